#include "settings/job_config.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <variant>

#include "settings/deepspeed_config.h"
#include "settings/trainer_config.h"
#include "zt/host/rendezvous.h"

namespace zt::trainer {

namespace {

// The job's config text, or its file, whichever the caller has.
struct ConfigSource {
  const std::string* path = nullptr;
  const std::string* text = nullptr;
  const std::string* name = nullptr;
  std::optional<Value> peek(const std::vector<std::string>& overrides, const std::string& section,
                            const std::string& key) const {
    return path ? Config::peek_file(*path, overrides, section, key)
                : Config::peek_string(*text, *name, overrides, section, key);
  }
  Config load(const std::vector<std::string>& overrides,
              const std::vector<ConfigSetting>& base) const {
    return path ? load_config_file(*path, overrides, base)
                : load_config_string(*text, *name, overrides, base);
  }
};

// The job's ranks as the config will see them: the launcher's environment, else launch.nproc.
int job_world(const ConfigSource& source, const std::vector<std::string>& overrides) {
  const RankEnv env = discover_rank_env();
  if (env.found) return env.world;
  // Out of range, it is the config's own check that refuses it (with its place).
  if (auto n = source.peek(overrides, "launch", "nproc");
      n && std::holds_alternative<int64_t>(*n) && std::get<int64_t>(*n) >= 1 &&
      std::get<int64_t>(*n) <= 1024) {
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

Config load_job(const ConfigSource& source, const std::vector<std::string>& overrides) {
  const auto ds = source.peek(overrides, "run", "deepspeed");
  if (!ds || !std::holds_alternative<std::string>(*ds) || std::get<std::string>(*ds).empty()) {
    return source.load(overrides, {});
  }
  const auto lenient = source.peek(overrides, "run", "deepspeed_lenient");
  const bool is_lenient = lenient && std::holds_alternative<bool>(*lenient) &&
                          std::get<bool>(*lenient);
  const DeepSpeedSettings s = read_deepspeed_config(std::get<std::string>(*ds), is_lenient,
                                                    job_world(source, overrides));
  // Once per job: by the process that starts the ranks, or by rank 0 of an outside launcher, in
  // its first start.
  const char* rank = std::getenv("RANK");
  const bool speaks = (!rank || (std::string(rank) == "0" && !std::getenv("ZT_LAUNCHER"))) &&
                      !std::getenv(kConfigSpokenVariable);
  if (speaks) {
    for (const auto& w : s.warnings) std::fprintf(stderr, "zt: warning: %s\n", w.c_str());
  }
  return source.load(overrides, s.settings);
}

}  // namespace

Config load_job_config(const std::string& path, const std::vector<std::string>& overrides) {
  ConfigSource source;
  source.path = &path;
  return load_job(source, overrides);
}

Config load_job_config_string(const std::string& toml_text, const std::string& source_name,
                              const std::vector<std::string>& overrides) {
  ConfigSource source;
  source.text = &toml_text;
  source.name = &source_name;
  return load_job(source, overrides);
}

std::string resolved_config_value(const std::string& toml, const std::string& section,
                                  const std::string& key) {
  if (toml.empty()) return "";
  const std::optional<Value> v = Config::peek_string(toml, "a checkpoint's config", {}, section,
                                                     key);
  return v ? value_to_toml(*v) : "";
}

}  // namespace zt::trainer
