#include "tune/estimate_table.h"

#include <algorithm>
#include <cstdio>

#include "zt/bytes.h"

namespace zt::trainer {

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

// The table's header: psi, ranks, what the host has, and the columns.
void print_head(const std::vector<CompositionEstimate>& estimates, const EstimateOptions& options,
                std::ostream& out) {
  const auto first = std::find_if(estimates.begin(), estimates.end(),
                                  [](const CompositionEstimate& e) { return e.refused.empty(); });
  if (first != estimates.end()) {
    char head[256];
    std::snprintf(head, sizeof(head),
                  "psi = %lld parameters, %d rank(s), %d per host; host RAM %s %s; margin %.0f%%\n",
                  static_cast<long long>(first->fit.inputs.parameters), options.world,
                  options.ranks_per_host, size_text(first->budget.ram).c_str(),
                  first->budget.ram_source.c_str(), options.margin * 100);
    out << head;
  }
  out << "MiB per rank: peak = the resident peak a run should measure, fit = what the fit check "
         "counts (with its safety: allocator slack, process rounded up); states = model states "
         "(B/param: their multiplier of psi), gathered = "
         "stage-3 window, grads, act = activations, stage = staging + tier buffers, other = "
         "process + construction/checkpoint + allocator; sent = MiB each rank sends per step "
         "(all_gather / reduce_scatter, or a gradient codec's all_to_all / all_reduce) and link\n";
  char line[512];
  std::snprintf(line, sizeof(line),
                "%3s %-7s %7s %7s %7s %8s %7s %7s %7s %7s %8s %8s %22s %-7s  %s\n", "#", "status",
                "peak", "fit", "states", "B/param", "gather", "grads", "act", "stage", "other",
                "NVMe", "sent ag/rs/ar", "link", "composition");
  out << line;
}

// One composition's row.
void print_row(int index, const CompositionEstimate& e, std::ostream& out) {
  char line[512];
  if (!e.refused.empty()) {
    std::snprintf(line, sizeof(line), "%3d %-7s %s\n", index, "refused",
                  e.composition.label.c_str());
    out << line;
    return;
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
                           mib(e.comm.sent("reduce_scatter") + e.comm.sent("all_to_all")) + "/" +
                           mib(e.comm.sent("all_reduce"));
  char per_param[32];
  std::snprintf(per_param, sizeof(per_param), "%.2f",
                static_cast<double>(e.fit.state_bytes.host() + e.fit.state_bytes.files()) / psi);
  std::snprintf(
      line, sizeof(line), "%3d %-7s %7s %7s %7s %8s %7s %7s %7s %7s %8s %8s %22s %-7s  %s\n", index,
      status_of(e).c_str(), mib(h.expected()).c_str(), mib(h.total()).c_str(),
      mib(h.model_states).c_str(), per_param, mib(h.params_gathered).c_str(), mib(h.grads).c_str(),
      mib(h.activations).c_str(), mib(h.staging + h.tier_pools).c_str(), mib(other).c_str(),
      mib(nvme).c_str(), sent.c_str(), link.c_str(), e.composition.label.c_str());
  out << line;
}

// Below the table: why each composition that does not race is out.
void print_outcasts(const std::vector<CompositionEstimate>& estimates, std::ostream& out) {
  bool said = false;
  int index = 0;
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

}  // namespace

void print_estimates(const std::vector<CompositionEstimate>& estimates,
                     const EstimateOptions& options, std::ostream& out) {
  print_head(estimates, options, out);
  int index = 0;
  for (const CompositionEstimate& e : estimates) print_row(++index, e, out);
  print_outcasts(estimates, out);
}

}  // namespace zt::trainer
