// One run of a composition of the user's job as a child `trainer`: what `trainer ab` runs for each
// arm and repetition, and `trainer tune` for each trial. The child writes into its own folder
// (metrics.jsonl, a log beside it), trains a fresh job (no resume, no live A/B of its own unless
// the overrides ask for one) and its progress is shown on one line while it trains. And the runs
// of a whole comparison: ab.reps x A B B A, analysed (ab_report.h).
// Thread safety: run from one thread; each call waits for its child.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ab/ab_arms.h"
#include "ab/ab_report.h"
#include "report/run_metrics.h"
#include "zt/error.h"

namespace zt::trainer {

// trainer ab / trainer compare's options (and tune's final A/B).
struct AbArgs {
  std::string a, b;                 // --a / --b: comma-separated overrides of each arm
  int64_t steps = 0;                // --steps: per run; 0 = the config's run.steps
  int reps = 2;                     // --reps: runs per arm, interleaved A B B A
  int64_t warmup = 2;               // --warmup: steps of each run left out of the timings
  std::string out_dir = "runs/ab";  // --out
  bool allow_different_math = false;
  double rtol = 1e-6;  // --rtol: relative difference of losses and gradient norms that agree
  // ab-report --arms: the two arms of a live job of more to compare, as its steps name them;
  // empty: the job's two.
  std::vector<std::string> arms;
};

struct ArmRunPlan {
  std::string config_path;
  std::vector<std::string> base;  // the command line's --set, for every run
  int64_t steps = 0;
  std::string out_dir;  // runs go to out_dir/runs/<name>, logs to out_dir/runs/<name>.log
  // The command that starts each run's ranks, its executable's path first (tune --launcher, e.g.
  // srun inside an allocation); empty: the trainer's own launcher on this host.
  std::vector<std::string> launcher;
  // A run still going at this time is stopped (SIGTERM, then SIGKILL after 10 s) and fails.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// A run that failed, with its exit code: `trainer ab` ends with that code, as the run itself did
// (137 for a rank the kernel's OOM killer ended, not zt's "internal error"). Its kind is the exit
// code's where that is one of zt's (2-7); a run killed by a signal or ended by another code is an
// io failure ("the OS refused"), never a bug to report.
class ArmRunFailed : public Error {
 public:
  ArmRunFailed(int run_exit_code, const std::string& message);
  int run_exit_code() const { return run_exit_code_; }

 private:
  int run_exit_code_;
};

// The restarts a run's launcher logged in `log` (launch.max_restarts, --max-restarts): how many,
// and why the first came ("rank 1 (pid N) was killed by signal 9 (Killed) after step 20"). A
// restarted run's time holds its failure and its steps again, which a comparison of speeds must
// say.
std::pair<int, std::string> restarts_logged(const std::string& log);

// Runs `arm` (its overrides after the plan's) as `name`; `head` starts its progress line
// ("[1/4] arm A (shard_tensor), run 1"), `who` names it in a failure ("the arm A run 1
// (shard_tensor)"). Returns its metrics. Throws ArmRunFailed naming the run, its exit (the
// signal that ended it) and its log's last lines.
RunMetrics run_arm(const ArmRunPlan& plan, const Arm& arm, const std::string& name,
                   const std::string& head, const std::string& who, std::ostream& out);

// The runs of a comparison (ab.reps x A B B A, each plan.steps steps) and their analysis: the
// losses checked for agreement when `math_keys` (the keys the arms set differently that change
// the math) is empty. Throws a failed run's ArmRunFailed.
AbResult run_ab_arms(const ArmRunPlan& plan, ArmResult a, ArmResult b, const AbArgs& ab,
                     const std::vector<std::string>& math_keys, std::ostream& out);

}  // namespace zt::trainer
