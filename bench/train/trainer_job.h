// One trainer job as a child process: the real `trainer` executable on configs/zero3.toml with
// the stage, shard strategy, offload tiers, steps and the bench's model size set by --set
// overrides. Its
// stdout and stderr go to a log file that metrics_file.cc reads (and that a failure shows).
// Thread safety: none needed; jobs run one at a time so they do not compete for the cores.
#pragma once

#include <string>
#include <vector>

#include "bench_train.h"
#include "common/child_process.h"  // run_logged, tail_lines

namespace zt::bench {

// The trainer's command line for `job`, writing metrics.jsonl under `out_dir`.
std::vector<std::string> trainer_command(const Plan& plan, const JobSpec& job,
                                         const std::string& out_dir);

}  // namespace zt::bench
