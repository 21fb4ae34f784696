// Reads what one trainer job left behind: its metrics.jsonl (trainer/report/train_report.cc writes
// one JSON object per step; bench/train/ddp_gpt.py the same step fields) and its stdout summary,
// and the GPT's sizes from the trainer's resolved config (--print-config). The parser knows exactly
// the fields the bench needs and the shape the trainer writes them in; it is not a general JSON
// reader. Thread safety: pure functions over files.
#pragma once

#include <string>

#include "bench_train.h"
#include "trainer/report/run_metrics.h"

namespace zt::bench {

// Fills out.losses with every step's loss and out.step_time_s, out.tokens_per_s and (where the
// step has them) the FLOP fields with the steps after the first `warmup`, from `run`, which it
// reads. Returns the last step's record. Throws
// ConfigError when the file is missing or not a metrics file, IoError when no step is past the
// warm-up.
const trainer::StepRecord& read_step_metrics(const std::string& path, int warmup, JobResult& out,
                                             trainer::RunMetrics& run);

// read_step_metrics, then out.model_state_bytes, out.busiest and out.world from the last step's
// "memory". Throws as read_step_metrics does, and IoError when "memory" lacks a field.
void read_metrics(const std::string& path, int warmup, JobResult& out);

// Fills out.parameters from the summary line "model states per rank (N parameters, ...)",
// out.low_precision from "compute <dtype>" and out.offload_note from "  offload: ..." (left empty
// without it). Throws IoError when either of the first two is missing.
void read_trainer_log(const std::string& path, JobResult& out);

// The [model] sizes in a config as `trainer --print-config` writes it (one "key = value" a line).
// Throws IoError when one is missing.
GptSizes read_gpt_sizes(const std::string& path);

}  // namespace zt::bench
