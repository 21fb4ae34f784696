// Optimizer: updates flat fp32 master shards in place. The engine owns every buffer: for each
// shard it hands over the master parameters, the gradient, the optimizer's own state tensors
// (allocated by the engine from state_names(), zero-initialised, same numel as the shard) and,
// optionally, a low-precision copy to refresh with the updated parameters.
// A step runs where the shard lives (CPU kernel for host tensors, CUDA kernel for device ones).
// Thread safety: step() is called from one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zt/api.h"
#include "zt/plugin.h"

namespace zt {

struct ShardTensors {
  at::Tensor param;               // fp32 master shard, updated in place
  at::Tensor grad;                // same numel; fp32 (bf16/fp16 where the plugin supports them)
  std::vector<at::Tensor> states; // in state_names() order, fp32, updated in place
  at::Tensor copy_out;            // optional (undefined = none): bf16/fp16 copy of the new params
};

struct StepArgs {
  int64_t step = 1;          // 1-based count of updates applied so far, this one included
  double lr = 1e-3;          // learning rate for this step (the engine applies the schedule)
  double grad_divisor = 1.0; // gradients are divided by this first (loss scale, accumulation)
};

class ZT_API Optimizer {
 public:
  virtual ~Optimizer();
  // Names of the per-element fp32 states, e.g. {"exp_avg", "exp_avg_sq"}.
  virtual std::vector<std::string> state_names() const = 0;
  // The configured learning rate that schedules scale.
  virtual double base_lr() const = 0;
  virtual void step(const std::vector<ShardTensors>& shards, const StepArgs& args) = 0;
};

// Factory of an optimizer plugin (kind ZT_KIND_OPTIMIZER).
class ZT_API OptimizerPlugin : public Plugin {
 public:
  virtual std::unique_ptr<Optimizer> create(const Options& options) const = 0;
};

}  // namespace zt
