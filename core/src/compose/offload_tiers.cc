// The offload tiers of a job's [plugins], its job id, and the leftovers of killed ranks.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "compose/offload_tiers.h"
#include "zt/error.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/plugin_loader.h"

namespace zt {

namespace {

// Each offload role with its choice in the settings.
std::vector<const PluginChoice*> offload_roles(const EngineSettings& settings) {
  return {&settings.offload_optimizer, &settings.offload_param};
}

}  // namespace

EngineTiers OffloadTiers::engine_tiers() const {
  EngineTiers t;
  if (!optimizer_id.empty()) t.optimizer = by_id.at(optimizer_id).get();
  if (!param_id.empty()) t.param = by_id.at(param_id).get();
  return t;
}

std::string OffloadTiers::describe() const {
  std::string out;
  if (!optimizer_id.empty()) {
    out += "optimizer states + master -> " + optimizer_id + ": " +
           by_id.at(optimizer_id)->describe();
  }
  if (!param_id.empty()) {
    out += std::string(out.empty() ? "" : "; ") + "parameter shards -> " + param_id + ": " +
           by_id.at(param_id)->describe();
  }
  return out;
}

std::string draw_job_id() {
  std::random_device device;
  char id[32];
  std::snprintf(id, sizeof(id), "%d-%08x", static_cast<int>(getpid()), device());
  return id;
}

std::string offload_job_id(Store& store, int rank, std::chrono::milliseconds timeout) {
  if (const char* id = std::getenv("ZT_JOB_ID")) return id;
  const std::string key = "offload/job_id";
  // Drawn once per store: a live A/B switch asks again, and a second draw under the same key
  // raced the other ranks' reads of the first (their savers then met under different keys).
  if (rank == 0 && store.add("offload/job_id_drawn", 1) == 1) {
    const std::string id = draw_job_id();
    store.set(key, std::vector<uint8_t>(id.begin(), id.end()));
  }
  std::vector<uint8_t> value = store.get(key, timeout);
  return std::string(value.begin(), value.end());
}

OffloadTiers make_offload_tiers(const EngineSettings& settings, PluginCatalog& catalog,
                                const RankEnv& env, Store& store,
                                std::chrono::milliseconds timeout) {
  OffloadTiers tiers;
  if (!settings.offload_optimizer.chosen() && !settings.offload_param.chosen()) return tiers;
  tiers.job = offload_job_id(store, env.rank, timeout);
  // Today launch.device reaches only the tiers (pinned host memory); compose refused "cuda"
  // where LibTorch has no CUDA device (check_launch_device).
  const bool cuda = settings.launch.device == "cuda";
  for (const PluginChoice* role : offload_roles(settings)) {
    if (!role->chosen()) continue;
    (role == &settings.offload_optimizer ? tiers.optimizer_id : tiers.param_id) = role->id;
    if (tiers.by_id.count(role->id)) continue;
    const OffloadPlugin& plugin = catalog.offload(role->id, role->key);
    OffloadContext context{env.rank, role->key, tiers.job, cuda};
    // Observed: a rank blocked on a transfer says which region (flight recorder, trace).
    tiers.by_id[role->id] = observe_tier(plugin.create(role->options, context), role->id);
  }
  return tiers;
}

bool offloads_to_files(const PluginChoice& role) { return role.chosen() && role.declares("path"); }

double separate_master_share(const EngineSettings& settings) {
  double share = 0;
  if (settings.offload_optimizer.chosen()) share = settings.options.offload_optimizer_fraction;
  if (settings.offload_param.chosen())
    share = std::max(share, settings.options.offload_param_fraction);
  return share;
}

std::vector<std::string> remove_offload_leftovers(const EngineSettings& settings,
                                                  const std::string& job) {
  std::vector<std::string> removed;
  for (const PluginChoice* role : offload_roles(settings)) {
    if (!offloads_to_files(*role)) continue;
    std::filesystem::path folder = std::filesystem::path(role->options.get_string("path")) /
                                   ("zt-" + job);
    std::error_code ec;
    if (std::filesystem::exists(folder, ec)) {
      std::filesystem::remove_all(folder, ec);
      removed.push_back(folder.string());
    }
  }
  return removed;
}

}  // namespace zt
