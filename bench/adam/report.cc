// zt_bench_adam's report: table, targets and adam.json from the rows.
#include "report.h"
#include "common/bench_util.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "isa.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const Row* find(const std::vector<Row>& rows, const std::string& impl, const std::string& isa,
                int64_t params, int threads) {
  for (const Row& r : rows) {
    if (r.impl == impl && r.isa == isa && r.params == params && r.threads == threads) return &r;
  }
  return nullptr;
}

std::string row_json(const Row& r) {
  return "{\"impl\": " + json_string(r.impl) + ", \"isa\": " + json_string(r.isa) +
         ", \"params\": " + std::to_string(r.params) +
         ", \"threads\": " + std::to_string(r.threads) +
         ", \"mparams_per_s\": " + json_number(r.mparams_per_s()) +
         ", \"gbps\": " + json_number(r.gbps()) + ", \"step_ms\": " + json_number(r.step_s * 1e3) +
         ", \"samples\": " + std::to_string(r.samples) +
         ", \"steps_per_sample\": " + std::to_string(r.steps_per_sample) + "}";
}

std::string check_json(const TargetCheck& c) {
  return "{\"name\": " + json_string(c.name) + ", \"value\": " + json_number(c.value) +
         ", \"threshold\": " + json_number(c.threshold) +
         ", \"pass\": " + (c.pass ? "true" : "false") + "}";
}

std::string json_strings(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
  return out + "]";
}

}  // namespace

std::vector<TargetCheck> evaluate_targets(const std::vector<Row>& rows, const std::string& isa) {
  const Row* zt = find(rows, kZt, isa, kTargetParams, kTargetThreads);
  const Row* copy = find(rows, kZtBf16Copy, isa, kTargetParams, kTargetThreads);
  const Row* torch = find(rows, kTorchAdamW, kLibtorchIsa, kTargetParams, kTargetThreads);
  const Row* roof = find(rows, kRoofline, isa, kTargetParams, kTargetThreads);
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

int64_t l2_cache_bytes() {
  const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc: 0 or -1 when unknown
  return bytes > 0 ? bytes : 0;
}

std::string l2_cache_label() {
  const int64_t bytes = l2_cache_bytes();
  return bytes > 0 ? std::to_string(bytes / 1024) + " KiB" : "unknown";
}

std::string params_label(int64_t params) {
  return params % 1'000'000 == 0 ? std::to_string(params / 1'000'000) + "M"
                                 : std::to_string(params);
}

void print_table(std::FILE* out, const std::vector<Row>& rows, const Plan& plan) {
  std::fprintf(out, "%-13s %-9s %9s %7s %6s %10s %10s %7s %9s %11s\n", "impl", "isa", "params",
               "threads", "steps", "step (ms)", "Mparams/s", "GB/s", "vs torch", "of roofline");
  int64_t last_params = -1;
  int last_threads = -1;
  for (const Row& r : rows) {
    if (last_params >= 0 && (r.params != last_params || r.threads != last_threads)) {
      std::fprintf(out, "\n");
    }
    last_params = r.params;
    last_threads = r.threads;
    const Row* torch = find(rows, kTorchAdamW, kLibtorchIsa, r.params, r.threads);
    const Row* roof = find(rows, kRoofline, r.isa, r.params, r.threads);
    char vs_torch[16] = "", of_roof[16] = "";
    if (torch && r.impl != kTorchAdamW) {
      std::snprintf(vs_torch, sizeof vs_torch, "%.1fx", torch->step_s / r.step_s);
    }
    if (roof && r.impl != kRoofline) {
      std::snprintf(of_roof, sizeof of_roof, "%.0f%%", 100 * roof->step_s / r.step_s);
    }
    std::fprintf(out, "%-13s %-9s %9s %7d %6d %10.3f %10.0f %7.1f %9s %11s\n", r.impl.c_str(),
                 r.isa.c_str(), params_label(r.params).c_str(), r.threads, r.steps_per_sample,
                 r.step_s * 1e3, r.mparams_per_s(), r.gbps(), vs_torch, of_roof);
  }
  std::fprintf(out,
               "medians over %d interleaved rounds; a sample: back-to-back steps for >= %.0f ms "
               "(steps: the median count)\n"
               "GB/s: %.0f bytes per parameter (p,g,m,v read, p,m,v written; the bf16 copy's 2 B "
               "not counted) / 1e9\n"
               "of roofline: the step time of the roofline pass built for the same ISA / this "
               "one's; in cache the pass runs at the cache's speed, and the gap is the kernel's "
               "arithmetic\n",
               plan.reps, plan.min_sample_s * 1e3, kBytesPerParam);
}

void print_targets(std::FILE* out, const std::vector<TargetCheck>& checks, const std::string& isa) {
  std::fprintf(out, "\ntargets at %d threads, %lldM params, %s (reported, not asserted):\n",
               kTargetThreads, static_cast<long long>(kTargetParams / 1'000'000), isa.c_str());
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
  ResultsFile out(path);

  out << "{\n  \"bench\": \"adam\",\n  " << blas_json()
      << ",\n  \"cpu\": " << json_string(cpu_model())
      << ",\n  \"l2_cache_bytes\": " << l2_cache_bytes()
      << ",\n  \"isas\": " << json_strings(plan.isas)
      << ",\n  \"best_isa\": " << json_string(best_isa())
      << ",\n  \"l2_params\": " << plan.l2_params
      << ",\n  \"bytes_per_param\": " << json_number(kBytesPerParam)
      << ",\n  \"reps\": " << plan.reps
      << ",\n  \"min_sample_ms\": " << json_number(plan.min_sample_s * 1e3)
      << ",\n  \"total_seconds\": " << json_number(total_seconds) << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << row_json(rows[i]);
  // Without the target's size and thread count in the plan there is nothing to pass.
  const bool all_pass = !checks.empty() &&
                        std::all_of(checks.begin(), checks.end(), [](auto& c) { return c.pass; });
  out << "\n  ],\n  \"targets\": {\n    \"threads\": " << kTargetThreads
      << ",\n    \"params\": " << kTargetParams
      << ",\n    \"isa\": " << json_string(plan.isas.front())
      << ",\n    \"all_pass\": " << (all_pass ? "true" : "false") << ",\n    \"checks\": [";
  for (size_t i = 0; i < checks.size(); ++i) {
    out << (i ? ",\n      " : "\n      ") << check_json(checks[i]);
  }
  out << "\n    ]\n  }\n}\n";
  out.commit();
}

}  // namespace zt::bench
