#include "scale_jobs.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/bench_util.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

// The number after `key` in `line`, or -1 when the line lacks it.
int64_t number_after(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return -1;
  return std::strtoll(line.c_str() + at + key.size(), nullptr, 10);
}

// Per-step medians of the steps that count (the first step also builds buffers and faults in
// pages, so it is left out when there are others).
struct StepSeries {
  std::vector<double> step_s, tokens_per_s, compute, read_wait, write_wait, comm_wait, optimizer;
  std::vector<double> read, written, collectives;
  void add(const nlohmann::json& j) {
    step_s.push_back(j.at("step_time_s").get<double>());
    tokens_per_s.push_back(j.at("tokens_per_s").get<double>());
    const nlohmann::json bytes = j.value("step_bytes", nlohmann::json::object());
    read.push_back(bytes.value("offload_read", 0.0));
    written.push_back(bytes.value("offload_written", 0.0));
    collectives.push_back(bytes.value("collectives", 0.0));
    if (!j.contains("times")) return;
    const nlohmann::json& t = j.at("times");
    compute.push_back(t.at("compute_s").get<double>());
    read_wait.push_back(t.at("read_wait_s").get<double>());
    write_wait.push_back(t.at("write_wait_s").get<double>());
    comm_wait.push_back(t.at("comm_wait_s").get<double>());
    optimizer.push_back(t.at("optimizer_s").get<double>());
  }
};

void read_memory(const nlohmann::json& memory, ScaleRow& row) {
  row.peak_rss.clear();
  row.model_state_bytes = row.disk_bytes = row.host_ram_bytes = 0;
  for (const nlohmann::json& r : memory) {
    auto field = [&](const char* name) { return r.value(name, int64_t{0}); };
    const int64_t files = field("offload_optimizer") + field("offload_param") +
                          field("offload_grads");
    row.model_state_bytes += field("params") + field("grads") + field("master") +
                             field("optimizer_states") + files;
    row.disk_bytes += files;
    row.peak_rss.push_back(field("peak_rss"));
    row.host_ram_bytes += field("peak_rss");
  }
  row.world = static_cast<int>(row.peak_rss.size());
  row.peak_rss_per_rank = *std::max_element(row.peak_rss.begin(), row.peak_rss.end());
}

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The summary's per-rank theory in bytes, from its header and rank 0's row: the row gives every
// byte column as "<MiB> MiB" after the rank, in the header's order. -1 when the line is no row.
int64_t theory_of_row(const std::vector<std::string>& header, const std::string& row_line) {
  const auto at = std::find(header.begin(), header.end(), "theory");
  const std::vector<std::string> row = words_of(row_line);
  const size_t column = static_cast<size_t>(at - header.begin()) - 1;  // after "rank"
  const size_t word = 1 + 2 * column;
  if (at == header.end() || row.empty() || row[0] != "0" || word + 1 >= row.size() ||
      row[word + 1] != "MiB") {
    return -1;
  }
  return static_cast<int64_t>(std::strtod(row[word].c_str(), nullptr) * 1024 * 1024);
}

}  // namespace

std::vector<std::string> scale_job_command(const ScaleJob& job, int steps,
                                           const ScalePaths& paths) {
  // Absolute paths into the source tree, so the bench runs from any folder.
  const std::string root = ZT_BENCH_SOURCE_DIR;
  std::vector<std::string> argv = {paths.trainer, "--config",
                                   root + "/configs/zero3_infinity_2b.toml"};
  auto set = [&](const std::string& kv) {
    argv.push_back("--set");
    argv.push_back(kv);
  };
  set("run.out_dir=" + paths.out_dir);
  set("plugin.offload_nvme.path=" + paths.nvme_path);
  set("run.steps=" + std::to_string(steps));
  for (const std::string& kv : job.overrides) set(kv);
  return argv;
}

void read_scale_metrics(const std::string& metrics_path, ScaleRow& row) {
  std::ifstream in(metrics_path);
  if (!in) throw IoError("zt_bench_scale: no metrics file " + metrics_path);
  StepSeries all, later;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("memory")) {
      if (j.is_discarded())
        throw IoError("zt_bench_scale: a line of " + metrics_path + " is not JSON");
      continue;
    }
    all.add(j);
    if (j.at("step").get<int64_t>() > 1) later.add(j);
    row.steps = j.at("step").get<int64_t>();
    row.loss = j.at("loss").get<double>();
    read_memory(j.at("memory"), row);
  }
  if (all.step_s.empty()) throw IoError("zt_bench_scale: " + metrics_path + " has no step");
  const StepSeries& s = later.step_s.empty() ? all : later;
  row.step_s = median(s.step_s);
  row.tokens_per_s = median(s.tokens_per_s);
  row.read_per_step = median(s.read);
  row.written_per_step = median(s.written);
  row.collectives_per_step = median(s.collectives);
  row.split.measured = !s.compute.empty();
  if (row.split.measured) {
    row.split = {median(s.compute),   median(s.read_wait), median(s.write_wait),
                 median(s.comm_wait), median(s.optimizer), true};
  }
}

void read_scale_log(const std::string& log_path, ScaleRow& row) {
  std::ifstream in(log_path);
  std::string line;
  std::vector<std::string> summary_header;
  while (std::getline(in, line)) {
    if (!summary_header.empty()) {
      const int64_t theory = theory_of_row(summary_header, line);
      if (theory >= 0) row.model_state_theory = theory * std::max(1, row.world);
      summary_header.clear();
    }
    const std::vector<std::string> words = words_of(line);
    if (!words.empty() && words[0] == "rank" &&
        std::find(words.begin(), words.end(), "theory") != words.end()) {
      summary_header = words;
    }
    const int64_t params = number_after(line, "model states per rank (");
    if (params > 0) row.params = params;
    const int64_t per_rank = number_after(line, "memory fit: host RAM per rank ");
    if (per_rank > 0) {
      row.rss_estimate_per_rank = per_rank;
      const int64_t local = number_after(line, ") x ");
      row.host_ram_estimate = per_rank * std::max<int64_t>(1, local);
    }
  }
  if (row.params <= 0 || row.rss_estimate_per_rank <= 0 || row.model_state_theory <= 0) {
    const char* missing = row.params <= 0                  ? "\"model states per rank\" summary"
                          : row.rss_estimate_per_rank <= 0 ? "\"memory fit:\" line"
                                                           : "summary's theory column";
    throw IoError("zt_bench_scale: " + log_path + " lacks the trainer's " + missing +
                  "; is the trainer older than the bench?");
  }
}

}  // namespace zt::bench
