#include "zero/tier_gradients.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "zero/grad_squares.h"

namespace zt {

TierGradients::TierGradients(std::vector<ShardStorage>& storage, MemoryLedger& ledger,
                             bool pipeline_read, bool pipeline_write)
    : storage_(storage),
      ledger_(ledger),
      pipeline_(pipeline_read, pipeline_write, ledger.clock()) {}

void TierGradients::add(int g, const at::Tensor& reduced, bool first, bool last, int64_t step) {
  ShardStorage& s = storage_[g];
  TieredArray& file = *s.grad_file;
  const int64_t tile = file.tile_bytes() / 4, shard = file.bytes() / 4;
  while (static_cast<int>(buffers_.size()) < pipeline_.sets())
    buffers_.emplace_back(file.tier(), file.tile_bytes(), ledger_);
  double sq = 0;
  bool nonfinite = false;
  auto read = [&](int64_t t, int set, std::vector<std::shared_ptr<Work>>& works) {
    if (!first) works.push_back(file.read_tile(t, buffers_[set].data()));
  };
  auto compute = [&](int64_t t, int set) {
    const int64_t len = std::min(tile, shard - t * tile);
    const at::Tensor sum = view_of(buffers_[set].data(), len, at::kFloat);
    // A tile at a time from the reduction's device: the tier's buffers are host memory.
    const at::Tensor part = reduced.narrow(0, t * tile, len);
    if (first) {
      sum.copy_(part);
    } else {
      file.verify_tile(t, buffers_[set].data(), step);
      sum.add_(part.to(at::kCPU));
    }
    if (!last) return;
    const double tile_sq = squared_sum(sum);
    if (std::isfinite(tile_sq)) {
      sq += tile_sq;
    } else {
      nonfinite = true;
    }
  };
  auto write = [&](int64_t t, int set, std::vector<std::shared_ptr<Work>>& works) {
    works.push_back(file.write_tile(t, buffers_[set].data()));
  };
  s.grad_measured = false;
  pipeline_.run(file.tiles(), read, compute, write, /*settle_writes=*/false);
  s.grad_sq = sq;
  s.grad_nonfinite = nonfinite;
  s.grad_measured = last;
}

}  // namespace zt
