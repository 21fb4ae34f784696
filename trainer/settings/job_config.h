// A job's config as the trainer's commands load it: its TOML file with --set overrides, and,
// with run.deepspeed (in the file or --set), the settings of the DeepSpeed JSON it names under
// them (settings/deepspeed_config.h).
// Thread safety: call from the main thread (it reads the environment and may print warnings).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "zt/host/config.h"

namespace zt::trainer {

// Set in the environment of a single process that started itself again, after loading its
// config, to run as the rank (app/job.cc): its first start printed what the config had to say.
inline constexpr const char* kConfigSpokenVariable = "ZT_CONFIG_SPOKEN";
// Set by a launcher of zt's that reads no config (Python's zt.launch) for the ranks it starts:
// their rank 0 says what the config has to say, as under torchrun (the trainer's launcher said
// it itself, and its ranks keep quiet).
inline constexpr const char* kRank0SpeaksVariable = "ZT_RANK0_SPEAKS";
// Set by `trainer ab`, `tune` and `estimate` for themselves and the runs they start: their arms
// and candidates select plugins the job as written does not, so a [plugin.<id>] table that no
// role of the file selects is no news there (settings/plugin_tables.h).
inline constexpr const char* kJobHasArmsVariable = "ZT_JOB_HAS_ARMS";

// Loads a job's config: with run.deepspeed, the DeepSpeed file's settings under the TOML, its
// warnings printed to stderr once (by rank 0 or the launcher). Throws what the loaders throw
// (ConfigError, PluginError).
Config load_job_config(const std::string& path, const std::vector<std::string>& overrides);
// As load_job_config(), from text (Python's config dicts and strings); `source_name` stands for
// the file name in messages.
Config load_job_config_string(const std::string& toml_text, const std::string& source_name,
                              const std::vector<std::string>& overrides);

// Prints "zt: warning: `warning`" once per job: by the process that speaks for its config (the
// one that starts the ranks, or rank 0 of an outside launcher, in its first start), once per
// process.
void warn_about_config(const std::string& warning);

// Whether the command line gives launch.nproc (`overrides` as the trainer's commands pass them:
// --nproc N is launch.nproc=N there, as --set launch.nproc=N is). In a Slurm step of one task,
// that asks zt's launcher for the ranks (the config's launch.nproc alone does not).
bool command_line_sets_nproc(const std::vector<std::string>& overrides);

// The launch.timeout_s of a command that reads a checkpoint before it has a job config (`trainer
// export`; eval and sample reading the config a checkpoint was saved with), which bounds those
// reads (run/checkpointing.h): the value an `overrides` entry gives (launch.timeout_s=S), else
// the config's default. An invalid value: with `refuse_invalid` (export, which loads no config
// that would refuse it later) the ConfigError naming it, else the default.
std::chrono::milliseconds launch_timeout_before_config(const std::vector<std::string>& overrides,
                                                       bool refuse_invalid = false);

// One key of a resolved config's text (JobSettings::config_toml, as a checkpoint records it),
// as TOML; "" when the text has none (or is empty).
std::string resolved_config_value(const std::string& toml, const std::string& section,
                                  const std::string& key);

}  // namespace zt::trainer
