// One trainer job as a child process: the real `trainer` executable on configs/zero3.toml with
// the stage, shard strategy, offload tiers, steps and the bench's model size set by --set
// overrides. Its
// stdout and stderr go to a log file that metrics_file.cc reads (and that a failure shows).
// Thread safety: none needed; jobs run one at a time so they do not compete for the cores.
#pragma once

#include <string>
#include <vector>

#include "bench_train.h"

namespace zt::bench {

// The trainer's command line for `job`, writing metrics.jsonl under `out_dir`.
std::vector<std::string> trainer_command(const Plan& plan, const JobSpec& job,
                                         const std::string& out_dir);

// Runs `argv` (argv[0] a path) with stdout and stderr to `log_path` and waits for it. Returns
// its exit code, or 128 + N when signal N ended it. Throws IoError when it cannot start.
int run_logged(const std::vector<std::string>& argv, const std::string& log_path);

// The last `lines` lines of a text file ("" when unreadable): what a failed job said.
std::string tail_lines(const std::string& path, size_t lines);

}  // namespace zt::bench
