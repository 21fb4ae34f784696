#include "zero/scratch_buffers.h"

#include <ATen/ATen.h>

namespace zt {

namespace {

// Rounded up so that buffers for neighbouring sizes (a bucket's chunks, padded per world) are
// one size, and one freed buffer serves the next call's slightly larger request.
constexpr int64_t kGranule = int64_t{1} << 16;

bool free_now(const at::Tensor& buffer) { return buffer.storage().use_count() == 1; }

}  // namespace

at::Tensor ScratchBuffers::get(int64_t numel, at::ScalarType dtype) {
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  if (bytes == 0) return at::empty({numel}, dtype);
  at::Tensor chosen;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The smallest free buffer that fits and wastes at most half of itself.
    for (const at::Tensor& b : kept_) {
      const int64_t size = b.numel();
      if (size < bytes || size > 2 * bytes + kGranule || !free_now(b)) continue;
      if (!chosen.defined() || size < chosen.numel()) chosen = b;
    }
    if (!chosen.defined() && kept_.size() < kKept) {
      const int64_t rounded = (bytes + kGranule - 1) / kGranule * kGranule;
      kept_.push_back(at::empty({rounded}, at::kByte));
      chosen = kept_.back();
    }
    // Lent while the lock is held: the view takes a reference before another caller looks.
    if (chosen.defined()) return chosen.narrow(0, 0, bytes).view(dtype);
  }
  return at::empty({numel}, dtype);
}

at::Tensor ScratchBuffers::get_per_step(int64_t numel, const at::TensorOptions& options) {
  const at::ScalarType dtype = options.dtype().toScalarType();
  const int64_t bytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  if (options.device().is_cpu() && bytes <= kLargestPerStep) return get(numel, dtype);
  return at::empty({numel}, options);
}

int64_t ScratchBuffers::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const at::Tensor& b : kept_) n += b.numel();
  return n;
}

void ScratchBuffers::drop_free() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<at::Tensor> lent;
  for (at::Tensor& b : kept_) {
    if (!free_now(b)) lent.push_back(std::move(b));
  }
  kept_ = std::move(lent);
}

ScratchBuffers& ScratchBuffers::process() {
  static ScratchBuffers* pool = new ScratchBuffers();
  return *pool;
}

}  // namespace zt
