// The offload tiers a job's [plugins] names (offload_optimizer, offload_param), created once per
// plugin id so one tier may serve both roles, and the job id that keeps their files apart from
// other jobs'. File tiers keep their files under <path>/zt-<job>/ (offload.h); after a rank was
// killed (no destructors ran) the launcher removes that folder.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "zt/config.h"
#include "zt/engine.h"
#include "zt/offload.h"
#include "zt/rendezvous.h"

namespace zt::trainer {

struct OffloadTiers {
  std::map<std::string, std::unique_ptr<OffloadTier>> by_id;
  std::string optimizer_id, param_id;  // "" when that role is not offloaded

  EngineTiers engine_tiers() const;
  // "optimizer states -> offload_nvme: files under ...; parameters -> ..." or "" without offload.
  std::string describe() const;
};

// Unique per job and equal on every rank: the zt launcher's ZT_JOB_ID, torchrun's
// TORCHELASTIC_RUN_ID, else the rendezvous port.
std::string offload_job_id(const RankEnv& env);
OffloadTiers make_offload_tiers(const Config& config, const RankEnv& env);
// Removes <path>/zt-<job> of every configured tier that has a `path` option; returns the folders
// that were still there.
std::vector<std::string> remove_offload_leftovers(const Config& config, const std::string& job);

}  // namespace zt::trainer
