// The commands that look inside a finished (or failed) run: `trainer trace merge RUN_DIR`
// (the ranks' timelines in one Trace Event file), `trainer flight RUN_DIR` (the diagnosis of
// the ranks' flight records) and `trainer report RUN_DIR` (report.html of one run).
// Thread safety: one call at a time.
#pragma once

#include <ostream>

#include "app/cli.h"

namespace zt::trainer {

// Each returns the process exit code; errors are thrown (ConfigError for a folder without the
// files, IoError for files that cannot be written).
int run_trace_merge(const CliArgs& cli, std::ostream& out);
int run_flight(const CliArgs& cli, std::ostream& out);
int run_report(const CliArgs& cli, std::ostream& out);

}  // namespace zt::trainer
