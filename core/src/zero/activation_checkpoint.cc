// Activation checkpointing of one unit: a no-grad forward plus one autograd node that recomputes
// the unit in backward (see activation_checkpoint.h for the contract).
#include "zero/activation_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "zt/host/trace.h"

namespace zt {

namespace {

using torch::autograd::variable_list;

// Default generators and their states, taken before the first forward so the recompute draws
// the same random numbers (dropout) as the run whose output the rest of the graph saw.
using RngStates = std::vector<std::pair<at::Generator, at::Tensor>>;

RngStates capture_rng(const at::Tensor& input, const std::vector<at::Tensor>& params) {
  std::vector<c10::Device> devices{c10::Device(c10::kCPU)};
  auto add = [&](const at::Tensor& t) {
    if (t.defined() && std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
      devices.push_back(t.device());
    }
  };
  add(input);
  for (const auto& p : params) add(p);
  RngStates states;
  for (const auto& device : devices) {
    at::Generator gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.emplace_back(gen, gen.get_state());
  }
  return states;
}

// Replays captured generator states for the recompute and restores the current ones after it,
// so the recompute neither repeats nor skips random numbers of the code that runs later.
class RngReplay {
 public:
  explicit RngReplay(const RngStates& replay) {
    for (const auto& [gen, state] : replay) {
      at::Generator g = gen;
      std::lock_guard<std::mutex> lock(g.mutex());
      outer_.emplace_back(g, g.get_state());
      g.set_state(state);
    }
  }
  ~RngReplay() {
    for (auto& [gen, state] : outer_) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state);
    }
  }
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  RngStates outer_;
};

// The unit's parameters, each once: a tensor listed twice would otherwise get its gradient twice.
std::vector<at::Tensor> unique_parameters(Unit& unit) {
  std::vector<at::Tensor> out;
  for (auto& named : unit.parameters()) {
    const at::Tensor& tensor = named.second;  // a plain reference: lambdas may capture it
    bool seen = std::any_of(out.begin(), out.end(),
                            [&](const at::Tensor& t) { return t.is_same(tensor); });
    if (!seen) out.push_back(tensor);
  }
  return out;
}

// Inputs (next edges): 0 is the unit's input, 1.. its parameters. It saves only the input.
class CheckpointBackward final : public torch::autograd::Node {
 public:
  CheckpointBackward(Unit& unit, const at::Tensor& input, std::vector<at::Tensor> params,
                     RngStates rng)
      : unit_(unit),
        input_(input, /*is_output=*/false),
        params_(std::move(params)),
        rng_(std::move(rng)) {}

  std::string name() const override { return "zt::CheckpointBackward"; }

  void release_variables() override {
    input_.reset_data();
    rng_.clear();
  }

 protected:
  variable_list apply(variable_list&& grads) override {
    variable_list result(num_outputs());
    // No gradient reached the output (it did not feed the loss): nothing to recompute.
    if (!grads[0].defined()) return result;
    at::Tensor x = input_.unpack().detach();
    std::vector<size_t> slots;  // which of our outputs each recomputed gradient belongs to
    variable_list wrt;
    if (task_should_compute_output(0)) {
      x.requires_grad_(true);
      slots.push_back(0);
      wrt.push_back(x);
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      if (task_should_compute_output(i + 1)) {
        slots.push_back(i + 1);
        wrt.push_back(params_[i]);
      }
    }
    if (wrt.empty()) return result;
    const trace::Scope span("recompute");
    at::Tensor y;
    {
      RngReplay replay(rng_);
      at::AutoGradMode grad_on(true);
      y = unit_.forward(x);
    }
    if (!y.requires_grad()) return result;
    // A nested (reentrant) backward over the recomputed graph only: it returns the gradients
    // instead of accumulating them, and the outer backward delivers them along our edges, so
    // the parameters' AccumulateGrad nodes (and the engine's hooks on them) run once.
    variable_list got = torch::autograd::grad({y}, wrt, {grads[0]}, /*retain_graph=*/false,
                                              /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < slots.size(); ++k) result[slots[k]] = std::move(got[k]);
    return result;
  }

 private:
  Unit& unit_;
  torch::autograd::SavedVariable input_;
  std::vector<at::Tensor> params_;
  RngStates rng_;
};

}  // namespace

at::Tensor checkpointed_forward(Unit& unit, const at::Tensor& input) {
  std::vector<at::Tensor> params = unique_parameters(unit);
  bool needs_grad = at::GradMode::is_enabled() &&
                    (input.requires_grad() ||
                     std::any_of(params.begin(), params.end(),
                                 [](const at::Tensor& p) { return p.requires_grad(); }));
  if (!needs_grad) return unit.forward(input);

  RngStates rng = capture_rng(input, params);
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = unit.forward(input);
  }
  // Under no-grad only a tensor that already had history comes back requiring grad: the input or
  // a parameter returned as is. Re-pointing its history would corrupt the caller's graph.
  if (out.requires_grad()) out = out.detach();

  torch::autograd::edge_list edges;
  edges.reserve(params.size() + 1);
  auto edge_of = [](const at::Tensor& t) {
    return t.requires_grad() ? torch::autograd::impl::gradient_edge(t) : torch::autograd::Edge();
  };
  edges.push_back(edge_of(input));
  for (const auto& p : params) edges.push_back(edge_of(p));
  std::shared_ptr<CheckpointBackward> node(
      new CheckpointBackward(unit, input, std::move(params), std::move(rng)),
      torch::autograd::deleteNode);
  node->set_next_edges(std::move(edges));
  torch::autograd::create_gradient_edge(out, node);
  return out;
}

}  // namespace zt
