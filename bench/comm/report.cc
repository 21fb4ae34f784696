// zt_bench_comm's report: table, targets and comm.json from the merged rows.
#include "report.h"
#include "common/bench_util.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <tuple>

#include "zt/error.h"

namespace zt::bench {

namespace {

const char* const kOps[] = {kAllGather, kReduceScatter, kAllReduce, kTagBw};
const char* const kBackends[] = {kCommUcx, kGloo, kUcxPerftest};

template <typename Names>
int rank_of(const Names& names, const std::string& name) {
  auto it = std::find(std::begin(names), std::end(names), name);
  return static_cast<int>(it - std::begin(names));
}

// Table order: size, then op, then backend (ours first, its baselines after).
std::vector<Row> sorted(std::vector<Row> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    auto key = [](const Row& r) {
      return std::make_tuple(r.bytes, rank_of(kOps, r.op), rank_of(kBackends, r.backend));
    };
    return key(a) < key(b);
  });
  return rows;
}

const Row* find(const std::vector<Row>& rows, const std::string& backend, const std::string& op,
                int64_t bytes) {
  for (const Row& r : rows) {
    if (r.backend == backend && r.op == op && r.bytes == bytes) return &r;
  }
  return nullptr;
}

// comm_ucx busbw over Gloo's, same op and size; NaN when either is missing.
double ucx_over_gloo(const std::vector<Row>& rows, const Row& ucx) {
  const Row* gloo = find(rows, kGloo, ucx.op, ucx.bytes);
  return gloo ? busbw_gbps(ucx) / busbw_gbps(*gloo) : NAN;
}

// comm_ucx all_gather busbw over ucx_perftest tag_bw at the same size; NaN when missing.
double ucx_over_perftest(const std::vector<Row>& rows, const Row& ucx) {
  if (ucx.op != kAllGather) return NAN;
  const Row* perf = find(rows, kUcxPerftest, kTagBw, ucx.bytes);
  return perf ? busbw_gbps(ucx) / busbw_gbps(*perf) : NAN;
}

std::string ratio_cell(double ratio, const char* unit) {
  if (std::isnan(ratio)) return "-";
  char buf[32];
  if (unit[0] == '%') {
    std::snprintf(buf, sizeof buf, "%.0f%%", ratio * 100);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fx", ratio);
  }
  return buf;
}

std::string row_json(const std::vector<Row>& rows, const Row& r) {
  std::string j = "{\"backend\": " + json_string(r.backend) + ", \"op\": " + json_string(r.op) +
                  ", \"bytes\": " + std::to_string(r.bytes) +
                  ", \"busbw_gbps\": " + json_number(busbw_gbps(r)) +
                  ", \"algbw_gbps\": " + json_number(algbw_gbps(r, r.seconds)) +
                  ", \"time_ms\": " + json_number(r.seconds * 1e3) +
                  ", \"busbw_min_gbps\": " + json_number(busbw_gbps(r, r.max_seconds)) +
                  ", \"busbw_max_gbps\": " + json_number(busbw_gbps(r, r.min_seconds)) +
                  ", \"world\": " + std::to_string(r.world) +
                  ", \"iters\": " + std::to_string(r.iters) +
                  ", \"reps\": " + std::to_string(r.reps);
  if (r.backend == kCommUcx) {
    j += ", \"busbw_over_gloo\": " + json_number(ucx_over_gloo(rows, r));
    if (r.op == kAllGather) {
      j += ", \"busbw_over_ucx_perftest\": " + json_number(ucx_over_perftest(rows, r));
    }
  }
  if (!r.note.empty()) j += ", \"note\": " + json_string(r.note);
  return j + "}";
}

std::string check_json(const TargetCheck& c) {
  return "{\"name\": " + json_string(c.name) + ", \"op\": " + json_string(c.op) +
         ", \"bytes\": " + std::to_string(c.bytes) + ", \"value\": " + json_number(c.value) +
         ", \"threshold\": " + json_number(c.threshold) +
         ", \"pass\": " + (c.pass ? "true" : "false") + "}";
}

}  // namespace

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows) {
  std::vector<TargetCheck> checks;
  for (const Row& r : sorted(rows)) {
    if (r.backend != kCommUcx || r.bytes < kTargetMinBytes) continue;
    double vs_gloo = ucx_over_gloo(rows, r);
    if (!std::isnan(vs_gloo)) {
      checks.push_back({"comm_ucx_over_gloo", r.op, r.bytes, vs_gloo, kMinUcxOverGloo,
                        vs_gloo >= kMinUcxOverGloo});
    }
    double vs_perf = ucx_over_perftest(rows, r);
    if (!std::isnan(vs_perf)) {
      checks.push_back({"all_gather_over_ucx_perftest", r.op, r.bytes, vs_perf,
                        kMinAllGatherOverPerftest, vs_perf >= kMinAllGatherOverPerftest});
    }
  }
  return checks;
}

