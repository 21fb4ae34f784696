// The memory roofline of an in-place Adam step: one pass that reads four fp32 arrays (p, g, m,
// v) and writes three of them back, with arithmetic too light to matter, on the OpenMP threads.
// What no Adam kernel can beat on this machine; not a STREAM triad, whose 2-read/1-write mix
// and separate output array move memory differently.
// Thread safety: touches only the arrays it is given.
#pragma once

#include <cstdint>

namespace zt::bench {

void roofline_pass(float* p, const float* g, float* m, float* v, int64_t n);

}  // namespace zt::bench
