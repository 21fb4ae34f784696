#include "zt/host/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <utility>

#include "launch/oom_witness.h"
#include "launch/rank_forking.h"
#include "launch/rank_output.h"
#include "zt/error.h"

namespace zt {

namespace {

// A delivered signal and when it came, in one word so that the two are read together: the
// CLOCK_MONOTONIC millisecond (steady_clock's clock) << 8 | the signal number; 0 = none. A busy
// launcher may act on a signal late: the same Ctrl-C twice is told from Ctrl-C again by when they
// came, not by when the launcher looked.
std::atomic<uint64_t> g_first_signal{0};  // the first since the launcher last looked
// A SIGINT a second or more after that first one, before the launcher looked: Ctrl-C again,
// which merged into the first would have been lost.
std::atomic<uint64_t> g_later_interrupt{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "used in a signal handler");
// LaunchSpec::record_signal came to the launcher since it last looked.
std::atomic<bool> g_relay_pending{false};
static_assert(std::atomic<bool>::is_always_lock_free, "used in a signal handler");

void on_record_signal(int) { g_relay_pending.store(true); }

void on_signal(int sig) {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  const uint64_t ms = static_cast<uint64_t>(t.tv_sec) * 1000 +
                      static_cast<uint64_t>(t.tv_nsec) / 1000000;
  const uint64_t now = ms << 8 | static_cast<uint64_t>(sig & 0xff);
  uint64_t first = 0;
  if (g_first_signal.compare_exchange_strong(first, now)) return;
  if (sig == SIGINT && ms - (first >> 8) >= 1000) g_later_interrupt.store(now);
}

struct DeliveredSignal {
  int sig = 0;  // 0: none
  std::chrono::steady_clock::time_point at;
};

DeliveredSignal unpack_signal(uint64_t word) {
  return {static_cast<int>(word & 0xff),
          std::chrono::steady_clock::time_point(std::chrono::milliseconds(word >> 8))};
}

// The signals delivered since the last call, in the order they came: the first, then a later
// Ctrl-C (each .sig 0 when there was none).
std::pair<DeliveredSignal, DeliveredSignal> take_delivered_signals() {
  // The later one first: a signal that comes in between stays for the next call (a copy of the
  // first within its second is dropped, as it would be here).
  const uint64_t later = g_later_interrupt.exchange(0);
  return {unpack_signal(g_first_signal.exchange(0)), unpack_signal(later)};
}

// The status of a rank that ended unseen: waitpid said it is no longer this process's child, so
// how it ended is unknown (neither WIFEXITED nor WIFSIGNALED holds for it).
constexpr int kUnseenEnd = 0x7f;

// waitpid, resumed when a signal to the launcher cuts it short: the launcher's handlers do not
// restart calls (a signal must end its wait for the ranks' start), and a wait cut short would
// read as the process's end with status 0.
pid_t wait_for(pid_t pid, int* status, int flags) {
  pid_t got = -1;
  do {
    got = waitpid(pid, status, flags);
  } while (got < 0 && errno == EINTR);
  return got;
}

// How long a process that was sent SIGKILL may take to be reaped: one stuck in the kernel (an
// NFS call, a driver's teardown) is then left, and said to have ended unseen. A process with
// much pinned or GPU memory may take tens of seconds to release it.
constexpr std::chrono::seconds kKilledEndLimit{60};

// Waits for `pid` to end, up to `limit`: its pid once reaped (status in `status`), 0 when it still
// runs, -1 when it is no child of this process.
pid_t wait_within(pid_t pid, int* status, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int pause_ms = 1;
  for (;;) {
    const pid_t got = wait_for(pid, status, WNOHANG);
    if (got != 0 || std::chrono::steady_clock::now() >= end) return got;
    // poll, not sleep_for: a signal ends it and the loop looks again. sleep_for resumes its
    // nanosleep after each one with the timer's slack added, so signals that keep coming (a
    // scheduler's, a test's) kept it asleep for good.
    ::poll(nullptr, 0, pause_ms);
    pause_ms = std::min(pause_ms * 2, 20);
  }
}

// Reaps `pid`, which was sent SIGKILL; false when it did not end within kKilledEndLimit.
bool reap_killed(pid_t pid, int* status = nullptr) {
  return wait_within(pid, status, kKilledEndLimit) == pid;
}

std::string describe_status(int status) {
  if (status == kUnseenEnd) {
    return "ended unseen (no longer this launcher's child, so its exit status is unknown)";
  }
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with status " + std::to_string(status);
}

int code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Forks and execs `spec`'s program as `rank` (for a forking start, the program that forks
// them all: `extra_env` holds ZT_FORK_RANKS, and `inherited_fds` stay open across the exec).
pid_t spawn_rank(const LaunchSpec& spec, int rank, int port, int stderr_fd,
                 const std::vector<std::pair<std::string, std::string>>& extra_env = {},
                 const std::vector<int>& inherited_fds = {}) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  auto set = [&env_strings](const std::string& k, const std::string& v) {
    for (auto& s : env_strings) {
      if (s.compare(0, k.size() + 1, k + "=") == 0) {
        s = k + "=" + v;
        return;
      }
    }
    env_strings.push_back(k + "=" + v);
  };
  set("RANK", std::to_string(rank));
  set("WORLD_SIZE", std::to_string(spec.nproc));
  set("LOCAL_RANK", std::to_string(rank));
  set("LOCAL_WORLD_SIZE", std::to_string(spec.nproc));
  set("MASTER_ADDR", spec.master_addr);
  set("MASTER_PORT", std::to_string(port));
  set("ZT_LAUNCHER", "1");  // lets ranks report "zt launcher" rather than "torchrun"
  for (const auto& [k, v] : spec.env) set(k, v);
  for (const auto& [k, v] : extra_env) set(k, v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t parent = getpid();
  const int record = spec.record_signal;
  // Signals wait until the child has the default handlers: one that came between the fork and
  // their reset would run the launcher's handler in the child, and be lost there.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  pid_t pid = fork();
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) {
    throw IoError("launcher: cannot fork rank " + std::to_string(rank) + ": " + strerror(errno));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    // SIGKILL, not SIGTERM: a training rank takes SIGTERM for "save and stop after this step",
    // and one without its launcher would do that with no one relaying its output.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);  // ignored by the launcher, and an ignored signal survives exec
    // Ignored until the rank takes it (an ignored signal survives exec): relayed before that,
    // its default action would end the rank.
    if (record > 0) signal(record, SIG_IGN);
    sigprocmask(SIG_SETMASK, &before, nullptr);  // a pending one now acts as on any program
    if (dup2(stderr_fd, 2) < 0) _exit(127);      // every other pipe end closes on exec
    for (int fd : inherited_fds) {
      if (fcntl(fd, F_SETFD, 0) != 0) _exit(127);
    }
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "zt launcher: exec failed\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
  }
  return pid;
}

// How long a forking start may take to report its ranks: the program's libraries load first.
constexpr std::chrono::minutes kForkedStartLimit{5};

// Reads pids from `fd` into `pids` until it has `count`, the pipe ends, `deadline` passes or
// `interrupted()`; returns "" or what went wrong (nothing when interrupted).
std::string read_forked_pids(int fd, int count, std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& interrupted, std::vector<pid_t>& pids) {
  pid_t value = 0;
  size_t have = 0;  // bytes of `value` read
  while (static_cast<int>(pids.size()) < count) {
    if (interrupted()) return "";
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return "it reported " + std::to_string(pids.size()) + " of " + std::to_string(count) +
             " ranks within " + std::to_string(kForkedStartLimit.count()) + " minutes";
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100))) <= 0) continue;
    const ssize_t n = read(fd, reinterpret_cast<char*>(&value) + have, sizeof value - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return "it ended after reporting " + std::to_string(pids.size()) + " of " +
             std::to_string(count) + " ranks";
    }
    have += static_cast<size_t>(n);
    if (have < sizeof value) continue;
    have = 0;
    if (value <= 0) {
      return "it could not fork rank " + std::to_string(pids.size()) + ": " +
             strerror(static_cast<int>(-value));
    }
    pids.push_back(value);
  }
  return "";
}

