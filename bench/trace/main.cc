// zt_bench_trace: what the timeline trace costs and whether it adds up (docs/observability.md).
// Runs the bench GPT at ZeRO stage 3 on 2 ranks (bench/train's model) without and with [trace]
// over every step after the warm-up, interleaved (off, on, on, off, ...), and reports the median
// step time of each and the overhead (target <= 3%). From each traced run it sums rank 0's trace
// by part (forward_backward, the optimizer step, comm / read / write waits, the optimizer update)
// and compares the sums with the engine's own times of the same steps, which the trace file
// records (target: within 2%). Prints a table, writes bench-results/trace.json; exits non-zero
// only when a job failed.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/bench_util.h"
#include "common/child_process.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_trace [--steps N] [--warmup W] [--reps R] [--offload on|off] [--json PATH]\n"
    "  The bench GPT (~11M parameters, 2 ranks, stage 3) without and with [trace] on every step\n"
    "  after the warm-up, interleaved: the overhead of tracing, and the trace's sums by part\n"
    "  against the engine's own times.\n"
    "  --steps    optimizer steps per job (default 20)\n"
    "  --warmup   steps left out of the timings and the trace (default 3)\n"
    "  --reps     jobs per arm (default 3)\n"
    "  --offload  on: optimizer states in offload_nvme (read and write waits in the trace)\n"
    "             (default off)\n"
    "  --json     results file (default bench-results/trace.json)\n";

struct Options {
  int64_t steps = 20, warmup = 3, reps = 3;
  bool offload = false;
  std::string json = "bench-results/trace.json";
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--steps", "--warmup", "--reps", "--offload", "--json"}, kUsage,
                     flag, value)) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--steps") o.steps = parse_positive(value, flag, kUsage);
    if (flag == "--warmup") o.warmup = parse_positive(value, flag, kUsage);
    if (flag == "--reps") o.reps = parse_positive(value, flag, kUsage);
    if (flag == "--offload") {
      if (value != "on" && value != "off")
        throw ConfigError("--offload takes on or off\n" + std::string(kUsage));
      o.offload = value == "on";
    }
    if (flag == "--json") o.json = value;
  }
  if (o.warmup >= o.steps)
    throw ConfigError("--warmup must be below --steps\n" + std::string(kUsage));
  return o;
}

// One job; returns its median step time after the warm-up.
double run_job(const Options& o, bool traced, const std::string& out_dir) {
  std::vector<std::string> sets;
  if (o.offload) {
    sets = {"plugins.offload_optimizer=offload_nvme", "zero.sub_group_size=262144",
            "plugin.offload_nvme.path=" + out_dir + "/nvme"};
  }
  if (traced) {
    sets.push_back("trace.enabled=true");
    sets.push_back("trace.steps=[" + std::to_string(o.warmup + 1) + ", " + std::to_string(o.steps) +
                   "]");
  }
  const std::vector<std::string> argv = bench_gpt_command(ZT_BENCH_TRAINER, ZT_BENCH_SOURCE_DIR,
                                                          out_dir, o.steps, sets);
  const std::string log = out_dir + ".log";
  if (run_logged(argv, log) != 0) {
    throw IoError("zt_bench_trace: a job failed; its log " + log + " ends:\n" + tail_lines(log, 8));
  }
  std::ifstream in(out_dir + "/metrics.jsonl");
  std::vector<double> times;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step_time_s") && j.value("step", 0) > o.warmup)
      times.push_back(j["step_time_s"].get<double>());
  }
  return median(times);
}

// Rank 0's trace summed by part (the engine clock's own spans), next to the engine's times.
struct Sums {
  std::map<std::string, double> trace, engine;
};

Sums trace_sums(const std::string& file) {
  std::ifstream in(file);
  const auto j = nlohmann::json::parse(in);
  static const std::map<std::string, std::string> kPart = {{"forward_backward", "forward_backward"},
                                                           {"optimizer step", "step"},
                                                           {"comm wait", "comm_wait"},
                                                           {"read wait", "read_wait"},
                                                           {"write wait", "write_wait"},
                                                           {"optimizer update", "optimizer"}};
  Sums s;
  for (const auto& [name, part] : kPart) s.trace[part] = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    auto it = kPart.find(e["name"].get<std::string>());
    if (it != kPart.end()) s.trace[it->second] += e["dur"].get<double>() / 1e6;
  }
  for (const auto& [part, v] : j["otherData"]["engine_times"].items()) s.engine[part] = v;
  return s;
}

