// Analytic training FLOPs of the built-in models, for MFU (model FLOPs utilisation): the
// arithmetic a step needs, not what the kernels happen to do. GPT per token, as PaLM's appendix
// counts it: 6 x (the matmul parameters: 12 d^2 per block + the tied head's V d) for forward and
// backward, plus 12 L T d for attention's scores and weighted sums. The forward activation
// checkpointing runs again is not counted (as PaLM defines MFU; counting it is hardware FLOPs
// utilisation). MLP: 6 x width^2 x depth per sample.
// Thread safety: pure functions.
#pragma once

#include "models/model.h"

namespace zt::models {

// FLOPs of one training sample (forward + backward); 0 when the model does not say
// (torchscript and plugin kinds).
double training_flops_per_sample(const ModelShape& shape);

}  // namespace zt::models
