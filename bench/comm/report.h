// zt_bench_comm's report: the printed table, the targets (evaluated and printed, never
// asserted: a miss is data, not a failure) and bench-results/comm.json.
// Thread safety: pure functions over rows, plus file output.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "bench_comm.h"

namespace zt::bench {

// The targets, from kTargetMinBytes up: comm_ucx busbw >= 5x Gloo's for every op, and comm_ucx
// all_gather busbw >= 50% of ucx_perftest tag_bw at the same size.
constexpr int64_t kTargetMinBytes = 16 * kMiB;
constexpr double kMinUcxOverGloo = 5.0;
constexpr double kMinAllGatherOverPerftest = 0.5;

struct TargetCheck {
  std::string name;  // "comm_ucx_over_gloo" or "all_gather_over_ucx_perftest"
  std::string op;
  int64_t bytes = 0;
  double value = 0;  // the measured ratio
  double threshold = 0;
  bool pass = false;
};

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows);

void print_table(std::FILE* out, const std::vector<Row>& rows);
void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks);
// Creates the file's folder if missing. Throws IoError when it cannot write.
void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, double total_seconds);

}  // namespace zt::bench
