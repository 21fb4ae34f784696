// Running the real `trainer` (or any tool, e.g. dd) as a child process for a benchmark: fork +
// exec without a shell, output to a log file, and the launcher variables of the bench's own
// environment removed so the child spawns its own ranks instead of joining someone else's job.
// Thread safety: none needed; benches run one child at a time so they do not compete for cores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::bench {

// Runs `argv` (argv[0] a path) with stdout and stderr to `log_path` and waits for it. Returns
// its exit code, or 128 + N when signal N ended it. Throws IoError when it cannot start. After
// a stop signal (stop_on_signals) it throws StoppedBySignal instead of starting the job, and
// once the job ended; a signal sent to the bench alone (kill, a scheduler) is passed on to the
// job as it comes, so that the job stops as it would (Ctrl-C reaches both already).
int run_logged(const std::vector<std::string>& argv, const std::string& log_path);

// The last `lines` lines of a text file ("" when unreadable): what a failed job said.
std::string tail_lines(const std::string& path, size_t lines);

// The GPT the train and ckpt benches use (~10.8M parameters): --set overrides of
// configs/zero3.toml.
const std::vector<std::string>& bench_gpt_overrides();

// `trainer` training the bench GPT (configs/zero3.toml under the source folder `root`, on its
// README.md) for `steps` steps into `out_dir`, without report.html, then the --set overrides
// `more`.
std::vector<std::string> bench_gpt_command(const std::string& trainer, const std::string& root,
                                           const std::string& out_dir, int64_t steps,
                                           const std::vector<std::string>& more);

}  // namespace zt::bench
