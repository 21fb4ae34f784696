// A job's config as the trainer's commands load it: its TOML file with --set overrides, and,
// with run.deepspeed (in the file or --set), the settings of the DeepSpeed JSON it names under
// them (settings/deepspeed_config.h).
// Thread safety: call from the main thread (it reads the environment and may print warnings).
#pragma once

#include <string>
#include <vector>

#include "zt/host/config.h"

namespace zt::trainer {

// Set in the environment of a single process that started itself again, after loading its
// config, to run as the rank (app/job.cc): its first start printed what the config had to say.
inline constexpr const char* kConfigSpokenVariable = "ZT_CONFIG_SPOKEN";

// Loads a job's config: with run.deepspeed, the DeepSpeed file's settings under the TOML, its
// warnings printed to stderr once (by rank 0 or the launcher). Throws what the loaders throw
// (ConfigError, PluginError).
Config load_job_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace zt::trainer
