#include "ckpt_jobs.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zt/error.h"
#include "zt/host/checkpoint.h"

namespace zt::bench {

const char* job_name(JobKind kind) {
  switch (kind) {
    case JobKind::kSync: return "sync save";
    case JobKind::kAsync: return "async save";
    case JobKind::kResume: return "resume";
    case JobKind::kNoCheckpoint: return "no checkpoint";
  }
  return "?";
}

std::vector<std::string> ckpt_job_command(const CkptConfig& config, JobKind kind, int steps,
                                          const JobPaths& paths) {
  // Absolute paths into the source tree, so the bench runs from any folder.
  const std::string root = ZT_BENCH_SOURCE_DIR;
  std::vector<std::string> argv = {paths.trainer, "--config", root + "/configs/zero3.toml"};
  auto set = [&](const std::string& kv) {
    argv.push_back("--set");
    argv.push_back(kv);
  };
  for (const std::string& kv : config.model) set(kv);
  set("launch.nproc=" + std::to_string(config.world));
  set("zero.stage=" + std::to_string(config.stage));
  set("run.out_dir=" + paths.out_dir);
  set("data.path=" + root + "/README.md");
  set("run.log_every=1");
  if (!config.offload_optimizer.empty()) {
    set("plugins.offload_optimizer=" + config.offload_optimizer);
    // 1 MiB tiles per fp32 array, as configs/zero3_offload.toml streams them.
    set("zero.sub_group_size=262144");
  }
  if (!config.offload_param.empty()) set("plugins.offload_param=" + config.offload_param);
  set("plugin.offload_nvme.path=" + paths.nvme_path);
  if (kind == JobKind::kResume) {
    argv.push_back("--resume");
    argv.push_back("auto");
    set("checkpoint.every_steps=0");
    set("run.steps=" + std::to_string(steps + 1));
    return argv;
  }
  set("run.steps=" + std::to_string(steps));
  set(std::string("checkpoint.every_steps=") + (kind == JobKind::kNoCheckpoint ? "0" : "1"));
  set(std::string("checkpoint.async=") + (kind == JobKind::kAsync ? "true" : "false"));
  return argv;
}

JobMetrics read_job_metrics(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  if (!in) throw IoError("zt_bench_ckpt: no metrics file " + metrics_path);
  JobMetrics m;
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      throw IoError("zt_bench_ckpt: a line of " + metrics_path + " is not JSON");
    const std::string event = j.value("event", "");
    if (event == "checkpoint") {
      m.stall_s.push_back(j.at("stall_s").get<double>());
      m.write_s.push_back(j.at("write_s").get<double>());
      m.checkpoint_bytes = j.at("bytes").get<int64_t>();
      m.last_folder = j.at("folder").get<std::string>();
    } else if (event == "resume") {
      m.load_s = j.at("load_s").get<double>();
    } else if (j.contains("memory")) {
      m.rank0_peak_rss = j.at("memory").at(0).at("peak_rss").get<int64_t>();
    }
  }
  return m;
}

int64_t folder_bytes(const std::string& folder) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder)) {
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

int64_t checkpoint_parameters(const std::string& folder) {
  const CheckpointReader reader(folder);
  int64_t n = 0;
  for (const CheckpointTensor& t : reader.tensors()) n += t.numel();
  return n;
}

}  // namespace zt::bench
