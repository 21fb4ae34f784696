// ShardIo: reads, rewrites and edits a group's optimizer arrays (array 0: the master, in the
// optimizer's master_dtype, then each optimizer state in Optimizer::state_names order, in its
// state_dtype) as fp32 runs wherever ShardStorage placed them (bf16 arrays widened exactly, and
// rounded to nearest even when written back: a value that came from bf16 goes back unchanged), for
// checkpoints, the debug accessors and with_gathered_parameters. In compute memory and in a host
// tier the bytes are used in place. In a streamed (file) tier they move tile by tile through one
// host buffer of the tier, so a shard is never whole in memory: every tile read is checked against
// the checksum it was written with, and a rewrite writes whole tiles, so the step after it reads
// them back clean. Positions are elements of the group's flat buffer; this rank holds [first, first
// + shard). Thread safety: one thread (the training thread).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/shard_storage.h"
#include "zt/offload.h"

namespace zt {

class ShardIo {
 public:
  // `tier`: the optimizer tier (null when none); `tile_elements`: the streamed tile length;
  // `master_dtype`, `state_dtype`: the optimizer's master weights' and states'.
  ShardIo(ModelLayout& layout, std::vector<ShardStorage>& storage, OffloadTier* tier,
          int64_t tile_elements, at::ScalarType master_dtype, at::ScalarType state_dtype,
          MemoryLedger& ledger);

  // A run of elements [begin, begin + count) of the flat buffer.
  using ReadFn = std::function<void(int64_t begin, const float* data, int64_t count)>;
  using FillFn = std::function<void(int64_t begin, float* data, int64_t count)>;

  // Hands elements [begin, end) of group `g`'s array `a` (within the held range) to `fn`, in
  // increasing order. Throws IoError when a tier read fails or a tile's checksum differs
  // (naming the array and `step`).
  void read(int g, int64_t a, int64_t begin, int64_t end, int64_t step, const ReadFn& fn);
  // Replaces the whole held range of group `g`'s array `a`: `fill` gets it zeroed, in increasing
  // runs (one run in memory, one per tile when streamed), and writes the new values into it; a
  // streamed tile is written back to the tier once `fill` returns. Throws IoError when a tier
  // write fails, and what `fill` throws.
  void rewrite(int g, int64_t a, const FillFn& fill);
  // Changes elements [begin, end) of group `g`'s array `a` (within the held range) in place,
  // keeping the rest: `change` gets runs that cover the range, in increasing order (in memory the
  // range itself; streamed, each tile that overlaps it, read, checked as read() does, and whole,
  // so a caller can pass the tile on, then written back once `change` returns). `change` must
  // alter only elements in [begin, end). Throws IoError when a tier read, check or write fails,
  // and what `change` throws.
  void edit(int g, int64_t a, int64_t begin, int64_t end, int64_t step, const FillFn& change);

 private:
  // Streamed: reads each tile of array `a` that overlaps [begin, end), checks it, and hands the
  // whole tile (its first element, data, length) to `fn`, writing it back when `fn` returns true.
  using TileFn = std::function<bool(int64_t tile_begin, float* data, int64_t count)>;
  void for_each_tile(int g, int64_t a, int64_t begin, int64_t end, int64_t step, const TileFn& fn);
  // In memory: hands [begin, end) of array `a` to `fn` as host fp32 (16-bit states, or arrays in
  // another device's memory, through a host run at a time, copied back when `write_back`).
  void in_memory(int g, int64_t a, int64_t begin, int64_t end, bool write_back, const FillFn& fn);
  at::ScalarType dtype(int64_t a) const { return a == 0 ? master_dtype_ : state_dtype_; }
  TieredArray& file(const ShardStorage& s, int64_t a) const;
  at::Tensor& tensor(ShardStorage& s, int64_t a) const;

  ModelLayout& layout_;
  std::vector<ShardStorage>& storage_;
  OffloadTier* tier_;
  int64_t tile_elements_;
  at::ScalarType master_dtype_;
  at::ScalarType state_dtype_;
  MemoryLedger& ledger_;
};

}  // namespace zt
