// The command lines of the bench's children: the trainer for one job, PyTorch DDP on the same GPT,
// and the Python helpers that write the TorchScript GPT and the initial weights.
#include "trainer_job.h"

#include "common/child_process.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

// Absolute paths into the source tree, so the bench runs from any folder.
const std::string kRoot = ZT_BENCH_SOURCE_DIR;

// The trainer on configs/zero3.toml with what every job of the plan shares: ranks, steps, data
// and the GPT.
std::vector<std::string> base_command(const Plan& plan) {
  std::vector<std::string> argv = {plan.trainer, "--config", kRoot + "/configs/zero3.toml"};
  for (const std::string& kv :
       {"launch.nproc=" + std::to_string(kRanks), "run.steps=" + std::to_string(plan.steps),
        "data.path=" + kRoot + "/README.md"}) {
    argv.insert(argv.end(), {"--set", kv});
  }
  for (const std::string& kv : model_overrides(plan)) argv.insert(argv.end(), {"--set", kv});
  return argv;
}

}  // namespace

std::vector<std::string> model_overrides(const Plan& plan) {
  if (plan.model == "zero3") return {};
  return bench_gpt_overrides();
}

std::vector<std::string> trainer_command(const Plan& plan, const JobSpec& job,
                                         const std::string& out_dir, const std::string& weights) {
  std::vector<std::string> argv = base_command(plan);
  auto set = [&](const std::string& kv) {
    argv.push_back("--set");
    argv.push_back(kv);
  };
  set("zero.stage=" + std::to_string(job.stage));
  if (job.bf16) set("precision.compute=bf16");
  set(std::string("plugins.shard=") + job.strategy.plugin);
  set("run.out_dir=" + out_dir);
  // The sizes above stay: a TorchScript model takes its shape from the file, but token data
  // needs model.seq_len and model.vocab.
  if (!job.torchscript.empty()) {
    set("model.kind=torchscript");
    set("model.path=" + job.torchscript);
  } else if (!weights.empty()) {
    set("model.init_from=" + weights);
  }
  // Besides the plugins and the folder, configs/zero3_offload.toml differs from zero3.toml in its
  // tile size, its bounce-buffer pool (which only transfers' unaligned tails use), its
  // evaluations and checkpoints every 50 steps (which a bench of the step leaves out) and its
  // biases and LayerNorm gains exempt from weight decay (DDP's AdamW decays every parameter, as
  // zero3.toml does, so the rows stay comparable).
  if (job.offloaded()) set("zero.sub_group_size=" + std::to_string(kOffloadSubGroup));
  if (*job.offload_optimizer)
    set(std::string("plugins.offload_optimizer=") + job.offload_optimizer);
  if (*job.offload_param) set(std::string("plugins.offload_param=") + job.offload_param);
  if (std::string(job.offload_optimizer) == "offload_nvme" ||
      std::string(job.offload_param) == "offload_nvme") {
    set("plugin.offload_nvme.path=" + plan.nvme_path);
  }
  return argv;
}

std::vector<std::string> print_config_command(const Plan& plan, bool bf16) {
  std::vector<std::string> argv = base_command(plan);
  if (bf16) argv.insert(argv.end(), {"--set", "precision.compute=bf16"});
  argv.push_back("--print-config");
  return argv;
}

std::vector<std::string> ddp_weights_command(const Plan& plan, const GptSizes& gpt,
                                             const std::string& out) {
  return {plan.python, kRoot + "/bench/train/ddp_gpt.py",
          "weights",   out,
          gpt.n_layer, gpt.n_head,
          gpt.d_model, gpt.seq_len,
          gpt.vocab,   std::to_string(kInitSeed)};
}

std::vector<std::string> ddp_train_command(const Plan& plan, const std::string& config,
                                           const std::string& weights, const std::string& out_jsonl,
                                           const std::vector<std::string>& env) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {plan.python, kRoot + "/bench/train/ddp_gpt.py", "train", config, weights,
                           out_jsonl});
  return argv;
}

std::vector<std::string> torchscript_gpt_command(const Plan& plan, const GptSizes& gpt,
                                                 const std::string& out_pt) {
  return {plan.python, kRoot + "/tests/torchscript/torchscript_models.py",
          "gpt",       out_pt,
          gpt.n_layer, gpt.n_head,
          gpt.d_model, gpt.seq_len,
          gpt.vocab};
}

}  // namespace zt::bench
