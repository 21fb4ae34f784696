// TieredArray: one array of bytes (a group's fp32 master, an optimizer state, a parameter
// shard) kept in an OffloadTier. When the tier is host memory the engine uses address() in
// place; otherwise bytes move in tiles of tile_bytes, and every tile's checksum is remembered
// when it is written and compared when it is read back, so a file truncated, cut short or
// overwritten under a running job is an IoError naming the array, the bytes and the step
// instead of silently wrong training. The checksum is additive over tiles, so a whole-array
// read is checked against the tiles that wrote it. Host buffers it allocates itself (upload,
// read_range) are counted as staging in the ledger, and their waits on the clock.
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zero/memory_ledger.h"
#include "zt/offload.h"
#include "zt/work.h"

namespace zt {

// Position-aware checksum of `bytes` that start `offset` bytes into their array (offset a
// multiple of 8): the sum over 64-bit words of a mix of the word and its index.
uint64_t array_checksum(const void* data, int64_t bytes, int64_t offset);

// A 1-D tensor of `numel` elements over bytes the tensor does not own (tier memory, host
// buffers); the owner must outlive it.
at::Tensor view_of(void* address, int64_t numel, at::ScalarType dtype);

class TieredArray {
 public:
  TieredArray(OffloadTier& tier, std::string name, int64_t bytes, int64_t tile_bytes,
              MemoryLedger& ledger);
  ~TieredArray();
  TieredArray(const TieredArray&) = delete;
  TieredArray& operator=(const TieredArray&) = delete;

  const std::string& name() const { return name_; }
  int64_t bytes() const { return bytes_; }
  int64_t tile_bytes() const { return tile_bytes_; }
  int64_t tiles() const { return static_cast<int64_t>(tile_sums_.size()); }
  OffloadTier& tier() const { return tier_; }
  // The bytes in tier memory, or nullptr when they must be moved (then use the calls below).
  void* address() const { return address_; }

  // Writes the whole array from `src` (1-D, any dtype and strides) as `dtype` elements, one tile
  // at a time through one host buffer, so no converted copy of the whole array is ever made;
  // returns when written.
  void upload(const at::Tensor& src, at::ScalarType dtype);
  // Tile t is bytes [t * tile_bytes, min(bytes, (t + 1) * tile_bytes)).
  std::shared_ptr<Work> read_tile(int64_t t, void* host);
  // Call once the read completed: throws IoError if the bytes differ from those written.
  void verify_tile(int64_t t, const void* host, int64_t step) const;
  std::shared_ptr<Work> write_tile(int64_t t, const void* host);
  std::shared_ptr<Work> read_all(void* host);
  void verify_all(const void* host, int64_t step) const;
  // Hands bytes [begin, end) to `fn` in increasing runs, one tile at a time through one host
  // buffer, each tile verified first (IoError naming `step` when it differs). `begin` and `end`
  // within the array; runs split only at tile bounds.
  using RangeFn = std::function<void(int64_t offset, const void* data, int64_t bytes)>;
  void read_range(int64_t begin, int64_t end, int64_t step, const RangeFn& fn);

 private:
  int64_t tile_length(int64_t t) const;
  [[noreturn]] void mismatch(int64_t first, int64_t length, int64_t step) const;

  OffloadTier& tier_;
  MemoryLedger& ledger_;
  std::string name_;
  int64_t bytes_, tile_bytes_;
  int64_t region_;
  void* address_;
  std::vector<uint64_t> tile_sums_;
};

}  // namespace zt
