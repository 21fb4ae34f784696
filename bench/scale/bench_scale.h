// zt_bench_scale's vocabulary: the trainer jobs it runs (the >2B GPT of
// configs/zero3_infinity_2b.toml, and a depth sweep at fixed width with the same composition:
// stage 3, parameters and optimizer states in offload_nvme, 2 ranks) and what each measured.
// main.cc plans, scale_jobs.cc runs a job and reads what it wrote, report.cc prints and writes
// bench-results/scale.json.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::bench {

struct ScaleJob {
  std::string label;                   // "2B GPT", "depth 24"
  std::vector<std::string> overrides;  // --set overrides of configs/zero3_infinity_2b.toml
  int64_t depth = 0;                   // n_layer; 0 for the config's own
  bool sweep = false;                  // part of the depth table
};

// Where a step's time went, per step, from the trainer's metrics (rank 0's engine times).
struct StepSplit {
  double compute = 0, read_wait = 0, write_wait = 0, comm_wait = 0, optimizer = 0;
  bool measured = false;  // the trainer wrote "times" (older trainers do not)
};

// What one job measured: the row, and the memory-fit estimate next to it.
struct ScaleRow {
  ScaleJob job;
  int64_t params = 0;
  int world = 0;
  int64_t model_state_bytes = 0;   // every rank's model states, in every tier
  int64_t model_state_theory = 0;  // ZeRO's theory for them (the trainer's summary), all ranks
  int64_t host_ram_bytes = 0;      // peak RSS summed over the ranks of this host
  int64_t host_ram_estimate = 0;   // the memory-fit check's host RAM for those ranks
  std::vector<int64_t> peak_rss;   // per rank
  int64_t peak_rss_per_rank = 0;   // the largest of them
  int64_t rss_estimate_per_rank = 0;
  int64_t disk_bytes = 0;  // every rank's bytes in offload_nvme's files
  int64_t steps = 0;
  double step_s = 0;  // median over the steps after the first (all of them with one step)
  double tokens_per_s = 0;
  double loss = 0;  // the last step's
  StepSplit split;  // per step, medians as step_s
  double wall_s = 0;
};

}  // namespace zt::bench
