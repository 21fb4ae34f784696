// ScratchBuffers: host buffers kept from one call to the next: those the coded collectives
// (coded_collectives.h) stage their encodings and sums in, a group's flat gradients before their
// reduction (ModelLayout::take_flat_grads) and the global norm's squares (grad_squares.h). Each
// call used to allocate its own, and glibc maps blocks past 4 MiB afresh, so every page of every
// buffer faulted in again at every step: on a 2-core VM, 4 ranks faulted 5x as often with the
// codecs as without, a tenth of the step's CPU time.
// A buffer is lent as a tensor viewing it and is free again when the last tensor viewing it is
// gone (its storage's reference count), so a buffer captured by an op's pending decode stays
// lent until the op finished. The pool keeps at most kKept buffers; past that, a request that
// finds none free gets a tensor of its own (the old behaviour, never a wait).
// Thread safety: get() may be called from any thread; lent tensors are the caller's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <mutex>
#include <vector>

namespace zt {

class ScratchBuffers {
 public:
  static constexpr size_t kKept = 32;

  // A contiguous 1-D tensor of `numel` elements of `dtype`, contents undefined.
  at::Tensor get(int64_t numel, at::ScalarType dtype);
  // As get() for a tensor in host memory of at most kLargestPerStep bytes; any other (on a
  // device, or larger) is a tensor of its own. For buffers every step takes again (the engine's
  // flat gradients and norm squares), so that the pool holds no model-sized buffer between steps.
  static constexpr int64_t kLargestPerStep = int64_t{64} << 20;
  at::Tensor get_per_step(int64_t numel, const at::TensorOptions& options);
  // Bytes the pool holds, lent or free (for tests).
  int64_t held_bytes() const;
  // Lets go of every buffer not lent now: when an engine is rebuilt (a live A/B switch) the next
  // arm's sizes differ, and buffers kept for the last arm's codecs counted in the next arm's
  // memory (an arm without a codec reported the codec's staging as its own).
  void drop_free();

  // The process's pool, shared by every engine and communicator (never destroyed: a pool that
  // outlived LibTorch's allocator at exit would free into it).
  static ScratchBuffers& process();

 private:
  mutable std::mutex mutex_;
  std::vector<at::Tensor> kept_;  // kByte, each a whole buffer
};

}  // namespace zt
