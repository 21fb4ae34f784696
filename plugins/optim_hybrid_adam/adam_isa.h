// Which instruction set optim_hybrid_adam's kernel uses: the best this CPU (and OS) can run, or
// the one named by the environment variable ZT_ADAM_ISA (tests force every path with it;
// benchmarks compare them). The plugin resolves it once, at create(), to a function pointer, so
// a step does no feature test. The AVX2 and AVX-512 kernels live in their own files compiled
// with their own -m flags; nothing else in the plugin assumes more than the baseline ISA.
// Thread safety: pure functions; the environment is only read.
#pragma once

#include "adam_kernel.h"

namespace zt::hybrid_adam {

enum class Isa { kPortable, kAvx2, kAvx512 };

// "portable", "avx2" or "avx512", as ZT_ADAM_ISA spells them.
const char* isa_name(Isa isa);

// Whether this build has the kernel and this CPU and OS can run it (AVX2 needs avx2, fma and
// f16c; AVX-512 needs avx512f and avx512bw).
bool isa_available(Isa isa);

// ZT_ADAM_ISA (avx512 | avx2 | portable | auto; unset or empty = auto: the best available).
// Throws ConfigError for an unknown name or an ISA this CPU or build cannot run, rather than
// silently running another path than the one asked for.
Isa choose_isa();

// The kernel of `isa`; `isa` must be available.
AdamRangeKernel range_kernel(Isa isa);

// The kernels themselves (adam_portable.cc, adam_avx2.cc, adam_avx512.cc).
void adam_range_portable(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end);
#if defined(ZT_ADAM_X86)
void adam_range_avx2(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end);
void adam_range_avx512(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end);
#endif

}  // namespace zt::hybrid_adam
