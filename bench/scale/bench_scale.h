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
  int state_bytes = 4;                 // each Adam moment's bytes per element (bf16 states: 2)
};

// The fewest tier bytes per parameter a step of the bench's composition needs (fp32 master and
// Adam's two moments, each of `state_bytes`, read and written once, the fp32 parameter shard
// read before forward and before backward and written once; docs/architecture.md, "Offload"):
// 20 read + 16 written with fp32 moments, 16 + 12 with bf16 ones.
constexpr double min_read_per_param(int state_bytes) { return 4 + 2.0 * state_bytes + 2 * 4; }
constexpr double min_written_per_param(int state_bytes) { return 4 + 2.0 * state_bytes + 4; }

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
  // Rank 0's bytes per step (medians as step_s): read from and written to its offload tiers,
  // and sent and received by its collectives.
  double read_per_step = 0, written_per_step = 0, collectives_per_step = 0;
  double wall_s = 0;
  // Tier bytes per parameter of rank 0's share (params / world) per step.
  double read_per_param() const { return read_per_step * world / static_cast<double>(params); }
  double written_per_param() const {
    return written_per_step * world / static_cast<double>(params);
  }
};

// The disk the tiers use, measured with dd over as many bytes as the bench could spare: its
// sustained O_DIRECT write and read bandwidth (bytes/s); 0 when not measured.
struct DiskBounds {
  double bytes = 0;
  double write_bps = 0, read_bps = 0;
  // Seconds the disk needs for `row`'s step: every rank's tier bytes through the one disk.
  double step_s(const ScaleRow& row) const {
    if (write_bps <= 0 || read_bps <= 0) return 0;
    return row.world * (row.read_per_step / read_bps + row.written_per_step / write_bps);
  }
};

}  // namespace zt::bench
