// What `trainer --help` prints (the commands, one line each) and `trainer CMD --help` (that
// command's usage, options and an example).
// Thread safety: pure.
#pragma once

#include "app/cli.h"

namespace zt::trainer {

// The commands in one screen: at most 25 lines.
const char* overview();
// One command's usage, options and an example.
const char* command_help(Command command);

}  // namespace zt::trainer
