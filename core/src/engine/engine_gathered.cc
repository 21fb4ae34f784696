#include "engine/engine_gathered.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <set>

#include "engine/engine_accessors.h"
#include "engine/engine_checkpoint.h"
#include "zt/error.h"
#include "zt/host/rank_agreement.h"

namespace zt {

namespace {

using Params = std::vector<std::pair<std::string, at::Tensor>>;

std::string shape_text(at::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

// The parameters' indices. Every rank checks the same arguments, so all refuse together, before
// any collective.
std::vector<int> checked_indices(const EngineParts& e, const std::vector<std::string>& names,
                                 int modifier_rank) {
  const int world = e.comm.size();
  if (modifier_rank < -1 || modifier_rank >= world) {
    throw ConfigError("with_gathered_parameters: modifier_rank " + std::to_string(modifier_rank) +
                      " is no rank of this job (world size " + std::to_string(world) +
                      "); pass -1 to read only, or the rank whose edits count, 0 to " +
                      std::to_string(world - 1));
  }
  std::vector<int> out;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!seen.insert(name).second) {
      throw ConfigError("with_gathered_parameters: parameter '" + name +
                        "' is named twice; name each parameter once (a tied weight is one "
                        "parameter, listed under its first unit's name)");
    }
    out.push_back(parameter_index(e.layout, name));
  }
  return out;
}

// Each parameter is one collective, its part on every rank summed or broadcast: ranks that list
// others, or the same in another order (a Python set iterates in an order of its own on each
// rank), or another modifier, summed one parameter's part with another's, silently. Refused on
// every rank at once, before any of them.
void check_ranks_agree(EngineParts& e, const std::vector<int>& indices, int modifier_rank) {
  std::string request = std::to_string(modifier_rank) + ":";
  for (int p : indices) request += std::to_string(p) + ",";
  const int differing = first_rank_differing(e.comm, fingerprint_of(request));
  if (differing < 0) return;
  throw ConfigError("with_gathered_parameters: rank " + std::to_string(differing) +
                    " asked for other parameters than rank 0, or in another order, or with "
                    "another modifier_rank; every rank passes the same names in the same order "
                    "(a Python set's order differs between ranks: pass a sorted list)");
}

// The modifier's function may replace the tensors it was given, not change what they are.
void check_edits(const ModelLayout& layout, const std::vector<int>& indices, const Params& params,
                 int rank) {
  const std::string who = "with_gathered_parameters: the function on rank " + std::to_string(rank);
  if (params.size() != indices.size()) {
    throw InternalError(who + " left " + std::to_string(params.size()) + " tensors of the " +
                        std::to_string(indices.size()) + " it was given; edit them in place");
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    const ParamSlot& slot = layout.params[indices[i]];
    const at::Tensor& t = params[i].second;
    if (params[i].first == slot.name && t.defined() && t.sizes() == at::IntArrayRef(slot.shape) &&
        at::isFloatingType(t.scalar_type())) {
      continue;
    }
    throw InternalError(who + " replaced parameter '" + slot.name + "' (" + shape_text(slot.shape) +
                        ") by '" + params[i].first + "' " +
                        (t.defined() ? shape_text(t.sizes()) + " " + c10::toString(t.scalar_type())
                                     : std::string("(undefined)")) +
                        "; keep the names and give each a floating tensor of its shape");
  }
}

// Runs `fn`. With a modifier, every rank then learns whether it failed on any rank, so all give
// up together instead of the others waiting out the timeout for a broadcast that never comes.
void run_agreed(EngineParts& e, const std::vector<int>& indices, int modifier,
                const Engine::GatheredFn& fn, Params& params) {
  std::exception_ptr failure;
  try {
    fn(params);
    if (e.comm.rank() == modifier) check_edits(e.layout, indices, params, modifier);
  } catch (...) {
    if (modifier < 0) throw;
    failure = std::current_exception();
  }
  if (modifier < 0) return;
  int failed_rank = -1;
  try {
    failed_rank = highest_failed_rank(e.comm, failure != nullptr);
  } catch (...) {
    if (failure) std::rethrow_exception(failure);
    throw;
  }
  if (failure) std::rethrow_exception(failure);
  if (failed_rank >= 0) {
    throw CommError("with_gathered_parameters: the function failed on rank " +
                    std::to_string(failed_rank) + " (its own error says why); nothing was " +
                    "written back on any rank, the parameters are as they were");
  }
}

// Stages 0-2 hold every parameter whole in the flat buffer, so each rank writes all of it (no
// all-gather needed); stage 3 holds it whole only while its group is gathered, and keeps its held
// part [lo, hi) in the parameter shard, in memory or in the parameter tier.
void refresh_copies(EngineParts& e, int p, const at::Tensor& value, int64_t lo, int64_t hi) {
  const ParamSlot& slot = e.layout.params[p];
  const ParamGroup& g = e.layout.groups[slot.group];
  ShardStorage& s = e.storage[slot.group];
  if (e.stage < 3 || e.gatherer.gathered(slot.group)) {
    g.flat.narrow(0, slot.offset, slot.numel).copy_(value);
  }
  // A streamed master already went to the parameter shard tile by tile.
  if (e.stage < 3 || s.opt_streamed || lo >= hi) return;
  if (s.param_streamed) {
    s.param_file->upload(s.master, e.dtype);  // as a step refreshes it
  } else {
    s.param_shard.narrow(0, lo - g.first, hi - lo)
        .copy_(value.narrow(0, lo - slot.offset, hi - lo));
  }
}

// Puts `value` (fp32, the whole parameter, the same on every rank) into this rank's held part of
// parameter `p`'s master and into every copy the engine computes with. A 16-bit master keeps
// `value` rounded to nearest even, and so do the copies: they hold the master's values.
void write_parameter(EngineParts& e, int p, const at::Tensor& exact) {
  const at::ScalarType master_dtype = e.optimizer.master_dtype();
  const at::Tensor value = master_dtype == at::kFloat ? exact
                                                      : exact.to(master_dtype).to(at::kFloat);
  const ParamSlot& slot = e.layout.params[p];
  const int gi = slot.group;
  const ParamGroup& g = e.layout.groups[gi];
  const auto overlap = param_overlap(slot, g.first, g.first + g.shard);
  const int64_t lo = overlap.first, hi = overlap.second;  // plain names: the lambda captures them
  const float* src = value.data_ptr<float>();
  const bool tiles_to_params = e.stage == 3 && e.storage[gi].opt_streamed;
  e.io.edit(gi, 0, lo, hi, e.stepper.steps(), [&](int64_t begin, float* data, int64_t count) {
    const int64_t from = std::max(begin, lo), to = std::min(begin + count, hi);
    if (from < to) {
      std::memcpy(data + (from - begin), src + (from - slot.offset),
                  static_cast<size_t>(to - from) * sizeof(float));
    }
    if (tiles_to_params) put_streamed_master(e, gi, begin, data, count);
  });
  refresh_copies(e, p, value, lo, hi);
}

// One parameter at a time: the modifier's value is broadcast, then written everywhere.
void write_back(EngineParts& e, const std::vector<int>& indices, int modifier,
                const Params& params) {
  // A parameter shard read ahead from its tier is about to go stale.
  e.gatherer.drop_fetches(/*rethrow=*/true);
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t numel = e.layout.params[indices[i]].numel;
    const at::Tensor value =
        e.comm.rank() == modifier
            ? params[i].second.detach().to(at::kCPU, at::kFloat).contiguous().reshape({numel})
            : at::empty({numel}, at::kFloat);
    broadcast_host(e.comm, value, modifier);
    write_parameter(e, indices[i], value);
  }
}

}  // namespace

void with_gathered_parameters(EngineParts& e, const std::vector<std::string>& names,
                              int modifier_rank, const Engine::GatheredFn& fn) {
  const std::vector<int> indices = checked_indices(e, names, modifier_rank);
  check_ranks_agree(e, indices, modifier_rank);
  Params params;
  for (int p : indices) params.emplace_back(e.layout.params[p].name, full_array(e, p, 0));
  run_agreed(e, indices, modifier_rank, fn, params);
  if (modifier_rank >= 0) write_back(e, indices, modifier_rank, params);
}

}  // namespace zt
