// Running a job from a validated config: decides between spawning local ranks (launcher) and
// running as one rank (rendezvous, then the task), and returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "app/cli.h"
#include "settings/job_settings.h"
#include "zt/host/config.h"
#include "zt/host/plugin_loader.h"

namespace zt::trainer {

// Runs args.command's task (training, or trainer eval / sample) of the job, whose plugins
// `catalog` loads (the config's, which the caller keeps).
int run_job(const JobSettings& job, PluginCatalog& catalog, const CliArgs& args,
            const std::vector<std::string>& argv);

// The config a checkpoint was saved with (its manifest's resolved config) with `overrides` on
// top: what trainer eval and sample run under without --config. Throws ConfigError for a path
// that is not a checkpoint or a manifest without a config.
Config load_checkpoint_config(const std::string& checkpoint,
                              const std::vector<std::string>& overrides);

}  // namespace zt::trainer
