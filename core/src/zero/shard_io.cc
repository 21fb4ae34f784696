#include "zero/shard_io.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace zt {

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

void ShardIo::for_each_tile(int gi, int64_t a, int64_t begin, int64_t end, int64_t step,
                            const TileFn& fn) {
  const ParamGroup& g = layout_.groups[gi];
  TieredArray& array = file(storage_[gi], a);
  const StagingBuffer buffer(*tier_, tile_elements_ * 4, ledger_);
  auto* data = static_cast<float*>(buffer.data());
  for (int64_t t = (begin - g.first) / tile_elements_; g.first + t * tile_elements_ < end; ++t) {
    array.read_tile(t, data)->wait();
    array.verify_tile(t, data, step);
    const int64_t tile_begin = g.first + t * tile_elements_;
    if (fn(tile_begin, data, std::min(tile_elements_, g.first + g.shard - tile_begin))) {
      array.write_tile(t, data)->wait();
    }
  }
}

void ShardIo::read(int gi, int64_t a, int64_t begin, int64_t end, int64_t step, const ReadFn& fn) {
  if (begin >= end) return;
  ShardStorage& s = storage_[gi];
  if (!s.opt_streamed) {
    fn(begin, tensor(s, a).data_ptr<float>() + (begin - layout_.groups[gi].first), end - begin);
    return;
  }
  for_each_tile(gi, a, begin, end, step, [&](int64_t tile_begin, float* data, int64_t count) {
    const int64_t lo = std::max(begin, tile_begin);
    const int64_t hi = std::min(end, tile_begin + count);
    fn(lo, data + (lo - tile_begin), hi - lo);
    return false;
  });
}

void ShardIo::edit(int gi, int64_t a, int64_t begin, int64_t end, int64_t step,
                   const FillFn& change) {
  if (begin >= end) return;
  ShardStorage& s = storage_[gi];
  if (!s.opt_streamed) {
    change(begin, tensor(s, a).data_ptr<float>() + (begin - layout_.groups[gi].first), end - begin);
    return;
  }
  for_each_tile(gi, a, begin, end, step, [&](int64_t tile_begin, float* data, int64_t count) {
    change(tile_begin, data, count);
    return true;
  });
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
  const StagingBuffer buffer(*tier_, tile_elements_ * 4, ledger_);
  auto* data = static_cast<float*>(buffer.data());
  for (int64_t start = 0; start < g.shard; start += tile_elements_) {
    const int64_t count = std::min(tile_elements_, g.shard - start);
    std::memset(data, 0, static_cast<size_t>(count) * 4);
    fill(g.first + start, data, count);
    array.write_tile(start / tile_elements_, data)->wait();
  }
}

}  // namespace zt
