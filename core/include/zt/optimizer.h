// Optimizer: updates flat master shards (fp32, or bf16: master_dtype()) in place. The engine owns
// every buffer: for each shard it hands over the master parameters, the gradient, the optimizer's
// own state tensors (allocated by the engine from state_names() in state_dtype(), zero-initialised,
// same numel as the shard) and, optionally, a low-precision copy to refresh with the updated
// parameters. A step runs where the shard lives (CPU kernel for host tensors, CUDA kernel for
// device ones).
//
// The update must be element-wise: an element's new values depend only on that element's
// param, grad and states and on StepArgs. The engine relies on it: within one training step it
// may call step() several times with the same StepArgs (once for the shards in memory, then
// once per tile of a shard streamed through an offload tier), each call seeing a different
// slice of the shards. So an optimizer keeps no per-step counter of its own (use args.step) and
// no per-element state outside `states`.
//
// Thread safety: step() is called from one thread at a time; the other methods are const and
// may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

#include "zt/api.h"
#include "zt/plugin.h"

namespace zt {

// One shard (or a tile of one): every tensor contiguous, 1-D, on the same device, with the same
// numel (0 is allowed: a no-op).
struct ShardTensors {
  at::Tensor param;                // in/out: master shard of master_dtype(), updated in place
  at::Tensor grad;                 // in: fp32 (bf16/fp16 where the plugin supports them); not
                                   //     modified, not yet divided by grad_divisor
  std::vector<at::Tensor> states;  // in/out: in state_names() order, of state_dtype(), updated
                                   //     in place
  at::Tensor copy_out;             // out, optional (undefined = none): bf16/fp16 copy of the new
                                   //     params (the engine passes none today; never with bf16
                                   //     masters, which are their own 16-bit copy)
  uint64_t seed = 0;  // element i of this slice is element seed + i of its group's states: the
                      // key of its random bits where the optimizer rounds stochastically, so an
                      // element draws the same bits however the engine tiles or places it (in
                      // memory or a tier, at any world size); another shard layout (stage,
                      // shard plugin, buckets) groups it elsewhere and draws other bits
  bool weight_decay = true;  // false: the slice's parameters take no weight decay (those a job
                             // exempts with zero.no_weight_decay, e.g. biases and norm gains);
                             // the engine never mixes both kinds in one slice
};

struct StepArgs {
  int64_t step = 1;           // 1-based count of updates applied so far, this one included
                              // (skipped steps do not count), e.g. for Adam's bias correction
  double lr = 1e-3;           // learning rate for this step (the engine applies the schedule),
                              // finite and >= 0
  double grad_divisor = 1.0;  // > 0; gradients are divided by this first (loss scale, ranks,
                              // accumulation, clipping), fused into the update
};

class ZT_API Optimizer {
 public:
  virtual ~Optimizer();
  // Names of the per-element states, e.g. {"exp_avg", "exp_avg_sq"}; may be empty (plain SGD).
  // Each costs 4 bytes (2 in bf16) per parameter, per rank's share. Must not change over the
  // optimizer's life (the engine sizes its buffers and tiers from it once). Never throws.
  virtual std::vector<std::string> state_names() const = 0;
  // The dtype of every state tensor: at::kFloat (4 bytes per parameter each) or at::kBFloat16
  // (2: the optimizer computes in fp32 and rounds when it stores). Fixed for the optimizer's
  // life; checkpoints hold states as fp32 values whatever it is, so a run may resume with
  // another. Another dtype is refused when the job is composed (PluginError). Never throws.
  virtual at::ScalarType state_dtype() const { return at::kFloat; }
  // The dtype of the master parameters (ShardTensors::param): at::kFloat, or at::kBFloat16 (the
  // optimizer widens them, computes in fp32 and rounds once when it stores: 2 bytes per
  // parameter fewer in memory, in offload tiers and in their traffic, at the cost of updates
  // smaller than half a bf16 spacing, which only stochastic rounding keeps on average). Fixed for
  // the optimizer's life; checkpoints hold masters as fp32 values whatever it is, so a run may
  // resume with another. Another dtype is refused when the job is composed (PluginError), and
  // bf16 masters only where they save memory: with precision.compute = "bf16", or with fp32
  // compute and the optimizer offloaded (else the job's ConfigError says so). Never throws.
  virtual at::ScalarType master_dtype() const { return at::kFloat; }
  // The configured learning rate; the trainer's schedule (run.lr_schedule) scales it and passes
  // the result as StepArgs::lr. Never throws.
  virtual double base_lr() const = 0;
  // Applies one update to every shard, in place.
  //   shards: in/out, the tensors described at ShardTensors; may be empty.
  //   args:   in, the step number, the learning rate to use and the gradient divisor.
  // Throws InternalError before touching any shard when a tensor is missing, of the wrong dtype,
  // size or device, not contiguous, or the states do not match state_names() (naming the shard
  // and tensor), or when args are out of range; PluginError for shards on a device this build
  // cannot update (saying how to rebuild). Need not look for NaN or inf: the engine skips a
  // step whose gradients are not finite (on every rank) before calling step().
  virtual void step(const std::vector<ShardTensors>& shards, const StepArgs& args) = 0;
};

// Factory of an optimizer plugin (kind ZT_KIND_OPTIMIZER).
class ZT_API OptimizerPlugin : public Plugin {
 public:
  // Makes the optimizer.
  //   options: in, the validated [plugin.<id>] table (every declared key present).
  //   returns: the optimizer, never null.
  // Throws ConfigError for values its declared ranges cannot express (e.g. betas outside
  // [0, 1)), naming the key as plugin.<id>.<key>.
  virtual std::unique_ptr<Optimizer> create(const Options& options) const = 0;
};

}  // namespace zt
