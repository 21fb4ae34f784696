// zt_bench_nvme's report: the markdown table, the target (offload_nvme at least 90% of dd with
// O_DIRECT, for write and for read; printed PASS/MISS, never asserted) and bench-results/nvme.json.
// Thread safety: pure functions over rows, plus file output.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace zt::bench {

constexpr double kMinOfDdDirect = 0.9;

// One engine and direction over the interleaved rounds.
struct Row {
  std::string engine;  // "offload_nvme", "buffered", "dd_direct"
  std::string op;      // "write", "read"
  std::vector<double> seconds;
  int64_t bytes = 0;
  double gbps() const;  // median, 1e9 bytes/s
  double gbps_min() const;
  double gbps_max() const;
};

struct TargetCheck {
  std::string op;
  double value = 0;  // offload_nvme's median GB/s over dd_direct's
  bool pass = false;
};

// What the run was, for the header line and the JSON.
struct RunInfo {
  std::string dir;
  std::string file_system;
  int64_t bytes = 0;
  int reps = 0;
  int queue_depth = 0;
  std::map<std::string, std::string> engines;  // name -> describe()
  double total_seconds = 0;
};

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows);
void print_table(std::FILE* out, const std::vector<Row>& rows);
void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks);
void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, const RunInfo& info);

}  // namespace zt::bench