// The way out of a forking start that failed, by how it failed: `problem` (read_forked_pids's),
// the ranks it `reported`, and how the forking process ended (`status`).
std::string start_failure_hint(const std::string& problem, size_t reported, int status) {
  if (problem.rfind("it could not fork", 0) == 0) {
    return "each rank is a fork of one process: raise the process limit (ulimit -u) or free "
           "memory";
  }
  if (reported == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return "fork_ranks needs a program linked with zt's core";
  if (problem.rfind("it ended", 0) == 0) return "it " + describe_status(status);
  return "the launcher stopped it";  // past the time limit
}

// After the forking process ended: the pids it wrote that were not read yet (ranks it forked
// that must not run on unsupervised). Never blocks: a rank may still hold the pipe open.
void drain_forked_pids(int fd, std::vector<pid_t>& pids) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  pid_t value = 0;
  while (read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value)) {
    if (value > 0) pids.push_back(value);
  }
}

// This process's children that a forked start's first process made (their environment, copied
// from that process's, holds `start`, its ZT_FORK_RANKS) and that are not in `reported`: ranks
// orphaned to this subreaper when the first process was killed between a fork and writing the
// pid. Each gets SIGKILL and is reaped.
void kill_unreported_ranks(const std::string& start, const std::vector<pid_t>& reported) {
  std::vector<pid_t> children;
  std::error_code ec;
  // An orphan's new parent is one of the subreaper's threads.
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream list(task.path() / "children");
    for (pid_t pid; list >> pid;) children.push_back(pid);
  }
  for (const pid_t pid : children) {
    if (std::find(reported.begin(), reported.end(), pid) != reported.end()) continue;
    std::ifstream environ("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    bool made_by_start = false;
    for (std::string var; std::getline(environ, var, '\0') && !made_by_start;) {
      made_by_start = var == start;
    }
    if (!made_by_start) continue;
    kill(pid, SIGKILL);
    reap_killed(pid);
  }
}

