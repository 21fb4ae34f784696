#include "setup/offload_tiers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "zt/flight_recorder.h"
#include "zt/plugin_loader.h"

namespace zt::trainer {

namespace {

const char* const kRoles[] = {"offload_optimizer", "offload_param"};

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
    out += "optimizer states + fp32 master -> " + optimizer_id + ": " +
           by_id.at(optimizer_id)->describe();
  }
  if (!param_id.empty()) {
    out += std::string(out.empty() ? "" : "; ") + "parameter shards -> " + param_id + ": " +
           by_id.at(param_id)->describe();
  }
  return out;
}

std::string offload_job_id(Store& store, int rank, std::chrono::milliseconds timeout) {
  if (const char* id = std::getenv("ZT_JOB_ID")) return id;
  const std::string key = "offload/job_id";
  if (rank == 0) {
    std::random_device device;
    char id[32];
    std::snprintf(id, sizeof(id), "%d-%08x", static_cast<int>(getpid()), device());
    store.set(key, std::vector<uint8_t>(id, id + std::strlen(id)));
  }
  std::vector<uint8_t> value = store.get(key, timeout);
  return std::string(value.begin(), value.end());
}

OffloadTiers make_offload_tiers(const Config& config, const RankEnv& env, Store& store,
                                std::chrono::milliseconds timeout) {
  OffloadTiers tiers;
  const Options& plugins = config.section("plugins");
  const bool cuda = config.section("launch").get_string("device") == "cuda";
  if (plugins.get_string("offload_optimizer").empty() &&
      plugins.get_string("offload_param").empty())
    return tiers;
  tiers.job = offload_job_id(store, env.rank, timeout);
  for (const char* role : kRoles) {
    const std::string& id = plugins.get_string(role);
    if (id.empty()) continue;
    (std::string(role) == "offload_optimizer" ? tiers.optimizer_id : tiers.param_id) = id;
    if (tiers.by_id.count(id)) continue;
    const std::string key = std::string("plugins.") + role;
    const OffloadPlugin& plugin = config.catalog().offload(id, key);
    OffloadContext context{env.rank, key, tiers.job, cuda};
    // Observed: a rank blocked on a transfer says which region (flight recorder, trace).
    tiers.by_id[id] = observe_tier(plugin.create(config.plugin_options(id), context), id);
  }
  return tiers;
}

bool offloads_to_files(const Config& config, const char* role) {
  const std::string& id = config.section("plugins").get_string(role);
  if (id.empty()) return false;
  for (const auto& spec : config.plugin_options(id).specs()) {
    if (spec.name == "path") return true;
  }
  return false;
}

double separate_master_share(const Config& config) {
  const Options& plugins = config.section("plugins");
  const Options& zero = config.section("zero");
  double share = 0;
  if (!plugins.get_string("offload_optimizer").empty())
    share = zero.get_double("offload_optimizer_fraction");
  if (!plugins.get_string("offload_param").empty())
    share = std::max(share, zero.get_double("offload_param_fraction"));
  return share;
}

std::vector<std::string> remove_offload_leftovers(const Config& config, const std::string& job) {
  std::vector<std::string> removed;
  for (const char* role : kRoles) {
    if (!offloads_to_files(config, role)) continue;
    const Options& options = config.plugin_options(config.section("plugins").get_string(role));
    std::filesystem::path folder = std::filesystem::path(options.get_string("path")) /
                                   ("zt-" + job);
    std::error_code ec;
    if (std::filesystem::exists(folder, ec)) {
      std::filesystem::remove_all(folder, ec);
      removed.push_back(folder.string());
    }
  }
  return removed;
}

}  // namespace zt::trainer
