// The engine's debug accessors (Engine::full_fp32_param, full_fp32_grad, full_optimizer_state,
// like DeepSpeed's safe_get_full_*): one named tensor at full size on every rank, fp32, in the
// parameter's shape. Every rank contributes the part it holds into a zero-filled tensor and one
// all-reduce (sum) assembles it, exactly, since each element has one contributor; stage 0 holds
// everything and needs no collective (except for gradients, which differ per rank until the step).
// Thread safety: one thread (the training thread). Collective: every rank asks for the same name.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "engine/engine_parts.h"

namespace zt {

// The parameter's index in ModelLayout::params; ConfigError naming a few valid names otherwise.
int parameter_index(const ModelLayout& layout, const std::string& name);
// ShardIo array index of optimizer state `state` (1..); ConfigError listing the states otherwise.
int64_t state_index(const Optimizer& optimizer, const std::string& state);

// Array `a` (0: the fp32 master, then each state) of parameter `p`.
at::Tensor full_array(EngineParts& engine, int p, int64_t a);
// The averaged, unscaled gradient the next step applies to parameter `p` (before clipping).
at::Tensor full_gradient(EngineParts& engine, int p);

}  // namespace zt
