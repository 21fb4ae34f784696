#include "shard_io.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace zt {

namespace {

// One tile's worth of the tier's host memory, counted as staging while it lives.
class TileBuffer {
 public:
  TileBuffer(OffloadTier& tier, int64_t elements, MemoryLedger& ledger)
      : ledger_(ledger), buffer_(tier.host_buffer(elements * 4)) {
    ledger_.staging_added(static_cast<int64_t>(buffer_.nbytes()));
  }
  ~TileBuffer() { ledger_.staging_freed(static_cast<int64_t>(buffer_.nbytes())); }
  TileBuffer(const TileBuffer&) = delete;
  TileBuffer& operator=(const TileBuffer&) = delete;
  float* data() const { return static_cast<float*>(buffer_.data_ptr()); }

 private:
  MemoryLedger& ledger_;
  at::Tensor buffer_;
};

}  // namespace

ShardIo::ShardIo(ModelLayout& layout, std::vector<ShardStorage>& storage, OffloadTier* tier,
                 int64_t tile_elements, MemoryLedger& ledger)
    : layout_(layout),
      storage_(storage),
      tier_(tier),
      tile_elements_(tile_elements),
      ledger_(ledger) {}

TieredArray& ShardIo::file(const ShardStorage& s, int64_t a) const {
  return a == 0 ? *s.master_file : *s.state_files[a - 1];
}

at::Tensor& ShardIo::tensor(ShardStorage& s, int64_t a) const {
  return a == 0 ? s.master : s.states[a - 1];
}

void ShardIo::read(int gi, int64_t a, int64_t begin, int64_t end, int64_t step, const ReadFn& fn) {
  if (begin >= end) return;
  ShardStorage& s = storage_[gi];
  const ParamGroup& g = layout_.groups[gi];
  if (!s.opt_streamed) {
    fn(begin, tensor(s, a).data_ptr<float>() + (begin - g.first), end - begin);
    return;
  }
  TieredArray& array = file(s, a);
  const TileBuffer buffer(*tier_, tile_elements_, ledger_);
  for (int64_t t = (begin - g.first) / tile_elements_; g.first + t * tile_elements_ < end; ++t) {
    array.read_tile(t, buffer.data())->wait();
    array.verify_tile(t, buffer.data(), step);
    const int64_t tile_begin = g.first + t * tile_elements_;
    const int64_t lo = std::max(begin, tile_begin);
    const int64_t hi = std::min({end, tile_begin + tile_elements_, g.first + g.shard});
    fn(lo, buffer.data() + (lo - tile_begin), hi - lo);
  }
}

void ShardIo::rewrite(int gi, int64_t a, const FillFn& fill) {
  ShardStorage& s = storage_[gi];
  const ParamGroup& g = layout_.groups[gi];
  if (!s.opt_streamed) {
    at::Tensor& t = tensor(s, a);
    t.zero_();
    fill(g.first, t.data_ptr<float>(), g.shard);
    return;
  }
  TieredArray& array = file(s, a);
  const TileBuffer buffer(*tier_, tile_elements_, ledger_);
  for (int64_t start = 0; start < g.shard; start += tile_elements_) {
    const int64_t count = std::min(tile_elements_, g.shard - start);
    std::memset(buffer.data(), 0, static_cast<size_t>(count) * 4);
    fill(g.first + start, buffer.data(), count);
    array.write_tile(start / tile_elements_, buffer.data())->wait();
  }
}

}  // namespace zt
