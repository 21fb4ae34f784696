#include "settings/job_config.h"

#include <cstdio>
#include <cstdlib>
#include <variant>

#include "settings/deepspeed_config.h"
#include "settings/trainer_config.h"
#include "zt/host/rendezvous.h"

namespace zt::trainer {

namespace {

// The job's ranks as the config will see them: the launcher's environment, else launch.nproc.
int job_world(const std::string& path, const std::vector<std::string>& overrides) {
  const RankEnv env = discover_rank_env();
  if (env.found) return env.world;
  if (auto n = Config::peek_file(path, overrides, "launch", "nproc");
      n && std::holds_alternative<int64_t>(*n)) {
    return static_cast<int>(std::get<int64_t>(*n));
  }
  for (const auto& section : config_schema()) {
    if (section.name != "launch") continue;
    for (const auto& spec : section.keys) {
      if (spec.name == "nproc") return static_cast<int>(std::get<int64_t>(spec.default_value));
    }
  }
  return 1;
}

}  // namespace

Config load_job_config(const std::string& path, const std::vector<std::string>& overrides) {
  const auto ds = Config::peek_file(path, overrides, "run", "deepspeed");
  if (!ds || !std::holds_alternative<std::string>(*ds) || std::get<std::string>(*ds).empty()) {
    return load_config_file(path, overrides);
  }
  const auto lenient = Config::peek_file(path, overrides, "run", "deepspeed_lenient");
  const bool is_lenient = lenient && std::holds_alternative<bool>(*lenient) &&
                          std::get<bool>(*lenient);
  const DeepSpeedSettings s = read_deepspeed_config(std::get<std::string>(*ds), is_lenient,
                                                    job_world(path, overrides));
  // Once per job: by the process that starts the ranks, or by rank 0 of an outside launcher, in
  // its first start.
  const char* rank = std::getenv("RANK");
  const bool speaks = (!rank || (std::string(rank) == "0" && !std::getenv("ZT_LAUNCHER"))) &&
                      !std::getenv(kConfigSpokenVariable);
  if (speaks) {
    for (const auto& w : s.warnings) std::fprintf(stderr, "zt: warning: %s\n", w.c_str());
  }
  return load_config_file(path, overrides, s.settings);
}

}  // namespace zt::trainer
