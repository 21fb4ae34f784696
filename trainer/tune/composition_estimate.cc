#include "tune/composition_estimate.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "settings/job_settings.h"
#include "setup/offload_tiers.h"
#include "tune/search_space.h"
#include "zt/bytes.h"
#include "zt/error.h"

namespace zt::trainer {

namespace {

// Offload traffic per step: a tier holding the master and optimizer states (and the gradient
// shards) reads and writes them once per step; one holding stage-3 parameter shards is read
// before each forward and backward gather and written after the update.
void offload_traffic(const Config& config, CompositionEstimate& e) {
  const FitInputs& in = e.fit.inputs;
  if (in.stage < 1) return;
  const Options& zero = config.section("zero");
  const Options& plugins = config.section("plugins");
  const double shard = static_cast<double>(in.parameters) / in.shard_world;
  auto add = [&](const char* role, double bytes) {
    if (plugins.get_string(role).empty() || bytes <= 0) return;
    (offloads_to_files(config, role) ? e.file_io_per_step
                                     : e.host_copies_per_step) += static_cast<int64_t>(bytes);
  };
  const double opt_share = zero.get_double("offload_optimizer_fraction");
  add("offload_optimizer", 2 * (4.0 * (1 + in.optimizer_states) + 4) * shard * opt_share);
  if (in.stage == 3) {
    const double accum = static_cast<double>(JobSettings::of(config).data.grad_accum);
    add("offload_param", (2 * accum + 1) * static_cast<double>(in.element_size) * shard *
                             zero.get_double("offload_param_fraction"));
  }
}

// Each tier the composition needs more of than (1 - margin) of what the host has.
void check_room(const EstimateOptions& options, CompositionEstimate& e) {
  const double keep = 1 - options.margin;
  const int local = e.fit.inputs.local_ranks;
  const int64_t ram = e.fit.host_total();
  char margin[32];
  std::snprintf(margin, sizeof(margin), "%.0f%%", options.margin * 100);
  if (e.budget.ram > 0 && static_cast<double>(ram) > keep * static_cast<double>(e.budget.ram)) {
    e.short_of.push_back("host RAM: needs " + size_text(ram) + " (" + std::to_string(local) +
                         " x " + size_text(e.fit.host.total()) + ") of the " +
                         size_text(e.budget.ram) + " " + e.budget.ram_source + ", less a " +
                         margin + " margin");
  }
  for (size_t i = 0; i < e.fit.disks.size() && i < e.budget.disk_free.size(); ++i) {
    const DiskNeed& d = e.fit.disks[i];
    const int64_t need = d.per_rank * local, have = e.budget.disk_free[i];
    if (have >= 0 && static_cast<double>(need) > keep * static_cast<double>(have)) {
      e.short_of.push_back("disk " + d.path + " (" + d.plugin + "): needs " + size_text(need) +
                           " of its " + size_text(have) + " free, less a " + margin + " margin");
    }
  }
}

}  // namespace

CompositionEstimate estimate_composition(const ConfigLoader& load, const Composition& c,
                                         const EstimateOptions& options) {
  CompositionEstimate e;
  e.composition = c;
  try {
    const Config config = load(c.overrides);
    e.composition.label = composition_label(config);
    // The strategy's plan gives the flat groups, which file tiers align each array of.
    e.comm = estimate_comm(config, options.world, options.ranks_per_host);
    FitInputs inputs = fit_inputs(config, options.world);
    inputs.groups = e.comm.groups;
    e.fit = estimate_fit(inputs, config);
    e.budget = host_budget(config, e.fit);
    offload_traffic(config, e);
  } catch (const Error& error) {  // the config's rules, or a plugin it names that cannot load
    e.refused = error.what();
    if (e.composition.label.empty()) {
      for (const std::string& kv : c.overrides) {
        e.composition.label += (e.composition.label.empty() ? "" : ", ") + kv;
      }
    }
    return e;
  }
  check_room(options, e);
  return e;
}

void prune_placements(std::vector<CompositionEstimate>& estimates) {
  std::map<std::string, size_t> best;  // cell -> the fitting estimate of least offload traffic
  for (size_t i = 0; i < estimates.size(); ++i) {
    const CompositionEstimate& e = estimates[i];
    if (!e.fits()) continue;
    const std::string cell = cell_of(e.composition);
    auto it = best.find(cell);
    if (it == best.end() || e.offload_cost() < estimates[it->second].offload_cost()) {
      best[cell] = i;
    }
  }
  for (size_t i = 0; i < estimates.size(); ++i) {
    CompositionEstimate& e = estimates[i];
    if (!e.fits()) continue;
    const size_t kept = best.at(cell_of(e.composition));
    if (kept == i) continue;
    const CompositionEstimate& k = estimates[kept];
    const int64_t more_files = e.file_io_per_step - k.file_io_per_step;
    const int64_t more_copies = e.host_copies_per_step - k.host_copies_per_step;
    std::string why = "pruned by the estimate: ";
    if (more_files > 0) why += size_text(more_files) + " more file I/O per step";
    if (more_copies > 0) {
      why += (more_files > 0 ? ", " : "") + size_text(more_copies) + " more host copies per step";
    }
    if (more_files <= 0 && more_copies <= 0) why += "no less offload traffic";
    e.pruned = why + " than " + k.composition.label + ", which fits too";
  }
}

}  // namespace zt::trainer
