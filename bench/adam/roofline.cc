// The roofline pass (see roofline.h). This one source is every ISA's pass: CMakeLists.txt
// compiles it once per optim_hybrid_adam kernel, with that kernel's flags, and ZT_ROOFLINE_PASS
// names the function each copy defines.
#include "roofline.h"

#include <omp.h>

#include <algorithm>

#ifndef ZT_ROOFLINE_PASS
#error "roofline.cc is built by bench/adam/CMakeLists.txt, which names its function"
#endif

namespace zt::bench {

namespace {

// optim_hybrid_adam's driver (adam_kernel.cc) gives no thread fewer elements than this, so a
// small shard runs on fewer threads than asked for; the pass does the same, so it is measured on
// the threads the kernel would use.
constexpr int64_t kMinPerThread = int64_t{1} << 16;

}  // namespace

void ZT_ROOFLINE_PASS(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                      float* __restrict__ v, int64_t n) {
  const int threads = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), n / kMinPerThread)));
  // Contiguous static parts, as optim_hybrid_adam splits a shard. The updates keep the arrays
  // valid Adam state (v stays >= 0), since the Adam contestants run over them too.
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = 0.9f * m[i] + 0.1f * gi;
    m[i] = mi;
    v[i] = 0.999f * v[i] + 0.001f * (gi * gi);
    p[i] += 1e-9f * mi;
  }
}

}  // namespace zt::bench
