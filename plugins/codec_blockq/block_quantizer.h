// Symmetric block quantization: a run of fp32 values cut into blocks of `block` elements, each
// stored as signed integer codes of `bits` bits (8 or 4) and one fp32 scale, absmax / qmax with
// qmax = 2^(bits-1) - 1, so the block's largest magnitude is a code of +-qmax and zero is exact.
// Codes round to nearest, ties to even; a block of zeros has scale 0.
// Layout of an encoded run of n elements: ceil(n / block) fp32 scales, then the codes: one byte
// each for 8 bits, two per byte for 4 bits (element 2i in the low nibble, 2i+1 in the high), so
// a run is 4 * ceil(n / block) + n (or ceil(n / 2)) bytes: 0.254x fp32 at int8 and 0.129x at
// int4 with blocks of 256.
// Thread safety: immutable; any thread.
#pragma once

#include <cstdint>

namespace zt::blockq {

struct Format {
  int bits = 8;         // 8 or 4
  int64_t block = 256;  // elements per scale, >= 1
  int qmax() const { return (1 << (bits - 1)) - 1; }
};

int64_t encoded_bytes(const Format& f, int64_t numel);
void encode(const Format& f, const float* in, int64_t numel, uint8_t* out);
void decode(const Format& f, const uint8_t* in, int64_t numel, float* out);

}  // namespace zt::blockq
