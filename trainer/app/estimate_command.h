// `trainer estimate`: every composition of the user's job sized without starting a rank
// (tune/composition_estimate.h): a table, or JSON with --json.
// Thread safety: run from the main thread.
#pragma once

#include <ostream>
#include <vector>

#include "app/cli.h"
#include "tune/composition.h"
#include "tune/composition_estimate.h"

namespace zt::trainer {

// The overrides every composition of the job starts from: the command line's --set, --nproc and
// --plugin-dir.
std::vector<std::string> job_overrides(const CliArgs& args);

// Loads the user's job (its file or DeepSpeed JSON, its --set) with a composition's overrides.
ConfigLoader job_loader(const CliArgs& args);

// Exit code 0 (a composition that does not fit is a finding, not an error).
int run_estimate(const CliArgs& args, std::ostream& out);

}  // namespace zt::trainer
