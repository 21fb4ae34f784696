// ScratchBuffers (core/src/zero/scratch_buffers.h): a buffer comes back to the next caller once
// the tensors viewing it are gone, never while one is alive, and the pool stops growing at its
// cap.
#include "zero/scratch_buffers.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using zt::ScratchBuffers;

namespace {
uintptr_t address(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }
}  // namespace

TEST_CASE("scratch buffers: reused once released, never while lent, capped") {
  ScratchBuffers pool;
  at::Tensor a = pool.get(1000, at::kFloat);
  CHECK(a.dtype() == at::kFloat);
  CHECK(a.numel() == 1000);
  CHECK(a.is_contiguous());
  const uintptr_t first = address(a);
  // While `a` lives its buffer is lent: a second request gets another.
  at::Tensor b = pool.get(1000, at::kFloat);
  CHECK(address(b) != first);
  // A view of `a` keeps the buffer lent after `a` itself is gone.
  at::Tensor view = a.narrow(0, 10, 20);
  a = at::Tensor();
  const uintptr_t third = address(pool.get(1000, at::kFloat));
  CHECK(third != first);
  view = at::Tensor();
  // Released: the same memory again (a's or the third request's, both free now), in another dtype
  // and a slightly other size too; b's stays lent.
  at::Tensor again = pool.get(3900, at::kByte);
  CHECK((address(again) == first || address(again) == third));
  CHECK(address(again) != address(b));
  CHECK(again.numel() == 3900);
  again = at::Tensor();
  // Much smaller requests do not take a large buffer (it would sit lent, wasted).
  at::Tensor big = pool.get(1 << 20, at::kFloat);
  const uintptr_t big_ptr = address(big);
  big = at::Tensor();
  CHECK(address(pool.get(100, at::kFloat)) != big_ptr);
  // Past the cap a request still gets memory, of its own: the pool holds no more.
  std::vector<at::Tensor> lent;
  for (size_t i = 0; i < ScratchBuffers::kKept + 4; ++i) lent.push_back(pool.get(1000, at::kFloat));
  const int64_t held = pool.held_bytes();
  lent.push_back(pool.get(1000, at::kFloat));
  CHECK(pool.held_bytes() == held);
  CHECK(lent.back().numel() == 1000);
  // Zero elements: an empty tensor, nothing held for it.
  CHECK(pool.get(0, at::kFloat).numel() == 0);
  CHECK(pool.held_bytes() == held);
}

TEST_CASE("scratch buffers: an engine rebuilt lets go of what is not lent, and keeps what is") {
  ScratchBuffers pool;
  at::Tensor small = pool.get(1000, at::kFloat);
  const int64_t small_bytes = pool.held_bytes();
  at::Tensor large = pool.get(200000, at::kFloat);
  REQUIRE(pool.held_bytes() > small_bytes);
  large = at::Tensor();
  pool.drop_free();
  CHECK(pool.held_bytes() == small_bytes);  // still lent: kept
  CHECK(small.numel() == 1000);
  small = at::Tensor();
  pool.drop_free();
  CHECK(pool.held_bytes() == 0);
}
