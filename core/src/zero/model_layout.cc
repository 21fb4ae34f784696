#include "zero/model_layout.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "zero/scratch_buffers.h"
#include "zt/error.h"

namespace zt {

namespace {

std::string identity_key(const at::Tensor& t) {
  return std::to_string(reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl()));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::vector<UnitEntries> entries_of_units(const std::vector<Unit*>& units) {
  std::vector<UnitEntries> out;
  for (Unit* unit : units) {
    UnitEntries entries;
    for (auto& [name, tensor] : unit->parameters()) {
      entries.push_back({identity_key(tensor), name, tensor.sizes().vec(), std::nullopt, tensor});
    }
    out.push_back(std::move(entries));
  }
  return out;
}

std::vector<UnitEntries> entries_of_source(const ModelSource& source) {
  std::vector<UnitEntries> out;
  for (int64_t u = 0; u < source.unit_count(); ++u) {
    UnitEntries entries;
    for (auto& decl : source.declare(u)) {
      entries.push_back({decl.name, decl.name, decl.shape, decl.init, {}});
    }
    out.push_back(std::move(entries));
  }
  return out;
}

ModelLayout::ModelLayout(const std::vector<Unit*>& units, const ShardStrategy& strategy,
                         int world_size, int64_t bytes_per_element)
    : element_size(bytes_per_element), world(world_size) {
  const std::vector<UnitEntries> entries = entries_of_units(units);
  unit_groups.resize(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    unit_labels.push_back(units[u]->name());
    add_unit(static_cast<int>(u), entries[u], strategy);
  }
}

ModelLayout::ModelLayout(const std::vector<UnitEntries>& units,
                         const std::vector<std::string>& labels, const ShardStrategy& strategy,
                         int world_size, int64_t bytes_per_element, uint64_t seed_value)
    : element_size(bytes_per_element), world(world_size), seed(seed_value), unit_labels(labels) {
  unit_groups.resize(units.size());
  for (size_t u = 0; u < units.size(); ++u) add_unit(static_cast<int>(u), units[u], strategy);
  for (const ParamSlot& p : params) from_declarations |= !p.tensor.defined();
}

// Registers the unit's parameters (a key seen before is borrowed) and lays out the ones it owns.
void ModelLayout::add_unit(int u, const UnitEntries& entries, const ShardStrategy& strategy) {
  std::vector<int> owned, used;
  for (const ParamEntry& e : entries) {
    const auto [it, added] = index_of_key_.emplace(e.key, static_cast<int>(params.size()));
    const int p = it->second;
    if (added) {
      params.push_back({e.name, e.tensor, e.shape, numel_of(e.shape), e.init, -1, 0, {}});
      owned.push_back(p);
    } else if (params[p].shape != e.shape) {
      throw InternalError("unit " + unit_labels[u] + " borrows " + e.name + " as " +
                          shape_text(e.shape) + ", but it was declared " +
                          shape_text(params[p].shape) + " by its owner; declare the same shape");
    }
    used.push_back(p);
  }
  std::vector<TensorMeta> metas;
  for (int p : owned) metas.push_back({params[p].name, params[p].numel, element_size});
  ShardPlan plan = strategy.plan(metas, world);
  validate_plan(plan, metas, world, "of unit " + unit_labels[u]);
  for (const auto& fg : plan.groups) {
    ParamGroup g;
    g.numel = fg.numel;
    g.padded = fg.padded_numel;
    g.unit = u;
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
    if (g >= 0 && !unit_uses(u, g)) unit_groups[u].push_back(g);
  }
}

void ModelLayout::attach(int u, Unit& unit) {
  const std::string where = "unit " + std::to_string(u) + " (" + unit.name() + ")";
  for (const auto& [name, tensor] : unit.parameters()) {
    const auto it = index_of_key_.find(name);
    if (it == index_of_key_.end()) {
      throw InternalError(where + " lists parameter " + name +
                          " that its ModelSource did not declare; declare() and build() must "
                          "list the same names");
    }
    ParamSlot& slot = params[it->second];
    // An engine of another arm (a live A/B switch) may have left it released: empty, its values
    // in that engine's checkpoint, which the new engine loads. A declared matrix without
    // elements ([0, 4]) is released the same way.
    const bool released = tensor.dim() == 1 && tensor.numel() == 0 &&
                          tensor.storage().nbytes() == 0;
    if (tensor.sizes().vec() != slot.shape && !released) {
      throw InternalError(where + " built " + name + " as " + shape_text(tensor.sizes().vec()) +
                          " but declared it " + shape_text(slot.shape));
    }
    if (groups[slot.group].unit == u) {
      // One tensor under two declared names (a tie declared by its second unit under a name of
      // its own) would be two parameters sharing one storage: the gradient went to one slot, the
      // values the model reads came from the other, and the tie trained wrong without a word.
      for (const ParamSlot& other : params) {
        if (&other != &slot && other.tensor.defined() &&
            other.tensor.unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl()) {
          throw InternalError(
              where + " lists " + name + " as its own, but it is the tensor " + other.name +
              " already lists; a tied weight is one parameter: " + "declare and list it as " +
              other.name + " in every unit that uses it");
        }
      }
      slot.tensor = tensor;
    } else if (!slot.tensor.defined() ||
               slot.tensor.unsafeGetTensorImpl() != tensor.unsafeGetTensorImpl()) {
      throw InternalError(where + " borrows " + name +
                          " but lists another tensor than the unit that owns it; hand build() "
                          "the owner's tensor (a tied weight is one tensor)");
    }
  }
  for (const ParamGroup& g : groups) {
    if (g.unit != u) continue;
    for (int p : g.params) {
      if (!params[p].tensor.defined()) {
        throw InternalError(where + " did not list declared parameter " + params[p].name +
                            "; declare() and build() must list the same names");
      }
    }
  }
}

void ModelLayout::fill_initial(int gi, int64_t begin, const at::Tensor& out) const {
  const int64_t end = begin + out.numel();
  for (int p : groups[gi].params) {
    const ParamSlot& slot = params[p];
    const auto [first, last] = param_overlap(slot, begin, end);
    if (last <= first) continue;
    at::Tensor dst = out.narrow(0, first - begin, last - first);
    if (slot.init) {
      fill_param_init(*slot.init, seed, slot.name, slot.shape, first - slot.offset, dst);
    } else {
      dst.copy_(slot.tensor.detach().reshape({-1}).narrow(0, first - slot.offset, last - first));
    }
  }
}

void ModelLayout::bind_views(int gi) {
  ParamGroup& g = groups[gi];
  for (int p : g.params) {
    at::Tensor& t = params[p].tensor;
    t.set_data(g.flat.narrow(0, params[p].offset, params[p].numel).view(params[p].shape));
  }
}

void ModelLayout::empty_views(int gi) {
  ParamGroup& g = groups[gi];
  for (int p : g.params) params[p].tensor.set_data(g.flat.narrow(0, params[p].offset, 0));
}

void ModelLayout::size_shards(bool sharded, int rank, bool stage3, int64_t persistence_threshold) {
  for (ParamGroup& g : groups) {
    int64_t largest = 0;
    for (int p : g.params) largest = std::max(largest, params[p].numel);
    g.persistent = !stage3 || largest < persistence_threshold;
    g.shard = sharded ? g.padded / world : g.padded;
    g.first = sharded ? g.shard * rank : 0;
  }
}

at::Tensor ModelLayout::build_flat(int gi, at::ScalarType dtype) {
  ParamGroup& g = groups[gi];
  at::Tensor full32 = at::zeros({g.padded}, at::kFloat);
  fill_initial(gi, 0, full32);
  g.flat = full32.to(dtype);
  bind_views(gi);
  return full32;
}

void ModelLayout::fold_grads_into_fp32() {
  for (ParamSlot& slot : params) {
    if (!slot.tensor.defined() || !slot.tensor.grad().defined()) continue;
    const at::Tensor grad = slot.tensor.grad().reshape({-1});
    if (slot.grad_sum.defined()) {
      slot.grad_sum.add_(grad);
    } else {
      slot.grad_sum = grad.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    }
    slot.tensor.mutable_grad().reset();
  }
}

at::Tensor ModelLayout::take_flat_grads(int gi, at::ScalarType dtype, double predivide) {
  ParamGroup& g = groups[gi];
  // Uninitialised, and only what no gradient covers is zeroed: zeroing the whole buffer first
  // wrote every byte twice (a pass over a block's gradients each step). From the process's pool:
  // a fresh buffer per group and micro step was mapped and zero-filled by the kernel each time.
  // It is lent until the reduction that holds it is done.
  at::Tensor flat = ScratchBuffers::process().get_per_step(g.padded, g.flat.options().dtype(dtype));
  int64_t covered = 0;  // params are in flat-offset order
  for (int p : g.params) {
    at::Tensor& t = params[p].tensor;
    ParamSlot& slot = params[p];
    // The micro steps' fp32 sum where there is one (with this micro step's .grad, when the
    // caller took the gradients before folding them).
    if (slot.grad_sum.defined() && t.grad().defined()) {
      slot.grad_sum.add_(t.grad().reshape({-1}));
      t.mutable_grad().reset();
    }
    const at::Tensor source = slot.grad_sum.defined() ? slot.grad_sum
                              : t.grad().defined()    ? t.grad().reshape({-1})
                                                      : at::Tensor();
    if (!source.defined()) continue;
    if (slot.offset > covered) flat.narrow(0, covered, slot.offset - covered).zero_();
    at::Tensor dst = flat.narrow(0, slot.offset, slot.numel);
    // Divided on the way in (the same division as a pass of its own, one pass fewer).
    if (predivide != 1.0) {
      at::div_out(dst, source.to(dtype), predivide);
    } else {
      dst.copy_(source);
    }
    covered = slot.offset + slot.numel;
    if (t.grad().defined()) t.mutable_grad().reset();
    slot.grad_sum = at::Tensor();
  }
  if (g.padded > covered) flat.narrow(0, covered, g.padded - covered).zero_();
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
  // From the storage's own allocator, so one call serves every device (resize_bytes_cpu is the
  // CPU's). The engine only frees (0) or fills an empty storage, so no bytes are carried over.
  c10::StorageImpl& storage = *flat.storage().unsafeGetStorageImpl();
  if (bytes > 0 && storage.nbytes() > 0) {
    throw InternalError("resize_flat_storage: a flat buffer of " +
                        std::to_string(storage.nbytes()) + " bytes is given " +
                        std::to_string(bytes) + ": only an empty one is filled");
  }
  c10::Allocator* allocator = storage.allocator();
  if (bytes > 0 && allocator == nullptr) {
    throw InternalError("resize_flat_storage: the flat buffer's storage has no allocator");
  }
  // CUDA's caching allocator serves the calling thread's current device: make it the storage's
  // (a hook on LibTorch's autograd thread, or a caller's thread, may have another current).
  const c10::DeviceGuard on_its_device(storage.device());
  storage.set_data_ptr_noswap(bytes > 0 ? allocator->allocate(static_cast<size_t>(bytes))
                                        : c10::DataPtr(nullptr, storage.device()));
  storage.set_nbytes(static_cast<size_t>(bytes));
}

}  // namespace zt
