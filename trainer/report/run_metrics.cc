#include "report/run_metrics.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "zt/error.h"
#include "zt/host/json_numbers.h"

namespace zt::trainer {

namespace {

// An integer field of a metrics line (`fallback` when absent). A float or an integer out of
// range is refused, naming the line: converting it is undefined behaviour in the JSON library.
int64_t int_field(const nlohmann::json& j, const char* key, int64_t fallback,
                  const std::string& where) {
  if (!j.is_object() || !j.contains(key)) return fallback;
  if (const std::optional<int64_t> v = json_integer<int64_t>(j.at(key))) return *v;
  throw ConfigError(where + ": \"" + key + "\" is " + j.at(key).dump() +
                    ", not an integer; is this a zt metrics file?");
}

// A real field (`fallback` when absent); null, the writer's non-finite value, is NaN.
double real_field(const nlohmann::json& j, const char* key, double fallback,
                  const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (const std::optional<double> v = json_real(j.at(key))) return *v;
  throw ConfigError(where + ": \"" + key + "\" is " + j.at(key).dump() +
                    ", not a number; is this a zt metrics file?");
}

StepRecord step_of(const nlohmann::json& j, const std::string& where) {
  StepRecord s;
  for (const char* key : {"step", "loss", "step_time_s"}) {
    if (!j.contains(key)) throw ConfigError(where + ": a step line without \"" + key + "\"");
  }
  s.step = int_field(j, "step", 0, where);
  s.loss = real_field(j, "loss", 0, where);
  s.grad_norm = real_field(j, "grad_norm", 0, where);
  s.step_time_s = real_field(j, "step_time_s", 0, where);
  s.tokens_per_s = real_field(j, "tokens_per_s", 0, where);
  s.flops = real_field(j, "flops", 0, where);
  s.flops_per_s_per_rank = real_field(j, "flops_per_s_per_rank", 0, where);
  s.mfu = real_field(j, "mfu", 0, where);
  s.skipped = j.value("skipped", false);
  s.arm = j.value("arm", std::string());
  for (const nlohmann::json& rank : j.value("memory", nlohmann::json::array())) {
    std::map<std::string, int64_t> fields;
    for (const auto& [name, value] : rank.items()) {
      if (name == "rank") continue;
      if (const std::optional<int64_t> v = json_integer<int64_t>(value)) fields[name] = *v;
    }
    s.memory.push_back(std::move(fields));
  }
  const nlohmann::json comm = j.value("comm", nlohmann::json::object());
  for (const auto& [op, v] : comm.items()) {
    s.comm[op] = {int_field(v, "calls", 0, where), int_field(v, "bytes", 0, where)};
    s.comm_sent[op] = int_field(v, "wire_bytes", 0, where);
  }
  if (j.contains("offload_io")) {
    s.io_bytes_read = int_field(j["offload_io"], "bytes_read", 0, where);
    s.io_bytes_written = int_field(j["offload_io"], "bytes_written", 0, where);
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
  std::error_code ec;  // a folder it may not read (EACCES): the open below names it
  run.path = std::filesystem::is_directory(run_dir, ec) ? run_dir + "/metrics.jsonl" : run_dir;
  std::ifstream in(run.path);
  if (!in) {
    throw ConfigError("no metrics file " + run.path +
                      "; give the run.out_dir of a run the trainer wrote (it holds metrics.jsonl)");
  }
  std::string line;
  bool resumed = false;  // a resume line came since the last step
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    // The last line of a run killed while writing it, cut short (no newline after it).
    if (j.is_discarded() && in.eof()) break;
    if (j.is_discarded() || !j.is_object()) {
      throw ConfigError(run.path + ":" + std::to_string(number) +
                        ": not a JSON object; is this a zt metrics file?");
    }
    // Every field of a line may hold any JSON type: a wrong one is the file's fault, said with
    // its line (nlohmann's type errors escaped as crashes before tests/fuzz's metrics target).
    const std::string where = run.path + ":" + std::to_string(number);
    try {
      if (j.value("event", std::string()) == "ab_arms") {
        for (const nlohmann::json& arm : j.value("arms", nlohmann::json::array()))
          run.arm_overrides[arm.value("name", std::string())] = arm.value(
              "overrides", std::vector<std::string>());
      }
      if (j.value("event", std::string()) == "ab_switch") {
        run.switches.push_back({int_field(j, "step", 0, where), j.value("to", std::string()),
                                j.value("seconds", 0.0)});
      }
      if (j.value("event", std::string()) == "resume") resumed = true;
      if (j.contains("event") || !j.contains("step_time_s")) continue;
      run.steps.push_back(step_of(j, where));
      run.steps.back().resumed = resumed;
      resumed = false;
    } catch (const nlohmann::json::exception& e) {
      throw ConfigError(where + ": " + e.what());
    }
  }
  if (run.steps.empty()) {
    throw ConfigError(run.path + " holds no training step; did the run fail before its first?");
  }
  return run;
}

}  // namespace zt::trainer
