// zt_bench_comm's shared helpers: iteration counts, the nccl-tests bandwidth convention, and
// the rank -> parent row file.
#include "bench_comm.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "zt/error.h"

namespace zt::bench {

int collective_iters(int64_t bytes) {
  const int64_t per_block = 512 * kMiB / std::max<int64_t>(bytes, 1);
  return static_cast<int>(std::clamp<int64_t>(per_block, 2, 64));
}

int perftest_iters(int64_t bytes) {
  const int64_t per_run = 1024 * kMiB / std::max<int64_t>(bytes, 1);
  return static_cast<int>(std::clamp<int64_t>(per_run, 8, 200));
}

double bus_factor(const std::string& op, int world) {
  const double n = world;
  if (op == kAllReduce) return 2.0 * (n - 1) / n;
  if (op == kAllGather || op == kReduceScatter) return (n - 1) / n;
  return 1.0;
}

double algbw_gbps(const Row& row, double seconds) {
  return seconds > 0 ? static_cast<double>(row.bytes) / seconds / 1e9 : 0.0;
}

double busbw_gbps(const Row& row, double seconds) {
  return algbw_gbps(row, seconds) * bus_factor(row.op, row.world);
}

void write_rows_tsv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream out(path, std::ios::trunc);
  out.precision(17);
  for (const Row& r : rows) {
    out << r.backend << '\t' << r.op << '\t' << r.bytes << '\t' << r.world << '\t' << r.iters
        << '\t' << r.reps << '\t' << r.seconds << '\t' << r.min_seconds << '\t' << r.max_seconds
        << '\t' << r.note << '\n';
  }
  if (!out) throw IoError("cannot write rank results to " + path);
}

std::vector<Row> read_rows_tsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("rank results file " + path + " is missing");
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Row r;
    std::getline(fields, r.backend, '\t');
    std::getline(fields, r.op, '\t');
    fields >> r.bytes >> r.world >> r.iters >> r.reps >> r.seconds >> r.min_seconds >>
        r.max_seconds;
    fields.ignore(1);  // the tab before the note
    std::getline(fields, r.note);
    if (r.backend.empty() || r.bytes <= 0) {
      throw IoError("malformed line in " + path + ": '" + line + "'");
    }
    rows.push_back(r);
  }
  return rows;
}

std::string size_label(int64_t bytes) {
  char buf[32];
  if (bytes % kMiB == 0) {
    std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>(bytes / kMiB));
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  }
  return buf;
}

}  // namespace zt::bench
