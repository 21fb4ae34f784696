// GradReducer: gets every group's gradients from the parameters' .grad into the rank's fp32
// gradient shard. Stages 2-3 send a group as soon as its last parameter's gradient arrived (a
// hook on each parameter's AccumulateGrad node), so reduce-scatters overlap the rest of backward
// (overlap_comm), with at most reduce_bucket_mb in flight. Stage 2 sends them in turn: the
// groups' order, last to first (backward's order), as DDP's Reducer launches its buckets. Which
// parameters get a gradient may differ between ranks (a branch on the batch, an expert's
// routing), and ranks that sent groups as each completed issued their reductions in different
// orders, which reduced one group's gradients into another's where the sizes agreed. A group
// that missed a gradient on some rank (agreed at the end of each backward) is sent after the
// others in the next micro step, rather than holding back every group before it. Stage 3 sends
// each group as it completes: its backward gathers run between the reductions, so ranks must use
// the same parameters there anyway (comm_ucx names the first collective that differs). Stages
// 0-1 send everything
// at the step (stage 0 all-reduces full gradients, stage 1 reduce-scatters). Results are summed
// over micro steps into ShardStorage::grad, or, for groups whose optimizer states are streamed
// from a file tier, into their gradient in that tier (TierGradients): the step's first
// reduction writes it, the last one's value is measured for the global norm. A final-gradient
// sink (ShardedStep::update_in_backward) may take a streamed group's last reduction instead: the
// gradient then goes straight into the update.
// Thread safety: one thread (the training thread; autograd runs hooks on the calling thread on
// the CPU).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/shard_storage.h"
#include "zero/tier_gradients.h"
#include "zt/codec.h"
#include "zt/communicator.h"

namespace torch::autograd {
struct Node;
}

namespace zt {

class ParamGatherer;

// Where gradients go: stage 0 all-reduces them over the world; stages 1-3 reduce-scatter them
// over the shard group, then (MiCS) all-reduce each shard across the groups holding it.
struct ReduceComms {
  Communicator& world;
  Communicator& shard;
  Communicator* replica;  // null: one group
};

struct ReduceOptions {
  int stage = 0;
  at::ScalarType dtype = at::kFloat;    // the gradients' (compute) dtype
  double predivide = 1.0;               // zero.gradient_predivide_factor
  bool overlap_comm = true;             // false: wait for each reduction at once
  double bucket_mb = 25;                // bound on gradient bytes in flight
  int64_t grad_accum = 1;               // micro steps per step
  bool pipeline_read = true;            // tier gradients: read the next tile ahead
  bool pipeline_write = true;           // tier gradients: write tiles behind
  const Codec* codec = nullptr;         // stages 1-3: reduce-scatters on its encoding (qgZ)
  const Codec* across_codec = nullptr;  // MiCS: the all-reduce across the groups, coded
  bool error_feedback = false;          // with a codec: keep each group's encoding error
};

class GradReducer {
 public:
  // Installs the gradient-ready hooks (InternalError if a parameter does not require grad).
  // Stage 3 releases a group's parameters through `gatherer` once its gradients are taken.
  // Waits go to the ledger's clock, tier gradient buffers to its staging.
  GradReducer(ModelLayout& layout, std::vector<ShardStorage>& storage, ReduceComms comms,
              ParamGatherer& gatherer, ReduceOptions options, MemoryLedger& ledger);
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;
  // Takes its hooks off the parameters: they outlive the engine (a closed Python engine's
  // module trains on as plain PyTorch), and a hook left on them called into freed memory.
  ~GradReducer();

