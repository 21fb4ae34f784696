// zt_bench_adam's report: the printed table, the targets (evaluated and printed, never
// asserted: a miss is data, not a failure) and bench-results/adam.json.
// Thread safety: pure functions over rows, plus file output.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_adam.h"

namespace zt::bench {

// The targets, at kTargetThreads threads and kTargetParams parameters, on the first ISA asked
// for: zt's fp32 step at least 90% of the same ISA's roofline pass's rate and 8x
// torch::optim::AdamW's, and the bf16 copy-out step at most 1.15x the fp32 step's time.
constexpr int kTargetThreads = 2;
constexpr int64_t kTargetParams = 50'000'000;
constexpr double kMinOfRoofline = 0.9;
constexpr double kMinOverTorch = 8.0;
constexpr double kMaxCopyOverFp32 = 1.15;

struct TargetCheck {
  std::string name;  // "zt_over_roofline", "zt_over_torch_adamw", "bf16_copy_time_over_fp32"
  double value = 0;  // the measured ratio
  double threshold = 0;
  bool pass = false;
};

// The checks over the rows of `isa` (and AdamW's).
std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows, const std::string& isa);

// "model name" of /proc/cpuinfo, or "unknown".
std::string cpu_model();
// The L2 cache of one core in bytes, 0 when the C library cannot tell.
int64_t l2_cache_bytes();
// "1024 KiB", or "unknown".
std::string l2_cache_label();
// "50M" for whole millions, else the count: "131072".
std::string params_label(int64_t params);

void print_table(std::FILE* out, const std::vector<Row>& rows, const Plan& plan);
void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks, const std::string& isa);
// Creates the file's folder if missing. Throws IoError when it cannot write.
void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, const Plan& plan, double total_seconds);

}  // namespace zt::bench
