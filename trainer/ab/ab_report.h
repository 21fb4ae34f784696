// What an A/B comparison found, from the arms' runs (metrics.jsonl files): per arm the step-time
// distribution, throughput, memory by category, collectives and offload I/O per step; the speed
// ratio with its bootstrap interval; whether the arms' losses and gradient norms agree; a one-line
// verdict; and ab.json with every number. `trainer ab` and `trainer compare` both end here.
// Thread safety: free functions of their inputs.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "ab/ab_arms.h"
#include "ab/ab_stats.h"
#include "report/report_file.h"
#include "report/run_metrics.h"

namespace zt::trainer {

struct ArmResult {
  Arm arm;
  std::string label;             // what the verdict calls it
  std::vector<RunMetrics> runs;  // in the order they ran
  std::vector<double> step_s;    // every run's steps after the warm-up, pooled
  StepGroups step_groups;        // the same, per run (the bootstrap resamples runs first)
  double median_s = 0, p10_s = 0, p90_s = 0, tokens_per_s = 0;
  std::map<std::string, int64_t> peak_memory;  // category -> the largest over ranks and steps
  int64_t peak_model_states = 0;  // per rank: the largest sum of model-state categories
  int64_t peak_rss = 0;           // the largest over ranks and steps
  std::map<std::string, std::pair<double, double>> comm_per_step;  // op -> {calls, bytes}
  double io_read_per_step = 0, io_written_per_step = 0;
};

struct Agreement {
  bool checked = false;    // false when the arms may differ in math (--allow-different-math)
  bool agree = true;       // every compared step within the tolerance
  bool identical = true;   // every compared value equal bit for bit
  int64_t first_step = 0;  // the first step out of tolerance (when !agree)
  std::string what;        // "loss" or "grad_norm" at that step
  std::string where;       // the run that left the tolerance: "arm B run 1"
  double a = 0, b = 0;     // the two values there
  double max_rel_loss = 0, max_rel_grad_norm = 0;  // over every compared step
  int64_t steps_compared = 0;
};

struct AbResult {
  ArmResult a, b;
  RatioInterval speedup;  // b over a: median step time of a / of b
  Agreement agreement;
  std::vector<std::string> math_keys;  // keys the arms set differently that may change the math
  int64_t warmup_steps = 0;
  double rtol = 0;
  // Said in the verdict when the agreement was not checked: why not.
  std::string unchecked_reason = "the arms differ in math: --allow-different-math";
  std::vector<ArmSwitch> switches;  // live A/B: every switch and its cost
  std::string verdict;
};

// How far y is from x, relative: 0 for equal values and for two NaNs (two arms that skipped the
// same overflowing step), infinite where only one is non-finite (NaN compared false with any
// tolerance, and a difference to inf is within inf times any tolerance: an overflow read as
// agreement).
double relative_difference(double x, double y);

// Fills an arm's numbers from its runs, leaving out each run's first `warmup` steps (all of a
// run's steps when it has no more). Throws ConfigError when no run has a step past the warm-up.
void summarize_arm(ArmResult& arm, int64_t warmup);

// Compares every run of both arms step by step with a's first run: losses and gradient norms
// within `rtol` relative. Runs of one arm must agree too (same seed, same data).
Agreement check_agreement(const ArmResult& a, const ArmResult& b, double rtol);

// The whole result: both arms summarised, the bootstrap interval, the agreement (when `check`)
// and the verdict line.
AbResult analyse(ArmResult a, ArmResult b, int64_t warmup, double rtol, bool check,
                 std::vector<std::string> math_keys);

// The verdict ("B is 1.18x faster than A (95% CI 1.12-1.24), model states the same within 1%,
// 62% fewer all_gather calls, losses identical") from a finished analysis.
std::string verdict_line(const AbResult& r);

// A table of both arms for the terminal, then the verdict.
void print_ab(const AbResult& r, std::ostream& out);

// Writes every number to `path` (JSON), through a temporary file and a rename.
void write_ab_json(const AbResult& r, const std::string& path);

}  // namespace zt::trainer
