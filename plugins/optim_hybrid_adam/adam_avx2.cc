// The AVX2 Adam/AdamW kernel (8 fp32 lanes): adam_simd.h's update over AVX2, FMA and F16C
// intrinsics. This file alone is compiled with -mavx2 -mfma -mf16c; adam_isa.cc calls it only
// when the CPU and OS support those, so the plugin still loads on any x86-64.
#include <immintrin.h>

#include "adam_isa.h"
#include "adam_simd.h"

namespace zt::hybrid_adam {

namespace {

using simd::Bf16;
using simd::F16;

// 8 32-bit lanes, each holding a value below 0x10000, narrowed to 8 16-bit values.
inline __m128i low_halves(__m256i x) {
  return _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}

struct Avx2 {
  static constexpr int kWidth = 8;
  using Vec = __m256;
  using Half = __m128i;  // kWidth 16-bit values

  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec x) { _mm256_storeu_ps(p, x); }

  // bf16 is the top half of an fp32: widening is a shift.
  static Vec load(const Bf16* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static Vec load(const F16* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }

  // c10::BFloat16's round_to_nearest_even: add 0x7FFF plus the kept lowest bit, keep the top
  // 16 bits; NaN becomes 0x7FC0.
  static Half narrow(const Bf16*, Vec x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r),
                                             _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC0)), nan));
    return low_halves(r);
  }
  // The hardware rounds to nearest even like c10::Half; only NaN differs (the hardware keeps
  // payload bits), so NaN lanes get c10's sign | 0x7E00.
  static Half narrow(const F16*, Vec x) {
    __m256i h = _mm256_cvtepu16_epi32(
        _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 16),
                                          _mm256_set1_epi32(0x8000));
    const __m256i quiet = _mm256_or_si256(sign, _mm256_set1_epi32(0x7E00));
    h = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(h), _mm256_castsi256_ps(quiet), nan));
    return low_halves(h);
  }
  static void store_half(void* p, Half h) { _mm_storeu_si128(static_cast<__m128i*>(p), h); }
  // Non-temporal: p must be 16-byte aligned.
  static void stream_half(void* p, Half h) { _mm_stream_si128(static_cast<__m128i*>(p), h); }
  static void fence() { _mm_sfence(); }

  // Stochastic rounding: the kept bits of x + bias (bias < 0x10000), NaN as 0x7FC0.
  using IVec = __m256i;
  static IVec iset1(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static IVec lanes() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
  static IVec iadd(IVec a, IVec b) { return _mm256_add_epi32(a, b); }
  static IVec ixor(IVec a, IVec b) { return _mm256_xor_si256(a, b); }
  static IVec iand(IVec a, IVec b) { return _mm256_and_si256(a, b); }
  static IVec imul(IVec a, IVec b) { return _mm256_mullo_epi32(a, b); }
  template <int kBits>
  static IVec srl(IVec a) {
    return _mm256_srli_epi32(a, kBits);
  }
  static Half narrow_biased(Vec x, IVec bias) {
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_castps_si256(x), bias), 16);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r),
                                             _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC0)), nan));
    return low_halves(r);
  }

  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec sqrt(Vec a) { return _mm256_sqrt_ps(a); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
};

}  // namespace

void adam_range_avx2(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  simd::adam_range<Avx2>(b, c, begin, end);
}

}  // namespace zt::hybrid_adam
