#include "report.h"

#include <algorithm>
#include <cmath>

#include "common/bench_util.h"
#include "engines.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

std::vector<double> rates(const Row& r) {
  std::vector<double> v;
  for (double s : r.seconds) v.push_back(r.bytes / s / 1e9);
  return v;
}

const Row* find(const std::vector<Row>& rows, const std::string& engine, const std::string& op) {
  for (const Row& r : rows) {
    if (r.engine == engine && r.op == op) return &r;
  }
  return nullptr;
}

std::string row_json(const Row& r) {
  std::string seconds;
  for (double s : r.seconds) seconds += (seconds.empty() ? "" : ", ") + json_number(s);
  return "{\"engine\": " + json_string(r.engine) + ", \"op\": " + json_string(r.op) +
         ", \"gbps\": " + json_number(r.gbps()) + ", \"gbps_min\": " + json_number(r.gbps_min()) +
         ", \"gbps_max\": " + json_number(r.gbps_max()) + ", \"seconds\": [" + seconds + "]}";
}

}  // namespace

// The median of the rates, not the rate of the median time: equal for odd counts.
double Row::gbps() const { return median(rates(*this)); }
double Row::gbps_min() const {
  auto v = rates(*this);
  return v.empty() ? NAN : *std::min_element(v.begin(), v.end());
}
double Row::gbps_max() const {
  auto v = rates(*this);
  return v.empty() ? NAN : *std::max_element(v.begin(), v.end());
}

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows) {
  std::vector<TargetCheck> checks;
  for (const char* op : {"write", "read"}) {
    const Row* ours = find(rows, kOffloadNvme, op);
    const Row* dd = find(rows, kDdDirect, op);
    if (!ours || !dd) continue;
    const double v = ours->gbps() / dd->gbps();
    checks.push_back({op, v, v >= kMinOfDdDirect});
  }
  return checks;
}

void print_table(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "| engine | op | GB/s (median) | min | max | of dd_direct |\n");
  std::fprintf(out, "| --- | --- | ---: | ---: | ---: | ---: |\n");
  for (const char* op : {"write", "read"}) {
    const Row* dd = find(rows, kDdDirect, op);
    for (const Row& r : rows) {
      if (r.op != op) continue;
      char of_dd[16] = "";
      if (dd) std::snprintf(of_dd, sizeof of_dd, "%.0f%%", 100 * r.gbps() / dd->gbps());
      std::fprintf(out, "| %s | %s | %.2f | %.2f | %.2f | %s |\n", r.engine.c_str(), op, r.gbps(),
                   r.gbps_min(), r.gbps_max(), of_dd);
    }
  }
  const size_t samples = rows.empty() ? 0 : rows.front().seconds.size();
  std::fprintf(out,
               "\nmedians over %zu interleaved rounds (after one warm-up round); GB/s = 1e9 "
               "bytes/s\n",
               samples);
}

void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks) {
  std::fprintf(out, "\ntargets (reported, not asserted):\n");
  int passed = 0;
  for (const TargetCheck& c : checks) {
    passed += c.pass;
    std::fprintf(out, "  %s offload_nvme %-5s >= %.0f%% of dd_direct: %.0f%%\n",
                 c.pass ? "PASS" : "MISS", c.op.c_str(), 100 * kMinOfDdDirect, 100 * c.value);
  }
  std::fprintf(out, "targets met: %d of %zu\n", passed, checks.size());
}

void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, const RunInfo& info) {
  ResultsFile out(path);
  out << "{\n  \"bench\": \"nvme\",\n  " << blas_json() << ",\n  \"dir\": " << json_string(info.dir)
      << ",\n  \"file_system\": " << json_string(info.file_system)
      << ",\n  \"bytes\": " << info.bytes << ",\n  \"reps\": " << info.reps
      << ",\n  \"queue_depth\": " << info.queue_depth << ",\n  \"block_bytes\": 1048576"
      << ",\n  \"total_seconds\": " << json_number(info.total_seconds) << ",\n  \"engines\": {";
  bool first = true;
  for (const auto& [name, text] : info.engines) {
    out << (first ? "\n    " : ",\n    ") << json_string(name) << ": " << json_string(text);
    first = false;
  }
  out << "\n  },\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << row_json(rows[i]);
  const bool all_pass = !checks.empty() &&
                        std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.pass; });
  out << "\n  ],\n  \"targets\": {\n    \"min_of_dd_direct\": " << json_number(kMinOfDdDirect)
      << ",\n    \"all_pass\": " << (all_pass ? "true" : "false") << ",\n    \"checks\": [";
  for (size_t i = 0; i < checks.size(); ++i) {
    out << (i ? ",\n      " : "\n      ")
        << "{\"name\": " << json_string("offload_nvme_" + checks[i].op + "_of_dd_direct")
        << ", \"value\": " << json_number(checks[i].value)
        << ", \"threshold\": " << json_number(kMinOfDdDirect)
        << ", \"pass\": " << (checks[i].pass ? "true" : "false") << "}";
  }
  out << "\n    ]\n  }\n}\n";
  out.commit();
}

}  // namespace zt::bench
