#include "settings/job_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <variant>

#include "settings/deepspeed_config.h"
#include "settings/deepspeed_precedence.h"
#include "settings/model_keys.h"
#include "settings/plugin_tables.h"
#include "settings/trainer_config.h"
#include "zt/error.h"
#include "zt/host/rendezvous.h"

namespace zt::trainer {

namespace {

// The job's config text (a file's, read once) and the name messages give it.
struct ConfigSource {
  const std::string& text;
  const std::string& name;
  std::optional<Value> peek(const std::vector<std::string>& overrides, const std::string& section,
                            const std::string& key) const {
    return Config::peek_string(text, name, overrides, section, key);
  }
  Config load(const std::vector<std::string>& overrides,
              const std::vector<ConfigSetting>& base) const {
    return load_config_string(text, name, overrides, base);
  }
};

// The job's ranks as the config will see them: the launcher's environment, else launch.nproc.
int job_world(const ConfigSource& source, const std::vector<std::string>& overrides) {
  const RankEnv env = discover_rank_env();
  // A Slurm step of one task with launch.nproc on the command line (trainer --nproc N): zt's
  // launcher starts those N ranks there (app/job.cc), so N is the world, not the step's 1.
  const bool launches_here = env.found && env.source == "slurm" && env.world == 1 &&
                             command_line_sets_nproc(overrides);
  if (env.found && !launches_here) return env.world;
  const OptionSpec* spec = config_option("launch", "nproc");
  if (!spec) return 1;
  // Out of its range or of another type, it is the config's own check that refuses it (with its
  // place); the default stands in meanwhile.
  if (auto n = source.peek(overrides, "launch", "nproc")) {
    try {
      return static_cast<int>(std::get<int64_t>(check_option(*spec, *n, "launch", {})));
    } catch (const ConfigError&) {
    }
  }
  return static_cast<int>(std::get<int64_t>(spec->default_value));
}

// Whether this process says what a job's config has to say: the process that starts the
// ranks, or rank 0 of an outside launcher, in its first start. Once per job.
bool speaks() {
  if (std::getenv(kConfigSpokenVariable)) return false;
  const char* rank = std::getenv("RANK");
  if (rank) {
    return std::string(rank) == "0" &&
           (!std::getenv("ZT_LAUNCHER") || std::getenv(kRank0SpeaksVariable));
  }
  // srun and mpirun set no RANK: their rank 0 speaks (each rank spoke before).
  try {
    const RankEnv env = discover_rank_env();
    return !env.found || env.rank == 0;
  } catch (const Error&) {
    return true;  // the rank's start-up names what is wrong with its variables
  }
}

// A warning about the user's config, where this process speaks for it, once per process: it
// loads the config again for each A/B arm and tune or estimate candidate.
void warn_once(const std::string& warning) {
  static std::set<std::string> said;
  if (speaks() && said.insert(warning).second)
    std::fprintf(stderr, "zt: warning: %s\n", warning.c_str());
}

// The user's config as loaded, after a word on [model] keys its model.kind does not read and on
// [plugin.<id>] tables no role selects.
Config checked(Config config) {
  if (speaks()) {
    for (const auto& w : unused_model_keys(config)) warn_once(w);
    if (!std::getenv(kJobHasArmsVariable)) {
      for (const auto& w : unused_plugin_tables(config)) warn_once(w);
    }
  }
  return config;
}

Config load_job(const ConfigSource& source, const std::vector<std::string>& overrides) {
  const auto ds = source.peek(overrides, "run", "deepspeed");
  if (!ds || !std::holds_alternative<std::string>(*ds) || std::get<std::string>(*ds).empty()) {
    return checked(source.load(overrides, {}));
  }
  const auto lenient = source.peek(overrides, "run", "deepspeed_lenient");
  const bool is_lenient = lenient && std::holds_alternative<bool>(*lenient) &&
                          std::get<bool>(*lenient);
  const DeepSpeedSettings s = read_deepspeed_config(std::get<std::string>(*ds), is_lenient,
                                                    job_world(source, overrides));
  // Before a refusal below, which they may explain (hpZ's mapping, a key ignored).
  for (const auto& w : s.warnings) warn_once(w);
  Config config = source.load(overrides, s.settings);
  check_deepspeed_conditions(config, s);
  for (const auto& w : replaced_deepspeed_settings(config, s)) warn_once(w);
  return checked(std::move(config));
}

}  // namespace

void warn_about_config(const std::string& warning) { warn_once(warning); }

Config load_job_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = Config::read_file(path);
  return load_job(ConfigSource{text, path}, overrides);
}

Config load_job_config_string(const std::string& toml_text, const std::string& source_name,
                              const std::vector<std::string>& overrides) {
  return load_job(ConfigSource{toml_text, source_name}, overrides);
}

std::string resolved_config_value(const std::string& toml, const std::string& section,
                                  const std::string& key) {
  if (toml.empty()) return "";
  const std::optional<Value> v = Config::peek_string(toml, "a checkpoint's config", {}, section,
                                                     key);
  return v ? value_to_toml(*v) : "";
}

bool command_line_sets_nproc(const std::vector<std::string>& overrides) {
  return std::any_of(overrides.begin(), overrides.end(),
                     [](const std::string& kv) { return kv.rfind("launch.nproc=", 0) == 0; });
}

std::chrono::milliseconds launch_timeout_before_config(const std::vector<std::string>& overrides,
                                                       bool refuse_invalid) {
  const OptionSpec* spec = config_option("launch", "timeout_s");
  if (!spec) throw InternalError("the config schema has no launch.timeout_s");
  Value seconds = spec->default_value;
  try {
    if (auto given = Config::peek_string("", "--set", overrides, "launch", "timeout_s")) {
      seconds = check_option(*spec, *given, "launch", SourceLocation{"--set", 0, 0});
    }
  } catch (const ConfigError&) {
    // Otherwise the config refuses it, with its place, once it loads; the default bounds the
    // reads before that.
    if (refuse_invalid) throw;
  }
  return std::chrono::milliseconds(std::llround(std::get<double>(seconds) * 1000));
}

}  // namespace zt::trainer
