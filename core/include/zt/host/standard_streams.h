// Standard input, output and error kept open for the process's life.
//
// Why: a program started with one of file descriptors 0, 1 and 2 closed (`trainer ... >&-`, the
// child of a daemon that closed them) hands that number to the next file it opens, and every
// later write to that stream lands in the file: a job's log lines in its metrics.jsonl or in a
// checkpoint's shard. Each closed one is opened on /dev/null instead, as shells and init systems
// do for the programs they start.
// Thread safety: call it first thing in main, before other threads or files exist.
#pragma once

#include "zt/api.h"

namespace zt {

// Opens /dev/null in place of each of descriptors 0, 1 and 2 that is closed. Throws IoError if
// /dev/null cannot be opened.
ZT_API void keep_standard_streams_open();

}  // namespace zt
