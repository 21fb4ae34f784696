// `trainer ab` and `trainer compare`: A/B comparisons of a user's own job.
//   ab: runs the job once per arm and repetition, interleaved A B B A (so drift in the machine
//   hits both arms alike), each a child `trainer` with the arm's --set overrides, the same seed
//   and data, then reports (ab_report.h) into --out: ab.json and the runs' folders.
//   compare: the same report from two finished runs' metrics; ab-report: from a live A/B job's.
// Thread safety: run from the main thread; one comparison per process.
#pragma once

#include <ostream>

#include "ab/ab_report.h"
#include "ab/arm_run.h"
#include "app/cli.h"

namespace zt::trainer {

// Exit code: 0, 6 (numeric) when arms that must agree diverged, or a failed run's own code.
int run_ab(const CliArgs& args, std::ostream& out);
int run_compare(const CliArgs& args, std::ostream& out);
// trainer ab-report RUN_DIR: the report of a live A/B job (live_ab.h) from its metrics.
int run_ab_report(const CliArgs& args, std::ostream& out);

}  // namespace zt::trainer
