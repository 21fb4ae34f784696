// The memory-fit check's refusal (per tier: bytes needed, bytes had, the knobs that move them),
// what the host has, and the one line a run prints. The estimate itself is memory_fit.cc's.
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "settings/job_settings.h"
#include "setup/memory_fit.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/compose.h"
#include "zt/host_memory.h"

namespace zt::trainer {

namespace {

// A way to need fewer bytes, and how many it moves per rank (0: depends on what it is set to).
struct Knob {
  int64_t bytes = 0;
  std::string text;
};

std::string knob_list(std::vector<Knob> knobs) {
  std::stable_sort(knobs.begin(), knobs.end(),
                   [](const Knob& a, const Knob& b) { return a.bytes > b.bytes; });
  std::string out;
  for (const Knob& k : knobs) {
    out += (out.empty() ? "" : "; ") + k.text;
    if (k.bytes > 0) out += " [" + size_text(k.bytes) + " per rank]";
  }
  return out;
}

// Knobs that move model states out of host memory.
void state_knobs(const FitEstimate& e, const JobSettings& job, std::vector<Knob>& knobs) {
  const KeyPlaces& at = job.places;
  const StateBytes& b = e.state_bytes;
  const int stage = e.inputs.stage;
  if (stage < 3) {
    StatePlacement at3 = e.inputs.states;
    at3.stage = 3;
    knobs.push_back({b.host() - rank_state_bytes(at3).host(), "raise " + at.key_at("zero.stage")});
  }
  // The gradient shards go with the optimizer states to their tier.
  const int64_t optimizer = b.master + b.states + b.grads;
  if (stage >= 1 && optimizer > 0) {
    knobs.push_back(
        {optimizer, offloads_to_files(job.engine.offload_optimizer)
                        ? "raise " + at.key_at("zero.offload_optimizer_fraction")
                        : "offload to files: " + at.key_at("plugins.offload_optimizer") +
                              " = \"offload_nvme\""});
  }
  if (stage == 3 && b.params > 0) {
    knobs.push_back({b.params, offloads_to_files(job.engine.offload_param)
                                   ? "raise " + at.key_at("zero.offload_param_fraction")
                                   : "offload to files: " + at.key_at("plugins.offload_param") +
                                         " = \"offload_nvme\""});
  }
  if (stage >= 1) {
    knobs.push_back({0, "more ranks on other hosts (" + at.key_at("launch.nproc") + " here, of " +
                            std::to_string(e.inputs.world) +
                            "): sharded states shrink as 1/ranks"});
  }
}

std::vector<Knob> host_knobs(const FitEstimate& e, const JobSettings& job) {
  std::vector<Knob> knobs;
  state_knobs(e, job, knobs);
  const HostNeed& h = e.host;
  const KeyPlaces& at = job.places;
  if (h.staging > 0) {
    knobs.push_back({h.staging, "lower " + at.key_at("zero.sub_group_size") + " (tiles of " +
                                    std::to_string(e.tile_elements) +
                                    " elements now), or set zero.pipeline_read / pipeline_write "
                                    "= false"});
  }
  const int64_t window = h.params_gathered -
                         e.inputs.element_size * (e.inputs.largest_unit + e.inputs.persistent);
  if (window > 0) knobs.push_back({window, "lower " + at.key_at("zero.prefetch_units")});
  knobs.push_back({h.activations,
                   "a smaller " + at.key_at("data.micro_batch") +
                       (job.model.activation_checkpointing
                            ? ""
                            : ", or " + at.key_at("model.activation_checkpointing") + " = true")});
  if (h.tier_pools > 0) {
    knobs.push_back({h.tier_pools, "fewer or smaller file-tier buffers (plugin.<id>.buffer_count, "
                                   "buffer_mb)"});
  }
  // Gradient shards waiting for the global norm in host memory beside a file tier.
  const StatePlacement& placed = e.inputs.states;
  if (placed.optimizer_in_files > 0 && !placed.grads_in_files &&
      offloads_to_files(job.engine.offload_optimizer)) {
    knobs.push_back({static_cast<int64_t>(e.state_bytes.grads * placed.optimizer_in_files),
                     at.key_at("zero.gradients_in_tier") +
                         " = true (the gradient shards wait for the global norm in the file "
                         "tier: 8 more bytes per parameter through the disk each step)"});
  }
  if (e.inputs.codec_residual_bytes > 0) {
    knobs.push_back({e.inputs.codec_residual_bytes, at.key_at("zero.codec_error_feedback") +
                                                        " = false (its residuals are an "
                                                        "fp32 copy of the gradients)"});
  }
  if (h.checkpoint > 8 * kMiB) {
    knobs.push_back({h.checkpoint, at.key_at("checkpoint.async") + " = false"});
  }
  return knobs;
}

std::vector<Knob> disk_knobs(const DiskNeed& d, const FitEstimate& e, const JobSettings& job) {
  const KeyPlaces& at = job.places;
  std::vector<Knob> knobs = {
      {0, "plugin." + d.plugin + ".path (" + d.path_where + ") on a disk with more room"}};
  if (e.state_bytes.optimizer_files > 0 && job.engine.offload_optimizer.id == d.plugin) {
    knobs.push_back(
        {e.state_bytes.optimizer_files, "lower " + at.key_at("zero.offload_optimizer_fraction") +
                                            " (that share stays in host RAM)"});
  }
  if (e.state_bytes.param_files > 0 && job.engine.offload_param.id == d.plugin) {
    knobs.push_back(
        {e.state_bytes.param_files,
         "lower " + at.key_at("zero.offload_param_fraction") + " (that share stays in host RAM)"});
  }
  knobs.push_back({0, "more ranks on other hosts"});
  return knobs;
}

// GiB for host-sized amounts, smaller units below one.
std::string amount(int64_t bytes) {
  return bytes >= kGiB ? gib_text(static_cast<double>(bytes)) : size_text(bytes);
}

// "needs 1.20 GiB (2 ranks x 612.0 MiB: ...), over the 1.00 GiB of launch.memory_limit_gb"
std::string tier_line(const std::string& tier, int local, int64_t per_rank,
                      const std::string& parts, int64_t have, const std::string& have_what) {
  const int64_t need = per_rank * local;
  std::string line = tier + ": needs " + amount(need) + " (" + std::to_string(local) +
                     " rank(s) x " + bytes_text(per_rank) + ": " + parts + ")";
  if (have <= 0) return line + ", has an unknown amount (" + have_what + "): not checked";
  return line + (need > have ? ", over the " : ", within the ") + amount(have) + " " + have_what;
}

std::string host_parts(const HostNeed& h) {
  return "process " + size_text(h.process) + ", model states " + size_text(h.model_states) +
         ", tier buffers " + size_text(h.tier_pools) + ", construction " +
         size_text(h.construction) + ", working set " + size_text(h.working_set()) +
         " (gathered parameters " + size_text(h.params_gathered) + ", gradients " +
         size_text(h.grads) + ", activations " + size_text(h.activations) + ", staging " +
         size_text(h.staging) + ", checkpoint " + size_text(h.checkpoint) + "), allocator " +
         size_text(h.allocator);
}

}  // namespace

void check_fit(const FitEstimate& e, const HostBudget& budget, const JobSettings& job) {
  const int local = e.inputs.local_ranks;
  bool short_somewhere = budget.ram > 0 && e.host_total() > budget.ram;
  std::string lines = "\n  " + tier_line("host RAM", local, e.host.total(), host_parts(e.host),
                                         budget.ram, budget.ram_source);
  if (budget.ram > 0 && e.host_total() > budget.ram)
    lines += "; to need less: " + knob_list(host_knobs(e, job));
  for (size_t i = 0; i < e.disks.size(); ++i) {
    const DiskNeed& d = e.disks[i];
    const int64_t free = i < budget.disk_free.size() ? budget.disk_free[i] : -1;
    const bool over = free >= 0 && d.per_rank * local > free;
    short_somewhere |= over;
    lines += "\n  " + tier_line("disk " + d.path + " (" + d.plugin + ")", local, d.per_rank,
                                d.roles, free, "free there");
    if (over) lines += "; to need less: " + knob_list(disk_knobs(d, e, job));
  }
  if (!short_somewhere) return;
  throw ConfigError(job.places.where("model.preset") + ": the job does not fit this " +
                    "host: " + std::to_string(e.inputs.parameters) + " parameters, ZeRO stage " +
                    std::to_string(e.inputs.stage) + ", " + std::to_string(local) + " of its " +
                    std::to_string(e.inputs.world) + " rank(s) on this host; by tier:" + lines +
                    "\n  (or choose a smaller model)");
}

int64_t file_tier_free_bytes(const std::string& path) {
  std::filesystem::path at = std::filesystem::absolute(path);
  std::error_code ec;
  while (!at.empty() && !std::filesystem::exists(at, ec)) {
    if (at == at.parent_path()) break;
    at = at.parent_path();
  }
  struct statvfs fs;
  if (::statvfs(at.c_str(), &fs) != 0) return -1;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

HostBudget host_budget(const JobSettings& job, const FitEstimate& e, bool in_a_rank) {
  HostBudget budget;
  const double limit_gb = job.engine.launch.memory_limit_gb;
  if (limit_gb > 0) {
    budget.ram = static_cast<int64_t>(limit_gb * static_cast<double>(kGiB));
    budget.ram_source = "of launch.memory_limit_gb (" + job.places.where("launch.memory_limit_gb") +
                        ")";
  } else {
    // In a container or a batch job the limit is the memory cgroup's, which MemAvailable
    // does not know: the kernel kills a rank there long before the host runs short.
    budget.ram = host_memory_room_bytes(&budget.ram_source);
    // Running ranks have their process already: the figure above no longer has it.
    const int64_t rss = process_rss_bytes();
    if (budget.ram > 0 && rss > 0 && in_a_rank) {
      budget.ram += e.inputs.local_ranks * std::min(rss, kProcessBaselineBytes);
      budget.ram_source += " + the process of each rank here";
    }
  }
  for (const DiskNeed& d : e.disks) budget.disk_free.push_back(file_tier_free_bytes(d.path));
  return budget;
}

std::string describe_fit(const FitEstimate& e, const HostBudget& budget) {
  const HostNeed& h = e.host;
  std::string line = "memory fit: host RAM per rank " + bytes_text(h.total()) + " (process " +
                     size_text(h.process) + ", model states " + size_text(h.model_states) +
                     ", tier buffers " + size_text(h.tier_pools) + ", construction " +
                     size_text(h.construction) + ", working set " + size_text(h.working_set()) +
                     ", allocator " + size_text(h.allocator) + ") x " +
                     std::to_string(e.inputs.local_ranks) + " = " +
                     gib_text(static_cast<double>(e.host_total()));
  if (budget.ram > 0) line += " of " + gib_text(static_cast<double>(budget.ram));
  for (size_t i = 0; i < e.disks.size(); ++i) {
    const DiskNeed& d = e.disks[i];
    line += "; disk " + d.path + " per rank " + bytes_text(d.per_rank);
    if (i < budget.disk_free.size() && budget.disk_free[i] >= 0)
      line += " x " + std::to_string(e.inputs.local_ranks) + " of " +
              gib_text(static_cast<double>(budget.disk_free[i])) + " free";
  }
  return line;
}

void check_memory_fits(const JobSettings& job, PluginCatalog& catalog, int world,
                       const FitCheck& how) {
  // A rank that neither enforces nor prints has nothing to do with the estimate: sizing it would
  // resolve the model (load a TorchScript file, make a plugin's model) for nothing.
  if (!how.enforce && !how.print) return;
  const FitEstimate estimate = estimate_fit(fit_inputs(job, catalog, world), job.engine);
  const HostBudget budget = host_budget(job, estimate, how.in_a_rank);
  if (how.enforce) check_fit(estimate, budget, job);
  if (how.print) {
    std::printf("%s\n", describe_fit(estimate, budget).c_str());
    std::fflush(stdout);
  }
}

}  // namespace zt::trainer
