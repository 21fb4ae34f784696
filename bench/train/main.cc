// zt_bench_train: tokens/s and model-state bytes per rank of the real trainer for ZeRO stages 0-3
// and both shard strategies, next to stage 0 (plain data parallel) and to ZeRO theory (DESIGN.md
// §8). Each (stage, strategy) is one trainer job of 2 local ranks on a ~11M-parameter GPT; the
// jobs run one after another, interleaved over repetitions, and the bench prints a table and the
// targets and writes bench-results/train.json. It exits non-zero only when a job failed.
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "bench_train.h"
#include "metrics_file.h"
#include "report.h"
#include "trainer_job.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_train [--steps N] [--warmup N] [--reps N] [--json PATH] [--trainer PATH]\n"
    "  Runs the trainer (configs/zero3.toml, 2 ranks, a ~11M-parameter GPT) for ZeRO stages 0-3\n"
    "  with shard_tensor and shard_bucket; prints tokens/s, step time against stage 0 and\n"
    "  model-state bytes per rank against theory, and the targets; writes PATH.\n"
    "  --steps    training steps per job (default 14)\n"
    "  --warmup   leading steps of each job left out of the medians (default 3)\n"
    "  --reps     interleaved passes over the 8 jobs; medians pool them (default 2)\n"
    "  --json     results file (default bench-results/train.json, relative to the current folder)\n"
    "  --trainer  trainer executable (default: the one built with the bench)\n";

int parse_count(const std::string& text, const std::string& flag, int least) {
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < least || v > 100000) {
    throw ConfigError(flag + " takes an integer >= " + std::to_string(least) + ", got '" + text +
                      "'\n" + kUsage);
  }
  return static_cast<int>(v);
}

// Accepts "--flag value" and "--flag=value". Returns false for --help.
bool parse_args(const std::vector<std::string>& args, Plan& plan) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--steps", "--warmup", "--reps", "--json", "--trainer"}, kUsage, flag, value)) return false;
    if (flag == "--steps") {
      plan.steps = parse_count(value, flag, 1);
    } else if (flag == "--warmup") {
      plan.warmup = parse_count(value, flag, 0);
    } else if (flag == "--reps") {
      plan.reps = parse_count(value, flag, 1);
    } else if (flag == "--json") {
      plan.json_path = value;
    } else {
      plan.trainer = value;
    }
  }
  if (plan.warmup >= plan.steps) {
    throw ConfigError("--warmup " + std::to_string(plan.warmup) + " leaves none of the " +
                      std::to_string(plan.steps) + " steps to measure; raise --steps");
  }
  return true;
}

// Runs one job and reads its results. Returns false (after saying why) when the trainer failed.
bool run_job(const Plan& plan, const JobSpec& job, const std::string& scratch, JobResult& result) {
  const std::string name = "s" + std::to_string(job.stage) + "_" + job.strategy.name + "_r" +
                           std::to_string(job.rep);
  const std::string out_dir = scratch + "/" + name;
  const std::string log = scratch + "/" + name + ".log";
  const auto start = std::chrono::steady_clock::now();
  const int code = run_logged(trainer_command(plan, job, out_dir), log);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (code != 0) {
    std::fprintf(stderr, "zt_bench_train: error: the trainer (stage %d, %s) exited with %d; its "
                         "last lines:\n%s", job.stage, job.strategy.plugin, code,
                 tail_lines(log, 15).c_str());
    return false;
  }
  read_metrics(out_dir + "/metrics.jsonl", plan.warmup, result);
  read_trainer_log(log, result);
  return true;
}

int run(const std::vector<std::string>& argv) {
  Plan plan;
  if (!parse_args(argv, plan)) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (plan.trainer.empty()) plan.trainer = ZT_BENCH_TRAINER;
  const auto start = std::chrono::steady_clock::now();
  ScratchDir scratch("zt_bench_train");
  const int total = plan.reps * static_cast<int>(std::size(kStages) * std::size(kStrategies));
  std::printf("zt_bench_train: %d trainer jobs (%d steps each, %d ranks) with %s\n", total,
              plan.steps, kRanks, plan.trainer.c_str());
  std::vector<std::pair<JobSpec, JobResult>> jobs;
  for (int rep = 0; rep < plan.reps; ++rep) {
    for (int stage : kStages) {
      for (const Strategy& strategy : kStrategies) {
        const JobSpec job{stage, strategy, rep};
        JobResult result;
        if (!run_job(plan, job, scratch.path(), result)) return 1;
        jobs.emplace_back(job, result);
        std::printf("  [%2zu/%d] stage %d %-6s rep %d: %.3f s/step (median), %.0f s\n",
                    jobs.size(), total, stage, strategy.name, rep + 1, median(result.step_time_s),
                    result.wall_s);
        std::fflush(stdout);
      }
    }
  }

  const std::vector<Row> rows = aggregate(jobs);
  const std::vector<TargetCheck> checks = evaluate_targets(rows);
  const Row& any = rows.front();
  std::printf("\nzt_bench_train: GPT of %lld parameters, %d ranks, offload none\n\n",
              static_cast<long long>(any.parameters), any.world);
  print_table(stdout, rows, plan);
  print_targets(stdout, checks);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_json(plan.json_path, rows, checks, plan, seconds);
  std::printf("\nwrote %s (%.0f s in all)\n", plan.json_path.c_str(), seconds);
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_train", argc, argv, zt::bench::run);
}
