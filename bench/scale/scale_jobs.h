// One zt_bench_scale trainer job: the real `trainer` on configs/zero3_infinity_2b.toml with the
// job's overrides, run as a child process; then what its metrics.jsonl and its output say (the
// memory-fit line, the summary).
// Thread safety: none needed; jobs run one at a time so they do not compete for the cores.
#pragma once

#include <string>
#include <vector>

#include "bench_scale.h"

namespace zt::bench {

struct ScalePaths {
  std::string trainer;    // the trainer executable
  std::string out_dir;    // run.out_dir
  std::string nvme_path;  // plugin.offload_nvme.path
};

// The command line of `job`, training `steps` steps.
std::vector<std::string> scale_job_command(const ScaleJob& job, int steps, const ScalePaths& paths);

// Fills the row from metrics.jsonl: per-step medians (after the first step when there are more),
// the last loss, and from the last step's memory the peak RSS per rank, model states in all
// tiers and the bytes in files. Throws IoError when the file is missing or a line does not parse.
void read_scale_metrics(const std::string& metrics_path, ScaleRow& row);
// Fills params, the estimate and the theory from the trainer's output ("memory fit: host RAM per
// rank N bytes ... x L ...", "model states per rank (N parameters" and the summary table's
// "theory" column). Throws IoError when missing.
void read_scale_log(const std::string& log_path, ScaleRow& row);

}  // namespace zt::bench
