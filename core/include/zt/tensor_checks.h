// Argument checks for code that hands tensors to raw-pointer kernels, collectives or I/O:
// defined, on the expected device, dense, of the expected length and dtype. A failed check is a
// bug in the caller (the engine or a plugin), not in the user's config, so each throws
// InternalError with one message, "<what> <what is wrong>[; <hint>]": `what` names the place and
// the tensor ("comm_ucx: all_gather: output tensor", "optim_hybrid_adam: shard 3: grad") and
// `hint`, when not empty, the rule or the way out. For example
//   "optim_hybrid_adam: shard 3: grad has 9 elements but param has 8; every tensor of a shard
//    must be the same length".
// Thread safety: pure functions of their arguments; call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "zt/api.h"

namespace zt {

// "<what> is undefined".
ZT_API void check_defined(const at::Tensor& t, const std::string& what,
                          const std::string& hint = "");
// "<what> is on cuda:0 but <expected_source> is on cpu", e.g. expected_source "param".
// REQUIRES t defined.
ZT_API void check_device(const at::Tensor& t, const std::string& what, const c10::Device& expected,
                         const std::string& expected_source, const std::string& hint = "");
// "<what> is not contiguous (sizes [8, 2], strides [1, 8])". REQUIRES t defined.
ZT_API void check_contiguous(const at::Tensor& t, const std::string& what,
                             const std::string& hint = "");
// "<what> has 9 elements but <expected_source> has 8", e.g. expected_source "param".
// REQUIRES t defined.
ZT_API void check_numel(const at::Tensor& t, const std::string& what, int64_t expected,
                        const std::string& expected_source, const std::string& hint = "");
// "<what> has dtype Double, expected Float, BFloat16 or Half". REQUIRES t defined and
// `allowed` not empty.
ZT_API void check_dtype(const at::Tensor& t, const std::string& what,
                        const std::vector<at::ScalarType>& allowed, const std::string& hint = "");

// check_defined; on the CPU ("<what> is on cuda:0, not in host memory[; <device_hint>]"); then
// check_contiguous: what a collective or a copy over host memory needs.
ZT_API void check_host_tensor(const at::Tensor& t, const std::string& what,
                              const std::string& device_hint = "");

// `shard` is rank `rank`'s part of `flat` under the flat sharding convention (communicator.h),
// as all_gather's input and reduce_scatter's output are: the same dtype, and
// flat_shard(flat.numel(), world, rank).size() elements. `where` names the place ("comm_ucx:
// all_gather"), `shard_name` and `flat_name` the two tensors ("input", "output"):
//   "comm_ucx: all_gather: input has 6 elements but rank 1's shard of a 10-element output has 5"
// REQUIRES both tensors defined.
ZT_API void check_shard_of(const at::Tensor& shard, const at::Tensor& flat,
                           const std::string& where, const std::string& shard_name,
                           const std::string& flat_name, int world, int rank);

}  // namespace zt
