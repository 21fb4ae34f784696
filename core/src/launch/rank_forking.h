// Ranks forked from one start of their program (LaunchSpec::fork_ranks), the protocol between the
// launcher and the program it starts once.
//
// Why: loading LibTorch costs about a second of CPU in every process that links it (the dynamic
// linker binds its symbols, and its static initializers register every operator), which is the
// most of what a short job's ranks do on a small host. A program linked with zt's core can pay it
// once: the launcher starts it with ZT_FORK_RANKS set, and zt's core, the moment its own
// libraries (LibTorch among them) are initialized and before any of zt's static state or main()
// runs, forks one child per rank there. Each child becomes a rank as an exec'd one would: its
// RANK and LOCAL_RANK set, its stderr on its own pipe to the launcher, a parent-death signal from
// the launcher. The first process only reports the children's pids and exits; the launcher, a
// child subreaper meanwhile, inherits them and supervises them as the ranks it forked itself.
//
// ZT_FORK_RANKS = "<report fd>:<launcher pid>:<stderr fd of rank 0>,<rank 1>,...", and RANK and
// LOCAL_RANK hold zeros as wide as the largest rank's number: each child writes its number into
// those strings in place (so /proc/<pid>/environ names its rank too). The program
// writes one pid_t per rank, in rank order, to the report fd, or a negative errno where a fork
// failed (then it exits 127). A process started without the variable is untouched.
// Thread safety: the fork runs before main(), where the process has one thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace zt {

inline constexpr const char* kForkRanksVariable = "ZT_FORK_RANKS";

// The variable's value for a launcher `launcher` whose ranks write to `stderr_fds`.
std::string fork_ranks_value(int report_fd, pid_t launcher, const std::vector<int>& stderr_fds);

}  // namespace zt
