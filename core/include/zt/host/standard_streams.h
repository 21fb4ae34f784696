// Standard input, output and error kept open for the process's life.
//
// Why: a program started with one of file descriptors 0, 1 and 2 closed (`trainer ... >&-`, the
// child of a daemon that closed them) hands that number to the next file it opens, and every
// later write to that stream lands in the file: a job's log lines in its metrics.jsonl or in a
// checkpoint's shard. Each closed one is opened on /dev/null instead, as shells and init systems
// do for the programs they start.
// Thread safety: keep_standard_streams_open first thing in main, before other threads or files
// exist; write_all_to from any thread.
#pragma once

#include <string_view>

#include "zt/api.h"

namespace zt {

// Opens /dev/null in place of each of descriptors 0, 1 and 2 that is closed. Throws IoError if
// /dev/null cannot be opened.
ZT_API void keep_standard_streams_open();

// Writes all of `text` to `fd` (stderr, a pipe) with write(2): in one call when the pipe or
// terminal takes it whole, so that the lines of processes sharing the stream do not interleave;
// again after EINTR or a short write. Gives up without a word when the stream is gone: there is
// nowhere better to say so.
ZT_API void write_all_to(int fd, std::string_view text);

}  // namespace zt
