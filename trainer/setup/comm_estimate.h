// What one rank sends in one optimizer step, estimated without starting a rank: the model's
// declarations grouped by the job's own shard strategy (the plugin is loaded and plans, as it does
// when the engine is built), then the collectives each stage issues per group. Per collective:
// calls, the payload bytes CommStats counts (metrics.jsonl "comm" bytes), the bytes this rank
// sends to its peers (its "wire_bytes") and the link they travel over. Checked against what runs
// measure (tests/multiproc/estimate_test.cc; docs/architecture.md, "Estimate and tune").
// Thread safety: pure functions of their inputs (the plugin catalog is used).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "settings/job_settings.h"
#include "zt/host/plugin_loader.h"

namespace zt::trainer {

struct CollectiveEstimate {
  std::string op;  // "all_gather", "reduce_scatter", "all_reduce", "all_to_all" (a codec's)
  // "world", "shard group" (MiCS: its k ranks), "replicas" (across groups), or a two-level
  // gather's levels: "hosts" (the ranks at one place on each host) and "host" (a host's ranks).
  std::string group;
  int ranks = 1;      // ranks of that group
  std::string link;   // "shared memory" (the group inside one host) or "network"
  double calls = 0;   // per optimizer step
  int64_t bytes = 0;  // payload per step (the flat tensors' bytes)
  int64_t sent = 0;   // bytes this rank sends to peers per step
  std::string why;    // "forward and backward gathers of 6 released groups x 2 micro steps"
};

struct CommEstimate {
  std::vector<CollectiveEstimate> collectives;
  int64_t groups = 0;  // the flat groups the strategy planned (what file tiers align per array)
  // Sums over the collectives of one op ("" = all).
  double calls(const std::string& op = "") const;
  int64_t bytes(const std::string& op = "") const;
  int64_t sent(const std::string& op = "") const;
};

// The step of the job on `world` ranks, `ranks_per_host` of them on each host (0 = all on one).
// Throws what loading the shard plugin or planning throws (ConfigError, PluginError).
CommEstimate estimate_comm(const JobSettings& job, PluginCatalog& catalog, int world,
                           int ranks_per_host);

}  // namespace zt::trainer
