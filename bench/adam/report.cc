// zt_bench_adam's report: table, targets and adam.json from the rows.
#include "report.h"
#include "common/bench_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "zt/error.h"

namespace zt::bench {

namespace {

const Row* find(const std::vector<Row>& rows, const std::string& impl, int64_t params,
                int threads) {
  for (const Row& r : rows) {
    if (r.impl == impl && r.params == params && r.threads == threads) return &r;
  }
  return nullptr;
}

std::string row_json(const Row& r) {
  return "{\"impl\": " + json_string(r.impl) + ", \"params\": " + std::to_string(r.params) +
         ", \"threads\": " + std::to_string(r.threads) +
         ", \"mparams_per_s\": " + json_number(r.mparams_per_s()) +
         ", \"gbps\": " + json_number(r.gbps()) + ", \"step_ms\": " + json_number(r.step_s * 1e3) +
         ", \"samples\": " + std::to_string(r.samples) + "}";
}

std::string check_json(const TargetCheck& c) {
  return "{\"name\": " + json_string(c.name) + ", \"value\": " + json_number(c.value) +
         ", \"threshold\": " + json_number(c.threshold) +
         ", \"pass\": " + (c.pass ? "true" : "false") + "}";
}

}  // namespace

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows) {
  const Row* zt = find(rows, kZt, kTargetParams, kTargetThreads);
  const Row* copy = find(rows, kZtBf16Copy, kTargetParams, kTargetThreads);
  const Row* torch = find(rows, kTorchAdamW, kTargetParams, kTargetThreads);
  const Row* roof = find(rows, kRoofline, kTargetParams, kTargetThreads);
  std::vector<TargetCheck> checks;
  if (zt && roof) {
    const double v = roof->step_s / zt->step_s;
    checks.push_back({"zt_over_roofline", v, kMinOfRoofline, v >= kMinOfRoofline});
  }
  if (zt && torch) {
    const double v = torch->step_s / zt->step_s;
    checks.push_back({"zt_over_torch_adamw", v, kMinOverTorch, v >= kMinOverTorch});
  }
  if (zt && copy) {
    const double v = copy->step_s / zt->step_s;
    checks.push_back({"bf16_copy_time_over_fp32", v, kMaxCopyOverFp32, v <= kMaxCopyOverFp32});
  }
  return checks;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

std::string zt_kernel() {
  const char* isa = std::getenv("ZT_ADAM_ISA");
  return isa && *isa ? isa : "auto";
}

void print_table(std::FILE* out, const std::vector<Row>& rows) {
  std::fprintf(out, "%-13s %10s %7s %10s %12s %8s %10s %11s\n", "impl", "params", "threads",
               "step (ms)", "Mparams/s", "GB/s", "vs torch", "of roofline");
  int64_t last_params = -1;
  int last_threads = -1;
  for (const Row& r : rows) {
    if (last_params >= 0 && (r.params != last_params || r.threads != last_threads)) {
      std::fprintf(out, "\n");
    }
    last_params = r.params;
    last_threads = r.threads;
    const Row* torch = find(rows, kTorchAdamW, r.params, r.threads);
    const Row* roof = find(rows, kRoofline, r.params, r.threads);
    char vs_torch[16] = "", of_roof[16] = "";
    if (torch && r.impl != kTorchAdamW) {
      std::snprintf(vs_torch, sizeof vs_torch, "%.1fx", torch->step_s / r.step_s);
    }
    if (roof && r.impl != kRoofline) {
      std::snprintf(of_roof, sizeof of_roof, "%.0f%%", 100 * roof->step_s / r.step_s);
    }
    std::fprintf(out, "%-13s %9.0fM %7d %10.2f %12.0f %8.1f %10s %11s\n", r.impl.c_str(),
                 r.params / 1e6, r.threads, r.step_s * 1e3, r.mparams_per_s(), r.gbps(), vs_torch,
                 of_roof);
  }
  const int samples = rows.empty() ? 0 : rows.front().samples;
  std::fprintf(out,
               "medians over %d interleaved rounds; GB/s = %.0f bytes per parameter "
               "(p,g,m,v read, p,m,v written; the bf16 copy's 2 B not counted) / 1e9; "
               "of roofline: roofline step time / this one's\n",
               samples, kBytesPerParam);
}

void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks) {
  std::fprintf(out, "\ntargets at %d threads, %lldM params (reported, not asserted):\n",
               kTargetThreads, static_cast<long long>(kTargetParams / 1'000'000));
  int passed = 0;
  for (const TargetCheck& c : checks) {
    passed += c.pass;
    const char* verdict = c.pass ? "PASS" : "MISS";
    if (c.name == "zt_over_roofline") {
      std::fprintf(out, "  %s zt fp32 step >= %.0f%% of the roofline pass:        %.0f%%\n",
                   verdict, c.threshold * 100, c.value * 100);
    } else if (c.name == "zt_over_torch_adamw") {
      std::fprintf(out, "  %s zt fp32 step >= %.0fx torch::optim::AdamW:           %.1fx\n",
                   verdict, c.threshold, c.value);
    } else {
      std::fprintf(out, "  %s zt with bf16 copy-out <= %.2fx the fp32 step's time: %.3fx\n",
                   verdict, c.threshold, c.value);
    }
  }
  std::fprintf(out, "targets met: %d of %zu\n", passed, checks.size());
}

void write_json(const std::string& path, const std::vector<Row>& rows,
                const std::vector<TargetCheck>& checks, const Plan& plan, double total_seconds) {
  std::ofstream out = open_results(path);

  out << "{\n  \"bench\": \"adam\",\n  " << blas_json()
      << ",\n  \"cpu\": " << json_string(cpu_model())
      << ",\n  \"zt_kernel\": " << json_string(zt_kernel())
      << ",\n  \"bytes_per_param\": " << json_number(kBytesPerParam)
      << ",\n  \"reps\": " << plan.reps << ",\n  \"total_seconds\": " << json_number(total_seconds)
      << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << row_json(rows[i]);
  // Without the target's size and thread count in the plan there is nothing to pass.
  const bool all_pass = !checks.empty() &&
                        std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.pass; });
  out << "\n  ],\n  \"targets\": {\n    \"threads\": " << kTargetThreads
      << ",\n    \"params\": " << kTargetParams
      << ",\n    \"all_pass\": " << (all_pass ? "true" : "false") << ",\n    \"checks\": [";
  for (size_t i = 0; i < checks.size(); ++i) {
    out << (i ? ",\n      " : "\n      ") << check_json(checks[i]);
  }
  out << "\n    ]\n  }\n}\n";
  if (!out) throw IoError("writing " + path + " failed");
}

}  // namespace zt::bench
