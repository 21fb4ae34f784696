// ShardedStep: the optimizer step over this rank's shards. One all-reduce carries the squared
// gradient norm of every owned shard and an overflow flag, so all ranks take the same decision:
// skip the step (overflow; the loss scaler backs off) or clip by the global norm, update every
// shard (in place, or streamed through host buffers for groups in a file tier) and put the new
// values back into the parameters (stages 1-2 all-gather the flat buffers, stage 3 refreshes the
// shards it gathers from). Gradients kept in a file tier were measured as they were written, so
// the norm reads none back (TierGradients).
// Update in backward: when the step's learning rate is known before its micro steps (begin())
// and nothing needs all of a step's gradients before the first update (no clipping, no loss
// scaling), a group whose optimizer states stream from a file tier is updated as soon as its
// last reduction arrives, from the reduced gradient in memory (update_in_backward()): its
// gradient is never written to the tier and read back (ZeRO-Infinity's minimum of tier bytes,
// docs/architecture.md), and its tiles' I/O overlaps the rest of backward. Such a step cannot be
// skipped, so a non-finite gradient is a NumericError instead of a skipped step.
// Where nothing can rescale an overflow (no loss scaling, or the scale at its floor), one such
// step is skipped as a spike, and a second in a row is a NumericError: the job would otherwise
// skip every step to its end and finish as if it had trained.
// Thread safety: one thread (the training thread). Collective: every rank calls run() together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/param_gatherer.h"
#include "zero/shard_storage.h"
#include "zero/streamed_update.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/engine_types.h"
#include "zt/host/loss_scaler.h"
#include "zt/optimizer.h"

namespace zt {

struct StepOptions {
  int stage = 0;
  at::ScalarType dtype = at::kFloat;
  int64_t grad_accum = 1;
  double predivide = 1.0;           // zero.gradient_predivide_factor
  double gradient_clipping = 0;     // max global norm; 0 = off
  double allgather_bucket_mb = 25;  // bound on parameter all-gathers in flight
};

// The dependencies of a step: what it reads, updates and talks to. Not owned.
struct StepParts {
  ModelLayout& layout;
  std::vector<ShardStorage>& storage;
  Communicator& shard;     // the shard group: the global norm over its shards
  Communicator& gather;    // what the updated shards are all-gathered over (stages 1-2)
  Communicator& everyone;  // every rank: where a poisoned step is agreed on
  int world;               // ranks whose gradients were summed
  Optimizer& optimizer;
  LossScaler& scaler;
  ParamGatherer& gatherer;
  StreamedUpdate& streamed;
  std::vector<OffloadTier*> tiers;  // distinct tiers in use, checked before each update
  MemoryLedger& ledger;             // its clock times the optimizer and the waits
};

class ShardedStep {
 public:
  ShardedStep(StepParts parts, StepOptions options);
  // After every micro step's gradients reached ShardStorage::grad (or its tier): the step.
  // Gradients in memory are zeroed whether or not it was skipped; those in a file tier are
  // replaced by the next step's first reduction. Throws IoError when a tier lost bytes, before any
  // state of this step changed, except the groups an update in backward already updated (the
  // error then says the step was partly applied).
  StepReport run(double lr);
  // This rank's gradients of the step are incomplete (a backward failed part way): run() skips
  // the step on every rank as it skips an overflow (the flag travels with the overflow's over the
  // shard group, and over every rank where that group is not all of them: stage 0, MiCS). At
  // stages 2-3 a backward that fails on one rank only leaves its peers waiting in its reductions
  // anyway, which the communication timeout ends.
  void poison() { poisoned_ = true; }
  // A micro step's loss, before its backward. With loss scaling nothing: the scaler skips what
  // overflows. Without, it is kept where it was computed, unread; a loss that is not finite on
  // any rank makes run() drop the step's gradients and throw NumericError on every rank (its
  // count travels with the gradient totals, so the step reads the device once). With the update
  // in backward on it is read here instead, and one that is not finite throws NumericError now,
  // on this rank alone (its peers wait in backward's reductions, so that ends the job): a
  // streamed group would otherwise take its gradients first.
  //   micro: in, the micro step's index in its step (from 0), for the message.
  void note_loss(const at::Tensor& loss, int micro);
  // The next step's learning rate, before its first micro step: turns the update in backward
  // on for that step where it applies (see above). run() must then get the same `lr`.
  void begin(double lr);
  // GradReducer's final-gradient sink: updates streamed group `g` from `reduced` when the update
  // in backward is on for this step; returns whether it did.
  bool update_in_backward(int g, const at::Tensor& reduced, bool first);
  int64_t steps() const { return steps_; }
  // Why the model holds a step only partly applied ("" when it does not): an update that failed
  // part way (a tier's read or write, its groups in memory and earlier tiles already updated) or
  // a tier check that failed after the update in backward. A save of such a state would be a
  // checkpoint of no step: save_engine_checkpoint refuses it; a load (set_steps) clears it.
  const std::string& partly_applied() const { return partly_applied_; }
  // Records why (the first reason stands until set_steps clears it).
  void mark_partly_applied(const std::string& why);
  // 1 when the last step was skipped for gradients nothing could rescale (a second in a row
  // stops the job), else 0: saved with the step count, so a resume stops where the run would.
  int64_t unscalable_in_a_row() const { return unscalable_in_a_row_; }
  // A loaded checkpoint's count of applied updates (Adam's bias correction goes on from it) and
  // of unscalable steps just before its save; what a failed backward had poisoned, and what an
  // abandoned step had updated in backward, is the replaced state's (their writes are waited
  // for first: the load rewrites those tiles). Throws the first failed write (IoError).
  void set_steps(int64_t steps, int64_t unscalable_in_a_row);
  // Puts the master weights into the parameters, as after an update: groups in memory or a host
  // tier are copied (stage 0-2 flat slot, stage 3 parameter shard or its tier), then stages 1-2
  // all-gather every flat buffer and stage 3 its persistent ones. Groups streamed from a file
  // tier are not copied: their tiles were put in place as they went by (StreamedUpdate, or a
  // checkpoint load). Collective.
  void refresh_parameters();

