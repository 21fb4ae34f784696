// Local multi-process launch: spawns N ranks of a command on this host with the torchrun-style
// environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and
// supervises them. When one rank fails (non-zero exit or a signal) the others are stopped
// (SIGTERM, then SIGKILL after a grace period) and the result names the rank and how it died.
// Each rank's stderr comes through a pipe and is forwarded whole line by whole line, so ranks
// failing together never print into each other's lines; the failed rank's last line (its error)
// is kept in the result. Ranks are started with a parent-death signal (SIGKILL) so none outlives
// the launcher. Every wait for a process is bounded: one that a SIGKILL does not end within 60 s
// (stuck in the kernel) is left and reported as ended unseen.
// Thread safety: launch_local blocks the calling thread; call it from one thread at a time.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "zt/api.h"

namespace zt {

struct LaunchSpec {
  int nproc = 1;
  std::vector<std::string> argv;                         // argv[0] is the executable path
  std::vector<std::pair<std::string, std::string>> env;  // extra variables for every rank
  std::string master_addr = "127.0.0.1";
  int master_port = 0;              // 0: pick a free port
  bool stop_all_on_failure = true;  // false: let survivors run on (to test their own timeouts)
  // After the first failure, how long the other ranks may take to end on their own before
  // SIGTERM: ranks that failed at the same moment then exit with their own error, not ours.
  std::chrono::milliseconds settle{1000};
  std::chrono::milliseconds grace{5000};  // SIGTERM -> SIGKILL
  // > 0: the signal on which a rank writes its flight record and goes on (the trainer's SIGUSR2).
  // Sent to the other ranks as soon as one failed, before `settle` (each writes its record while
  // it still waits where it hung), and, sent to the launcher, on to every running rank (its
  // default action ended the launcher and, with it, its ranks). Ranks start with it ignored, so
  // one that comes before a rank takes it ends no rank.
  int record_signal = 0;
  // SIGINT, SIGTERM or SIGUSR1 to the launcher: 0 stops the ranks (SIGTERM, then SIGKILL after
  // `grace`), exit 128 + signal. > 0 forwards the signal to every rank and gives them this long
  // to stop on their own (the trainer finishes its step and saves); the job's exit code is then
  // 0 when every rank exits 0. A second SIGINT (Ctrl-C again) kills the ranks at once; a repeated
  // SIGTERM or SIGUSR1 (a scheduler's at the end of its grace time) leaves them the drain.
  std::chrono::milliseconds drain{0};
  // What `drain` is made of, for the message of ranks killed when it ran out (e.g. "3 x
  // launch.timeout_s + 2 x checkpoint.timeout_s"); "" says only its length.
  std::string drain_limit;
  std::chrono::milliseconds timeout{0};  // whole job; 0 = none
  // true: argv[0] is a program linked with zt's core, started once; it forks the ranks as soon as
  // its libraries are loaded, before main() (LibTorch's start, about a second of CPU, is then paid
  // once per job instead of once per rank). The ranks are this process's children as with
  // separate starts, with the same environment, pipes and supervision. A program that is not
  // zt's never reports its ranks: launch_local throws IoError when it ends (or after 5 minutes).
  // false: one exec per rank.
  bool fork_ranks = false;
};

// Set (to 1) in the environment of ranks that fork_ranks started.
inline constexpr const char* kRanksForkedVariable = "ZT_RANKS_FORKED";

struct LaunchResult {
  int exit_code = 0;            // 0, the first failing rank's code, or 128+signal
  int failed_rank = -1;         // first rank that failed, -1 if none (see launch_local)
  std::string message;          // "rank 1 (pid 42) was killed by signal 9 (Killed)"
  std::string error_line;       // failed_rank's last line on stderr (its error); "" if none
  std::vector<int> rank_codes;  // per rank: exit code or 128+signal; -1: it never started
  int launcher_signal = 0;      // the signal that stopped the launcher (SIGTERM, ...), 0 if none
};

// Spawns and supervises; returns when all ranks ended. Throws IoError if a rank cannot start.
// The first failure is the first rank reaped with a non-zero status, except that among ranks
// that exited with an error code (not a signal), the one whose last stderr line arrived first
// counts: ranks failing the same way at once are then named in the order their errors printed,
// and a communication error (exit 4, ErrorKind::kComm: how a peer sees another rank go) only when
// no rank exited with another error.
ZT_API LaunchResult launch_local(const LaunchSpec& spec);
// A TCP port on `addr` that is free right now: drawn below the kernel's ephemeral range (where
// outgoing connections cannot take it before rank 0 listens), bind(0)'s where that range starts
// low.
ZT_API int pick_free_port(const std::string& addr);
// Path of the running executable (/proc/self/exe).
ZT_API std::string self_executable();

}  // namespace zt
