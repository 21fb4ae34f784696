// What a training run shows and records: a progress line on a terminal (plain lines otherwise),
// metrics.jsonl (one JSON object per logged step), and the end-of-run summary with measured
// model-state bytes per rank next to the theory. Only rank 0 reports; it receives every rank's
// memory numbers through the communicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "zt/communicator.h"
#include "zt/host/engine.h"
#include "zt/offload.h"

namespace zt::trainer {

// Memory of one rank, by category, in bytes (engine-owned) plus process RSS and peak.
struct RankMemory {
  int64_t params = 0, grads = 0, master = 0, optimizer_states = 0, gathered_peak = 0;
  int64_t rss = 0, peak_rss = 0;
  // Model states placed in the offload tiers (gradient shards in the optimizer's), and the host
  // buffers streaming them: now and at their peak.
  int64_t offload_optimizer = 0, offload_param = 0, offload_grads = 0;
  int64_t offload_staging = 0, offload_staging_peak = 0;
  // The gradient codec's error-feedback residuals (zero.codec_error_feedback): not model states,
  // so outside the totals and the theory, shown on their own line.
  int64_t codec_residuals = 0;
  // In compute memory (host memory on CPU ranks; tiers excluded).
  int64_t model_states() const { return params + grads + master + optimizer_states; }
  int64_t total_model_states() const {
    return model_states() + offload_optimizer + offload_param + offload_grads;
  }
};

RankMemory measure_memory(const MemoryReport& engine_memory, int stage);
// All ranks' memory on every rank (a small all_gather).
std::vector<RankMemory> gather_memory(Communicator& comm, const RankMemory& mine);

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double loss_scale = 1;
  double grad_norm = 0;
  bool skipped = false;
  double step_seconds = 0;
  double tokens_per_s = 0;
  std::string arm{};       // live A/B: the arm that trained the step ("" otherwise)
  EngineTimes times{};     // rank 0's engine time in this step (all zero when not measured)
  double flops = 0;        // the step's analytic training FLOPs, all ranks (0 = unknown)
  double flops_per_s = 0;  // what one rank achieved: flops / world / step_seconds
  double mfu = 0;          // flops_per_s over the measured peak of one rank (0 = unknown)
};

// Where a step's time went (EngineTimes split into parts that add up to the whole): compute is
// what is left of forward/backward and the step once the waits and the optimizer are taken out.
struct TimeSplit {
  double compute = 0, read_wait = 0, write_wait = 0, comm_wait = 0, optimizer = 0;
  double total() const { return compute + read_wait + write_wait + comm_wait + optimizer; }
};
TimeSplit split_times(const EngineTimes& t);
// `now` less `before`: the engine time of what ran in between.
EngineTimes times_since(const EngineTimes& now, const EngineTimes& before);
// a + b, field by field: the engine time of two stretches together.
EngineTimes add_times(const EngineTimes& a, const EngineTimes& b);

// What the end-of-run summary shows, collected on every rank while the engine and tiers are alive
// (the memory of all ranks comes through a collective); rank 0 prints it.
struct TrainSummary {
  int64_t steps = 0, skipped = 0;  // the steps this process trained
  int64_t resumed_at = 0;          // the checkpoint's step, 0 for a fresh run
  int stopped_by = 0;              // the signal that stopped the run early, 0 if none
  int64_t stopped_after = 0;       // its last step then
  double final_loss = 0;
  double seconds = 0;  // all steps together
  double tokens_per_step = 0;
  int64_t parameters = 0;
  int stage = 0, world = 1;
  int64_t theory_bytes = 0;        // model states per rank by ZeRO's theory (memory_theory.h)
  std::vector<RankMemory> memory;  // by rank
  // One column per distinct offload plugin (both roles may share one), with rank 0's I/O.
  struct Tier {
    std::string id;
    bool holds_optimizer = false, holds_params = false;
    OffloadStats stats;
  };
  std::vector<Tier> tiers;
  CommStats comm;  // every collective of this rank (the job's communicator and the MiCS groups)
  std::vector<std::pair<std::string, CommStats>> comm_groups;  // MiCS groups alone, by role
  std::string sharding;                                        // Engine::describe_sharding()
  EngineTimes times;  // rank 0's engine time over the run (all zero when not measured)
  std::string out_dir;
  // MFU over the run: analytic FLOPs per step (0 = the model does not say) against the peak a
  // rank measured (peak_flops.h).
  double flops_per_step = 0;
  double peak_per_rank = 0;
  std::string peak_how;
  // The last validation ([eval]); val_step 0 when none ran.
  int64_t val_step = 0;
  double val_loss = 0;
  bool val_perplexity = true;
};

