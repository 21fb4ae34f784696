// The AVX-512 Adam/AdamW kernel (16 fp32 lanes): adam_simd.h's update over AVX-512F/BW
// intrinsics. This file alone is compiled with -mavx512f -mavx512bw -mfma; adam_isa.cc calls
// it only when the CPU and OS support those, so the plugin still loads on any x86-64.
// GCC 12's AVX-512 intrinsics start some results from a self-initialised _mm512_undefined_*(),
// which -Wmaybe-uninitialized (and, for the bf16 moments' loads, -Wuninitialized) reports inside
// the header once inlined here (GCC bug 105593, fixed in GCC 13). The pragma covers the header's
// own lines only; this file's code keeps the warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "adam_isa.h"
#include "adam_simd.h"

namespace zt::hybrid_adam {

namespace {

using simd::Bf16;
using simd::F16;

struct Avx512 {
  static constexpr int kWidth = 16;
  using Vec = __m512;
  using Half = __m256i;  // kWidth 16-bit values

  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec x) { _mm512_storeu_ps(p, x); }

  // bf16 is the top half of an fp32: widening is a shift.
  static Vec load(const Bf16* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static Vec load(const F16* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }

  // c10::BFloat16's round_to_nearest_even: add 0x7FFF plus the kept lowest bit, keep the top
  // 16 bits; NaN becomes 0x7FC0.
  static Half narrow(const Bf16*, Vec x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(r);
  }
  // The hardware rounds to nearest even like c10::Half; only NaN differs (the hardware keeps
  // payload bits), so NaN lanes get c10's sign | 0x7E00.
  static Half narrow(const F16*, Vec x) {
    __m512i h = _mm512_cvtepu16_epi32(
        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 16),
                                          _mm512_set1_epi32(0x8000));
    h = _mm512_mask_mov_epi32(h, nan, _mm512_or_si512(sign, _mm512_set1_epi32(0x7E00)));
    return _mm512_cvtepi32_epi16(h);
  }
  static void store_half(void* p, Half h) { _mm256_storeu_si256(static_cast<__m256i*>(p), h); }
  // Non-temporal: p must be 32-byte aligned.
  static void stream_half(void* p, Half h) { _mm256_stream_si256(static_cast<__m256i*>(p), h); }
  static void fence() { _mm_sfence(); }

  // Stochastic rounding: the kept bits of x + bias (bias < 0x10000), NaN as 0x7FC0.
  using IVec = __m512i;
  static IVec iset1(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static IVec lanes() {
    return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
  static IVec iadd(IVec a, IVec b) { return _mm512_add_epi32(a, b); }
  static IVec ixor(IVec a, IVec b) { return _mm512_xor_si512(a, b); }
  static IVec iand(IVec a, IVec b) { return _mm512_and_si512(a, b); }
  static IVec imul(IVec a, IVec b) { return _mm512_mullo_epi32(a, b); }
  template <int kBits>
  static IVec srl(IVec a) {
    return _mm512_srli_epi32(a, kBits);
  }
  static Half narrow_biased(Vec x, IVec bias) {
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_castps_si512(x), bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(r);
  }

  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
  static Vec sqrt(Vec a) { return _mm512_sqrt_ps(a); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
};

}  // namespace

void adam_range_avx512(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  simd::adam_range<Avx512>(b, c, begin, end);
}

}  // namespace zt::hybrid_adam
