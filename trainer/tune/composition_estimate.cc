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

std::string amount(int64_t bytes) {
  return bytes >= kGiB ? gib_text(static_cast<double>(bytes)) : size_text(bytes);
}

// Each tier the composition needs more of than (1 - margin) of what the host has.
void check_room(const EstimateOptions& options, CompositionEstimate& e) {
  const double keep = 1 - options.margin;
  const int local = e.fit.inputs.local_ranks;
  const int64_t ram = e.fit.host_total();
  char margin[32];
  std::snprintf(margin, sizeof(margin), "%.0f%%", options.margin * 100);
  if (e.budget.ram > 0 && static_cast<double>(ram) > keep * static_cast<double>(e.budget.ram)) {
    e.short_of.push_back("host RAM: needs " + amount(ram) + " (" + std::to_string(local) + " x " +
                         amount(e.fit.host.total()) + ") of the " + amount(e.budget.ram) + " " +
                         e.budget.ram_source + ", less a " + margin + " margin");
  }
  for (size_t i = 0; i < e.fit.disks.size() && i < e.budget.disk_free.size(); ++i) {
    const DiskNeed& d = e.fit.disks[i];
    const int64_t need = d.per_rank * local, have = e.budget.disk_free[i];
    if (have >= 0 && static_cast<double>(need) > keep * static_cast<double>(have)) {
      e.short_of.push_back("disk " + d.path + " (" + d.plugin + "): needs " + amount(need) +
                           " of its " + amount(have) + " free, less a " + margin + " margin");
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
  } catch (const ConfigError& error) {
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

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", static_cast<double>(bytes) / kMiB);
  return buf;
}

std::string status_of(const CompositionEstimate& e) {
  if (!e.refused.empty()) return "refused";
  if (!e.fits()) return "NO FIT";
  if (!e.pruned.empty()) return "pruned";
  return "fits";
}

}  // namespace

void print_estimates(const std::vector<CompositionEstimate>& estimates,
                     const EstimateOptions& options, std::ostream& out) {
  const CompositionEstimate* first = nullptr;
  for (const auto& e : estimates) {
    if (e.refused.empty()) {
      first = &e;
      break;
    }
  }
  if (first) {
    char head[256];
    std::snprintf(head, sizeof(head),
                  "psi = %lld parameters, %d rank(s), %d per host; host RAM %s %s; margin %.0f%%\n",
                  static_cast<long long>(first->fit.inputs.parameters), options.world,
                  options.ranks_per_host, amount(first->budget.ram).c_str(),
                  first->budget.ram_source.c_str(), options.margin * 100);
    out << head;
  }
  out << "MiB per rank: peak = the resident peak a run should measure, fit = what the fit check "
         "counts (with its safety: allocator slack, process rounded up); states = model states "
         "(B/param: their multiplier of psi), gathered = "
         "stage-3 window, grads, act = activations, stage = staging + tier buffers, other = "
         "process + construction/checkpoint + allocator; sent = MiB each rank sends per step "
         "(all_gather / reduce_scatter / all_reduce) and link\n";
  char line[512];
  std::snprintf(line, sizeof(line),
                "%3s %-7s %7s %7s %7s %8s %7s %7s %7s %7s %8s %8s %22s %-7s  %s\n", "#", "status",
                "peak", "fit", "states", "B/param", "gather", "grads", "act", "stage", "other",
                "NVMe", "sent ag/rs/ar", "link", "composition");
  out << line;
  int index = 0;
  for (const CompositionEstimate& e : estimates) {
    ++index;
    if (!e.refused.empty()) {
      std::snprintf(line, sizeof(line), "%3d %-7s %s\n", index, "refused",
                    e.composition.label.c_str());
      out << line;
      continue;
    }
    const HostNeed& h = e.fit.host;
    const double psi = static_cast<double>(std::max<int64_t>(1, e.fit.inputs.parameters));
    int64_t nvme = 0;
    for (const DiskNeed& d : e.fit.disks) nvme += d.per_rank;
    const int64_t other = h.process +
                          std::max<int64_t>(0, h.total() - h.process - h.model_states -
                                                   h.params_gathered - h.grads - h.activations -
                                                   h.staging - h.tier_pools - h.allocator) +
                          h.allocator;
    std::string link;
    for (const CollectiveEstimate& c : e.comm.collectives) {
      const std::string name = c.link == "network" ? "net" : "shm";
      if (c.bytes > 1024 && link.find(name) == std::string::npos)
        link += (link.empty() ? "" : "+") + name;
    }
    const std::string sent = mib(e.comm.sent("all_gather")) + "/" +
                             mib(e.comm.sent("reduce_scatter")) + "/" +
                             mib(e.comm.sent("all_reduce"));
    char per_param[32];
    std::snprintf(per_param, sizeof(per_param), "%.2f",
                  static_cast<double>(e.fit.state_bytes.host() + e.fit.state_bytes.files()) / psi);
    std::snprintf(line, sizeof(line),
                  "%3d %-7s %7s %7s %7s %8s %7s %7s %7s %7s %8s %8s %22s %-7s  %s\n", index,
                  status_of(e).c_str(), mib(h.expected()).c_str(), mib(h.total()).c_str(),
                  mib(h.model_states).c_str(), per_param, mib(h.params_gathered).c_str(),
                  mib(h.grads).c_str(), mib(h.activations).c_str(),
                  mib(h.staging + h.tier_pools).c_str(), mib(other).c_str(), mib(nvme).c_str(),
                  sent.c_str(), link.c_str(), e.composition.label.c_str());
    out << line;
  }
  bool said = false;
  index = 0;
  for (const CompositionEstimate& e : estimates) {
    ++index;
    if (e.fits() && e.pruned.empty()) continue;
    if (!said) out << "\n";
    said = true;
    out << "#" << index << " ";
    if (!e.refused.empty()) {
      out << "refused by the config: " << e.refused << "\n";
    } else if (!e.fits()) {
      out << "does not fit:";
      for (const std::string& s : e.short_of) out << " " << s << ";";
      out << "\n";
    } else {
      out << e.pruned << "\n";
    }
  }
}

}  // namespace zt::trainer
