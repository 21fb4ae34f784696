// Engine: ZeRO data-parallel training of a model given as units (unit.h), composed from a
// communicator, a shard strategy and an optimizer. One process per rank; every rank calls the
// same methods in the same order.
//   stage 0: every rank keeps full parameters, gradients and optimizer states; gradients are
//            all-reduced at the step.
//   stage 1: optimizer states and fp32 master weights sharded; gradients reduce-scattered at
//            the step; updated shards all-gathered into the parameters.
//   stage 2: + gradients sharded: each group's gradients are reduce-scattered as soon as its
//            unit finished backward (overlapped with the rest of backward when overlap_comm).
//   stage 3: + parameters sharded: a unit's groups are gathered just before it runs (and
//            prefetched ahead), freed after, re-gathered before its backward.
// With activation_checkpointing each unit runs without keeping activations and is recomputed
// when backward reaches it (after the stage 3 re-gather); gradients and hooks are unchanged.
// Parameters live as views into one flat buffer per group (layout from the ShardStrategy), so
// a gather writes every tensor of the group at once and a release frees them all.
// Offload (EngineTiers): a group's fp32 master weights and optimizer states, and in stage 3 its
// parameter shard, may live in an OffloadTier instead. A host-memory tier is used in place; a
// tier that is not addressable (files) is streamed: the step reads, updates and writes back the
// states in tiles of sub_group_size elements, and stage 3 reads a parameter shard ahead of its
// gather. Which groups go to a tier follows the offload fractions, in model order.
// Codecs (EngineCodecs, ZeRO++): stage 3's parameter gathers and the gradient reduce-scatters
// may move encoded bytes instead (zt/codec.h); masters, states and checkpoints stay exact, and
// full_parameters() returns the exact weights.
// Thread safety: one training thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zt/api.h"
#include "zt/communicator.h"
#include "zt/host/engine_types.h"
#include "zt/model_source.h"
#include "zt/offload.h"
#include "zt/optimizer.h"
#include "zt/shard_strategy.h"
#include "zt/unit.h"

