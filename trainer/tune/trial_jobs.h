// The jobs `trainer tune` runs its trials in. Candidates that differ only in where bytes live and
// how they travel (stage, shard strategy, buckets, prefetch, persistence, offload) run inside one
// job through live switching (live_ab.h: the job alternates between them every switch_every
// steps, resharding its state, so no process start or warm-up is paid per trial); a job with one
// candidate is a plain run. Each job is a child `trainer` (arm_run.h).
// Thread safety: run from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "ab/arm_run.h"
#include "report/run_metrics.h"
#include "tune/composition.h"

namespace zt::trainer {

// What every trial (and the final A/B) sets: timed, not kept; no checkpoints, no evaluation
// (nor a best checkpoint, which needs it), no report of its own, every step in metrics.jsonl.
// A trial stopped at the budget's end exits without a save.
inline constexpr const char* kTrialOverrides[] = {
    "checkpoint.every_steps=0", "checkpoint.keep_best=\"\"", "checkpoint.save_on_stop=false",
    "eval.every_steps=0",       "run.report=false",          "run.log_every=1"};

struct TrialJob {
  std::vector<Candidate> arms;  // the same micro batch x grad_accum (at most kMaxLiveArms)
  int64_t switch_every = 3;     // steps per turn; a plain run trains switch_every x blocks
  int64_t blocks = 2;           // turns of each arm
  std::string name;             // its folder under the plan's out_dir/runs
};

struct TrialJobResult {
  // Per arm, in the job's order: its timed steps (the first step of each turn left out, and a
  // plain run's first), and the largest resident memory of a rank while it trained.
  std::vector<std::vector<double>> step_s;
  std::vector<int64_t> rss;
  RunMetrics metrics;
  bool failed = false;
  bool stopped = false;  // the budget's end stopped it
  int failed_arm = -1;   // the arm training (or being built) when it failed
  std::string failure;   // one line: what happened, with the log to read
  double seconds = 0;
};

// Runs `job` after `plan` (config, base overrides, out_dir, deadline; plan.steps is set here).
TrialJobResult run_trial_job(ArmRunPlan plan, const TrialJob& job, std::ostream& out);

// The arm of `job` that trained step record `s` of its metrics.
int arm_of_record(const StepRecord& s);

// The first step whose loss (and, `with_grad_norm`, gradient norm) differs from `reference`'s
// same step by more than `rtol` relative; -1 when all compared steps agree. `what` names the
// value and both numbers. Gradient norms are compared only between runs of one micro batch
// split: another split reorders fp32 sums, and measured here the norm of the headline job drifts
// 5.7% by step 19 (micro 1 x accum 4 against 4 x 1, at every stage) while its losses stay within
// 3e-4.
int64_t first_disagreement(const RunMetrics& run, const RunMetrics& reference, double rtol,
                           bool with_grad_norm, std::string& what);

}  // namespace zt::trainer
