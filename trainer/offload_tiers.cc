#include "offload_tiers.h"

#include <cstdlib>
#include <filesystem>

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
    out += "optimizer states + fp32 master -> " + optimizer_id + ": " + by_id.at(optimizer_id)->describe();
  }
  if (!param_id.empty()) {
    out += std::string(out.empty() ? "" : "; ") + "parameter shards -> " + param_id + ": " +
           by_id.at(param_id)->describe();
  }
  return out;
}

std::string offload_job_id(const RankEnv& env) {
  if (const char* id = std::getenv("ZT_JOB_ID")) return id;
  if (const char* id = std::getenv("TORCHELASTIC_RUN_ID")) return id;
  return "port" + std::to_string(env.master_port);
}

OffloadTiers make_offload_tiers(const Config& config, const RankEnv& env) {
  OffloadTiers tiers;
  const Options& plugins = config.section("plugins");
  const bool cuda = config.section("launch").get_string("device") == "cuda";
  for (const char* role : kRoles) {
    const std::string& id = plugins.get_string(role);
    if (id.empty()) continue;
    (std::string(role) == "offload_optimizer" ? tiers.optimizer_id : tiers.param_id) = id;
    if (tiers.by_id.count(id)) continue;
    const std::string key = std::string("plugins.") + role;
    const OffloadPlugin& plugin = config.catalog().offload(id, key);
    OffloadContext context{env.rank, key, offload_job_id(env), cuda};
    tiers.by_id[id] = plugin.create(config.plugin_options(id), context);
  }
  return tiers;
}

std::vector<std::string> remove_offload_leftovers(const Config& config, const std::string& job) {
  std::vector<std::string> removed;
  const Options& plugins = config.section("plugins");
  for (const char* role : kRoles) {
    const std::string& id = plugins.get_string(role);
    if (id.empty()) continue;
    const Options& options = config.plugin_options(id);
    bool has_path = false;
    for (const auto& spec : options.specs()) has_path |= spec.name == "path";
    if (!has_path) continue;
    std::filesystem::path folder = std::filesystem::path(options.get_string("path")) / ("zt-" + job);
    std::error_code ec;
    if (std::filesystem::exists(folder, ec)) {
      std::filesystem::remove_all(folder, ec);
      removed.push_back(folder.string());
    }
  }
  return removed;
}

}  // namespace zt::trainer
