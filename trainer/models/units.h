// Internals shared by the model files: each model family as a ModelSource, and the helpers its
// units are built with. Not part of the trainer's API; include models/model.h instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "models/model.h"
#include "zt/model_source.h"

namespace zt::models::detail {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

std::unique_ptr<ModelSource> make_gpt_source(const ModelShape& shape, uint64_t seed);
std::unique_ptr<ModelSource> make_mlp_source(const ModelShape& shape, uint64_t seed);

// The declared tensors as (name, at::empty(shape) requiring grad), in order. Never written: the
// engine points them into its flat buffers, or materialize_unit fills them.
NamedTensors allocate(const std::vector<ParamDecl>& decls);

// A ModelSource that forwards to `model` (torchscript and plugin models, shared by the shape).
std::unique_ptr<ModelSource> share_source(std::shared_ptr<TrainableModel> model);

// Throws InternalError naming the model kind unless 0 <= unit < count.
void check_unit_index(const std::string& kind, int64_t unit, int64_t count);

}  // namespace zt::models::detail
