// zt_bench_eval: what an evaluation costs against training's own forward (issue target: an
// evaluation of B batches <= 1.1x the forward part of B training micro steps). Runs the bench GPT
// at ZeRO stage 3 on 2 ranks, with and without parameter offload (offload_cpu), evaluating every
// few steps on README.md's held-out tenth with [trace] on, and reads rank 0's timeline: the
// engine's "forward" span of each training micro step (its loss included) against the trainer's
// "evaluation" span (data, no-grad forwards with stage 3's gathers, per-sample losses, the
// all-reduce) divided by the forward passes each rank ran in it: eval.batches x micro_batch
// samples shared out among the 2 ranks, in passes of micro_batch samples, the size of a training
// micro step's. Prints a table, writes bench-results/eval.json; exits non-zero only when a job
// failed.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/bench_util.h"
#include "common/child_process.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_eval [--steps N] [--every E] [--batches B] [--reps R] [--json PATH]\n"
    "  The bench GPT (~11M parameters, 2 ranks, stage 3) evaluating every E steps, traced: an\n"
    "  evaluation's time per batch against a training micro step's forward.\n"
    "  --steps    optimizer steps per job (default 16)\n"
    "  --every    eval.every_steps (default 4)\n"
    "  --batches  eval.batches, of data.micro_batch samples each (default 4)\n"
    "  --reps     jobs per composition (default 2)\n"
    "  --json     results file (default bench-results/eval.json)\n";

struct Options {
  int64_t steps = 16, every = 4, batches = 4, reps = 2;
  std::string json = "bench-results/eval.json";
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--steps", "--every", "--batches", "--reps", "--json"}, kUsage, flag,
                     value)) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--steps") o.steps = parse_positive(value, flag, kUsage);
    if (flag == "--every") o.every = parse_positive(value, flag, kUsage);
    if (flag == "--batches") o.batches = parse_positive(value, flag, kUsage);
    if (flag == "--reps") o.reps = parse_positive(value, flag, kUsage);
    if (flag == "--json") o.json = value;
  }
  if (o.every > o.steps)
    throw ConfigError("--every must not exceed --steps\n" + std::string(kUsage));
  return o;
}

constexpr int64_t kRanks = 2;

struct Composition {
  std::string name;
  std::vector<std::string> sets;
};

// Rank 0's spans of one traced job: each training micro step's forward, each evaluation.
struct Spans {
  std::vector<double> forward, evaluation;
};

Spans run_job(const Options& o, const Composition& c, const std::string& out_dir) {
  std::vector<std::string> sets = c.sets;
  // The first two steps warm the allocator and the peak-FLOP/s probe: left out of the trace.
  sets.insert(sets.end(), {"launch.nproc=" + std::to_string(kRanks), "data.val_fraction=0.1",
                           "eval.every_steps=" + std::to_string(o.every),
                           "eval.batches=" + std::to_string(o.batches), "trace.enabled=true",
                           "trace.steps=[3, " + std::to_string(o.steps) + "]"});
  const std::vector<std::string> argv = bench_gpt_command(ZT_BENCH_TRAINER, ZT_BENCH_SOURCE_DIR,
                                                          out_dir, o.steps, sets);
  const std::string log = out_dir + ".log";
  if (run_logged(argv, log) != 0) {
    throw IoError("zt_bench_eval: a job failed; its log " + log + " ends:\n" + tail_lines(log, 8));
  }
  std::ifstream in(out_dir + "/trace/rank-0.json");
  const auto j = nlohmann::json::parse(in);
  Spans s;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    const double seconds = e["dur"].get<double>() / 1e6;
    if (name == "forward") s.forward.push_back(seconds);
    if (name == "evaluation") s.evaluation.push_back(seconds);
  }
  if (s.forward.empty() || s.evaluation.empty()) {
    throw InternalError("zt_bench_eval: the trace of " + out_dir +
                        " holds no forward or no evaluation span");
  }
  return s;
}

int run(const std::vector<std::string>& args) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  const Options o = parse(args);
  ScratchDir scratch("zt-bench-eval");
  std::printf("zt_bench_eval: bench GPT, stage 3, 2 ranks, %lld steps, an evaluation of %lld "
              "batches every %lld steps, %lld jobs per composition\n%s\n",
              static_cast<long long>(o.steps), static_cast<long long>(o.batches),
              static_cast<long long>(o.every), static_cast<long long>(o.reps), blas_line().c_str());
  const std::vector<Composition> compositions = {
      {"stage 3", {}}, {"stage 3, parameters offload_cpu", {"plugins.offload_param=offload_cpu"}}};
  std::vector<Spans> all(compositions.size());
  for (int64_t rep = 0; rep < o.reps; ++rep) {
    for (size_t k = 0; k < compositions.size(); ++k) {
      // Alternating order: neither composition always runs first.
      const size_t c = rep % 2 == 0 ? k : compositions.size() - 1 - k;
      const Spans s = run_job(o, compositions[c],
                              scratch.path() + "/" + std::to_string(c) + "-" + std::to_string(rep));
      all[c].forward.insert(all[c].forward.end(), s.forward.begin(), s.forward.end());
      all[c].evaluation.insert(all[c].evaluation.end(), s.evaluation.begin(), s.evaluation.end());
      std::printf("  job %s %lld: forward %.4f s, evaluation %.4f s (medians)\n",
                  compositions[c].name.c_str(), static_cast<long long>(rep + 1), median(s.forward),
                  median(s.evaluation));
      std::fflush(stdout);
    }
  }
  // Every rank runs ceil(batches / ranks) passes of micro_batch samples (evaluation.cc).
  const int64_t passes = (o.batches + kRanks - 1) / kRanks;
  std::printf("\n| composition | training forward s / micro step | evaluation s / pass (%lld "
              "passes per rank) | ratio (target <= 1.10) |\n|---|---:|---:|---:|\n",
              static_cast<long long>(passes));
  std::string rows;
  for (size_t c = 0; c < compositions.size(); ++c) {
    const double forward = median(all[c].forward);
    const double per_pass = median(all[c].evaluation) / static_cast<double>(passes);
    const double ratio = per_pass / forward;
    std::printf("| %s | %.4f | %.4f | %.3f%s |\n", compositions[c].name.c_str(), forward, per_pass,
                ratio, ratio <= 1.1 ? "" : " (above the target)");
    rows += std::string(rows.empty() ? "" : ", ") +
            "{\"composition\": " + json_string(compositions[c].name) +
            ", \"forward_s\": " + json_number(forward) +
            ", \"evaluation_s_per_pass\": " + json_number(per_pass) +
            ", \"ratio\": " + json_number(ratio) +
            ", \"forwards\": " + std::to_string(all[c].forward.size()) +
            ", \"evaluations\": " + std::to_string(all[c].evaluation.size()) + "}";
  }
  ResultsFile out(o.json);
  out << "{\"bench\": \"eval\", " << blas_json() << ", \"steps\": " << o.steps
      << ", \"every\": " << o.every << ", \"batches\": " << o.batches << ", \"reps\": " << o.reps
      << ", \"passes_per_rank\": " << passes << ", \"target_ratio\": 1.1, \"rows\": [" << rows
      << "]}\n";
  out.commit();
  std::printf("results: %s\n", o.json.c_str());
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_eval", argc, argv, zt::bench::run);
}
