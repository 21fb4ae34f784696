// Ending a process that linked LibTorch without LibTorch's own teardown.
//
// Why: exit() runs the static destructors of every library, and LibTorch's deregister each of its
// thousands of operators from the dispatcher, rewriting the tables its initialisers wrote. In a
// rank forked from one loaded start of its program (zt/host/launcher.h, fork_ranks), those tables
// sit in pages still shared with that start, so each write also copies a page. Measured on a
// 2-core VM (bench GPT's small cousin, 4 steps, 2 forked ranks): 1.45 s of CPU per rank after its
// last step, most of the job's CPU time. No state of zt's lives in those destructors: files are
// closed and flushed, threads joined, offload files removed by the objects of main's scope.
// Thread safety: call it from main, once the job's objects are destroyed; other threads end with
// the process.
#pragma once

#include "zt/api.h"

namespace zt {

// Flushes std::cout, std::cerr, std::clog and every stdio stream, then ends the process with
// `code` at once (_exit). In a sanitizer's build it calls std::exit(code) instead, so the leak
// check and the sanitizer's reports still run.
[[noreturn]] ZT_API void exit_without_library_teardown(int code);

}  // namespace zt
