#include "zero/shard_io.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace zt {

ShardIo::ShardIo(ModelLayout& layout, std::vector<ShardStorage>& storage, OffloadTier* tier,
                 int64_t tile_elements, at::ScalarType master_dtype, at::ScalarType state_dtype,
                 MemoryLedger& ledger)
    : layout_(layout),
      storage_(storage),
      tier_(tier),
      tile_elements_(tile_elements),
      master_dtype_(master_dtype),
      state_dtype_(state_dtype),
      ledger_(ledger) {}

TieredArray& ShardIo::file(const ShardStorage& s, int64_t a) const {
  return a == 0 ? *s.master_file : *s.state_files[a - 1];
}

at::Tensor& ShardIo::tensor(ShardStorage& s, int64_t a) const {
  return a == 0 ? s.master : s.states[a - 1];
}

namespace {

// Runs of a 16-bit array in memory are handed out as fp32 through a buffer of this many elements.
constexpr int64_t kConvertRun = int64_t{1} << 16;

// One streamed tile's host buffers: the tier's bytes (raw) and what callers see (data): the same
// buffer for fp32, an fp32 copy for a 16-bit array, widened after a read and rounded back
// (to nearest even) before a write.
class TileBuffer {
 public:
  TileBuffer(OffloadTier& tier, int64_t elements, at::ScalarType type, MemoryLedger& ledger)
      : type_(type), raw_(tier, elements * 4, ledger) {
    if (type != at::kFloat) wide_.emplace(tier, elements * 4, ledger);
  }
  void* raw() const { return raw_.data(); }
  float* data() const { return static_cast<float*>(wide_ ? wide_->data() : raw_.data()); }
  void widen(int64_t count) const {
    if (wide_) view_of(data(), count, at::kFloat).copy_(view_of(raw(), count, type_));
  }
  void narrow(int64_t count) const {
    if (wide_) view_of(raw(), count, type_).copy_(view_of(data(), count, at::kFloat));
  }

 private:
  at::ScalarType type_;
  StagingBuffer raw_;
  std::optional<StagingBuffer> wide_;
};

}  // namespace

void ShardIo::for_each_tile(int gi, int64_t a, int64_t begin, int64_t end, int64_t step,
                            const TileFn& fn) {
  const ParamGroup& g = layout_.groups[gi];
  TieredArray& array = file(storage_[gi], a);
  const TileBuffer buffer(*tier_, tile_elements_, dtype(a), ledger_);
  for (int64_t t = (begin - g.first) / tile_elements_; g.first + t * tile_elements_ < end; ++t) {
    array.read_tile(t, buffer.raw())->wait();
    array.verify_tile(t, buffer.raw(), step);
    const int64_t tile_begin = g.first + t * tile_elements_;
    const int64_t count = std::min(tile_elements_, g.first + g.shard - tile_begin);
    buffer.widen(count);
    if (fn(tile_begin, buffer.data(), count)) {
      buffer.narrow(count);
      array.write_tile(t, buffer.raw())->wait();
    }
  }
}

void ShardIo::in_memory(int gi, int64_t a, int64_t begin, int64_t end, bool write_back,
                        const FillFn& fn) {
  const at::Tensor& t = tensor(storage_[gi], a);
  const int64_t first = layout_.groups[gi].first;
  // Used in place where it is host fp32; otherwise through a host fp32 run: widened from 16
  // bits, or copied from compute memory on another device.
  if (t.scalar_type() == at::kFloat && t.is_cpu()) {
    fn(begin, t.data_ptr<float>() + (begin - first), end - begin);
    return;
  }
  at::Tensor run = at::empty({std::min(kConvertRun, end - begin)}, at::kFloat);
  for (int64_t lo = begin; lo < end; lo += kConvertRun) {
    const int64_t n = std::min(kConvertRun, end - lo);
    const at::Tensor part = t.narrow(0, lo - first, n);
    const at::Tensor wide = run.narrow(0, 0, n);
    wide.copy_(part);
    fn(lo, wide.data_ptr<float>(), n);
    if (write_back) part.copy_(wide);
  }
}

void ShardIo::read(int gi, int64_t a, int64_t begin, int64_t end, int64_t step, const ReadFn& fn) {
  if (begin >= end) return;
  ShardStorage& s = storage_[gi];
  if (!s.opt_streamed) {
    in_memory(gi, a, begin, end, false,
              [&](int64_t lo, float* data, int64_t n) { fn(lo, data, n); });
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
    in_memory(gi, a, begin, end, true, change);
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
    tensor(s, a).zero_();
    in_memory(gi, a, g.first, g.first + g.shard, true, fill);
    return;
  }
  TieredArray& array = file(s, a);
  const TileBuffer buffer(*tier_, tile_elements_, dtype(a), ledger_);
  for (int64_t start = 0; start < g.shard; start += tile_elements_) {
    const int64_t count = std::min(tile_elements_, g.shard - start);
    std::memset(buffer.data(), 0, static_cast<size_t>(count) * 4);
    fill(g.first + start, buffer.data(), count);
    buffer.narrow(count);
    array.write_tile(start / tile_elements_, buffer.raw())->wait();
  }
}

}  // namespace zt
