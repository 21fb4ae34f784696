// The roofline of an in-place Adam step: one pass that reads four fp32 arrays (p, g, m, v) and
// writes three of them back, with arithmetic too light to matter, on the OpenMP threads. At a
// size in DRAM it is the memory's limit, what no Adam kernel can beat on this machine; at a size
// in cache it is the cache's, and the gap to it is the kernel's arithmetic. Not a STREAM triad,
// whose 2-read/1-write mix and separate output array move memory differently.
//
// roofline.cc is compiled once per optim_hybrid_adam kernel, with that kernel's flags
// (CMakeLists.txt), so each kernel is held against a loop the compiler vectorised for the same
// ISA. Like the kernels' fp32 step, the pass writes with ordinary stores: only their 16-bit
// copy-out streams (stream_half in adam_avx*.cc), since it alone is written without being read;
// every line written here was just read, so a non-temporal store would save no memory traffic.
// Thread safety: touches only the arrays it is given.
#pragma once

#include <cstdint>

namespace zt::bench {

void roofline_pass_portable(float* p, const float* g, float* m, float* v, int64_t n);
// Built only where the plugin builds its SIMD kernels (ZT_BENCH_ADAM_X86).
void roofline_pass_avx2(float* p, const float* g, float* m, float* v, int64_t n);
void roofline_pass_avx512(float* p, const float* g, float* m, float* v, int64_t n);

}  // namespace zt::bench
