#include "block_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace zt::blockq {

namespace {

int64_t blocks(const Format& f, int64_t numel) { return (numel + f.block - 1) / f.block; }

float absmax(const float* x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// Codes of one block, as int8 in [-qmax, qmax]. The multiply by the reciprocal is what the
// double-precision oracle allows for: a code may differ from round(x / scale) only where x /
// scale is within rounding of a half.
void quantize(const float* x, int64_t n, float scale, int qmax, int8_t* q) {
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;
  const float hi = static_cast<float>(qmax);
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::nearbyint(x[i] * inv);
    q[i] = static_cast<int8_t>(std::min(hi, std::max(-hi, v)));
  }
}

}  // namespace

int64_t encoded_bytes(const Format& f, int64_t numel) {
  const int64_t codes = f.bits == 8 ? numel : (numel + 1) / 2;
  return 4 * blocks(f, numel) + codes;
}

void encode(const Format& f, const float* in, int64_t numel, uint8_t* out) {
  const int64_t nb = blocks(f, numel);
  uint8_t* codes = out + 4 * nb;
  int8_t q[512];  // one slice of a block at a time
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t first = b * f.block, n = std::min(f.block, numel - first);
    const float scale = absmax(in + first, n) / static_cast<float>(f.qmax());
    std::memcpy(out + 4 * b, &scale, 4);
    for (int64_t s = 0; s < n; s += 512) {
      const int64_t m = std::min<int64_t>(512, n - s), at = first + s;
      quantize(in + at, m, scale, f.qmax(), q);
      if (f.bits == 8) {
        std::memcpy(codes + at, q, static_cast<size_t>(m));
        continue;
      }
      // Nibbles pair elements across the whole run, so a block or slice may start mid-byte.
      for (int64_t i = 0; i < m; ++i) {
        const int64_t e = at + i;
        uint8_t& byte = codes[e / 2];
        const uint8_t nibble = static_cast<uint8_t>(q[i]) & 0x0F;
        byte = (e % 2 == 0) ? nibble : static_cast<uint8_t>((byte & 0x0F) | (nibble << 4));
      }
    }
  }
}

void decode(const Format& f, const uint8_t* in, int64_t numel, float* out) {
  const int64_t nb = blocks(f, numel);
  const uint8_t* codes = in + 4 * nb;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t first = b * f.block, n = std::min(f.block, numel - first);
    float scale;
    std::memcpy(&scale, in + 4 * b, 4);
    float* y = out + first;
    if (f.bits == 8) {
      const auto* q = reinterpret_cast<const int8_t*>(codes + first);
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(q[i]) * scale;
      continue;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = first + i;
      const uint8_t byte = codes[e / 2];
      const uint8_t nibble = (e % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
      // Sign-extend the 4-bit two's complement code.
      const int code = (nibble & 0x08) ? static_cast<int>(nibble) - 16 : static_cast<int>(nibble);
      y[i] = static_cast<float>(code) * scale;
    }
  }
}

}  // namespace zt::blockq
