// A finished (or running) training run as its metrics.jsonl tells it: per step the loss, the
// gradient norm, the step time and throughput, every rank's memory by category, rank 0's
// collectives and offload I/O so far. What `trainer ab` and `trainer compare` read; pure data,
// no LibTorch.
// Thread safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace zt::trainer {

struct StepRecord {
  int64_t step = 0;
  double loss = 0, grad_norm = 0;
  double step_time_s = 0, tokens_per_s = 0;
  // Model FLOPs of the step (all ranks), per second per rank, and that over the measured peak
  // (0 when the run did not report them).
  double flops = 0, flops_per_s_per_rank = 0, mfu = 0;
  bool skipped = false;
  // Per rank: "params", "grads", "master", "optimizer_states", "offload_optimizer",
  // "offload_param", "offload_grads", "offload_staging", "peak_rss", ... (bytes).
  std::vector<std::map<std::string, int64_t>> memory;
  // Rank 0's collectives since the run started: op -> {calls, bytes}.
  std::map<std::string, std::pair<int64_t, int64_t>> comm;
  std::map<std::string, int64_t> comm_sent;         // op -> bytes rank 0 sent to peers (wire bytes)
  int64_t io_bytes_read = 0, io_bytes_written = 0;  // rank 0's offload tiers since the start
  std::string arm;  // live A/B (live_ab.h): the arm that trained this step; "" otherwise
  // The first step after a resume: the counters above (comm, io) restart from 0 with it.
  bool resumed = false;
};

// Live A/B: the engine switched to arm `to` before step `step` + 1, which took `seconds`.
struct ArmSwitch {
  int64_t step = 0;
  std::string to;
  double seconds = 0;
};

struct RunMetrics {
  std::string path;  // the metrics.jsonl read
  std::vector<StepRecord> steps;
  std::vector<ArmSwitch> switches;
  std::map<std::string, std::vector<std::string>> arm_overrides;  // live A/B: name -> overrides
  // Times the run's ranks were started again (launch.max_restarts), where `trainer ab` or `tune`
  // ran it and read its log; 0 otherwise.
  int restarts = 0;
};

// Reads `run_dir`/metrics.jsonl (or `run_dir` itself when it names a file). Event lines
// (checkpoints, resumes) are skipped, live A/B switches kept; a resumed run's steps keep their step
// numbers. Throws ConfigError naming the file when it is missing, not JSON, or holds no step.
RunMetrics read_run_metrics(const std::string& run_dir);

// The model-state categories of a memory entry, in the order reports show them.
const std::vector<std::string>& memory_categories();

}  // namespace zt::trainer
