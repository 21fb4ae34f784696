// Running a job from a validated config: decides between spawning local ranks (launcher) and
// running as one rank (rendezvous, then the task), and returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "app/cli.h"
#include "zt/config.h"

namespace zt::trainer {

int run_job(const Config& config, const CliArgs& args, const std::vector<std::string>& argv);

}  // namespace zt::trainer
