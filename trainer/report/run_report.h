// report.html of one training run, from its metrics.jsonl: the loss curve, each step's time split
// into compute and waits, tokens/s and MFU, memory by category per rank, the bytes each step moved
// (collectives, offload reads and writes), checkpoint saves with their stalls, and restarts,
// resumes and live A/B switches as markers. Self-contained like the A/B report (svg_chart.h).
// Thread safety: free functions of the files they read.
#pragma once

#include <string>

namespace zt::trainer {

// The page for the metrics of `run_dir` (its metrics.jsonl, or the file itself). Throws
// ConfigError naming the file when it is missing or holds no step.
std::string run_report_html(const std::string& run_dir);
// Writes run_report_html(run_dir) to `path`. Throws ConfigError as above, IoError when the file
// cannot be written.
void write_run_report(const std::string& run_dir, const std::string& path);

}  // namespace zt::trainer
