// ParamInit: how a parameter's initial values are made, as a pure function of (seed, the
// parameter's name, the element's index in the flattened tensor). Nothing depends on the global
// torch RNG, the order tensors are built in, the world size or the shard strategy, so a rank can
// fill just the elements it holds (partitioned construction, like DeepSpeed's zero.Init) and get
// exactly the values a single process filling the whole tensor gets.
// The generator is counter-based (each element's bits are a hash of the key and its index, in
// the spirit of Philox): no state to skip through, any slice in any order.
// Thread safety: fill_param_init is reentrant; it may use LibTorch's intra-op threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zt/api.h"

namespace zt {

struct ParamInit {
  enum class Kind {
    kNormal,    // N(0, scale^2)
    kUniform,   // U(-scale, scale)
    kConstant,  // every element = scale
    kCustom,    // `custom` fills the whole tensor
  };
  Kind kind = Kind::kConstant;
  double scale = 0;
  // kCustom: writes every element of `full` (fp32, the parameter's shape, contiguous). Must be
  // deterministic: every rank calls it and keeps its own slice, so a rank needs the whole tensor
  // (one tensor at a time) only for parameters initialised this way.
  std::function<void(const at::Tensor& full)> custom;

  static ParamInit normal(double std) { return {Kind::kNormal, std, {}}; }
  static ParamInit uniform(double bound) { return {Kind::kUniform, bound, {}}; }
  static ParamInit constant(double value) { return {Kind::kConstant, value, {}}; }
  static ParamInit from_function(std::function<void(const at::Tensor& full)> fill) {
    return {Kind::kCustom, 0, std::move(fill)};
  }
};

// Writes elements [first, first + out.numel()) of parameter `name` (shape `shape`, flattened in
// row-major order) into `out`.
//   init:  in, the parameter's initialiser.
//   seed:  in, the run's seed (run.seed).
//   name:  in, the parameter's full name ("block3.attn.qkv.weight"): two parameters with
//          different names get independent values.
//   shape: in, the parameter's full shape (kCustom builds a tensor of it).
//   first: in, >= 0, the index of out's first element in the flattened parameter.
//   out:   out, a contiguous 1-D fp32 CPU tensor; first + out.numel() <= the shape's elements.
// Throws InternalError for a bad range or an `out` that is not contiguous fp32; what `custom`
// throws.
ZT_API void fill_param_init(const ParamInit& init, uint64_t seed, const std::string& name,
                            const std::vector<int64_t>& shape, int64_t first,
                            const at::Tensor& out);

// Fills the whole of `param` (any shape, fp32, contiguous) under no_grad: what a single process
// building the model in full (the oracle's reference, stages that keep full parameters) does.
ZT_API void init_param(const at::Tensor& param, const ParamInit& init, uint64_t seed,
                       const std::string& name);

}  // namespace zt
