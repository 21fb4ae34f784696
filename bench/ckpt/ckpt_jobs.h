// One zt_bench_ckpt trainer job: the real `trainer` on configs/zero3.toml with the
// configuration's model, world, stage and offload, saving checkpoints every step (synchronously or
// not), resuming from the last one, or training without them; then what its metrics.jsonl and
// checkpoint folder say.
// Thread safety: none needed; jobs run one at a time so they do not compete for the cores.
#pragma once

#include <string>
#include <vector>

#include "bench_ckpt.h"

namespace zt::bench {

struct JobPaths {
  std::string trainer;    // the trainer executable
  std::string out_dir;    // run.out_dir (checkpoints go to out_dir/checkpoints)
  std::string nvme_path;  // plugin.offload_nvme.path
};

// The command line of `kind` for `config`: `steps` optimizer steps (kResume: one more than the
// checkpoint it resumes, found under paths.out_dir).
std::vector<std::string> ckpt_job_command(const CkptConfig& config, JobKind kind, int steps,
                                          const JobPaths& paths);

// What one job's metrics.jsonl says.
struct JobMetrics {
  std::vector<double> stall_s;  // per completed save, in order
  std::vector<double> write_s;
  int64_t checkpoint_bytes = 0;  // every rank's file of the last save
  std::string last_folder;       // the last save's folder
  double load_s = -1;            // a resumed run: reading the checkpoint
  int64_t rank0_peak_rss = 0;    // the last step's peak RSS of rank 0
};

// Reads `metrics_path`. Throws IoError when it is missing or a line does not parse.
JobMetrics read_job_metrics(const std::string& metrics_path);

// Sizes of every file in a checkpoint folder, and its parameter count (from the manifest).
int64_t folder_bytes(const std::string& folder);
int64_t checkpoint_parameters(const std::string& folder);

}  // namespace zt::bench
