// `trainer prepare-data`: data/prepare_data.h's pipeline with a progress bar on stderr and a
// summary (documents, tokens, bytes per token, where the files went) on `out`.
// Thread safety: run from the main thread.
#pragma once

#include <ostream>

#include "app/cli.h"

namespace zt::trainer {

// Exit code 0; errors are thrown (ConfigError for inputs, IoError for outputs).
int run_prepare_data(const CliArgs& args, std::ostream& out);

}  // namespace zt::trainer
