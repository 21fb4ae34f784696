// EngineParts: the engine's pieces that checkpoints (engine_checkpoint) and the debug accessors
// (engine_accessors) read and restore, handed over by the engine as references. Not owned.
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "zero/grad_reducer.h"
#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/param_gatherer.h"
#include "zero/shard_io.h"
#include "zero/shard_storage.h"
#include "zero/sharded_step.h"
#include "zt/communicator.h"
#include "zt/host/loss_scaler.h"
#include "zt/offload.h"
#include "zt/optimizer.h"

namespace zt {

struct EngineParts {
  ModelLayout& layout;
  std::vector<ShardStorage>& storage;
  Communicator& comm;   // every rank of the job
  Communicator& shard;  // the ranks sharing out this rank's states (comm itself when flat)
  int replica_index;    // which of the groups holding the same shards this rank's is (0: flat)
  Optimizer& optimizer;
  LossScaler& scaler;
  ShardedStep& stepper;
  ParamGatherer& gatherer;
  ShardIo& io;
  MemoryLedger& ledger;     // where a host buffer taken here is counted
  OffloadTier* param_tier;  // stage 3 parameter shards' tier, or null
  int stage;
  at::ScalarType dtype;        // compute dtype
  double predivide;            // zero.gradient_predivide_factor
  int64_t tile_elements;       // streamed tile length
  const int64_t& micro_steps;  // micro steps run since the last step
  GradReducer& reducer;        // the gradient codec's error feedback (residuals)
};

}  // namespace zt
