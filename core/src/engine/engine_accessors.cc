#include "engine/engine_accessors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "zt/error.h"
#include "zt/host/did_you_mean.h"

namespace zt {

namespace {

// "a, b, c, ... (12 in all)": enough to see what names look like.
std::string some_of(const std::vector<std::string>& names) {
  constexpr size_t kShown = 6;
  std::string out;
  for (size_t i = 0; i < std::min(names.size(), kShown); ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// The part of parameter `p` this rank holds, in flat-buffer positions.
std::pair<int64_t, int64_t> held_part(const ModelLayout& layout, int p) {
  const ParamSlot& slot = layout.params[p];
  const ParamGroup& g = layout.groups[slot.group];
  return param_overlap(slot, g.first, g.first + g.shard);
}

// Throws when group g's gradient went into its update during backward. The flag is the same on
// every rank, so every rank throws before the collective that follows (a rank holding none of
// a parameter would otherwise wait in it for the others until the timeout).
void require_gradient_kept(const EngineParts& e, int g) {
  if (!e.storage[g].updated_in_backward) return;
  throw ConfigError("the gradient of " + e.layout.params[e.layout.groups[g].params.front()].name +
                    "'s group went straight into its update during backward "
                    "(Engine::begin_step with optimizer states streamed from a file tier), so "
                    "no rank holds it; read gradients in a step not begun with begin_step");
}

// Elements [begin, end) of group g's reduced gradient shard into `out` from element `to` on: in
// memory, or read back tile by tile from the optimizer tier (checked against what was written).
// The caller checked require_gradient_kept first.
void held_gradient(EngineParts& e, int g, int64_t begin, int64_t end, at::Tensor& out, int64_t to) {
  const ShardStorage& s = e.storage[g];
  if (s.grad.defined()) {
    out.narrow(0, to, end - begin).copy_(s.grad.narrow(0, begin, end - begin));
    return;
  }
  auto* dst = static_cast<char*>(out.data_ptr()) + to * 4;
  s.grad_file->read_range(begin * 4, end * 4, e.stepper.steps() + 1,
                          [&](int64_t offset, const void* data, int64_t bytes) {
    std::memcpy(dst + (offset - begin * 4), data, static_cast<size_t>(bytes));
  });
}

}  // namespace

int parameter_index(const ModelLayout& layout, const std::string& name) {
  std::vector<std::string> names;
  for (size_t i = 0; i < layout.params.size(); ++i) {
    if (layout.params[i].name == name) return static_cast<int>(i);
    names.push_back(layout.params[i].name);
  }
  throw ConfigError("no parameter named '" + name + "' in this model" + did_you_mean(name, names) +
                    "; its parameters are " + some_of(names) +
                    " (Engine::parameter_names lists them all)");
}

int64_t state_index(const Optimizer& optimizer, const std::string& state) {
  const std::vector<std::string> names = optimizer.state_names();
  const auto it = std::find(names.begin(), names.end(), state);
  if (it != names.end()) return 1 + (it - names.begin());
  throw ConfigError("the optimizer keeps no state named '" + state + "'" +
                    did_you_mean(state, names) + "; its states are " +
                    (names.empty() ? std::string("none") : some_of(names)));
}

at::Tensor full_array(EngineParts& e, int p, int64_t a) {
  const ParamSlot& slot = e.layout.params[p];
  at::Tensor out = at::zeros({slot.numel}, at::kFloat);
  auto* dst = out.data_ptr<float>();
  const auto [lo, hi] = held_part(e.layout, p);
  e.io.read(slot.group, a, lo, hi, e.stepper.steps(),
            [&](int64_t begin, const float* data, int64_t count) {
    std::memcpy(dst + (begin - slot.offset), data, static_cast<size_t>(count) * 4);
  });
  // The shard group's held parts cover the tensor once (a MiCS replica holds the same parts).
  if (e.stage >= 1) all_reduce_host(e.shard, out, ReduceOp::kSum);
  return out.view(slot.shape);
}

// Stages 0-1 keep each rank's own gradients in the parameters' .grad until the step (summed over
// micro steps, in fp32 beside .grad for a 16-bit job that accumulates; not yet predivided); stages
// 2-3 reduced them into the rank's fp32 shard after every micro step, divided by
// gradient_predivide_factor first.
at::Tensor full_gradient(EngineParts& e, int p) {
  const ParamSlot& slot = e.layout.params[p];
  const int64_t numel = slot.numel;
  if (e.micro_steps == 0) return at::zeros(slot.shape, at::kFloat);
  at::Tensor out;
  double divisor = e.scaler.scale() * static_cast<double>(e.micro_steps) * e.comm.size();
  if (e.stage >= 2) {
    require_gradient_kept(e, slot.group);
    out = at::zeros({numel}, at::kFloat);
    const auto [lo, hi] = held_part(e.layout, p);
    const ParamGroup& g = e.layout.groups[slot.group];
    if (lo < hi) held_gradient(e, slot.group, lo - g.first, hi - g.first, out, lo - slot.offset);
    divisor /= e.predivide;
  } else {
    // The fp32 sum of the micro steps folded so far (16-bit jobs that accumulate), plus .grad.
    out = slot.grad_sum.defined() ? slot.grad_sum.to(at::kCPU, at::kFloat, false, /*copy=*/true)
                                  : at::zeros({numel}, at::kFloat);
    const at::Tensor grad = slot.tensor.grad();
    if (grad.defined()) out.add_(grad.detach().reshape({-1}).to(at::kCPU, at::kFloat));
  }
  // Reduced shards (stages 2-3) already hold every rank's sum: their group covers the tensor.
  all_reduce_host(e.stage >= 2 ? e.shard : e.comm, out, ReduceOp::kSum);
  return out.div_(divisor).view(slot.shape);
}

}  // namespace zt