namespace zt {

class CheckpointRankWriter;
class CheckpointReader;

class ZT_API Engine {
 public:
  Engine(std::vector<Unit*> units, Communicator& comm, const ShardStrategy& strategy,
         Optimizer& optimizer, EngineOptions options, EngineTiers tiers = {},
         EngineCodecs codecs = {});
  ~Engine();
  // Partitioned construction (zero.Init): builds the units of `source` one at a time and keeps
  // only this rank's shards of each (model_source.h); the engine owns the units. The values are
  // the declared initialisers', the same whatever the world size, stage or strategy.
  Engine(ModelSource& source, Communicator& comm, const ShardStrategy& strategy,
         Optimizer& optimizer, EngineOptions options, EngineTiers tiers = {},
         EngineCodecs codecs = {});
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Announces the learning rate of the step whose micro steps follow (optional; the trainer
  // does). Where nothing needs all of the step's gradients before updating (no
  // zero.gradient_clipping, no loss scaling), groups whose optimizer states stream from a file
  // tier (offload_nvme) are then updated during backward, as soon as their gradients are
  // reduced: the gradients never go to the tier and back. step() must get the same `lr`, and a
  // non-finite gradient is then a NumericError rather than a skipped step.
  void begin_step(double lr);
  // One micro step: runs every unit in order on `input`, `loss_fn(output)` gives the scalar
  // loss of this rank's micro batch (a mean), then backward. Returns the loss, detached, where
  // it was computed: the engine does not read it, so a micro step never waits for its device
  // (reading it is the caller's choice). Without loss scaling a loss that is not finite on any
  // rank makes step() throw NumericError on every rank, naming the step (and on the rank that
  // had it, the micro step and value), with nothing of the step applied and its gradients
  // dropped (a caller may go on with the next step). Where streamed groups update in backward
  // (begin_step) the loss is read first, and this call throws it before backward on that rank
  // alone: its peers wait in backward's reductions, so that error ends the job.
  at::Tensor forward_backward(const at::Tensor& input,
                              const std::function<at::Tensor(const at::Tensor&)>& loss_fn);
  // Evaluation: runs every unit in order on `input` without autograd and returns the output
  // (no gradient, no optimizer state touched). Stage 3 gathers each unit's parameters before it
  // runs and releases them after, as forward does, so every rank must call it the same number
  // of times (pad a short last batch). Call between steps, not between a step's micro steps.
  at::Tensor forward_eval(const at::Tensor& input);

  // A forward the caller runs itself: a model whose own code calls its units in any order and
  // combines their outputs (embeddings summed, a residual in the parent, a head applied twice),
  // as a Python nn.Module does. begin_forward(training), then enter_unit(u) before and
  // leave_unit(u, outputs) after every call of unit u (a unit may be called more than once),
  // then backward(loss) for a training micro step (as forward_backward) or end_forward() for an
  // evaluation run without autograd (as forward_eval). Stage 3 gathers a unit's groups when it
  // is entered (prefetching the next units in order) and releases them when it is left; its
  // outputs carry a hook that gathers them again before its backward, and backward releases each
  // group once its gradients are taken, whatever the order. abort_forward() undoes an open
  // forward that failed (every group released); the next begin_forward() starts afresh.
  // Misuse (a call out of order, an unknown unit) throws InternalError; activation
  // checkpointing throws ConfigError (the model checkpoints its own activations).
  void begin_forward(bool training);
  void enter_unit(int unit);
  void leave_unit(int unit, const std::vector<at::Tensor>& outputs);
  at::Tensor backward(const at::Tensor& loss);
  void end_forward();
  void abort_forward();
  // After grad_accum micro steps: reduce what is not reduced yet, clip by the global norm,
  // update the owned shards, refresh parameters. Collective. Throws NumericError on every rank
  // for a loss that was not finite without loss scaling (forward_backward).
  StepReport step(double lr);

  // Every parameter at full size as fp32 in host memory, in registration order (collective in
  // stage 3).
  std::vector<std::pair<std::string, at::Tensor>> full_parameters();

  // Checkpoints (zt/host/checkpoint.h). Call between steps (after step(), before the next
  // forward_backward()).
  // Declares and writes this rank's pieces: the fp32 master value ("param") and every optimizer
  // state of the elements it owns (stage 0: a 1/world split of every group), file-tier states
  // read tile by tile through the tier's buffers. Not collective.
  void save_checkpoint(CheckpointRankWriter& writer);
  // Collective. Every rank reads the elements it owns, whatever world size, stage, strategy and
  // offload saved them, into its master weights and optimizer states (in memory or a tier),
  // restores the counters (optimizer steps, loss scaler) and refreshes the parameters, so the
  // next step continues the saved run exactly. Throws ConfigError naming the first tensor whose
  // name or shape differs from the model's, or an optimizer state the checkpoint lacks; IoError
  // from the reader.
  void load_checkpoint(const CheckpointReader& reader);

  // Debug accessors, like DeepSpeed's safe_get_full_fp32_param / safe_get_full_grad /
  // safe_get_full_optimizer_state. Collective; every rank gets the whole tensor, fp32 in host
  // memory, in the parameter's shape. Throws ConfigError for an unknown name or state (listing the
  // names).
  //   full_fp32_param: the fp32 master value.
  //   full_fp32_grad: the gradients so far, averaged over ranks and the micro steps run so far
  //     and unscaled (before clipping); zeros before the first micro step. After all grad_accum
  //     micro steps it is the gradient the next step() applies (a step after fewer divides
  //     their sum by grad_accum). Call after forward_backward(), before step().
  //   full_optimizer_state: an optimizer state ("exp_avg", "exp_avg_sq" for Adam).
  at::Tensor full_fp32_param(const std::string& name);
  at::Tensor full_fp32_grad(const std::string& name);
  at::Tensor full_optimizer_state(const std::string& name, const std::string& state);
  // Scoped gather of named parameters outside forward/backward (DeepSpeed's
  // GatheredParameters). Collective: every rank passes the same names and modifier_rank.
  //   names: in, parameter names (ConfigError for an unknown one, listing valid names).
  //   modifier_rank: in, -1 to read only; else the rank whose edits count.
  //   fn: gets (name, tensor) for each name in order: the full fp32 master value in the
  //       parameter's shape, on every rank. With modifier_rank >= 0, once fn returns on every
  //       rank, that rank's tensors are broadcast and written into every rank's shards (master
  //       weights, parameters, tiers); optimizer states are left as they are.
  // Call between steps. Throws what fn throws (before anything is written back; with a
  // modifier the other ranks then throw CommError naming that rank), CommError, IoError.
  using GatheredFn = std::function<void(std::vector<std::pair<std::string, at::Tensor>>& params)>;
  void with_gathered_parameters(const std::vector<std::string>& names, int modifier_rank,
                                const GatheredFn& fn);
  // Names of every parameter, in registration order.
  std::vector<std::string> parameter_names() const;
  // Those of them weight decay leaves alone (EngineOptions::no_weight_decay), in the same order.
  std::vector<std::string> decay_free_parameter_names() const;
  // "" or a warning naming the EngineOptions::no_weight_decay patterns that match no parameter
  // (the program prints it once, on rank 0).
  const std::string& weight_decay_warning() const;
  MemoryReport memory() const;
  EngineTimes times() const;
  int64_t parameter_count() const;
  // Updates applied so far, skipped steps (a loss-scaler overflow) left out, as checkpoints keep
  // it: what a learning-rate schedule counts (DeepSpeed steps its scheduler only on an applied
  // update, so an overflow does not use up warmup).
  int64_t optimizer_steps() const;
  // Micro steps since the last step(), one whose backward failed included (its step is skipped
  // on every rank): a caller that drives micro steps itself counts as the engine does.
  int64_t micro_steps() const;
  // How model states are sharded: flat over every rank, or MiCS groups (one line).
  std::string describe_sharding() const;
  // Counters of the communicators the engine split off the job's (MiCS: "shard group",
  // "replica group", "two-level gather"), by role; empty for flat ZeRO. The job's communicator
  // counts its own.
  std::vector<std::pair<std::string, CommStats>> group_comm_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt
