// `trainer tune --config FILE`: the command line made into a request for the tuner (tune/tuner.h,
// which says what it does).
// Thread safety: run from the main thread.
#pragma once

#include <ostream>

#include "app/cli.h"

namespace zt::trainer {

// Exit code: 0; 2 for a bad config, a config that does not fit, or a reference run that failed;
// 6 when the final A/B finds the winner's losses diverge from the config's.
int run_tune(const CliArgs& args, std::ostream& out);

}  // namespace zt::trainer
