// The offload tiers a job's [plugins] names (offload_optimizer, offload_param), created once per
// plugin id so one tier may serve both roles, and the job id that keeps their files apart from
// other jobs'. File tiers keep their files under <path>/zt-<job>/ (offload.h); after a rank was
// killed (no destructors ran) the launcher removes that folder.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "zt/config.h"
#include "zt/engine.h"
#include "zt/offload.h"
#include "zt/rendezvous.h"
#include "zt/store.h"

namespace zt::trainer {

struct OffloadTiers {
  std::map<std::string, std::unique_ptr<OffloadTier>> by_id;
  std::string optimizer_id, param_id;  // "" when that role is not offloaded
  std::string job;  // offload_job_id(): file tiers keep their files under <path>/zt-<job>/

  EngineTiers engine_tiers() const;
  // "optimizer states -> offload_nvme: files under ...; parameters -> ..." or "" without offload.
  std::string describe() const;
};

// Unique per job and equal on every rank: the zt launcher's ZT_JOB_ID (it also removes what
// killed ranks leave), else an id rank 0 draws and publishes through the store (torchrun's
// default run id and a fixed MASTER_PORT are shared by unrelated jobs on a node).
std::string offload_job_id(Store& store, int rank, std::chrono::milliseconds timeout);
OffloadTiers make_offload_tiers(const Config& config, const RankEnv& env, Store& store,
                                std::chrono::milliseconds timeout);
// Whether the tier a role names keeps its bytes in files: its plugin takes a `path` option
// (offload.h's folder convention). False when the role is not offloaded.
bool offloads_to_files(const Config& config, const char* role);
// The share of parameters whose fp32 master is its own copy because the optimizer states or the
// stage-3 parameter shards are offloaded (theory_model_state_bytes' `separate_master`).
double separate_master_share(const Config& config);
// Removes <path>/zt-<job> of every configured tier that has a `path` option; returns the folders
// that were still there.
std::vector<std::string> remove_offload_leftovers(const Config& config, const std::string& job);

}  // namespace zt::trainer
