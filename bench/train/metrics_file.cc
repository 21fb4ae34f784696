// What a bench job left: its metrics.jsonl through the trainer's own reader (report/run_metrics.h;
// the DDP job writes the same step fields), the trainer's summary lines and the [model] sizes in
// its resolved config.
#include "metrics_file.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "zt/error.h"

namespace zt::bench {

namespace {

// Model-state bytes of one rank's memory entry, by where they live.
RankStates states_of(const std::map<std::string, int64_t>& rank, const std::string& where) {
  auto field = [&](const char* name) {
    const auto it = rank.find(name);
    if (it == rank.end()) {
      throw IoError(where + ": no \"" + name +
                    "\" in a memory entry; is the trainer newer than "
                    "the bench?");
    }
    return it->second;
  };
  RankStates r;
  for (const char* name : {"params", "grads", "master", "optimizer_states"})
    r.compute += field(name);
  r.offload_optimizer = field("offload_optimizer");
  r.offload_param = field("offload_param");
  r.offload_staging = field("offload_staging");
  return r;
}

}  // namespace

const trainer::StepRecord& read_step_metrics(const std::string& path, int warmup, JobResult& out,
                                             trainer::RunMetrics& run) {
  run = trainer::read_run_metrics(path);
  const trainer::StepRecord* last = nullptr;
  for (const trainer::StepRecord& s : run.steps) {
    out.losses.push_back(s.loss);
    if (s.step <= warmup) continue;
    out.step_time_s.push_back(s.step_time_s);
    out.tokens_per_s.push_back(s.tokens_per_s);
    if (s.mfu > 0) {
      out.flops_per_step = s.flops;
      out.flops_per_s_per_rank.push_back(s.flops_per_s_per_rank);
      out.peak_flops_per_rank.push_back(s.flops_per_s_per_rank / s.mfu);
    }
    last = &s;
  }
  if (!last) {
    throw IoError(path + ": no step after the " + std::to_string(warmup) +
                  " warm-up steps; raise --steps or lower --warmup");
  }
  return *last;
}

void read_metrics(const std::string& path, int warmup, JobResult& out) {
  trainer::RunMetrics run;
  const trainer::StepRecord& last = read_step_metrics(path, warmup, out, run);
  const std::string where = path + " (last step)";
  if (last.memory.empty()) throw IoError(where + ": no \"memory\" array");
  out.world = static_cast<int>(last.memory.size());
  out.model_state_bytes = 0;
  out.busiest = states_of(last.memory.front(), where);
  for (const auto& rank : last.memory) {
    const RankStates r = states_of(rank, where);
    out.model_state_bytes = std::max(out.model_state_bytes, r.compute);
    if (r.total() > out.busiest.total()) out.busiest = r;
  }
}

void read_trainer_log(const std::string& path, JobResult& out) {
  std::ifstream in(path);
  std::string line;
  bool found_psi = false, found_compute = false;
  while (std::getline(in, line)) {
    const std::string offload_key = "  offload: ";
    if (line.rfind(offload_key, 0) == 0) out.offload_note = line.substr(offload_key.size());
    const std::string psi_key = "model states per rank (";
    const size_t p = line.find(psi_key);
    if (p != std::string::npos) {
      out.parameters = std::atoll(line.c_str() + p + psi_key.size());
      found_psi = out.parameters > 0;
    }
    const std::string compute_key = ", compute ";
    const size_t c = line.find(compute_key);
    if (c != std::string::npos) {
      std::istringstream dtype(line.substr(c + compute_key.size()));
      std::string name;
      dtype >> name;
      out.low_precision = name != "fp32";
      found_compute = !name.empty();
    }
  }
  if (!found_psi || !found_compute) {
    throw IoError(path + ": the trainer's output lacks its " +
                  (found_psi ? "\"compute <dtype>\" line" : "\"model states per rank\" summary") +
                  "; is the trainer newer than the bench?");
  }
}

GptSizes read_gpt_sizes(const std::string& path) {
  std::ifstream in(path);
  std::string line, section;
  std::map<std::string, std::string> model;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '[') section = line;
    if (section != "[model]") continue;
    std::istringstream words(line);
    std::string key, equals, value;
    if (words >> key >> equals >> value && equals == "=") model[key] = value;
  }
  auto size = [&](const char* key) {
    const auto it = model.find(key);
    if (it == model.end()) {
      throw IoError(path + ": the trainer's resolved config has no model." + key +
                    "; is the trainer newer than the bench?");
    }
    return it->second;
  };
  return {size("n_layer"), size("n_head"), size("d_model"), size("seq_len"), size("vocab")};
}

}  // namespace zt::bench
