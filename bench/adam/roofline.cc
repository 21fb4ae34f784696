// The roofline pass (see roofline.h), compiled with -O3 so it is as vectorised as memory allows.
#include "roofline.h"

namespace zt::bench {

void roofline_pass(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                   float* __restrict__ v, int64_t n) {
  // Contiguous static parts, as optim_hybrid_adam splits a shard. The updates keep the arrays
  // valid Adam state (v stays >= 0), since the Adam contestants run over them too.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = 0.9f * m[i] + 0.1f * gi;
    m[i] = mi;
    v[i] = 0.999f * v[i] + 0.001f * (gi * gi);
    p[i] += 1e-9f * mi;
  }
}

}  // namespace zt::bench
