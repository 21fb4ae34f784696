// zt_bench_train's shared vocabulary: the plan (which trainer jobs, how many steps, how many
// repetitions), what one trainer job measured, and one row of the result (a stage and shard
// strategy, aggregated over repetitions). main.cc plans, trainer_job.cc runs a job,
// metrics_file.cc reads what it wrote, report.cc aggregates and prints.
// Thread safety: plain values.
#pragma once

#include "common/bench_util.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zt::bench {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kRanks = 2;

// The shard plugins compared, as the issue names them ("tensor", "bucket") and as the trainer
// loads them (plugins.shard).
struct Strategy {
  const char* name;
  const char* plugin;
};
constexpr Strategy kStrategies[] = {{"tensor", "shard_tensor"}, {"bucket", "shard_bucket"}};
constexpr int kStages[] = {0, 1, 2, 3};

struct Plan {
  // Steps per trainer job. At about 0.6 s a step for the ~11M-parameter GPT on two cores, 14
  // steps plus ~2 s of start-up keep 8 jobs x 2 repetitions at about 3.5 minutes.
  int steps = 14;
  // Leading steps of each job left out of the medians: the first steps allocate buffers,
  // fault in pages and (stage 3) learn the gather order.
  int warmup = 3;
  // Passes over all (stage, strategy) jobs; the jobs of a pass are interleaved so that drift
  // of the shared machine hits every job alike.
  int reps = 2;
  std::string json_path = "bench-results/train.json";
  std::string trainer = "";  // the trainer executable; empty: the one built with the bench
};

// One trainer job: one (stage, strategy) in one repetition.
struct JobSpec {
  int stage = 0;
  Strategy strategy{};
  int rep = 0;
};

// What one job measured, read from its metrics.jsonl and stdout.
struct JobResult {
  std::vector<double> step_time_s;   // per step after warm-up
  std::vector<double> tokens_per_s;  // per step after warm-up
  int64_t model_state_bytes = 0;     // max over ranks of params+grads+master+optimizer states
  int world = 0;                     // ranks in the job (entries of "memory")
  int64_t parameters = 0;            // psi, from the trainer's summary
  bool low_precision = false;        // compute dtype not fp32: theory counts a separate master
  double wall_s = 0;                 // the whole job, start-up included
};

// One (stage, strategy), over all repetitions.
struct Row {
  int stage = 0;
  std::string strategy;  // "tensor" or "bucket"
  int world = 0;
  int64_t parameters = 0;
  int samples = 0;             // steps behind the medians
  double tokens_per_s = 0;     // median over the samples
  double step_time_s = 0;      // median over the samples
  int64_t model_state_bytes = 0;
  int64_t theory_bytes = 0;    // trainer/memory_theory.h
  double ratio_to_stage0 = 0;  // step time over stage 0's, same strategy (NaN without it)
  double measured_over_theory() const {
    return theory_bytes > 0 ? static_cast<double>(model_state_bytes) / theory_bytes : 0;
  }
};


}  // namespace zt::bench
