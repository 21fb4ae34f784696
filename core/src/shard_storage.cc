#include "shard_storage.h"

#include <ATen/ATen.h>

namespace zt {

at::Tensor view_of(void* address, int64_t numel, at::ScalarType dtype) {
  return at::from_blob(address, {numel}, at::TensorOptions().dtype(dtype));
}

namespace {

// Master and states in the optimizer tier: in place when it is addressable, streamed otherwise.
void place_optimizer_in_tier(ShardStorage& s, const ParamGroup& g, const std::string& label,
                             const at::Tensor& init, const StorageContext& c,
                             MemoryLedger& ledger) {
  OffloadTier& tier = *c.optimizer_tier;
  const int64_t bytes = g.shard * 4, tile_bytes = c.tile_elements * 4;
  s.master_file = std::make_unique<TieredArray>(tier, "fp32 master of " + label, bytes, tile_bytes);
  for (const auto& name : c.state_names) {
    s.state_files.push_back(
        std::make_unique<TieredArray>(tier, name + " of " + label, bytes, tile_bytes));
  }
  s.opt_streamed = s.master_file->address() == nullptr;
  const at::Tensor master0 = init.contiguous(), zeros = at::zeros({g.shard}, at::kFloat);
  s.master_file->upload(master0.data_ptr());
  for (auto& f : s.state_files) f->upload(zeros.data_ptr());
  if (!s.opt_streamed) {
    s.master = view_of(s.master_file->address(), g.shard, at::kFloat);
    for (auto& f : s.state_files) s.states.push_back(view_of(f->address(), g.shard, at::kFloat));
  }
  ledger.fixed().offload_optimizer += static_cast<int64_t>(1 + c.state_names.size()) * bytes;
}

void place_param_shard(ShardStorage& s, const ParamGroup& g, const std::string& label,
                       const at::Tensor& init, bool master_is_param, const StorageContext& c,
                       MemoryLedger& ledger) {
  const int64_t es = static_cast<int64_t>(c10::elementSize(c.dtype));
  if (!s.param_in_tier) {
    s.param_shard = master_is_param ? s.master : init.to(c.dtype).clone();
    ledger.fixed().params_shard += g.shard * es;  // fp32 without offload: the master itself
    return;
  }
  s.param_file = std::make_unique<TieredArray>(*c.param_tier, "parameters of " + label,
                                               g.shard * es, c.tile_elements * es);
  const at::Tensor typed = init.to(c.dtype).contiguous();
  s.param_file->upload(typed.data_ptr());
  s.param_streamed = s.param_file->address() == nullptr;
  if (!s.param_streamed) s.param_shard = view_of(s.param_file->address(), g.shard, c.dtype);
  ledger.fixed().offload_param += g.shard * es;
}

}  // namespace

ShardStorage build_shard_storage(ModelLayout& layout, int gi, bool opt_in_tier, bool param_in_tier,
                                 const StorageContext& c, MemoryLedger& ledger) {
  ShardStorage s;
  s.opt_in_tier = opt_in_tier;
  s.param_in_tier = param_in_tier;
  const at::Tensor full32 = layout.build_flat(gi, c.dtype);
  const ParamGroup& g = layout.groups[gi];
  const std::string label = "group " + std::to_string(gi);
  const int64_t es = static_cast<int64_t>(c10::elementSize(c.dtype));
  const auto states = static_cast<int64_t>(c.state_names.size());
  const at::Tensor init = full32.narrow(0, g.first, g.shard);
  // In fp32 the parameters are the master weights (ZeRO's fp32 accounting): stages 0-2 update
  // their own slot of the flat buffer in place, stage 3 gathers from the master shard. A master
  // in a tier, or a stage 3 parameter shard in one, is its own copy.
  const bool master_is_param = c.dtype == at::kFloat && !opt_in_tier && !param_in_tier;
  if (opt_in_tier) {
    place_optimizer_in_tier(s, g, label, init, c, ledger);
  } else {
    s.master = master_is_param && c.stage < 3 ? g.flat.narrow(0, g.first, g.shard) : init.clone();
    for (int64_t i = 0; i < states; ++i) s.states.push_back(at::zeros({g.shard}, at::kFloat));
    if (!master_is_param)
      ledger.fixed().master_params += g.shard * 4;  // else counted as parameters
    ledger.fixed().optimizer_states += states * g.shard * 4;
  }
  s.grad = at::zeros({g.shard}, at::kFloat);
  if (c.stage == 3) place_param_shard(s, g, label, init, master_is_param, c, ledger);
  ledger.gathered(g.padded * es);
  ledger.fixed().grads += g.shard * 4;
  if (c.stage == 3 && g.persistent) ledger.fixed().persistent_params += g.padded * es;
  return s;
}

}  // namespace zt
