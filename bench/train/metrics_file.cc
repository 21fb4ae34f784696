// A purpose-built reader of metrics.jsonl (the trainer's and the DDP job's), of the trainer's
// summary lines and of the [model] sizes in its resolved config.
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

// The number after "key": in text[from, to). The trainer writes keys without spaces around the
// colon and numbers that strtod reads.
bool number_after(const std::string& text, const std::string& key, size_t from, size_t to,
                  double& value) {
  const std::string quoted = "\"" + key + "\":";
  const size_t at = text.find(quoted, from);
  if (at == std::string::npos || at >= to) return false;
  const char* begin = text.c_str() + at + quoted.size();
  char* end = nullptr;
  value = std::strtod(begin, &end);
  return end != begin;
}

double required(const std::string& text, const std::string& key, size_t from, size_t to,
                const std::string& where) {
  double v = 0;
  if (!number_after(text, key, from, to, v)) {
    throw IoError(where + ": no number for \"" + key + "\"; is the trainer newer than the bench?");
  }
  return v;
}

// Model-state bytes of every rank in one step's "memory" array: each entry is a flat object
// {"rank":..,"params":..,...}, so entries end at '}' and the array at the first ']'.
std::vector<RankStates> rank_states(const std::string& line, const std::string& where) {
  const std::string key = "\"memory\":[";
  const size_t begin = line.find(key);
  const size_t end = begin == std::string::npos ? begin : line.find(']', begin);
  if (end == std::string::npos) throw IoError(where + ": no \"memory\" array");
  std::vector<RankStates> ranks;
  for (size_t at = begin + key.size(); at < end;) {
    const size_t close = line.find('}', at);
    if (close == std::string::npos || close > end) break;
    auto field = [&](const char* name) {
      return static_cast<int64_t>(required(line, name, at, close, where));
    };
    RankStates r;
    for (const char* name : {"params", "grads", "master", "optimizer_states"})
      r.compute += field(name);
    r.offload_optimizer = field("offload_optimizer");
    r.offload_param = field("offload_param");
    r.offload_staging = field("offload_staging");
    ranks.push_back(r);
    at = close + 1;
  }
  if (ranks.empty()) throw IoError(where + ": empty \"memory\" array");
  return ranks;
}

}  // namespace

std::string read_step_metrics(const std::string& path, int warmup, JobResult& out) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read " + path + ": the job wrote no metrics");
  std::string line, last;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.rfind("{\"step\":", 0) != 0) continue;  // an event (resume, checkpoint), not a step
    const std::string where = path + ":" + std::to_string(lineno);
    out.losses.push_back(required(line, "loss", 0, line.size(), where));
    if (required(line, "step", 0, line.size(), where) <= warmup) continue;
    out.step_time_s.push_back(required(line, "step_time_s", 0, line.size(), where));
    out.tokens_per_s.push_back(required(line, "tokens_per_s", 0, line.size(), where));
    last = line;
  }
  if (last.empty()) {
    throw IoError(path + ": no step after the " + std::to_string(warmup) +
                  " warm-up steps; raise --steps or lower --warmup");
  }
  return last;
}

void read_metrics(const std::string& path, int warmup, JobResult& out) {
  const std::string last = read_step_metrics(path, warmup, out);
  const std::vector<RankStates> ranks = rank_states(last, path + " (last step)");
  out.world = static_cast<int>(ranks.size());
  out.model_state_bytes = 0;
  out.busiest = ranks.front();
  for (const RankStates& r : ranks) {
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
