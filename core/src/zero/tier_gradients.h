// TierGradients: the reduced fp32 gradient shards of groups whose optimizer states are streamed
// from a file tier live in that tier too (ZeRO-Infinity swaps gradient partitions out to NVMe),
// so no rank holds a gradient the size of its share of the model. A reduced shard reaches its
// array tile by tile through a few host buffers (TilePipeline): the step's first reduction
// writes it, later micro steps read, add and write it back. Its final value for the step is
// measured as it goes by (squared sum, non-finite values: ShardStorage::grad_*), so the step's
// global norm reads nothing back. The last tiles' writes stay in flight while backward goes on,
// until the next group needs their buffers or settle(): at most pipeline sets x one tile.
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/shard_storage.h"
#include "zero/tile_pipeline.h"

namespace zt {

class TierGradients {
 public:
  // pipeline_read / pipeline_write: as for the optimizer states' tiles (zero.pipeline_*).
  TierGradients(std::vector<ShardStorage>& storage, MemoryLedger& ledger, bool pipeline_read,
                bool pipeline_write);
  TierGradients(const TierGradients&) = delete;
  TierGradients& operator=(const TierGradients&) = delete;

  // Adds `reduced` (group g's shard in the compute dtype, summed over ranks) into its gradient
  // in the tier. `first`: it replaces what is there (the step's first reduction); `last`: it
  // gives the step's final value, which is measured. `step` names the step in a checksum error.
  // Throws IoError (a failed transfer, a tile read back different).
  void add(int g, const at::Tensor& reduced, bool first, bool last, int64_t step);
  // Waits for every write still in flight; rethrows the first failure.
  void settle() { pipeline_.settle(); }

 private:
  std::vector<ShardStorage>& storage_;
  MemoryLedger& ledger_;
  std::vector<StagingBuffer> buffers_;  // one tile each, allocated at first use; before the
                                        // pipeline, so they outlive its transfers
  TilePipeline pipeline_;
};

}  // namespace zt
