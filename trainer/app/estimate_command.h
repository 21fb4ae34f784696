// `trainer estimate`: every composition of the user's job sized without starting a rank
// (tune/composition_estimate.h): a table, or JSON with --json.
// Thread safety: run from the main thread.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "app/cli.h"
#include "tune/composition.h"
#include "tune/composition_estimate.h"

namespace zt::trainer {

// Where the job's plugins are looked for: --plugin-dir folders first, then the config's
// plugins.dirs (with --set). Reads nothing else of the config: the plugins commands must work
// with a file that only names where plugins live.
std::vector<std::string> plugin_search_dirs(const CliArgs& args);
// The overrides every composition of the job starts from: the command line's --set, --nproc and
// --plugin-dir (with the config's plugins.dirs after its folders, as plugin_search_dirs()).
// Every rank parses the same command line, so each finds the same plugins.
std::vector<std::string> job_overrides(const CliArgs& args);

// Loads the user's job (its file or DeepSpeed JSON, its --set) with a composition's overrides.
ConfigLoader job_loader(const CliArgs& args);

// Exit code 0 (a composition that does not fit is a finding, not an error).
int run_estimate(const CliArgs& args, std::ostream& out);

}  // namespace zt::trainer
