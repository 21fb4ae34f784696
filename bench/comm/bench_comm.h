// zt_bench_comm's shared vocabulary: the plan (sizes, repetitions, iteration counts), one
// measured row, and the bandwidth convention of nccl-tests. The parent process plans and
// reports; the ranks (collectives.cc) and ucx_perftest (ucx_perftest.cc) produce rows.
// Thread safety: plain values and pure functions.
#pragma once

#include "common/bench_util.h"

#include <cstdint>
#include <string>
#include <vector>

#include "zt/bytes.h"  // kMiB

namespace zt::bench {

constexpr int kRanks = 2;

// Backends and ops as they appear in the table and in comm.json.
constexpr const char* kCommUcx = "comm_ucx";
constexpr const char* kGloo = "gloo";
constexpr const char* kUcxPerftest = "ucx_perftest";
constexpr const char* kAllGather = "all_gather";
constexpr const char* kReduceScatter = "reduce_scatter";
constexpr const char* kAllReduce = "all_reduce";
constexpr const char* kTagBw = "tag_bw";

struct Plan {
  std::vector<int64_t> sizes_bytes{1 * kMiB, 16 * kMiB, 64 * kMiB, 256 * kMiB};
  int reps = 7;  // medians are taken over these
  std::string json_path = "bench-results/comm.json";
};

// Collectives per timed block: about 512 MiB of payload and at least 2 ops per block, so small
// sizes are not dominated by timer and barrier noise and 256 MiB Gloo (~0.3 s per op) stays
// affordable on two cores.
int collective_iters(int64_t bytes);
// ucx_perftest messages per run: about 1 GiB, at least 8 (it is fast and starts a process).
int perftest_iters(int64_t bytes);

// One measured (backend, op, size). Times are per op; the median, min and max are over reps.
struct Row {
  std::string backend;
  std::string op;
  int64_t bytes = 0;  // the flat buffer: all_gather output, reduce_scatter input, all_reduce
  int world = kRanks;
  int iters = 0;
  int reps = 0;
  double seconds = 0;  // median time per op
  double min_seconds = 0;
  double max_seconds = 0;
  std::string note;  // why a row is not what its name says (Gloo has no reduce_scatter)
};

// nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n for all_reduce and
// algbw * (n-1)/n for all_gather and reduce_scatter, so every op is comparable with the
// link's bandwidth. Point-to-point (tag_bw) has busbw = algbw. GB/s are 1e9 bytes/s.
double bus_factor(const std::string& op, int world);
double algbw_gbps(const Row& row, double seconds);
double busbw_gbps(const Row& row, double seconds);
inline double busbw_gbps(const Row& row) { return busbw_gbps(row, row.seconds); }

// Rows travel from rank 0 to the parent as tab-separated lines in a file.
void write_rows_tsv(const std::string& path, const std::vector<Row>& rows);
std::vector<Row> read_rows_tsv(const std::string& path);

std::string size_label(int64_t bytes);  // "16 MiB"

}  // namespace zt::bench
