// Running another program as a child process, its output to a log file: what the trainer's A/B
// runner and the benchmarks use to run whole `trainer` jobs one after the other. fork + exec, no
// shell; the launcher variables of this process's environment (RANK, WORLD_SIZE, MASTER_ADDR,
// OMPI_COMM_WORLD_*, SLURM_*, ...) are removed in the child, so a trainer started this way
// spawns its own ranks instead of joining the caller's job.
// Thread safety: each function may be called from any thread; a pid is reaped once, by whoever
// waits on it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "zt/api.h"

namespace zt {

// Starts `argv` (argv[0] a path) with stdout and stderr appended to `log_path` (created, or
// truncated first when `truncate`). Returns the child's pid. Throws IoError when the log cannot
// be opened or fork fails; an exec failure shows as exit code 127 with the reason in the log.
// The child gets SIGTERM when the calling thread ends (the kernel's parent-death signal: this
// process killed outright, or that thread gone): call it from a thread that outlives the child.
ZT_API pid_t spawn_logged(const std::vector<std::string>& argv, const std::string& log_path,
                          bool truncate = true);

// The exit code of child `pid` once it has ended (128 + N when signal N ended it), reaping it;
// std::nullopt while it runs. Throws IoError when `pid` is not a child of this process.
ZT_API std::optional<int> try_reap(pid_t pid);

// Waits for child `pid` to end and returns its exit code as try_reap does.
ZT_API int wait_child(pid_t pid);

// spawn_logged + wait_child.
ZT_API int run_logged(const std::vector<std::string>& argv, const std::string& log_path);

// Whether `path` is a file this process may execute: access(X_OK) holds for a folder too, whose
// exec then fails (the shell's PATH lookup skips folders as well).
ZT_API bool is_executable_file(const std::string& path);

// The first executable file `name` in $PATH's folders (an empty one is "."), as a path for
// spawn_logged, which does not search PATH; "" when there is none.
ZT_API std::string find_on_path(const std::string& name);

}  // namespace zt
