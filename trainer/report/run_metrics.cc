#include "report/run_metrics.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zt/error.h"

namespace zt::trainer {

namespace {

StepRecord step_of(const nlohmann::json& j) {
  StepRecord s;
  s.step = j.at("step").get<int64_t>();
  s.loss = j.at("loss").get<double>();
  s.grad_norm = j.value("grad_norm", 0.0);
  s.step_time_s = j.at("step_time_s").get<double>();
  s.tokens_per_s = j.value("tokens_per_s", 0.0);
  s.flops = j.value("flops", 0.0);
  s.flops_per_s_per_rank = j.value("flops_per_s_per_rank", 0.0);
  s.mfu = j.value("mfu", 0.0);
  s.skipped = j.value("skipped", false);
  s.arm = j.value("arm", std::string());
  for (const nlohmann::json& rank : j.value("memory", nlohmann::json::array())) {
    std::map<std::string, int64_t> fields;
    for (const auto& [name, value] : rank.items()) {
      if (name != "rank" && value.is_number_integer()) fields[name] = value.get<int64_t>();
    }
    s.memory.push_back(std::move(fields));
  }
  const nlohmann::json comm = j.value("comm", nlohmann::json::object());
  for (const auto& [op, v] : comm.items()) {
    s.comm[op] = {v.value("calls", int64_t{0}), v.value("bytes", int64_t{0})};
    s.comm_sent[op] = v.value("wire_bytes", int64_t{0});
  }
  if (j.contains("offload_io")) {
    s.io_bytes_read = j["offload_io"].value("bytes_read", int64_t{0});
    s.io_bytes_written = j["offload_io"].value("bytes_written", int64_t{0});
  }
  return s;
}

}  // namespace

const std::vector<std::string>& memory_categories() {
  static const std::vector<std::string> kCategories = {"params",
                                                       "grads",
                                                       "master",
                                                       "optimizer_states",
                                                       "offload_param",
                                                       "offload_grads",
                                                       "offload_optimizer",
                                                       "offload_staging",
                                                       "gathered_peak"};
  return kCategories;
}

RunMetrics read_run_metrics(const std::string& run_dir) {
  RunMetrics run;
  run.path = std::filesystem::is_directory(run_dir) ? run_dir + "/metrics.jsonl" : run_dir;
  std::ifstream in(run.path);
  if (!in) {
    throw ConfigError("no metrics file " + run.path +
                      "; give the run.out_dir of a run the trainer wrote (it holds metrics.jsonl)");
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      throw ConfigError(run.path + ":" + std::to_string(number) +
                        ": not a JSON object; is this a zt metrics file?");
    }
    if (j.value("event", std::string()) == "ab_arms") {
      for (const nlohmann::json& arm : j.value("arms", nlohmann::json::array()))
        run.arm_overrides[arm.value("name", std::string())] = arm.value("overrides",
                                                                        std::vector<std::string>());
    }
    if (j.value("event", std::string()) == "ab_switch") {
      run.switches.push_back(
          {j.value("step", int64_t{0}), j.value("to", std::string()), j.value("seconds", 0.0)});
    }
    if (j.contains("event") || !j.contains("step_time_s")) continue;
    try {
      run.steps.push_back(step_of(j));
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(run.path + ":" + std::to_string(number) + ": " + e.what());
    }
  }
  if (run.steps.empty()) {
    throw ConfigError(run.path + " holds no training step; did the run fail before its first?");
  }
  return run;
}

}  // namespace zt::trainer
