#include "model_layout.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <map>

namespace zt {

ModelLayout::ModelLayout(const std::vector<Unit*>& units, const ShardStrategy& strategy,
                         int world_size, int64_t bytes_per_element)
    : element_size(bytes_per_element), world(world_size) {
  std::map<const void*, int> seen;  // tensor identity -> param index
  unit_groups.resize(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<int> owned, used;
    for (auto& [name, tensor] : units[u]->parameters()) {
      auto [it, added] = seen.emplace(tensor.unsafeGetTensorImpl(),
                                      static_cast<int>(params.size()));
      if (added) {
        owned.push_back(it->second);
        params.push_back({name, tensor, -1, 0});
      }
      used.push_back(it->second);
    }
    std::vector<TensorMeta> metas;
    for (int p : owned) metas.push_back({params[p].name, params[p].tensor.numel(), element_size});
    ShardPlan plan = strategy.plan(metas, world);
    validate_plan(plan, metas, world, "of unit " + units[u]->name());
    for (const auto& fg : plan.groups) {
      ParamGroup g;
      g.numel = fg.numel;
      g.padded = fg.padded_numel;
      for (const auto& seg : fg.segments) {
        const int p = owned[seg.tensor];
        params[p].group = static_cast<int>(groups.size());
        params[p].offset = seg.flat_offset;
        g.params.push_back(p);
      }
      groups.push_back(std::move(g));
    }
    for (int p : used) {
      const int g = params[p].group;
      if (g >= 0 && !unit_uses(static_cast<int>(u), g)) unit_groups[u].push_back(g);
    }
  }
}

void ModelLayout::size_shards(bool sharded, int rank, bool stage3, int64_t persistence_threshold) {
  for (ParamGroup& g : groups) {
    int64_t largest = 0;
    for (int p : g.params) largest = std::max(largest, params[p].tensor.numel());
    g.persistent = !stage3 || largest < persistence_threshold;
    g.shard = sharded ? g.padded / world : g.padded;
    g.first = sharded ? g.shard * rank : 0;
  }
}

at::Tensor ModelLayout::build_flat(int gi, at::ScalarType dtype) {
  ParamGroup& g = groups[gi];
  at::Tensor full32 = at::zeros({g.padded}, at::kFloat);
  for (int p : g.params) {
    const at::Tensor& t = params[p].tensor;
    full32.narrow(0, params[p].offset, t.numel()).copy_(t.detach().reshape({-1}));
  }
  g.flat = full32.to(dtype);
  // set_data keeps each parameter's own version counter, so writes into `flat` (gathers) never
  // trip autograd's checks.
  for (int p : g.params) {
    at::Tensor& t = params[p].tensor;
    t.set_data(g.flat.narrow(0, params[p].offset, t.numel()).view(t.sizes()));
  }
  return full32;
}

at::Tensor ModelLayout::take_flat_grads(int gi, at::ScalarType dtype, double predivide) {
  ParamGroup& g = groups[gi];
  at::Tensor flat = at::zeros({g.padded}, dtype);
  for (int p : g.params) {
    at::Tensor& t = params[p].tensor;
    if (t.grad().defined())
      flat.narrow(0, params[p].offset, t.numel()).copy_(t.grad().reshape({-1}));
    t.mutable_grad().reset();
  }
  if (predivide != 1.0) flat.div_(predivide);
  return flat;
}

int64_t ModelLayout::largest_unit_bytes() const {
  int64_t largest = 0;
  for (const auto& used : unit_groups) {
    int64_t bytes = 0;
    for (int g : used) bytes += groups[g].padded * element_size;
    largest = std::max(largest, bytes);
  }
  return largest;
}

bool ModelLayout::unit_uses(int unit, int group) const {
  const auto& used = unit_groups[unit];
  return std::find(used.begin(), used.end(), group) != used.end();
}

void resize_flat_storage(const at::Tensor& flat, int64_t bytes) {
  at::native::resize_bytes_cpu(flat.storage().unsafeGetStorageImpl(), bytes);
}

}  // namespace zt
