// One trainer job as a child process: the real `trainer` executable on configs/zero3.toml with
// the stage, shard strategy, offload tiers, steps, the bench's model size and (for the
// TorchScript job) the model's file set by --set overrides. Its stdout and stderr go to a log
// file that metrics_file.cc reads (and that a failure shows). The TorchScript file comes from
// another child, tests/torchscript/torchscript_models.py run by the plan's Python.
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

// The command that writes the bench's GPT (bench_gpt_overrides: layers, heads, width, context,
// vocabulary) as TorchScript to `out_pt`, computed as the built-in GPT computes it.
std::vector<std::string> torchscript_gpt_command(const Plan& plan, const std::string& out_pt);

}  // namespace zt::bench