  // Micro step `index` (0-based, of grad_accum) of step `step` (1-based, for error messages)
  // begins.
  void begin_micro_step(int64_t step, int64_t index);
  // Sends every group not sent in this micro step (stages 0-1 all of them, first to last;
  // stage 2 the rest in their turn, then the late ones; stage 3 the ones whose parameters got no
  // gradient, first to last), so all ranks issue the same collectives, and waits for all of them
  // (tier gradient writes included). Stage 2 then agrees on the next micro step's late groups.
  void reduce_remaining();
  // A micro step whose backward failed part way: at stage 2 sends the rest as reduce_remaining
  // does (ranks whose hooks sent different groups meet at the same collective again), waits for
  // the reductions it issued (their buffers are in flight) and drops the gradients autograd left
  // on the parameters. What it
  // added to the shards stays: the caller makes the step skip (ShardedStep::poison).
  void abandon_micro_step();
  // Whether a parameter's gradient arrived since begin_micro_step: a backward ran (at every
  // stage; stages 0-1 reduce only at the step).
  bool gradients_arrived() const { return any_arrived_; }
  // The engine's own backward of the loss runs (Engine's run_backward): an arrival outside it is
  // a backward the caller ran (an auxiliary loss's loss.backward(retain_graph=True)), named as
  // such when it reduced a group the engine's backward then reaches again.
  // Inside it, a unit the engine is told it enters is a forward recomputed for that backward
  // (PyTorch's non-reentrant checkpoint), whose saved tensors view the gathered groups.
  void set_in_engine_backward(bool in) { in_engine_backward_ = in; }
  bool in_engine_backward() const { return in_engine_backward_; }
  // Error feedback: group g's residual (fp32, its padded length: what encoding this rank's
  // gradients lost so far), or undefined without error feedback. Checkpoints save and restore it.
  const at::Tensor& residual(int g) const { return residuals_[g]; }
  // The same for the coded all-reduce across MiCS groups: fp32, the group's shard padded to the
  // replicas; undefined without it.
  const at::Tensor& across_residual(int g) const { return across_residuals_[g]; }
  // Both residuals times `factor`; 0 forgets them. They hold what encoding lost of loss-scaled
  // gradients: a skipped step's gradients are dropped, and so must be what they lost (an inf
  // there made every later step overflow); a new loss scale puts them in the next step's units.
  void scale_residuals(double factor);
  // Offers each streamed group's last reduction of a step (`reduced`, summed over ranks;
  // `first`: no earlier micro step of this step left a partial sum in the tier) to `sink`
  // before it would go to the tier; the sink returns true when it consumed it.
  using FinalGradientSink = std::function<bool(int group, const at::Tensor& reduced, bool first)>;
  void set_final_gradient_sink(FinalGradientSink sink) { sink_ = std::move(sink); }

 private:
  struct Pending {
    int group;
    at::Tensor out;              // compute-dtype result being reduced into
    std::shared_ptr<Work> work;  // the reduction over the world or the shard group, then (MiCS)
                                 // the all-reduce across the groups
    int64_t bytes;
    bool across = false;  // MiCS: `work` is the all-reduce across the groups
  };

  void on_grad_ready(int param);
  // Stage 2: sends the groups whose turn it is and whose parameters' gradients all arrived.
  void reduce_in_turn();
  // Whether every parameter of group g got its gradient in this micro step.
  bool complete(int g) const;
  // Stage 2, once a micro step's reductions are issued: the groups that missed a
  // gradient, or completed after the group next in their turn, on any rank, become late for
  // kLateMicroSteps (a collective over the world).
  void agree_on_late_groups();
  // Stage 2, once backward ended (or failed): sends the groups not sent yet in the order every
  // rank keeps, then agree_on_late_groups(); once per micro step.
  void send_rest_in_turn();
  void reduce_group(int g);
  void drain();
  // MiCS: the all-reduce across groups of pending_[0, upto)'s shards, each once its
  // reduce-scatter finished.
  void start_across(size_t upto);
  void accumulate(const Pending& r);

  ModelLayout& layout_;
  std::vector<ShardStorage>& storage_;
  ReduceComms comms_;
  ParamGatherer& gatherer_;
  ReduceOptions options_;
  MemoryLedger& ledger_;
  TierGradients tier_grads_;
  int64_t step_ = 1, micro_ = 0;  // begin_micro_step's
  std::vector<std::shared_ptr<torch::autograd::Node>>
      accumulators_;                  // kept alive: they carry our hooks
  std::vector<uintptr_t> hook_keys_;  // one per accumulator, for del_post_hook
  std::vector<int> ready_;  // per group: parameters whose gradient arrived this micro step
  // Per parameter: whether its gradient arrived this micro step, and from where.
  static constexpr char kArrivedInside = 1;   // in the engine's own backward
  static constexpr char kArrivedOutside = 2;  // in a backward the caller ran
  std::vector<char> arrived_;
  bool any_arrived_ = false;  // gradients_arrived()
  bool in_engine_backward_ = false;
  bool arrived_outside_ = false;       // since begin_micro_step, outside the engine's backward
  std::vector<bool> reduced_;          // per group: already sent this micro step
  std::vector<at::Tensor> residuals_;  // per group; undefined without error feedback
  std::vector<at::Tensor> across_residuals_;  // per group, MiCS's coded all-reduce
  std::vector<char> out_of_turn_;  // stage 2, per group: completed after the next in its turn
  // Stage 2: micro steps a flagged group stays late (late_left_ counts them down, per group).
  static constexpr int kLateMicroSteps = 16;
  std::vector<int> late_left_;
  // Stage 2: group g is sent after the others (agree_on_late_groups).
  bool late(int g) const { return late_left_[g] > 0; }
  bool agreed_ = false;      // stage 2: this micro step's agreement was issued
  int turn_ = -1;            // stage 2: the group sent next in turn; -1 when all were
  bool noted_late_ = false;  // agree_on_late_groups' note, once
  std::vector<Pending> pending_;
  FinalGradientSink sink_;
};

}  // namespace zt
