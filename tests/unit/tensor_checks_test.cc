// zt/tensor_checks.h: each check passes what it should and fails with InternalError whose message
// names the tensor, what is wrong, and the hint.
#include <doctest/doctest.h>

#include <ATen/ATen.h>

#include <string>

#include "zt/error.h"
#include "zt/tensor_checks.h"

namespace {

// The message of what `fn` threw as InternalError ("" when it did not throw).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const zt::InternalError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("check_defined and check_contiguous") {
  const at::Tensor dense = at::zeros({4, 2});
  CHECK(error_of([&] { zt::check_defined(dense, "x"); }).empty());
  CHECK(error_of([&] { zt::check_defined(at::Tensor(), "optim: shard 3: grad", "allocate it"); }) ==
        "optim: shard 3: grad is undefined; allocate it");
  CHECK(error_of([&] { zt::check_contiguous(dense, "x"); }).empty());
  CHECK(error_of([&] { zt::check_contiguous(dense.t(), "comm: all_gather: output tensor"); }) ==
        "comm: all_gather: output tensor is not contiguous (sizes [2, 4], strides [1, 2])");
  // A contiguous slice of a larger buffer is fine: only the layout matters.
  CHECK(error_of([&] { zt::check_contiguous(dense.narrow(0, 1, 2), "x"); }).empty());
}

TEST_CASE("check_device and check_host_tensor") {
  const at::Tensor host = at::zeros({3});
  const at::Tensor meta = at::empty({3}, at::TensorOptions().device(at::kMeta));
  CHECK(error_of([&] { zt::check_device(host, "x", c10::Device(c10::kCPU), "param"); }).empty());
  CHECK(error_of([&] { zt::check_device(meta, "grad", host.device(), "param", "same device"); }) ==
        "grad is on meta but param is on cpu; same device");
  CHECK(error_of([&] { zt::check_host_tensor(host, "x"); }).empty());
  CHECK(error_of([&] { zt::check_host_tensor(at::Tensor(), "in"); }) == "in is undefined");
  CHECK(error_of([&] { zt::check_host_tensor(meta, "in", "comm_x moves host memory"); }) ==
        "in is on meta, not in host memory; comm_x moves host memory");
  CHECK(error_of([&] {
          zt::check_host_tensor(at::zeros({2, 3}).t(), "in", "unused");
        }) == "in is not contiguous (sizes [3, 2], strides [1, 3])");
}

TEST_CASE("check_numel and check_dtype") {
  const at::Tensor t = at::zeros({9}, at::kDouble);
  CHECK(error_of([&] { zt::check_numel(t, "grad", 9, "param"); }).empty());
  CHECK(error_of([&] { zt::check_numel(t, "grad", 8, "param", "same length"); }) ==
        "grad has 9 elements but param has 8; same length");
  CHECK(error_of([&] { zt::check_dtype(t, "x", {at::kFloat, at::kDouble}); }).empty());
  CHECK(error_of([&] { zt::check_dtype(t, "grad", {at::kFloat}); }) ==
        "grad has dtype Double, expected Float");
  CHECK(error_of([&] {
          zt::check_dtype(t, "copy", {at::kBFloat16, at::kHalf}, "low");
        }) == "copy has dtype Double, expected BFloat16 or Half; low");
  CHECK(error_of([&] {
          zt::check_dtype(t, "grad", {at::kFloat, at::kBFloat16, at::kHalf});
        }) == "grad has dtype Double, expected Float, BFloat16 or Half");
}

TEST_CASE("check_shard_of follows the flat sharding convention") {
  // 10 elements over 3 ranks: shards of 4, 4 and 2.
  const at::Tensor flat = at::zeros({10});
  auto gather_input = [&](int64_t numel, int rank) {
    return error_of([&] {
      zt::check_shard_of(at::zeros({numel}), flat, "c: all_gather", "input", "output", 3, rank);
    });
  };
  CHECK(gather_input(4, 0).empty());
  CHECK(gather_input(4, 1).empty());
  CHECK(gather_input(2, 2).empty());
  CHECK(gather_input(4, 2) ==
        "c: all_gather: input has 4 elements but rank 2's shard of a 10-element output has 2");
  CHECK(gather_input(10, 0) ==
        "c: all_gather: input has 10 elements but rank 0's shard of a 10-element output has 4");
  // 2 elements over 3 ranks: the last rank's shard is empty.
  CHECK(error_of([&] {
          zt::check_shard_of(at::zeros({0}), at::zeros({2}), "c", "s", "f", 3, 2);
        }).empty());
  CHECK(error_of([&] {
          zt::check_shard_of(at::zeros({4}, at::kBFloat16), flat, "c: reduce_scatter", "output",
                             "input", 3, 0);
        }) == "c: reduce_scatter: output has dtype BFloat16, expected Float; a shard has the "
              "dtype of its input");
}