// Spawns the ranks, relays their stderr (rank_output.h) and watches them until all ended.
class Supervisor {
 public:
  explicit Supervisor(const LaunchSpec& spec)
      : spec_(spec),
        pids_(spec.nproc, -1),
        status_(spec.nproc, 0),
        running_(spec.nproc, false),
        out_(spec.nproc),
        oom_(spec.nproc),
        killed_by_launcher_(spec.nproc, false) {
    result_.rank_codes.assign(spec.nproc, -1);
  }

  void start(int port) {
    try {
      if (spec_.fork_ranks && spec_.nproc > 1) {
        start_forked(port);
      } else {
        for (int r = 0; r < spec_.nproc; ++r) start_rank(r, port);
      }
    } catch (...) {
      stop_all(SIGKILL);
      for (int r = 0; r < spec_.nproc; ++r)
        if (running_[r]) reap_killed(pids_[r]);
      throw;
    }
  }

  LaunchResult run() {
    const auto begin = std::chrono::steady_clock::now();
    // A signal that came while the ranks started (start_forked stops waiting for them on one).
    handle_delivered_signals();
    while (alive_ > 0) {
      if (reap_all()) continue;
      auto now = std::chrono::steady_clock::now();
      handle_delivered_signals();
      if (!stopping_ && spec_.timeout.count() > 0 && now - begin > spec_.timeout) {
        begin_stop("job exceeded its " + std::to_string(spec_.timeout.count()) +
                       " ms limit; stopping all ranks",
                   124);
      }
      if (settling_ && !stopping_ && now >= stop_at_) begin_stop("", result_.exit_code);
      if (stopping_ && now > kill_at_) kill_all_at_limit();
      if (stopping_ && now > kill_at_ + kKilledEndLimit) leave_unkillable_ranks();
      out_.pump(5);
    }
    if (result_.failed_rank >= 0) name_first_failure();
    if (unstarted_ > 0 && result_.launcher_signal != 0 && result_.exit_code == 0) {
      // A drained job succeeds when every rank finished its step: one never started.
      result_.exit_code = 128 + result_.launcher_signal;
      result_.message = std::string("launcher received ") + strsignal(result_.launcher_signal) +
                        " before " + std::to_string(unstarted_) + " rank(s) started";
    }
    return result_;
  }

