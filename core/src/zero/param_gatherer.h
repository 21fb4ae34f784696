// ParamGatherer: stage 3's parameter life cycle. Before a unit runs its groups are all-gathered
// from the rank shards (and the next units' gathers started: prefetch_units, or as many as fit
// in prefetch_elements; never past max_live_parameters gathered elements); after it ran they
// are released (their storage freed) unless needed again soon; before its backward they are
// gathered again. The last unit that releases anything keeps its groups across a training
// forward's turn into backward, which begins by gathering exactly those again (FSDP keeps its
// root gathered after forward for the same reason). A released group's buffer is kept for the
// next gather of the same size (at most kSpareBuffers of them, freed by release_all() but after a
// backward that ended as planned, which keeps those the next forward's first gathers take, held
// through the step beside no gathered group; the ledger counts neither as gathered): the next
// unit's gather follows at once, and a fresh block of 4 MiB or more is a fresh mapping whose
// pages the kernel zero-fills as they are first touched (zt/host_memory.h). Measured on the bench
// GPT at stage 3: 2% of a step.
// Shards kept in a streamed tier are read one unit further ahead than gathered.
// Below stage 3 every group stays gathered and all of this is a no-op.
// Thread safety: one thread (the training thread); collectives and reads complete elsewhere,
// into buffers this object keeps alive until they are done (also when destroyed by an error).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/shard_storage.h"
#include "zt/codec.h"
#include "zt/communicator.h"
#include "zt/offload.h"

namespace zt {

struct GatherOptions {
  const Codec* codec = nullptr;  // gathers run on its encoding (ZeRO++ qwZ); null = exact
  int64_t prefetch_units = 1;
  int64_t prefetch_elements = 0;             // > 0: prefetch by elements instead of units
  int64_t max_live_parameters = 1000000000;  // gathered elements no prefetch goes beyond
};

class ParamGatherer {
 public:
  ParamGatherer(ModelLayout& layout, std::vector<ShardStorage>& storage, Communicator& comm,
                OffloadTier* param_tier, GatherOptions options, MemoryLedger& ledger);
  ~ParamGatherer();
  ParamGatherer(const ParamGatherer&) = delete;
  ParamGatherer& operator=(const ParamGatherer&) = delete;

  // Gathers started from now on skip the codec (full_parameters: exported and checked values are
  // the exact ones); persistent groups are refreshed exactly at every step anyway.
  void set_exact(bool exact) { exact_ = exact; }
  // The step that reads of streamed shards are checked for (named in their errors).
  void set_step(int64_t step) { step_ = step; }

  // Unit `u` is about to run forward (direction +1) or backward (-1): its groups gathered, the
  // next ones in that direction started, streamed shards beyond them read ahead.
  void gather_unit(int u, int direction);
  // After unit `u`'s forward: releases its groups the prefetch window does not need next.
  // `backward_follows` (a training forward that runs every unit in order): the turn unit keeps
  // its groups for the backward; the reducer or release_all() frees them there.
  void release_after_forward(int u, bool backward_follows = false);
  // Unit `done`'s backward finished and `next` runs next: releases what `next` does not need.
  void release_after_backward(int done, int next);
  void ensure_gathered(int g);
  bool gathered(int g) const { return state_[g].gathered; }
  void release(int g);
  // Releases every group and frees the kept buffers; with `keep_spares` (a backward that ended as
  // planned: the next forward gathers the same sizes) keeps as many as the next forward's first
  // unit and its prefetch take (1 + prefetch_units, at most kSpareBuffers).
  void release_all(bool keep_spares = false);
  // Waits out every read-ahead and drops the shards (they go stale at a step). With
  // `rethrow`, the first failure is thrown once all have finished.
  void drop_fetches(bool rethrow);

 private:
  struct GroupState {
    bool gathered = true;
    std::shared_ptr<Work> pending_gather;
    at::Tensor fetched;  // streamed: the shard read ahead of its gather
    std::shared_ptr<Work> fetch_work;
  };

  void fetch(int g);
  void start_gather(int g);
  void forget_fetched(GroupState& s);
  void take_storage(const at::Tensor& flat, size_t bytes);
  void give_storage(const at::Tensor& flat);
  std::vector<int> prefetch_window(int u, int direction) const;
  bool needed_soon(int g, int u, int direction) const;
  int64_t element_size() const { return layout_.element_size; }

  ModelLayout& layout_;
  std::vector<ShardStorage>& storage_;
  Communicator& comm_;
  OffloadTier* param_tier_;
  GatherOptions options_;
  MemoryLedger& ledger_;
  std::vector<GroupState> state_;
  int64_t step_ = 1;
  bool exact_ = false;
  // The last unit with a group that is ever released: its forward ends where backward begins.
  // -1 when every group is persistent.
  int turn_unit_ = -1;
  // Released buffers waiting for the next gather of their size.
  static constexpr size_t kSpareBuffers = 2;
  struct Spare {
    c10::DataPtr data;
    size_t bytes;
  };
  std::vector<Spare> spare_;
};

}  // namespace zt
