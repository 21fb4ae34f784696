#include "block_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// The loops below are written so the compiler vectorizes them (plain arithmetic, selects instead
// of branches, no libm calls). encode and decode are each built for AVX-512, AVX2 and the
// baseline with the fastest chosen when the plugin loads (GCC's target_clones), the helpers
// inlined into each version, so a block costs no call. Every version computes the same bits: one
// multiply, one rounding by the 1.5 * 2^23 trick (round to nearest, ties to even, exact for
// |v| < 2^22; codes stay within +-127.5), one conversion.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ZT_CODEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ZT_CODEC_CLONES
#endif
#if defined(__GNUC__)
#define ZT_CODEC_INLINE inline __attribute__((always_inline))
#else
#define ZT_CODEC_INLINE inline
#endif

namespace zt::blockq {

namespace {

constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: x + kRound - kRound rounds x to an integer

int64_t blocks(const Format& f, int64_t numel) { return (numel + f.block - 1) / f.block; }

// The largest |x| of a block, as the bits of |x|: for floats without their sign, integer order is
// magnitude order, and an integer max vectorizes where a float one (NaN-aware) does not. A NaN
// beats every number, so a block holding one gets a NaN scale and decodes as NaN throughout:
// the engine's check for non-finite gradients still sees it.
ZT_CODEC_INLINE float absmax(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    u &= 0x7FFFFFFFu;
    m = u > m ? u : m;
  }
  float out;
  std::memcpy(&out, &m, 4);
  return out;
}

// Codes of one block, as int8 in [-qmax, qmax]. The multiply by the reciprocal is what the
// double-precision oracle allows for: a code may differ from round(x / scale) only where x /
// scale is within rounding of a half.
ZT_CODEC_INLINE void quantize(const float* x, int64_t n, float scale, int qmax, int8_t* q) {
  // A block holding a NaN or an inf: its codes are 0, which decode as NaN (0 x a non-finite
  // scale), so the engine's check still sees it; x * inv would be NaN, and casting it undefined.
  if (!std::isfinite(scale)) {
    std::memset(q, 0, static_cast<size_t>(n));
    return;
  }
  const float hi = static_cast<float>(qmax);
  float inv = scale > 0 ? 1.0f / scale : 0.0f;
  // Magnitudes near FLT_MIN (a scale below 2^-128): the reciprocal overflows to inf, which took
  // every nonzero value to +-qmax. Dividing is exact enough there, and this path is rare.
  const bool divide = std::isinf(inv);
  for (int64_t i = 0; i < n; ++i) {
    float v = divide ? x[i] / scale : x[i] * inv;
    v = (v + kRound) - kRound;
    v = v > hi ? hi : v;
    v = v < -hi ? -hi : v;
    q[i] = static_cast<int8_t>(static_cast<int>(v));
  }
}

// Pairs of 4-bit codes into bytes: q[2i] in the low nibble, q[2i+1] in the high one.
ZT_CODEC_INLINE void pack4(const int8_t* q, int64_t pairs, uint8_t* out) {
  for (int64_t i = 0; i < pairs; ++i) {
    out[i] = static_cast<uint8_t>((static_cast<uint8_t>(q[2 * i]) & 0x0F) |
                                  (static_cast<uint8_t>(q[2 * i + 1]) << 4));
  }
}

ZT_CODEC_INLINE void dequantize8(const int8_t* q, int64_t n, float scale, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(q[i]) * scale;
}

// Both nibbles of `pairs` bytes, sign-extended (shift the nibble to the byte's top, then an
// arithmetic shift back), times the scale.
ZT_CODEC_INLINE void dequantize4(const uint8_t* codes, int64_t pairs, float scale, float* y) {
  for (int64_t i = 0; i < pairs; ++i) {
    const int8_t lo = static_cast<int8_t>(static_cast<uint8_t>(codes[i] << 4)) >> 4;
    const int8_t hi = static_cast<int8_t>(codes[i]) >> 4;
    y[2 * i] = static_cast<float>(lo) * scale;
    y[2 * i + 1] = static_cast<float>(hi) * scale;
  }
}

// One 4-bit code of a byte, for the element a block or a run leaves alone in its byte.
ZT_CODEC_INLINE float nibble(uint8_t byte, bool high, float scale) {
  const int8_t v = high ? static_cast<int8_t>(byte) >> 4
                        : static_cast<int8_t>(static_cast<uint8_t>(byte << 4)) >> 4;
  return static_cast<float>(v) * scale;
}

}  // namespace

int64_t encoded_bytes(const Format& f, int64_t numel) {
  const int64_t codes = f.bits == 8 ? numel : (numel + 1) / 2;
  return 4 * blocks(f, numel) + codes;
}

ZT_CODEC_CLONES void encode(const Format& f, const float* in, int64_t numel, uint8_t* out) {
  const int64_t nb = blocks(f, numel);
  uint8_t* codes = out + 4 * nb;
  constexpr int64_t kSlice = 512;  // codes of one slice of a block at a time, on the stack
  int8_t q[kSlice + 1];
  int8_t carry = 0;  // 4 bits: a code waiting for its byte's high nibble
  bool carrying = false;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t first = b * f.block, n = std::min(f.block, numel - first);
    const float scale = absmax(in + first, n) / static_cast<float>(f.qmax());
    std::memcpy(out + 4 * b, &scale, 4);
    for (int64_t s = 0; s < n; s += kSlice) {
      const int64_t m = std::min(kSlice, n - s), at = first + s;
      if (f.bits == 8) {
        quantize(in + at, m, scale, f.qmax(), reinterpret_cast<int8_t*>(codes + at));
        continue;
      }
      // Nibbles pair elements across the whole run, so a slice may start mid-byte: the code
      // left over from the last slice goes first.
      int64_t k = 0;
      if (carrying) q[k++] = carry;
      quantize(in + at, m, scale, f.qmax(), q + k);
      const int64_t have = k + m, pairs = have / 2;
      pack4(q, pairs, codes + (at - k) / 2);
      carrying = have % 2 == 1;
      carry = carrying ? q[have - 1] : 0;
    }
  }
  if (carrying) codes[(numel - 1) / 2] = static_cast<uint8_t>(carry) & 0x0F;
}

ZT_CODEC_CLONES void decode(const Format& f, const uint8_t* in, int64_t numel, float* out) {
  const int64_t nb = blocks(f, numel);
  const uint8_t* codes = in + 4 * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t first = b * f.block, n = std::min(f.block, numel - first);
    float scale;
    std::memcpy(&scale, in + 4 * b, 4);
    if (f.bits == 8) {
      dequantize8(reinterpret_cast<const int8_t*>(codes + first), n, scale, out + first);
      continue;
    }
    // A block may start or end mid-byte: its odd element at either end alone, the pairs between.
    int64_t e = first;
    const int64_t end = first + n;
    if (e % 2 == 1) {
      out[e] = nibble(codes[e / 2], true, scale);
      ++e;
    }
    const int64_t pairs = (end - e) / 2;
    dequantize4(codes + e / 2, pairs, scale, out + e);
    e += 2 * pairs;
    if (e < end) out[e] = nibble(codes[e / 2], false, scale);
  }
}

}  // namespace zt::blockq
