// The trainer's command line for one bench job, and the one that writes the TorchScript GPT.
#include "trainer_job.h"

#include "common/child_process.h"
#include "zt/error.h"

namespace zt::bench {

std::vector<std::string> trainer_command(const Plan& plan, const JobSpec& job,
                                         const std::string& out_dir) {
  // Absolute paths into the source tree, so the bench runs from any folder.
  const std::string root = ZT_BENCH_SOURCE_DIR;
  std::vector<std::string> argv = {plan.trainer, "--config", root + "/configs/zero3.toml"};
  auto set = [&](const std::string& kv) {
    argv.push_back("--set");
    argv.push_back(kv);
  };
  set("zero.stage=" + std::to_string(job.stage));
  set(std::string("plugins.shard=") + job.strategy.plugin);
  set("launch.nproc=" + std::to_string(kRanks));
  set("run.steps=" + std::to_string(plan.steps));
  set("run.out_dir=" + out_dir);
  set("data.path=" + root + "/README.md");
  for (const std::string& kv : bench_gpt_overrides()) set(kv);
  // The sizes above stay: a TorchScript model takes its shape from the file, but token data
  // needs model.seq_len and model.vocab.
  if (!job.torchscript.empty()) {
    set("model.kind=torchscript");
    set("model.path=" + job.torchscript);
  }
  // Besides the plugins and the folder, configs/zero3_offload.toml differs from zero3.toml only
  // in its tile size and bounce-buffer pool (which the engine's aligned tiles do not use).
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

std::vector<std::string> torchscript_gpt_command(const Plan& plan, const std::string& out_pt) {
  // The sizes come from bench_gpt_overrides() rather than a copy, so the two GPTs stay one.
  auto size = [](const std::string& key) {
    const std::string prefix = "model." + key + "=";
    for (const std::string& kv : bench_gpt_overrides()) {
      if (kv.rfind(prefix, 0) == 0) return kv.substr(prefix.size());
    }
    throw ConfigError("the bench's GPT sets no " + prefix + "; cannot write it as TorchScript");
  };
  return {plan.python,
          std::string(ZT_BENCH_SOURCE_DIR) + "/tests/torchscript/torchscript_models.py",
          "gpt",
          out_pt,
          size("n_layer"),
          size("n_head"),
          size("d_model"),
          size("seq_len"),
          size("vocab")};
}

}  // namespace zt::bench
