// One bench job as a child process: the real `trainer` executable on configs/zero3.toml with
// the stage, shard strategy, offload tiers, steps, the bench's model size, the initial weights
// and (for the TorchScript job) the model's file set by --set overrides; or PyTorch DDP on the
// same GPT (bench/train/ddp_gpt.py), configured by the trainer's own resolved config of the
// same job. Output goes to a log file that metrics_file.cc reads (and that a failure shows). The
// TorchScript file and the initial weights come from other children run by the plan's Python.
// Thread safety: none needed; jobs run one at a time so they do not compete for the cores.
#pragma once

#include <string>
#include <vector>

#include "bench_train.h"
#include "common/child_process.h"  // run_logged, tail_lines

namespace zt::bench {

// The --set overrides that give the plan's GPT (plan.model): bench_gpt_overrides() for
// "bench", none for "zero3" (configs/zero3.toml's own).
std::vector<std::string> model_overrides(const Plan& plan);

// The trainer's command line for `job`, writing metrics.jsonl under `out_dir`; `weights`, when
// not empty, is the safetensors file the model starts from (model.init_from).
std::vector<std::string> trainer_command(const Plan& plan, const JobSpec& job,
                                         const std::string& out_dir, const std::string& weights);

// The trainer's command that prints the resolved config of a job with the plan's GPT, steps and
// ranks (what the DDP job reads), with bf16 compute when `bf16`.
std::vector<std::string> print_config_command(const Plan& plan, bool bf16 = false);

// The command that writes the initial weights of the GPT of sizes `gpt` (GPT-2's init from
// kInitSeed) as safetensors under HF GPT-2 names to `out`.
std::vector<std::string> ddp_weights_command(const Plan& plan, const GptSizes& gpt,
                                             const std::string& out);

// The command that trains the GPT with PyTorch DDP as the job whose resolved config is `config`
// would, from `weights`, writing one JSON line per step to `out_jsonl`. `env` (NAME=VALUE, e.g.
// the OpenBLAS core the trainer gives its ranks) is set for it.
std::vector<std::string> ddp_train_command(const Plan& plan, const std::string& config,
                                           const std::string& weights, const std::string& out_jsonl,
                                           const std::vector<std::string>& env);

// The command that writes the GPT of sizes `gpt` as TorchScript to `out_pt`, computed as the
// built-in GPT computes it.
std::vector<std::string> torchscript_gpt_command(const Plan& plan, const GptSizes& gpt,
                                                 const std::string& out_pt);

}  // namespace zt::bench
