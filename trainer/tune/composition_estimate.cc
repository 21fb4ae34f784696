#include "tune/composition_estimate.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "settings/job_settings.h"
#include "tune/search_space.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/compose.h"

namespace zt::trainer {

namespace {

// Offload traffic per step: a tier holding the master and optimizer states (and the gradient
// shards) reads and writes them once per step; one holding stage-3 parameter shards is read
// before each forward and backward gather and written after the update.
void offload_traffic(const JobSettings& job, CompositionEstimate& e) {
  const FitInputs& in = e.fit.inputs;
  if (in.stage < 1) return;
  const EngineSettings& engine = job.engine;
  const double shard = static_cast<double>(in.parameters) / in.shard_world;
  auto add = [&](const PluginChoice& role, double bytes) {
    if (!role.chosen() || bytes <= 0) return;
    (offloads_to_files(role) ? e.file_io_per_step
                             : e.host_copies_per_step) += static_cast<int64_t>(bytes);
  };
  const EngineOptions& zero = engine.options;
  const double opt_share = zero.offload_optimizer_fraction;
  const auto states = static_cast<double>(in.optimizer_states * in.state_element_size);
  // The reduced gradient crosses a file tier only where it waits there: for the global norm
  // (clipping, loss scaling) with zero.gradients_in_tier, and as the partial sums of earlier
  // micro steps when groups are updated in backward; otherwise it stays in host memory. Stage 1
  // reduces once per step, at the step: it has no partial sums.
  double gradient = 8;
  if (offloads_to_files(engine.offload_optimizer)) {
    const double partial_sums = in.stage >= 2 ? 8.0 * static_cast<double>(job.data.grad_accum - 1)
                                              : 0;
    gradient = !waits_for_gradient_norm(zero) ? partial_sums
               : zero.gradients_in_tier       ? 8 + partial_sums
                                              : 0;
  }
  const auto master = static_cast<double>(in.master_element_size);
  add(engine.offload_optimizer, (2 * (master + states) + gradient) * shard * opt_share);
  if (in.stage == 3) {
    const double accum = static_cast<double>(job.data.grad_accum);
    add(engine.offload_param, (2 * accum + 1) * static_cast<double>(in.element_size) * shard *
                                  engine.options.offload_param_fraction);
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

CompositionEstimate estimate_composition(const ConfigLoader& load, const Candidate& c,
                                         const EstimateOptions& options) {
  CompositionEstimate e;
  e.composition = c;
  try {
    // A trial's door: its config resolved once.
    const Config config = load(c.overrides);
    e.job = JobSettings::of(config);
    const JobSettings& job = e.job;
    e.composition.label = composition_label(job);
    // What composing would refuse is refused here, not counted as fitting.
    // As compose(): any master narrower than fp32.
    check_master_placement(job.engine,
                           optimizer_footprint(job.engine, config.catalog()).master_bytes < 4);
    // The strategy's plan gives the flat groups, which file tiers align each array of.
    e.comm = estimate_comm(job, config.catalog(), options.world, options.ranks_per_host);
    FitInputs inputs = fit_inputs(job, config.catalog(), options.world);
    inputs.groups = e.comm.groups;
    e.fit = estimate_fit(inputs, job.engine);
    // A job of one process is about to become its own rank: its process counts as the rank's.
    e.budget = host_budget(job, e.fit, job.engine.launch.nproc == 1);
    offload_traffic(job, e);
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

ConfigLoader per_host_loader(ConfigLoader load, int hosts, int ranks_per_host) {
  if (hosts <= 1) return load;
  return [load = std::move(load), ranks_per_host](const std::vector<std::string>& overrides) {
    std::vector<std::string> all = overrides;
    all.push_back("launch.nproc=" + std::to_string(ranks_per_host));
    return load(all);
  };
}

JobEstimates estimate_all(const ConfigLoader& load, int hosts, EstimateOptions& options) {
  JobEstimates out;
  // The door of `trainer estimate` and `trainer tune`: the job as given, resolved once.
  out.given = JobSettings::of(load({}));
  const JobSettings& job = out.given;
  if (job.run.task != "train") {
    throw ConfigError(job.places.where("run.task") + ": run.task = \"" + job.run.task +
                      "\" trains nothing; trainer estimate and trainer tune size training jobs "
                      "(run.task = \"train\", e.g. configs/zero3.toml)");
  }
  options.world = job.engine.launch.nproc;
  if (options.world % hosts != 0) {
    throw ConfigError("--hosts " + std::to_string(hosts) + " does not divide the " +
                      std::to_string(options.world) +
                      " ranks (launch.nproc or --nproc): give a number of hosts that holds "
                      "the same number of ranks each");
  }
  options.ranks_per_host = options.world / hosts;
  const ConfigLoader per_host = per_host_loader(load, hosts, options.ranks_per_host);
  Candidate yours;
  yours.origin = "your config";
  out.all.push_back(estimate_composition(per_host, yours, options));
  std::vector<CompositionEstimate> grid;
  for (const Candidate& c : composition_grid(job, hosts)) {
    grid.push_back(estimate_composition(per_host, c, options));
  }
  prune_placements(grid);
  out.all.insert(out.all.end(), grid.begin(), grid.end());
  return out;
}

}  // namespace zt::trainer