 private:
  StepReport run_step(double lr);  // run()'s body; run() marks a step partly applied
  struct GradientTotals {
    double norm;    // global L2 norm of the summed, still scaled gradients
    bool overflow;  // a non-finite value on any rank
    bool poisoned;  // a failed backward on any rank (the step is skipped; no overflow)
    bool bad_loss;  // a loss that is not finite on any rank (note_loss)
  };

  // A loss note_loss() kept: copies of its own (the caller may add to the tensor it got back),
  // in its own dtype (a finite fp64 loss past fp32's range is no overflow).
  struct NotedLoss {
    at::Tensor value;  // the loss, detached
    at::Tensor bad;    // whether it is not finite: a bool on its device
    int micro;         // its micro step, from 0
  };

  GradientTotals measure_gradients(const std::vector<NotedLoss>& losses);
  // Names step `step` to the tiers and checks them (a tier whose files vanished or shrank fails
  // here, before any state of that step changes).
  void check_tiers(int64_t step);
  void update(const StepArgs& args);
  void zero_gradients();
  // The error for a loss that is not finite: `what` ("loss is nan", or that another rank had
  // one) at this step, `where` (" (micro step 2)"), whether the step was dropped, and the way out.
  NumericError loss_error(const std::string& what, const std::string& where,
                          bool step_dropped) const;
  // The error for a step whose losses were not all finite: this rank's first such loss, or the
  // highest rank that had one. Collective over every rank (each takes this path in the same step),
  // and reads `losses` (an error path: the syncs are fine).
  NumericError nonfinite_loss(const std::vector<NotedLoss>& losses);
  // The error for a second overflow in a row that nothing could rescale, with the way out.
  NumericError unscalable_overflow() const;

  // What the summed gradients are divided by: ranks, micro steps and the loss scale, less the
  // predivide factor already applied.
  double divisor() const;

  StepParts parts_;
  StepOptions options_;
  int64_t steps_ = 0;
  bool poisoned_ = false;          // poison() since the last run()
  std::string partly_applied_;     // partly_applied()
  std::vector<NotedLoss> losses_;  // note_loss() since the last run()
  // begin()'s: the learning rate its step was announced with, and whether streamed groups
  // update in that step's backward.
  double announced_lr_ = 0;
  bool in_backward_ = false;
  bool updated_in_backward_ = false;  // a streamed group took this step's update in backward
  bool tiers_checked_ = false;        // this step's first update in backward checked the tiers
  // Steps in a row that overflowed with nothing left to rescale (LossScaler::at_floor): one is
  // skipped, the next stops the job (run()). Any other step (applied, poisoned, or dropped for
  // a loss that is not finite) ends the row, so the error's "the one before" is true.
  int unscalable_in_a_row_ = 0;
};

}  // namespace zt
