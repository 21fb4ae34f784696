// StreamedUpdate: the optimizer step for groups whose master and states live in a tier
// that is not addressable (files). Each shard is cut into tiles of tile_elements; a tile's
// master, states and reduced gradient (kept in the same tier, see TierGradients, or in host
// memory where it waited for the global norm: ShardStorage::grad) are read into a host buffer
// set, updated by the optimizer, copied into the parameters (the stage 1-2 flat
// slot, the stage 3 shard, or the tile written to the parameter tier) and written back (the
// gradient is not: the next step's first reduction replaces it), with reads ahead and writes
// behind overlapping the update (TilePipeline). Every tile read is checked against the checksum
// it was written with. The buffer sets are allocated at the first step and kept, counted as
// staging: sets x (master + states + gradient [+ a compute-dtype parameter tile when parameters
// of another dtype than the master's are streamed too]) x tile_elements x 4 bytes, each rounded
// up to the tier's alignment (a 16-bit master or state uses half of its buffer).
// update_group() is the same update for one group whose reduced gradient is in memory, during
// backward (ShardedStep::update_in_backward): the gradient never goes to the tier and back. Its
// last writes stay in flight while backward goes on; settle() waits for them.
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/shard_storage.h"
#include "zero/tile_pipeline.h"
#include "zt/offload.h"
#include "zt/optimizer.h"

namespace zt {

struct StreamOptions {
  int stage = 0;
  at::ScalarType dtype = at::kFloat;  // compute dtype
  int64_t tile_elements = 1;
  bool pipeline_read = true;
  bool pipeline_write = true;
};

class StreamedUpdate {
 public:
  StreamedUpdate(ModelLayout& layout, std::vector<ShardStorage>& storage, Optimizer& optimizer,
                 OffloadTier* tier, StreamOptions options, MemoryLedger& ledger);
  // Updates every streamed group's shard; returns when all tiles are written back. Throws the
  // first failed read or write (IoError), or a checksum mismatch naming the array and `args.step`.
  // Groups updated in backward (ShardStorage::updated_in_backward) are skipped, and the flag
  // cleared.
  void run(const StepArgs& args);
  // Updates group `g` from `reduced` (its shard of the gradient summed over ranks, compute
  // dtype), plus the partial sum in the tier unless `first` (the step's earlier micro steps
  // left it there). Measures the gradient as it goes (ShardStorage::grad_sq) and throws
  // NumericError at a non-finite value, before that tile is updated: a step some of whose
  // groups are updated cannot be skipped.
  void update_group(int g, const at::Tensor& reduced, bool first, const StepArgs& args);
  // Waits for update_group()'s writes still in flight; rethrows the first failure.
  void settle();
  // Forgets the groups updated in backward of a step that did not run (an error ended it, and a
  // checkpoint load replaces what they hold): a later run() updates them again. Settles first.
  void forget_backward_updates();

 private:
  struct Tile {
    int group;
    int64_t start, len;
  };

  std::vector<Tile> tiles() const;
  void append_tiles(int g, std::vector<Tile>& out) const;
  void ensure_buffer_sets(int sets);
  TieredArray& array(const ShardStorage& s, int64_t a) const;
  // Arrays [0, arrays) of the tile into buffer set `set` (arrays_ + 1: the gradient too), and
  // their checksums once read.
  void read(const Tile& t, int set, int64_t arrays, std::vector<std::shared_ptr<Work>>& works);
  void verify(const Tile& t, int set, int64_t arrays, int64_t step) const;
  // `grad`: the tile's fp32 gradient.
  void update(const Tile& t, int set, const at::Tensor& grad, const StepArgs& args);
  void write(const Tile& t, int set, std::vector<std::shared_ptr<Work>>& works);
  void* buffer(int set, int64_t a) const { return sets_[set][a].data(); }

  ModelLayout& layout_;
  std::vector<ShardStorage>& storage_;
  Optimizer& optimizer_;
  OffloadTier* tier_;
  StreamOptions options_;
  MemoryLedger& ledger_;
  int64_t arrays_;               // master + each state; the gradient's buffer follows them in a set
  at::ScalarType master_dtype_;  // the optimizer's master weights' (buffers are fp32-sized)
  at::ScalarType state_dtype_;   // the optimizer's states' (their buffers are fp32-sized)
  // Parameters streamed to a tier in another dtype than the master's need their own converted
  // tile; in the master's dtype they are the master tile's own bytes.
  bool param_tile_;
  std::vector<std::vector<StagingBuffer>> sets_;  // host buffers, one set per tile in flight
  std::unique_ptr<TilePipeline> in_backward_;     // update_group()'s, kept across groups
};

}  // namespace zt
