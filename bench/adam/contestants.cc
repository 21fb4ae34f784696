// zt_bench_adam's contestants: allocation, one timed step of each, and the thread setting.
#include "contestants.h"

#include <omp.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench_adam.h"
#include "roofline.h"
#include "zt/error.h"
#include "zt/options.h"
#include "zt/plugin_loader.h"

namespace zt::bench {

namespace {

// The same hyperparameters for both optimizers; weight decay on so AdamW's decay is paid.
constexpr double kLr = 1e-3;
constexpr double kWeightDecay = 0.01;

std::unique_ptr<Optimizer> make_zt() {
  static PluginCatalog catalog;
  const OptimizerPlugin& plugin = catalog.optimizer("optim_hybrid_adam");
  std::map<std::string, Value> values = {
      {"lr", kLr}, {"weight_decay", kWeightDecay}, {"adamw", true}};
  return plugin.create(Options("plugin.optim_hybrid_adam", plugin.options(), values, {}));
}

template <typename F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void set_threads(int threads) {
  at::set_num_threads(threads);
  omp_set_num_threads(threads);
}

Contestants::Contestants(int64_t params) : params_(params) {
  // Every page is written here, so no contestant pays the first-touch faults in its timing.
  param_ = torch::randn({params});
  grad_ = torch::randn({params});
  exp_avg_ = torch::zeros({params});
  exp_avg_sq_ = torch::zeros({params});
  copy_ = torch::zeros({params}, torch::kBFloat16);
  zt_ = make_zt();

  torch_param_ = param_.clone();
  torch_param_.mutable_grad() = grad_.clone();
  torch::optim::AdamWOptions options(kLr);
  options.weight_decay(kWeightDecay);
  torch_ = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{torch_param_}, options);
}

double Contestants::step_zt(bool bf16_copy) {
  ShardTensors shard{param_, grad_, {exp_avg_, exp_avg_sq_}, bf16_copy ? copy_ : torch::Tensor()};
  const StepArgs args{++zt_steps_, kLr, 1.0};
  return seconds_of([&] { zt_->step({shard}, args); });
}

double Contestants::step_torch_adamw() {
  return seconds_of([&] { torch_->step(); });
}

double Contestants::step_roofline() {
  return seconds_of([&] {
    roofline_pass(param_.data_ptr<float>(), grad_.data_ptr<float>(), exp_avg_.data_ptr<float>(),
                  exp_avg_sq_.data_ptr<float>(), params_);
  });
}

double Contestants::step(const char* impl) {
  if (std::strcmp(impl, kZt) == 0) return step_zt(false);
  if (std::strcmp(impl, kZtBf16Copy) == 0) return step_zt(true);
  if (std::strcmp(impl, kTorchAdamW) == 0) return step_torch_adamw();
  if (std::strcmp(impl, kRoofline) == 0) return step_roofline();
  throw InternalError(std::string("zt_bench_adam: no contestant named ") + impl);
}

}  // namespace zt::bench