int run(const std::vector<std::string>& args) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  const Options o = parse(args);
  ScratchDir scratch("zt-bench-trace");
  std::printf("zt_bench_trace: bench GPT, stage 3, 2 ranks, %lld steps (%lld warm-up), %lld "
              "jobs per arm%s\n%s\n",
              static_cast<long long>(o.steps), static_cast<long long>(o.warmup),
              static_cast<long long>(o.reps), o.offload ? ", optimizer states on offload_nvme" : "",
              blas_line().c_str());
  std::vector<double> off, on;
  std::vector<Sums> sums;
  for (int64_t rep = 0; rep < o.reps; ++rep) {
    // off on, on off, ...: neither arm always runs first.
    for (const bool traced :
         rep % 2 == 0 ? std::vector<bool>{false, true} : std::vector<bool>{true, false}) {
      const std::string dir = scratch.path() + "/" + (traced ? "on-" : "off-") +
                              std::to_string(rep);
      const double t = run_job(o, traced, dir);
      (traced ? on : off).push_back(t);
      if (traced) sums.push_back(trace_sums(dir + "/trace/rank-0.json"));
      std::printf("  job %s %lld: median step %.4f s\n", traced ? "traced  " : "untraced",
                  static_cast<long long>(rep + 1), t);
      std::fflush(stdout);
    }
  }
  const double m_off = median(off), m_on = median(on);
  const double overhead = m_on / m_off - 1;
  std::printf("\n| trace | median s/step | vs untraced |\n|---|---:|---:|\n"
              "| off | %.4f | 1.000 |\n| on | %.4f | %.3f (%+.1f%%, target <= +3%%) |\n",
              m_off, m_on, m_on / m_off, 100 * overhead);
  // The worst relative difference per part over the traced jobs (parts under 1 ms compared in
  // absolute terms: a part that small is within the clock reads' own cost).
  std::printf("\n| part (rank 0, traced steps) | trace s | engine s | worst difference |\n"
              "|---|---:|---:|---:|\n");
  std::string parts_json;
  double worst_all = 0;
  for (const auto& [part, engine] : sums.front().engine) {
    double worst = 0;
    for (const Sums& s : sums) {
      const double e = s.engine.at(part), t = s.trace.at(part);
      const double d = e > 1e-3 ? std::abs(t - e) / e : (std::abs(t - e) > 1e-4 ? 1 : 0);
      worst = std::max(worst, d);
    }
    worst_all = std::max(worst_all, worst);
    std::printf("| %s | %.4f | %.4f | %.2f%% |\n", part.c_str(), sums.front().trace.at(part),
                engine, 100 * worst);
    parts_json += std::string(parts_json.empty() ? "" : ", ") + json_string(part) +
                  ": {\"trace_s\": " + json_number(sums.front().trace.at(part)) +
                  ", \"engine_s\": " + json_number(engine) +
                  ", \"worst_rel_diff\": " + json_number(worst) + "}";
  }
  std::printf("\ntrace sums vs the engine's clock: worst %.2f%% (target <= 2%%)\n",
              100 * worst_all);
  ResultsFile out(o.json);
  out << "{\"bench\": \"trace\", " << blas_json() << ", \"steps\": " << o.steps
      << ", \"warmup\": " << o.warmup << ", \"reps\": " << o.reps
      << ", \"offload\": " << (o.offload ? "true" : "false")
      << ", \"median_step_s\": {\"off\": " << json_number(m_off)
      << ", \"on\": " << json_number(m_on) << "}, \"overhead\": " << json_number(overhead)
      << ", \"overhead_target\": 0.03, \"parts\": {" << parts_json
      << "}, \"worst_sum_diff\": " << json_number(worst_all) << ", \"sum_target\": 0.02}\n";
  out.commit();
  std::printf("results: %s\n", o.json.c_str());
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_trace", argc, argv, zt::bench::run);
}
