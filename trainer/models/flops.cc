#include "models/flops.h"

namespace zt::models {

double training_flops_per_sample(const ModelShape& shape) {
  if (shape.kind == "gpt") {
    const double L = static_cast<double>(shape.n_layer), d = static_cast<double>(shape.d_model);
    const double T = static_cast<double>(shape.seq_len), V = static_cast<double>(shape.vocab);
    const double matmul_params = 12 * L * d * d + V * d;
    return T * (6 * matmul_params + 12 * L * T * d);
  }
  if (shape.kind == "mlp") {
    const double w = static_cast<double>(shape.width);
    return 6 * w * w * static_cast<double>(shape.depth);
  }
  return 0;
}

}  // namespace zt::models