// One validation ([eval]) after optimizer step `step`: the mean loss over `samples` held-out
// samples (every rank's share), and how long it took. `perplexity`: the loss is a cross-entropy
// over tokens, so exp(loss) is one (a model on vectors has none).
struct EvalEvent {
  int64_t step = 0;
  double loss = 0;
  int64_t samples = 0;
  double seconds = 0;
  bool perplexity = true;
};

// Prints the summary to stdout: totals, model-state bytes per rank and tier next to theory,
// offload I/O, where the time of a step went, collectives, where the metrics are.
void print_summary(const TrainSummary& summary);

// A save that completed: shown and recorded once.
struct CheckpointEvent {
  int64_t step = 0;
  std::string folder;
  int64_t bytes = 0;  // every rank's files
  double stall_seconds = 0, write_seconds = 0;
};

class TrainReport {
 public:
  // `path`: metrics.jsonl; empty on non-zero ranks (they write nothing). A run resumed from the
  // checkpoint of step `resumed_at` > 0 keeps the file's lines up to that step (the run it
  // continues) and appends; a fresh run starts the file anew.
  // `io_limit` (0: none) bounds each open, write and close of the file (not a resume's rewrite of
  // it): one still blocked after it ends the process naming the file (zt/host/file_io_deadline.h),
  // where rank 0 stuck on a run.out_dir whose storage stopped answering hung past its peers' exit
  // (srun leaves it).
  TrainReport(const std::string& path, int64_t total_steps, int64_t log_every,
              int64_t resumed_at = 0, std::chrono::milliseconds io_limit = {});
  ~TrainReport();
  // The counters as a step starts: its step_bytes are what moved from here to its log(), not
  // what the start-up, an evaluation or a save (its own event line counts it) moved before.
  void start_step(const CommStats& comm, const OffloadStats& io);
  // `io`: this rank's offload tiers together, since the run started (cumulative, like `comm`).
  void log(const StepMetrics& m, const std::vector<RankMemory>& memory, const CommStats& comm,
           const OffloadStats& io);
  // One line on stdout and one in metrics.jsonl ("event":"checkpoint").
  void log_checkpoint(const CheckpointEvent& event);
  // metrics.jsonl's {"event":"eval"} line and the progress line's validation loss and perplexity.
  void log_eval(const EvalEvent& event);
  // One metrics line for a resume: the step it continues and how long the load took.
  void log_resume(int64_t step, const std::string& folder, double load_seconds);
  // Live A/B: the arms (name and overrides) once at the start, and each switch with its cost.
  void log_arms(const std::vector<std::pair<std::string, std::vector<std::string>>>& arms);
  void log_switch(int64_t after_step, const std::string& to, const std::string& label,
                  double seconds);
  void finish_progress();

 private:
  // Appends one line (or several) to metrics.jsonl. A write that fails is said on stderr once,
  // the file cut back to its whole lines, and every later line counted as lost (the destructor
  // says how many): a reader never meets a torn line.
  void append(const std::string& line);
  void write_failed(int error);

  std::string path_;
  std::chrono::milliseconds io_limit_{};
  std::FILE* file_ = nullptr;
  int64_t lines_lost_ = 0;
  int write_error_ = 0;
  bool tty_ = false;
  int64_t total_steps_;
  int64_t log_every_;
  int64_t steps_logged_ = 0;  // by this process (the ETA's rate)
  double elapsed_ = 0;
  // The cumulative counters at the previous step, for the bytes a step moved.
  uint64_t comm_bytes_before_ = 0;
  int64_t read_before_ = 0, written_before_ = 0;
};

}  // namespace zt::trainer