 private:
  // Rank `r`'s stderr pipe: the relay takes the read end; returns the write end.
  int open_stderr_pipe(int r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      throw IoError("launcher: cannot create a pipe for rank " + std::to_string(r) + ": " +
                    strerror(errno));
    }
    out_.attach(r, fds[0]);
    return fds[1];
  }

  // Rank `r` runs as `pid`: supervised from here on.
  void supervise(int r, pid_t pid) {
    pids_[r] = pid;
    oom_[r] = OomWitness(pid);
    running_[r] = true;
    ++alive_;
  }

  void start_rank(int r, int port) {
    const int write_end = open_stderr_pipe(r);
    pid_t pid = -1;
    try {
      pid = spawn_rank(spec_, r, port, write_end);
    } catch (...) {
      close(write_end);
      throw;
    }
    close(write_end);
    supervise(r, pid);
  }

  // LaunchSpec::fork_ranks: one exec of the program, which forks the ranks (rank_forking.h);
  // this launcher, a child subreaper until it reaped that first process, inherits them.
  void start_forked(int port) {
    std::vector<int> write_ends;
    const auto close_write_ends = [&write_ends] {
      for (int fd : write_ends) close(fd);
      write_ends.clear();
    };
    int report[2] = {-1, -1};
    try {
      for (int r = 0; r < spec_.nproc; ++r) write_ends.push_back(open_stderr_pipe(r));
      if (pipe2(report, O_CLOEXEC) != 0)
        throw IoError(std::string("launcher: cannot create a pipe: ") + strerror(errno));
    } catch (...) {
      close_write_ends();
      throw;
    }
    int was_subreaper = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    std::vector<int> inherited = write_ends;
    inherited.push_back(report[1]);
    pid_t first = -1;
    const std::string start_value = fork_ranks_value(report[1], getpid(), write_ends);
    const std::string first_env = std::string(kForkRanksVariable) + "=" + start_value;
    try {
      // Each rank writes its number over these zeros (rank_forking.h).
      const std::string placeholder(std::to_string(spec_.nproc - 1).size(), '0');
      first = spawn_rank(spec_, 0, port, write_ends[0],
                         {{kForkRanksVariable, start_value},
                          {kRanksForkedVariable, "1"},
                          {"RANK", placeholder},
                          {"LOCAL_RANK", placeholder}},
                         inherited);
    } catch (...) {
      prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
      close_write_ends();
      close(report[0]);
      close(report[1]);
      throw;
    }
    close_write_ends();
    close(report[1]);
    // A signal to the launcher while the program loads ends the wait; run() then handles it.
    bool interrupted = false;
    std::vector<pid_t> pids;
    std::string problem = read_forked_pids(
        report[0], spec_.nproc, std::chrono::steady_clock::now() + kForkedStartLimit,
        [&interrupted] { return interrupted = g_first_signal.load() != 0; }, pids);
    const bool all_reported = static_cast<int>(pids.size()) >= spec_.nproc;
    int status = 0;
    // Having reported every rank, the first process only exits; a minute past that it is stuck.
    pid_t got = all_reported ? wait_within(first, &status, std::chrono::minutes(1)) : 0;
    if (got == 0) {
      kill(first, SIGKILL);
      got = wait_within(first, &status, kKilledEndLimit);
    }
    if (got != first) status = kUnseenEnd;
    // Its children are this process's from here on.
    prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
    drain_forked_pids(report[0], pids);
    close(report[0]);
    // Killed while it forked, the first process may have left a rank whose pid it never wrote:
    // that one would run on unsupervised until its rendezvous timed out.
    if (!all_reported) kill_unreported_ranks(first_env, pids);
    for (size_t r = 0; r < pids.size() && static_cast<int>(r) < spec_.nproc; ++r)
      supervise(static_cast<int>(r), pids[r]);
    if (interrupted) {
      unstarted_ = spec_.nproc - static_cast<int>(std::min<size_t>(pids.size(), spec_.nproc));
      return;
    }
    if (problem.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
      problem = "it " + describe_status(status) + " after forking the ranks";
    if (!problem.empty()) {
      out_.finish(0);  // its own error, if it printed one, came on rank 0's pipe
      throw IoError("launcher: " + spec_.argv[0] + " did not start its " +
                    std::to_string(spec_.nproc) + " ranks: " + problem + " (" +
                    start_failure_hint(problem, pids.size(), status) + "; its output is above)");
    }
  }

  void stop_all(int sig) {
    for (int r = 0; r < spec_.nproc; ++r)
      if (running_[r]) kill(pids_[r], sig);
  }

  // The ranks SIGKILL has not ended within kKilledEndLimit (stuck in the kernel: an NFS call, a
  // driver's teardown): the launcher stops waiting for them, and says so.
  void leave_unkillable_ranks() {
    for (int r = 0; r < spec_.nproc; ++r) {
      if (!running_[r]) continue;
      running_[r] = false;
      --alive_;
      status_[r] = kUnseenEnd;
      result_.rank_codes[r] = code_of(kUnseenEnd);
      out_.finish(r);
      const std::string line =
          "zt: launcher: rank " + std::to_string(r) + " (pid " + std::to_string(pids_[r]) +
          ") has not ended " + std::to_string(kKilledEndLimit.count()) +
          " s after SIGKILL (stuck in the kernel?); no longer waiting for it\n";
      out_.say(line);
    }
  }

  void handle_delivered_signals() {
    if (g_relay_pending.exchange(false) && spec_.record_signal > 0 && !stopping_) {
      stop_all(spec_.record_signal);
      out_.say("zt: signal " + std::to_string(spec_.record_signal) + " (" +
               strsignal(spec_.record_signal) + ") to the launcher: sent on to every rank\n");
    }
    const auto [first, later] = take_delivered_signals();
    if (first.sig != 0) on_launcher_signal(first.sig, first.at);
    if (later.sig != 0) on_launcher_signal(later.sig, later.at);
  }

  // `at`: when the signal came.
  void on_launcher_signal(int sig, std::chrono::steady_clock::time_point at) {
    result_.launcher_signal = sig;
    if (result_.failed_rank >= 0 && !stopping_) {
      // A rank failed already: the others cannot finish a step without it, so no draining;
      // they get `grace`, and the failure stays what the result reports.
      begin_stop(result_.message, result_.exit_code);
      stop_signal_at_ = at;
      return;
    }
    if (stopping_ && stop_signal_at_ == std::chrono::steady_clock::time_point{}) {
      // The first signal of a stop that a failure or the timeout began: the ranks keep their
      // grace (a flight record may be on its way out); a Ctrl-C a second or more later kills.
      stop_signal_at_ = at;
      return;
    }
    if (stopping_ && sig != SIGINT) {
      // A scheduler's SIGTERM again at the end of its grace time: the ranks' save may still
      // need the KillWait that follows, and the drain deadline bounds the wait all the same.
      return;
    }
    if (stopping_ && at - stop_signal_at_ < std::chrono::seconds(1)) {
      // The same Ctrl-C twice (the terminal's to the process group and a wrapper's forwarded
      // copy), as the ranks read it too: the save goes on.
      return;
    }
    if (stopping_) {
      // Ctrl-C again, a second or more after the first: no more waiting.
      result_.message = std::string("launcher received ") + strsignal(sig) +
                        " again; killing all ranks";
      result_.exit_code = 128 + sig;
      draining_ = false;
      stop_all(SIGKILL);
      return;
    }
    if (spec_.drain.count() <= 0) {
      begin_stop(std::string("launcher received ") + strsignal(sig) + "; stopping all ranks",
                 128 + sig);
      stop_signal_at_ = at;
      return;
    }
    result_.message = std::string("launcher received ") + strsignal(sig) +
                      "; the ranks stop after their current step";
    result_.exit_code = 0;
    stopping_ = true;
    draining_ = true;
    stop_all(sig);
    stop_signal_at_ = at;
    // From when the ranks got it, not from when it came: a late launcher's delay is not theirs.
    set_kill_limit(std::chrono::steady_clock::now() + spec_.drain, /*drain=*/true);
  }

  // The ranks outlived their limit: SIGKILL, with the ranks it reaches remembered, so that one
  // of them named as the first failure is not called out of memory (the OOM witness reads any
  // SIGKILL so) and the way out is named. A rank that died before (the OOM killer's victim whose
  // death began the stop) keeps its own verdict.
  void kill_all_at_limit() {
    for (int r = 0; r < spec_.nproc; ++r) {
      if (running_[r]) killed_by_launcher_[r] = true;
    }
    stop_all(SIGKILL);
  }

  // Why the launcher killed a rank at kill_at_, as set with it.
  void set_kill_limit(std::chrono::steady_clock::time_point at, bool drain) {
    kill_at_ = at;
    if (drain) {
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(spec_.drain).count();
      kill_reason_ = "the launcher killed it: the ranks had not stopped " +
                     std::to_string(seconds) + " s after it passed the signal on" +
                     (spec_.drain_limit.empty() ? "" : " (" + spec_.drain_limit + ")") +
                     ", the time a step and the saves may take; raise those limits when a save "
                     "takes longer";
    } else {
      kill_reason_ = "the launcher killed it: it had not ended " +
                     std::to_string(spec_.grace.count()) + " ms after SIGTERM";
    }
  }

  void begin_stop(const std::string& message, int exit_code) {
    result_.message = message;
    result_.exit_code = exit_code;
    stopping_ = true;
    stop_all(SIGTERM);
    set_kill_limit(std::chrono::steady_clock::now() + spec_.grace, /*drain=*/false);
  }

  // Reaps every rank that ended; true if any did.
  bool reap_all() {
    bool reaped = false;
    for (int r = 0; r < spec_.nproc; ++r) {
      // Per pid, never -1: the caller may have other children we must not reap.
      if (!running_[r]) continue;
      const pid_t got = wait_for(pids_[r], &status_[r], WNOHANG);
      if (got < 0 && errno == ECHILD) status_[r] = kUnseenEnd;  // else waiting forever for it
      else if (got != pids_[r]) continue;
      reaped = true;
      running_[r] = false;
      --alive_;
      out_.finish(r);  // its error line is in the pipe before its exit status is known
      result_.rank_codes[r] = code_of(status_[r]);
      bool failed = !(WIFEXITED(status_[r]) && WEXITSTATUS(status_[r]) == 0);
      // Draining after a signal, the job succeeds only if every rank stopped cleanly. A rank that
      // failed instead (one the signal reached before it could catch it, say) leaves the others
      // waiting for it in their next collective: they get `grace`, not the whole drain.
      if (failed && draining_) {
        if (result_.exit_code == 0) result_.exit_code = code_of(status_[r]);
        if (result_.failed_rank < 0) {
          result_.failed_rank = r;  // the result names it
          // The others wait for it in a collective until `grace` ends: they write their flight
          // records now, or never (SIGKILL leaves none).
          if (spec_.record_signal > 0) stop_all(spec_.record_signal);
        }
        const auto by_grace = std::chrono::steady_clock::now() + spec_.grace;
        if (by_grace < kill_at_) set_kill_limit(by_grace, /*drain=*/false);
      }
      if (failed && result_.failed_rank < 0 && !stopping_) {
        result_.failed_rank = r;
        stopped_others_ = spec_.stop_all_on_failure ? alive_ : 0;
        result_.exit_code = code_of(status_[r]);
        settling_ = stopped_others_ > 0;
        stop_at_ = std::chrono::steady_clock::now() + spec_.settle;
        if (spec_.record_signal > 0) stop_all(spec_.record_signal);
      }
    }
    return reaped;
  }

  // Of two ranks that failed with an error line of their own, whether `a` failed before `b`. A
  // communication error is how a peer sees another rank go, so any other error comes first (a
  // failing rank prints its line only after its unwinding closed what its peers were using);
  // else the line that printed first.
  bool failed_before(int a, int b) const {
    const int comm = static_cast<int>(ErrorKind::kComm);
    const bool a_comm = WEXITSTATUS(status_[a]) == comm, b_comm = WEXITSTATUS(status_[b]) == comm;
    if (a_comm != b_comm) return b_comm;
    return out_.last_seq(a) < out_.last_seq(b);
  }

  // Ranks that failed at once: the first failure (failed_before) is the one named, so the line
  // the user reads first and the rank the result names agree, and a rank whose error came first
  // but whose teardown was slower is not hidden behind a peer that only saw it go.
  void name_first_failure() {
    int first = result_.failed_rank;
    if (WIFEXITED(status_[first]) && out_.last_seq(first) > 0) {
      for (int r = 0; r < spec_.nproc; ++r) {
        bool own_error = WIFEXITED(status_[r]) && WEXITSTATUS(status_[r]) != 0 &&
                         out_.last_seq(r) > 0;
        if (own_error && failed_before(r, first)) first = r;
      }
    }
    result_.failed_rank = first;
    result_.exit_code = code_of(status_[first]);
    result_.error_line = out_.last_line(first);
    result_.message = "rank " + std::to_string(first) + " (pid " + std::to_string(pids_[first]) +
                      ") " + describe_status(status_[first]);
    if (WIFSIGNALED(status_[first]) && WTERMSIG(status_[first]) == SIGKILL)
      result_.message += killed_by_launcher_[first] ? "; " + kill_reason_ : oom_[first].verdict();
    if (stopped_others_ > 0) {
      result_.message += "; stopping the other " + std::to_string(stopped_others_) + " rank(s)";
    }
  }

  const LaunchSpec& spec_;
  std::vector<pid_t> pids_;
  std::vector<int> status_;
  std::vector<bool> running_;
  RankOutputRelay out_;
  std::vector<OomWitness> oom_;  // per rank, read when it started
  LaunchResult result_;
  int alive_ = 0;
  int unstarted_ = 0;  // ranks a signal kept from starting (start_forked)
  int stopped_others_ = 0;
  bool settling_ = false;  // a rank failed: the others get spec_.settle, then SIGTERM
  bool draining_ = false;  // a signal was forwarded: the ranks stop on their own
  std::vector<bool> killed_by_launcher_;  // per rank: running when the launcher sent SIGKILL
  std::string kill_reason_;               // why it did, set with kill_at_
  bool stopping_ = false;
  std::chrono::steady_clock::time_point stop_at_{};
  std::chrono::steady_clock::time_point kill_at_{};
  // The launcher's first signal of the stop (the epoch until one came): a copy of it within a
  // second is the same Ctrl-C, a later one asks to kill.
  std::chrono::steady_clock::time_point stop_signal_at_{};
};

