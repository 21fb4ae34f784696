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

#include "app/cli.h"

namespace zt::trainer {

// Exit code: 0; 2 for a bad config, a config that does not fit, or a reference run that failed;
// 6 when the final A/B finds the winner's losses diverge from the config's.
int run_tune(const CliArgs& args, std::ostream& out);

}  // namespace zt::trainer
