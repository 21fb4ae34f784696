// `trainer tune`: the composition of the user's job that trains fastest on this host, found within
// a time budget and checked against the job as given.
//   1. estimate: your config, the grid (search_space.h) and --candidate compositions, sized
//      without starting a rank; those that do not fit (with --margin) never start, and in each
//      cell of the grid only the fitting placement with the least offload traffic races.
//   2. a reference run of your config: the losses every trial must agree with (--rtol; trials
//      split the global batch into other micro batches, which reorders fp32 sums).
//   3. phase 1 races the grid, phase 2 the knobs around its leader (compositions_around): in
//      rounds of trial jobs (trial_jobs.h: candidates of one micro batch alternate inside one
//      live job), judged after each round (race.h: the clearly slower leave, then the slower
//      half).
//   4. the winner against your config as a final `trainer ab` (A B B A), whose verdict is the
//      one reported; tuned.toml, tune.json and report.html into --out (tune_report.h).
// A trial that fails says why in one line and the search goes on; every child job stops at the
// budget's end.
// Thread safety: run from the main thread.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tune/composition.h"

namespace zt::trainer {

struct JobSettings;

// trainer estimate / trainer tune's options.
struct TuneArgs {
  int hosts = 1;                      // --hosts: hosts the ranks spread over (MiCS groups per host)
  bool json = false;                  // estimate --json
  double margin = 0.1;                // --margin: share of each tier a composition must leave free
  double budget_s = 900;              // tune --budget (15m)
  std::string out_dir = "runs/tune";  // tune --out
  int64_t trial_steps = 6;            // tune --trial-steps: timed, per candidate and round
  std::vector<std::string> candidates;  // tune --candidate: extra compositions to race
  double rtol = 1e-3;                   // tune --rtol: losses of a trial vs the given config
  // tune --launcher: the command that starts a trial's ranks across --hosts (its executable
  // resolved on PATH); empty: zt's own launcher on this host.
  std::vector<std::string> launcher;
};

// What to tune: the user's job and how to search.
struct TuneRequest {
  std::string config_path;        // named in the output and the report
  std::vector<std::string> base;  // the command line's overrides (--set, --nproc, --plugin-dir)
  ConfigLoader load;              // the user's job with a composition's overrides on top of base
  TuneArgs args;
};

// `overrides` with the keys trial jobs compare arms by spelled out (the config's own values where
// `overrides` does not set them), so that arms of one job differ only where they really do.
std::vector<std::string> explicit_overrides(const Config& config,
                                            std::vector<std::string> overrides);
// Of `overrides` (a candidate's, explicit), those that change the math (changes_math) besides
// the micro batch split, which tune allows.
std::vector<std::string> math_overrides(const JobSettings& job,
                                        const std::vector<std::string>& overrides);
// What trial jobs group candidates by, and the final A/B's "same math": the micro batch split
// ("4x1"), the math overrides, sorted, and with a codec the resolved MiCS group size
// ("4x1|zero.stage=3|groups=-1").
std::string math_key(const JobSettings& job, const std::vector<std::string>& overrides);

// Exit code: 0; 6 when the final A/B finds the winner's losses diverge from the config's. Throws
// ConfigError for a bad config, a config that does not fit, or a reference run that failed.
int run_tune(const TuneRequest& request, std::ostream& out);

}  // namespace zt::trainer
