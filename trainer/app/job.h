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
// `catalog` loads (the config's, which the caller keeps): as the rank itself (one process, or
// one of an outside launcher's ranks, whose world a --nproc must equal), or under zt's launcher
// (launch.nproc above 1, or a training job of one rank with launch.max_restarts).
int run_job(const JobSettings& job, PluginCatalog& catalog, const CliArgs& args,
            const std::vector<std::string>& argv);

// The config a checkpoint was saved with (its manifest's resolved config) with `overrides` on
// top: what trainer eval and sample run under without --config. Throws ConfigError for a path
// that is not a checkpoint or a manifest without a config. Its reads are bounded as a resume's
// (half of launch.timeout_s from `overrides`, else of its default): storage that stops
// answering ends the process with exit 5, naming the file (zt/host/file_io_deadline.h).
Config load_checkpoint_config(const std::string& checkpoint,
                              const std::vector<std::string>& overrides);

}  // namespace zt::trainer
