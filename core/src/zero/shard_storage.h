// ShardStorage: what one rank keeps of a group between steps, and where: the master weights
// (fp32, or the optimizer's master_dtype) and optimizer states of its shard (compute memory, a host
// tier used in place, or a streamed tier), the reduced fp32 gradient shard (where the optimizer
// states are: with them in the optimizer tier, like ZeRO-Offload's and ZeRO-Infinity's gradient
// partitions, so gradient memory does not grow with the model either), and in stage 3 the parameter
// shard that all-gathers read. Built once per group from the placement decided by place_offload.
// Thread safety: one thread (the training thread).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "zero/memory_ledger.h"
#include "zero/model_layout.h"
#include "zero/tiered_array.h"
#include "zt/offload.h"

namespace zt {

struct ShardStorage {
  at::Tensor master;               // master_dtype, `shard` elements; undefined when streamed
  std::vector<at::Tensor> states;  // one per optimizer state, like master but of state_dtype
  at::Tensor grad;         // fp32 reduced gradient, `shard` elements; undefined when streamed
  at::Tensor param_shard;  // stage 3: compute dtype, the all-gather source; undefined when streamed
  // Offload. "streamed": the tier is not addressable, so the bytes move through host buffers.
  bool opt_in_tier = false, opt_streamed = false;
  std::unique_ptr<TieredArray> master_file;
  std::vector<std::unique_ptr<TieredArray>> state_files;
  std::unique_ptr<TieredArray> grad_file;  // with opt_in_tier
  // Streamed gradient: its squared sum and whether it holds a non-finite value, measured as its
  // final value for the step was written (grad_measured), so the step need not read it back.
  double grad_sq = 0;
  bool grad_nonfinite = false, grad_measured = false;
  // Streamed group updated in this step's backward: its reduced gradient went straight into
  // the update (StreamedUpdate::update_group), the tier holds none, and the step skips it.
  bool updated_in_backward = false;
  bool param_in_tier = false, param_streamed = false;
  std::unique_ptr<TieredArray> param_file;
};

struct StorageContext {
  int stage = 0;
  at::ScalarType dtype = at::kFloat;        // compute dtype
  std::vector<std::string> state_names;     // the optimizer's
  at::ScalarType state_dtype = at::kFloat;  // the optimizer's
  OffloadTier* optimizer_tier = nullptr;
  OffloadTier* param_tier = nullptr;
  int64_t tile_elements = 1;  // streamed tile length
  // A tier group's reduced gradient waits in host memory, not in the optimizer tier: the step
  // needs the global norm before any update (clipping, loss scaling) and zero.gradients_in_tier
  // is off.
  bool streamed_grads_in_memory = false;
  at::ScalarType master_dtype = at::kFloat;  // the optimizer's
  // Compute memory (EngineOptions::device): the flat buffers, and the shards no tier holds.
  // Initial values are made on the host in fp32 and copied there once.
  c10::Device device{c10::kCPU};
};

// ShardTensors::seed of element `local` of group `g`'s shard, whose first element is element
// `first` of the group's flat buffer: one key per element of the model, whether the shard is in
// memory or streamed in tiles (groups hold fewer than 2^40 elements).
inline uint64_t state_seed(int g, int64_t first, int64_t local) {
  return (static_cast<uint64_t>(g) << 40) + static_cast<uint64_t>(first + local);
}

// Builds group `g`'s flat buffer (the parameters become views of it) and this rank's storage,
// in a tier where `opt_in_tier` / `param_in_tier` say; counts every byte in `ledger`.
ShardStorage build_shard_storage(ModelLayout& layout, int g, bool opt_in_tier, bool param_in_tier,
                                 const StorageContext& context, MemoryLedger& ledger);

}  // namespace zt