// The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range), from which
// connect() binds every outgoing socket; 32768, Linux's default, where it cannot be read.
int ephemeral_range_start() {
  std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 0, hi = 0;
  if (f >> lo >> hi && lo > 1024) return lo;
  return 32768;
}

// Binds a socket on addr:port (0: any) and returns the port bound, or 0 when it is taken.
int try_bind_port(const std::string& addr, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw IoError(std::string("cannot create a socket: ") + strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1)
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int err = errno;
    close(fd);
    if (err == EADDRINUSE || err == EACCES) return 0;
    throw IoError("cannot bind a socket on " + addr +
                  " to find a free port for the ranks' store: " + strerror(err) +
                  " (ranks started here meet at an address of this host: set " +
                  "launch.master_addr to one, e.g. 127.0.0.1, or set launch.master_port)");
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

}  // namespace

int pick_free_port(const std::string& addr) {
  // Below the ephemeral range: a port the kernel hands out for bind(0) is also where it binds
  // outgoing connections, so between this check and rank 0's listen any connect() on the host
  // (UCX's, another job's store client) could take it, and rank 0 failed with "port in use"
  // under a parallel test run. Below the range only another listener can, and a random draw
  // over ~20000 ports makes two zt starts meeting there unlikely.
  constexpr int kLowest = 10000;
  const int below = ephemeral_range_start();
  if (below - kLowest >= 1000) {
    std::mt19937 draw(std::random_device{}() ^ static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> port_in(kLowest, below - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      if (int port = try_bind_port(addr, port_in(draw))) return port;
    }
  }
  const int port = try_bind_port(addr, 0);
  if (port == 0) throw IoError("cannot find a free port on " + addr + " for the ranks' store");
  return port;
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw IoError(std::string("cannot read /proc/self/exe: ") + strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

LaunchResult launch_local(const LaunchSpec& spec) {
  if (spec.nproc < 1 || spec.argv.empty()) {
    throw InternalError("launch_local needs nproc >= 1 and a command");
  }
  if (access(spec.argv[0].c_str(), X_OK) != 0) {
    throw IoError("launcher: cannot execute '" + spec.argv[0] + "': " + strerror(errno));
  }
  int port = spec.master_port > 0 ? spec.master_port : pick_free_port(spec.master_addr);

  g_first_signal.store(0);
  g_later_interrupt.store(0);
  g_relay_pending.store(false);
  struct sigaction sa {
  }, ignore{}, children{}, relay{}, old_int{}, old_term{}, old_usr1{}, old_pipe{}, old_chld{},
      old_relay{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGUSR1, &sa, &old_usr1);
  // The ranks' lines go on to the launcher's stderr, which may be a pipe that closes
  // (`trainer ... 2>&1 | head`): the relay then drops them (EPIPE), and the job runs on.
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &old_pipe);
  // An ignored SIGCHLD survives exec (a parent that ignores it started this one): the kernel
  // then reaps the ranks itself, and every rank's end read as "unseen" (a failed start, or a
  // job that succeeded reported as failed).
  children.sa_handler = SIG_DFL;
  sigemptyset(&children.sa_mask);
  sigaction(SIGCHLD, &children, &old_chld);
  if (spec.record_signal > 0) {
    relay.sa_handler = on_record_signal;
    sigemptyset(&relay.sa_mask);
    sigaction(spec.record_signal, &relay, &old_relay);
  }
  auto restore = [&] {
    if (spec.record_signal > 0) sigaction(spec.record_signal, &old_relay, nullptr);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    sigaction(SIGUSR1, &old_usr1, nullptr);
    sigaction(SIGPIPE, &old_pipe, nullptr);
    sigaction(SIGCHLD, &old_chld, nullptr);
  };
  Supervisor supervisor(spec);
  try {
    supervisor.start(port);
  } catch (...) {
    restore();
    throw;
  }
  LaunchResult result = supervisor.run();
  restore();
  return result;
}

}  // namespace zt