void print_table(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "%-8s %-15s %-13s %6s %11s %12s %12s %9s %12s\n", "size", "op", "backend",
               "iters", "time (ms)", "algbw GB/s", "busbw GB/s", "vs gloo", "vs perftest");
  std::vector<std::string> notes;
  int64_t last_bytes = -1;
  for (const Row& r : sorted(rows)) {
    if (last_bytes >= 0 && r.bytes != last_bytes) std::fprintf(out, "\n");
    last_bytes = r.bytes;
    std::string op = r.op;
    if (!r.note.empty() && r.backend == kGloo) {
      op += "*";
      if (std::find(notes.begin(), notes.end(), r.note) == notes.end()) notes.push_back(r.note);
    }
    const bool ours = r.backend == kCommUcx;
    std::fprintf(out, "%-8s %-15s %-13s %6d %11.3f %12.2f %12.2f %9s %12s\n",
                 size_label(r.bytes).c_str(), op.c_str(), r.backend.c_str(), r.iters,
                 r.seconds * 1e3, algbw_gbps(r, r.seconds), busbw_gbps(r),
                 ours ? ratio_cell(ucx_over_gloo(rows, r), "x").c_str() : "",
                 ours ? ratio_cell(ucx_over_perftest(rows, r), "%").c_str() : "");
  }
  for (const auto& n : notes) std::fprintf(out, "* %s\n", n.c_str());
  std::fprintf(out, "times: median per op over the reps; GB/s = 1e9 bytes/s; busbw by the "
                    "nccl-tests convention; vs perftest: comm_ucx all_gather busbw / "
                    "ucx_perftest tag_bw\n");
}

void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks) {
  std::fprintf(out, "\ntargets (from %s up; reported, not asserted):\n",
               size_label(kTargetMinBytes).c_str());
  int passed = 0;
  for (const TargetCheck& c : checks) {
    passed += c.pass;
    const std::string at = "at " + size_label(c.bytes) + ":";
    if (c.name == "comm_ucx_over_gloo") {
      std::fprintf(out, "  %-4s comm_ucx %-14s busbw >= %.0fx gloo              %-11s %.1fx\n",
                   c.pass ? "PASS" : "MISS", c.op.c_str(), c.threshold, at.c_str(), c.value);
    } else {
      std::fprintf(out, "  %-4s comm_ucx %-14s busbw >= %.0f%% of ucx_perftest %-11s %.0f%%\n",
                   c.pass ? "PASS" : "MISS", c.op.c_str(), c.threshold * 100, at.c_str(),
                   c.value * 100);
    }
  }
  std::fprintf(out, "targets met: %d of %zu\n", passed, checks.size());
}

void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, double total_seconds) {
  ResultsFile out(path);

  out << "{\n  \"bench\": \"comm\",\n  " << blas_json() << ",\n  \"world\": " << kRanks
      << ",\n  \"total_seconds\": " << json_number(total_seconds) << ",\n  \"rows\": [";
  const std::vector<Row> ordered = sorted(rows);
  for (size_t i = 0; i < ordered.size(); ++i) {
    out << (i ? ",\n    " : "\n    ") << row_json(rows, ordered[i]);
  }
  bool all_pass = std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.pass; });
  out << "\n  ],\n  \"targets\": {\n    \"min_bytes\": " << kTargetMinBytes
      << ",\n    \"comm_ucx_over_gloo_busbw_min\": " << json_number(kMinUcxOverGloo)
      << ",\n    \"all_gather_over_ucx_perftest_min\": " << json_number(kMinAllGatherOverPerftest)
      << ",\n    \"all_pass\": " << (all_pass ? "true" : "false") << ",\n    \"checks\": [";
  for (size_t i = 0; i < checks.size(); ++i) {
    out << (i ? ",\n      " : "\n      ") << check_json(checks[i]);
  }
  out << "\n    ]\n  }\n}\n";
  out.commit();
}

}  // namespace zt::bench
