// zt_bench_train's report: aggregation, table, targets and train.json.
#include "common/bench_util.h"
#include "report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "trainer/memory_theory.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const Row* find(const std::vector<Row>& rows, int stage, const std::string& strategy) {
  for (const Row& r : rows) {
    if (r.stage == stage && r.strategy == strategy) return &r;
  }
  return nullptr;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

std::string row_json(const Row& r) {
  return "{\"stage\": " + std::to_string(r.stage) + ", \"strategy\": \"" + r.strategy +
         "\", \"offload\": \"none\", \"world\": " + std::to_string(r.world) +
         ", \"tokens_per_s\": " + json_number(r.tokens_per_s) +
         ", \"model_state_bytes_per_rank\": " + std::to_string(r.model_state_bytes) +
         ", \"theory_bytes_per_rank\": " + std::to_string(r.theory_bytes) +
         ", \"step_time_s\": " + json_number(r.step_time_s) +
         ", \"ratio_to_stage0\": " + json_number(r.ratio_to_stage0) +
         ", \"measured_over_theory\": " + json_number(r.measured_over_theory()) +
         ", \"parameters\": " + std::to_string(r.parameters) +
         ", \"samples\": " + std::to_string(r.samples) + "}";
}

std::string check_json(const TargetCheck& c) {
  return "{\"name\": \"" + c.name + "\", \"strategy\": \"" + c.strategy +
         "\", \"value\": " + json_number(c.value) + ", \"threshold\": " + json_number(c.threshold) +
         ", \"pass\": " + (c.pass ? "true" : "false") + "}";
}

}  // namespace

std::vector<Row> aggregate(const std::vector<std::pair<JobSpec, JobResult>>& jobs) {
  std::vector<Row> rows;
  for (const Strategy& strategy : kStrategies) {
    for (int stage : kStages) {
      Row row;
      row.stage = stage;
      row.strategy = strategy.name;
      std::vector<double> times, tokens;
      bool low = false;
      for (const auto& [spec, result] : jobs) {
        if (spec.stage != stage || spec.strategy.name != row.strategy) continue;
        times.insert(times.end(), result.step_time_s.begin(), result.step_time_s.end());
        tokens.insert(tokens.end(), result.tokens_per_s.begin(), result.tokens_per_s.end());
        row.model_state_bytes = std::max(row.model_state_bytes, result.model_state_bytes);
        row.world = result.world;
        row.parameters = result.parameters;
        low = result.low_precision;
      }
      if (times.empty()) continue;
      row.samples = static_cast<int>(times.size());
      row.step_time_s = median(times);
      row.tokens_per_s = median(tokens);
      row.theory_bytes = trainer::theory_model_state_bytes(stage, row.parameters, row.world, low);
      rows.push_back(row);
    }
  }
  for (Row& r : rows) {
    const Row* base = find(rows, 0, r.strategy);
    r.ratio_to_stage0 = base ? r.step_time_s / base->step_time_s : NAN;
  }
  return rows;
}

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows) {
  std::vector<TargetCheck> checks;
  for (const Strategy& strategy : kStrategies) {
    const Row* r = find(rows, 3, strategy.name);
    if (!r) continue;
    const double off = r->measured_over_theory();
    checks.push_back({"stage3_bytes_vs_theory", strategy.name, off, kMaxBytesOffTheory,
                      std::abs(off - 1) <= kMaxBytesOffTheory});
    checks.push_back({"stage3_step_time_vs_stage0", strategy.name, r->ratio_to_stage0,
                      kMaxStage3OverStage0, r->ratio_to_stage0 <= kMaxStage3OverStage0});
  }
  return checks;
}

void print_table(std::FILE* out, const std::vector<Row>& rows, const Plan& plan) {
  std::fprintf(out, "%-5s %-8s %10s %10s %10s %14s %12s %10s\n", "stage", "strategy", "tokens/s",
               "step (s)", "vs stage0", "states MiB/rk", "theory MiB", "meas/theo");
  std::string last;
  for (const Row& r : rows) {
    if (!last.empty() && r.strategy != last) std::fprintf(out, "\n");
    last = r.strategy;
    std::fprintf(out, "%-5d %-8s %10.0f %10.3f %9.2fx %14.1f %12.1f %10.3f\n", r.stage,
                 r.strategy.c_str(), r.tokens_per_s, r.step_time_s, r.ratio_to_stage0,
                 mib(r.model_state_bytes), mib(r.theory_bytes), r.measured_over_theory());
  }
  const int samples = rows.empty() ? 0 : rows.front().samples;
  std::fprintf(out,
               "medians over %d steps per row (%d repetition(s) x %d steps, the first %d of each "
               "left out); states: params + grads + master + optimizer states of the busiest rank "
               "at the last step; vs stage0: step time over stage 0's, same strategy\n",
               samples, plan.reps, plan.steps, plan.warmup);
}

void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks) {
  std::fprintf(out, "\ntargets (reported, not asserted):\n");
  int passed = 0;
  for (const TargetCheck& c : checks) {
    passed += c.pass;
    if (c.name == "stage3_bytes_vs_theory") {
      std::fprintf(out, "  %-4s %-6s stage-3 model-state bytes per rank within %.0f%% of theory: "
                        "%.3f\n", c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold * 100,
                   c.value);
    } else {
      std::fprintf(out, "  %-4s %-6s stage-3 step time <= %.1fx stage 0's:                     "
                        "%.2fx\n", c.pass ? "PASS" : "MISS", c.strategy.c_str(), c.threshold,
                   c.value);
    }
  }
  std::fprintf(out, "targets met: %d of %zu\n", passed, checks.size());
}

void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, const Plan& plan, double total_seconds) {
  std::ofstream out = open_results(path);

  out << "{\n  \"bench\": \"train\",\n  \"steps\": " << plan.steps << ",\n  \"warmup\": "
      << plan.warmup << ",\n  \"reps\": " << plan.reps << ",\n  \"total_seconds\": "
      << json_number(total_seconds) << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << row_json(rows[i]);
  const bool all_pass = std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.pass; });
  out << "\n  ],\n  \"targets\": {\n    \"stage3_bytes_max_off_theory\": "
      << json_number(kMaxBytesOffTheory) << ",\n    \"stage3_step_time_over_stage0_max\": "
      << json_number(kMaxStage3OverStage0) << ",\n    \"all_pass\": "
      << (all_pass ? "true" : "false") << ",\n    \"checks\": [";
  for (size_t i = 0; i < checks.size(); ++i) {
    out << (i ? ",\n      " : "\n      ") << check_json(checks[i]);
  }
  out << "\n    ]\n  }\n}\n";
  if (!out) throw IoError("writing " + path + " failed");
}

}  // namespace zt::bench
