// Internals shared by the model files: the unit builders of each model family and the seeded
// initialisers they use. Not part of the trainer's API; include models/model.h instead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "models/model.h"

namespace torch::nn {
class Module;
}

namespace zt::models::detail {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

std::vector<std::unique_ptr<Unit>> make_gpt_units(const ModelShape& shape, uint64_t seed);
std::vector<std::unique_ptr<Unit>> make_mlp_units(const ModelShape& shape, uint64_t seed);

// Each parameter draws from its own generator seeded by (seed, its full name), so a value never
// depends on which tensors were built before it, nor on the global torch RNG.
void init_normal(const at::Tensor& param, const std::string& name, uint64_t seed, double std);
void init_uniform(const at::Tensor& param, const std::string& name, uint64_t seed, double bound);
void init_constant(const at::Tensor& param, double value);

// Appends module's parameters as ("<prefix>.<name>", tensor); the tensors alias the module's.
void append_parameters(NamedTensors& out, const std::string& prefix, torch::nn::Module& module);

}  // namespace zt::models::detail
