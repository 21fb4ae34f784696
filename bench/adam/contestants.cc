// zt_bench_adam's contestants: allocation, timed samples of each, and the thread setting.
#include "contestants.h"

#include <omp.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "bench_adam.h"
#include "isa.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/options.h"

namespace zt::bench {

namespace {

// The same hyperparameters for both optimizers; weight decay on so AdamW's decay is paid.
constexpr double kLr = 1e-3;
constexpr double kWeightDecay = 0.01;

std::unique_ptr<Optimizer> make_zt(const std::string& isa, bool bf16_states) {
  static PluginCatalog catalog;
  const OptimizerPlugin& plugin = catalog.optimizer("optim_hybrid_adam");
  std::map<std::string, Value> values = {
      {"lr", kLr}, {"weight_decay", kWeightDecay}, {"adamw", true}};
  if (bf16_states) values["state_dtype"] = std::string("bf16");
  use_zt_isa(isa);  // read by create(), so the kernel is surely the ISA its roofline is
  return plugin.create(Options("plugin.optim_hybrid_adam", plugin.options(), values, {}));
}

// No sample is more steps than this, whatever the clock says.
constexpr int kMaxSteps = 1 << 20;

// Steps until min_s have passed. The count adapts to each sample, so a step slowed by another
// process costs one sample its length, not every sample of the contestant.
template <typename F>
Sample sample_of(F&& step, double min_s) {
  const auto start = std::chrono::steady_clock::now();
  Sample s;
  do {
    step();
    ++s.steps;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (s.seconds < min_s && s.steps < kMaxSteps);
  return s;
}

}  // namespace

void set_threads(int threads) {
  at::set_num_threads(threads);
  omp_set_num_threads(threads);
}

Contestants::Contestants(int64_t params, const std::vector<std::string>& isas) : params_(params) {
  // Every page is written here, so no contestant pays the first-touch faults in its timing.
  param_ = torch::randn({params});
  grad_ = torch::randn({params});
  exp_avg_ = torch::zeros({params});
  exp_avg_sq_ = torch::zeros({params});
  copy_ = torch::zeros({params}, torch::kBFloat16);
  exp_avg16_ = torch::zeros({params}, torch::kBFloat16);
  exp_avg_sq16_ = torch::zeros({params}, torch::kBFloat16);
  for (const std::string& isa : isas) {
    zt_[isa] = make_zt(isa, false);
    zt_bf16_states_[isa] = make_zt(isa, true);
  }

  torch_param_ = param_.clone();
  torch_param_.mutable_grad() = grad_.clone();
  torch::optim::AdamWOptions options(kLr);
  options.weight_decay(kWeightDecay);
  torch_ = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{torch_param_}, options);
}

Sample Contestants::run(const std::string& impl, const std::string& isa, double min_s) {
  if (impl == kTorchAdamW) return sample_of([&] { torch_->step(); }, min_s);
  if (impl == kRoofline) {
    const RooflinePass pass = roofline_pass(isa);
    float* p = param_.data_ptr<float>();
    const float* g = grad_.data_ptr<float>();
    float* m = exp_avg_.data_ptr<float>();
    float* v = exp_avg_sq_.data_ptr<float>();
    return sample_of([&] { pass(p, g, m, v, params_); }, min_s);
  }
  const bool bf16_states = impl == kZtBf16States;
  auto& optimizers = bf16_states ? zt_bf16_states_ : zt_;
  const auto zt = optimizers.find(isa);
  if (zt == optimizers.end() || (impl != kZt && impl != kZtBf16Copy && !bf16_states)) {
    throw InternalError("zt_bench_adam: no contestant " + impl + " on " + isa);
  }
  if (bf16_states) {
    const std::vector<ShardTensors> shards = {{param_, grad_, {exp_avg16_, exp_avg_sq16_}, {}}};
    return sample_of([&] { zt->second->step(shards, StepArgs{++zt_steps_, kLr, 1.0}); }, min_s);
  }
  // Built outside the clock, as the engine builds its shard list once for a step.
  const std::vector<ShardTensors> shards = {
      {param_, grad_, {exp_avg_, exp_avg_sq_}, impl == kZtBf16Copy ? copy_ : torch::Tensor()}};
  return sample_of([&] { zt->second->step(shards, StepArgs{++zt_steps_, kLr, 1.0}); }, min_s);
}

}  // namespace zt::bench
