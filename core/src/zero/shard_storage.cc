#include "zero/shard_storage.h"

#include <ATen/ATen.h>

namespace zt {

namespace {

// Master and states in the optimizer tier: in place when it is addressable, streamed otherwise.
void place_optimizer_in_tier(ShardStorage& s, const ParamGroup& g, const std::string& label,
                             const at::Tensor& init, const StorageContext& c,
                             MemoryLedger& ledger) {
  OffloadTier& tier = *c.optimizer_tier;
  const auto master_es = static_cast<int64_t>(c10::elementSize(c.master_dtype));
  const int64_t bytes = g.shard * master_es, tile_bytes = c.tile_elements * master_es;
  const auto state_es = static_cast<int64_t>(c10::elementSize(c.state_dtype));
  s.master_file = std::make_unique<TieredArray>(
      tier, std::string(c.master_dtype == at::kFloat ? "fp32" : "bf16") + " master of " + label,
      bytes, tile_bytes, ledger);
  for (const auto& name : c.state_names) {
    s.state_files.push_back(std::make_unique<TieredArray>(
        tier, name + " of " + label, g.shard * state_es, c.tile_elements * state_es, ledger));
  }
  s.opt_streamed = s.master_file->address() == nullptr;
  // States start at zero: one zero broadcast over the shard, so no shard of zeros is allocated.
  const at::Tensor zeros = at::zeros({1}, c.state_dtype).expand({g.shard});
  s.master_file->upload(init, c.master_dtype);
  for (auto& f : s.state_files) f->upload(zeros, c.state_dtype);
  if (!s.opt_streamed) {
    s.master = view_of(s.master_file->address(), g.shard, c.master_dtype);
    for (auto& f : s.state_files) s.states.push_back(view_of(f->address(), g.shard, c.state_dtype));
  }
  ledger.fixed().offload_optimizer += bytes + static_cast<int64_t>(c.state_names.size()) * g.shard *
                                                  state_es;
}

void place_param_shard(ShardStorage& s, const ParamGroup& g, const std::string& label,
                       const at::Tensor& init, bool master_is_param, const StorageContext& c,
                       MemoryLedger& ledger) {
  const int64_t es = static_cast<int64_t>(c10::elementSize(c.dtype));
  if (!s.param_in_tier) {
    s.param_shard = master_is_param ? s.master : init.to(c.device, c.dtype, false, /*copy=*/true);
    ledger.fixed().params_shard += g.shard * es;  // fp32 without offload: the master itself
    return;
  }
  s.param_file = std::make_unique<TieredArray>(*c.param_tier, "parameters of " + label,
                                               g.shard * es, c.tile_elements * es, ledger);
  s.param_file->upload(init, c.dtype);
  s.param_streamed = s.param_file->address() == nullptr;
  if (!s.param_streamed) s.param_shard = view_of(s.param_file->address(), g.shard, c.dtype);
  ledger.fixed().offload_param += g.shard * es;
}

bool keeps_full(const ParamGroup& g, const StorageContext& c) {
  return c.stage < 3 || g.persistent;
}

// The initial values as the master holds them: a 16-bit master rounds them (to nearest even), and
// every copy the engine computes with starts from the master's values.
void round_to_master(at::Tensor& values, const StorageContext& c) {
  if (c.master_dtype != at::kFloat) values.copy_(values.to(c.master_dtype));
}

// Builds group `g`'s flat buffer and returns this rank's shard of the initial values in fp32.
// A group that stays gathered gets every initial value; a stage 3 group that is gathered on
// demand gets only this rank's (a flat buffer never written holds no memory), so a rank never
// holds a unit's full parameters while the model is built.
at::Tensor initial_shard(ModelLayout& layout, int gi, const StorageContext& c) {
  ParamGroup& g = layout.groups[gi];
  if (keeps_full(g, c)) {
    at::Tensor full32 = at::zeros({g.padded}, at::kFloat);
    layout.fill_initial(gi, 0, full32);
    round_to_master(full32, c);
    g.flat = full32.to(c.device, c.dtype);
    layout.bind_views(gi);
    return full32.narrow(0, g.first, g.shard);
  }
  at::Tensor shard32 = at::zeros({g.shard}, at::kFloat);
  layout.fill_initial(gi, g.first, shard32);
  round_to_master(shard32, c);
  g.flat = at::empty({g.padded}, at::TensorOptions().dtype(c.dtype).device(c.device));
  layout.bind_views(gi);
  return shard32;
}

// The reduced gradient lives where the group's optimizer states do: in compute memory, or next
// to them in the optimizer tier (used in place when addressable, written and read through
// TieredArray tiles of the same length as the states' otherwise). A group whose step waits for
// the global norm keeps it in host memory instead (streamed_grads_in_memory): the norm is known
// only once every gradient is, so a streamed one would go to the disk and back. An addressable
// tier's groups do the same, so what the tier holds is known before any region is allocated
// (the placement asks the tier for its room first), addressable or not.
void place_grad(ShardStorage& s, const ParamGroup& g, const std::string& label,
                const StorageContext& c, MemoryLedger& ledger) {
  if (!s.opt_in_tier || c.streamed_grads_in_memory) {
    // Next to the states that take it: a tier's are on the host, for the host kernel.
    s.grad = at::zeros({g.shard},
                       at::TensorOptions(at::kFloat).device(s.opt_in_tier ? c10::kCPU : c.device));
    ledger.fixed().grads += g.shard * 4;
    return;
  }
  s.grad_file = std::make_unique<TieredArray>(*c.optimizer_tier, "fp32 gradient of " + label,
                                              g.shard * 4, c.tile_elements * 4, ledger);
  // A tier does not zero its regions. A streamed one is written before it is read: each step's
  // first reduction replaces it.
  if (void* address = s.grad_file->address()) {
    s.grad = view_of(address, g.shard, at::kFloat);
    s.grad.zero_();
  }
  ledger.fixed().offload_grads += g.shard * 4;
}

}  // namespace

ShardStorage build_shard_storage(ModelLayout& layout, int gi, bool opt_in_tier, bool param_in_tier,
                                 const StorageContext& c, MemoryLedger& ledger) {
  ShardStorage s;
  s.opt_in_tier = opt_in_tier;
  s.param_in_tier = param_in_tier;
  const at::Tensor init = initial_shard(layout, gi, c);
  const ParamGroup& g = layout.groups[gi];
  const std::string label = "group " + std::to_string(gi);
  const int64_t es = static_cast<int64_t>(c10::elementSize(c.dtype));
  const auto states = static_cast<int64_t>(c.state_names.size());
  // Where the parameters have the master's dtype (fp32, ZeRO's fp32 accounting; or bf16 with
  // bf16 masters) they are the master weights: stages 0-2 update their own slot of the flat
  // buffer in place, stage 3 gathers from the master shard. A master in a tier, or a stage 3
  // parameter shard in one, is its own copy.
  const bool master_is_param = c.dtype == c.master_dtype && !opt_in_tier && !param_in_tier;
  if (opt_in_tier) {
    place_optimizer_in_tier(s, g, label, init, c, ledger);
  } else {
    s.master = master_is_param && c.stage < 3
                   ? g.flat.narrow(0, g.first, g.shard)
                   : init.to(c.device, c.master_dtype, false, /*copy=*/true);
    for (int64_t i = 0; i < states; ++i)
      s.states.push_back(at::zeros({g.shard}, at::TensorOptions(c.state_dtype).device(c.device)));
    if (!master_is_param)  // else counted as parameters
      ledger.fixed().master_params += g.shard *
                                      static_cast<int64_t>(c10::elementSize(c.master_dtype));
    ledger.fixed().optimizer_states += states * g.shard *
                                       static_cast<int64_t>(c10::elementSize(c.state_dtype));
  }
  place_grad(s, g, label, c, ledger);
  if (c.stage == 3) place_param_shard(s, g, label, init, master_is_param, c, ledger);
  ledger.gathered(g.padded * es);
  if (c.stage == 3 && g.persistent) ledger.fixed().persistent_params += g.padded * es;
  // Stage 3 gathers this group when a unit needs it: until then it holds no bytes.
  if (!keeps_full(g, c)) resize_flat_storage(g.flat, 0);
  return s;
}

}  // namespace zt
