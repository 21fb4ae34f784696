// One composition sized without starting a rank: host memory per rank by category (the memory-fit
// model, memory_fit.h), bytes per rank in each file tier, bytes each rank sends per step by
// collective and link (comm_estimate.h), the offload traffic per step, and whether it fits this
// host with a margin (on a CPU host running out of memory is a SIGKILL, not an exception). What
// `trainer estimate` prints and `trainer tune` prunes with.
// Thread safety: estimate_composition reads /proc/meminfo and statvfs; the rest is pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "setup/comm_estimate.h"
#include "setup/memory_fit.h"
#include "tune/composition.h"

namespace zt::trainer {

struct EstimateOptions {
  int world = 1;           // ranks of the job
  int ranks_per_host = 1;  // of them on each host
  double margin = 0.1;     // a composition fits when it needs at most (1 - margin) of a tier
};

struct CompositionEstimate {
  Candidate composition;
  std::string refused;  // the config's rules refuse the combination, or a plugin it names does not
                        // load (their message); then nothing else is set
  JobSettings job;      // the composition's settings, resolved once (its trial's door)
  FitEstimate fit;
  HostBudget budget;
  CommEstimate comm;
  int64_t host_copies_per_step = 0;   // bytes offload_cpu tiers copy per step, per rank
  int64_t file_io_per_step = 0;       // bytes file tiers read and write per step, per rank
  std::vector<std::string> short_of;  // per tier without room: what it needs and has
  std::string pruned;                 // fits, but the estimate rules it out: why
  bool fits() const { return refused.empty() && short_of.empty(); }
  // Offload traffic weighted by its tier (a file tier's byte counted as ten host copies): the
  // order in which fitting placements of one cell are preferred.
  double offload_cost() const {
    return static_cast<double>(host_copies_per_step) + 10.0 * static_cast<double>(file_io_per_step);
  }
  // Bytes sent and offloaded per step, a byte between hosts weighted as ten through shared memory
  // (as a file tier's byte is ten host copies): the link across hosts is the likely bound, and a
  // codec that shrinks its bytes must not rank below a knob that saves as many bytes inside a
  // host. The order in which tune's first round races what the user did not name.
  double traffic_cost() const {
    double network = 0, local = 0;
    for (const CollectiveEstimate& c : comm.collectives)
      (c.link == "network" ? network : local) += static_cast<double>(c.sent);
    return local + 10.0 * network + offload_cost();
  }
};

// Loads `c` through `load` (a refusal is recorded, not thrown) and sizes it.
CompositionEstimate estimate_composition(const ConfigLoader& load, const Candidate& c,
                                         const EstimateOptions& options);

// In each cell of the grid (the compositions that differ only in offload placement, cell_of), the
// fitting placement with the least offload traffic is kept; the other fitting ones are pruned,
// each saying what it would move more per step.
void prune_placements(std::vector<CompositionEstimate>& estimates);

// The user's job (its settings, resolved once) and every composition of it estimated: "your
// config" first, then the grid (search_space.h) with its placements pruned.
struct JobEstimates {
  JobSettings given;
  std::vector<CompositionEstimate> all;
};
// `load`: the user's job with a composition's overrides; `hosts`: hosts the ranks spread over
// (each runs world / hosts of them). Sets options.world and ranks_per_host. Throws ConfigError
// for a job that trains nothing, or hosts that do not divide the world.
JobEstimates estimate_all(const ConfigLoader& load, int hosts, EstimateOptions& options);

// `load` as one host of `hosts` sees it: with more than one, launch.nproc is its
// `ranks_per_host`, which the memory-fit check multiplies by. Every composition is estimated
// through it (the grid, --candidate and tune's phase 2 alike: one resolved config each, so the
// same composition is one candidate).
ConfigLoader per_host_loader(ConfigLoader load, int hosts, int ranks_per_host);

}  // namespace zt::trainer
