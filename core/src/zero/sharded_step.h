// ShardedStep: the optimizer step over this rank's shards. One all-reduce carries the squared
// gradient norm of every owned shard and an overflow flag, so all ranks take the same decision:
// skip the step (overflow; the loss scaler backs off) or clip by the global norm, update every
// shard (in place, or streamed through host buffers for groups in a file tier) and put the new
// values back into the parameters (stages 1-2 all-gather the flat buffers, stage 3 refreshes the
// shards it gathers from). Gradients kept in a file tier were measured as they were written, so
// the norm reads none back (TierGradients).
// Thread safety: one thread (the training thread). Collective: every rank calls run() together.
#pragma once

#include <cstdint>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/param_gatherer.h"
#include "zero/shard_storage.h"
#include "zero/streamed_update.h"
#include "zt/communicator.h"
#include "zt/engine_types.h"
#include "zt/loss_scaler.h"
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
  Communicator& shard;   // the shard group: the global norm over its shards
  Communicator& gather;  // what the updated shards are all-gathered over (stages 1-2)
  int world;             // ranks whose gradients were summed
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
  // state of this step changed.
  StepReport run(double lr);
  int64_t steps() const { return steps_; }
  // A loaded checkpoint's count of applied updates (Adam's bias correction goes on from it).
  void set_steps(int64_t steps) { steps_ = steps; }
  // Puts the master weights into the parameters, as after an update: groups in memory or a host
  // tier are copied (stage 0-2 flat slot, stage 3 parameter shard or its tier), then stages 1-2
  // all-gather every flat buffer and stage 3 its persistent ones. Groups streamed from a file
  // tier are not copied: their tiles were put in place as they went by (StreamedUpdate, or a
  // checkpoint load). Collective.
  void refresh_parameters();

 private:
  struct GradientTotals {
    double norm;    // global L2 norm of the summed, still scaled gradients
    bool overflow;  // a non-finite value on any rank
  };

  GradientTotals measure_gradients();
  void check_tiers();
  void update(const StepArgs& args);
  void zero_gradients();

  StepParts parts_;
  StepOptions options_;
  int64_t steps_ = 0;
};

}  // namespace zt
