#include "ab/arm_run.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "report/report_file.h"
#include "zt/error.h"
#include "zt/host/child_process.h"
#include "zt/host/compose.h"
#include "zt/host/launcher.h"
#include "zt/host/process_exit.h"

namespace zt::trainer {

namespace {

// Lines of `path` that are step records so far (a running job's progress).
int64_t steps_written(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);)
    n += line.find("\"step_time_s\"") != std::string::npos;
  return n;
}

std::string last_lines(const std::string& path, size_t count) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i)
    out += "\n  | " + lines[i];
  return out;
}

// SIGINT or SIGTERM to `trainer ab` / `trainer tune` while a run trains: the run is stopped
// with it (a killed parent left its child training for the config's whole run.steps).
volatile sig_atomic_t g_stop_signal = 0;

void note_stop_signal(int sig) { g_stop_signal = sig; }

// The handlers for the time of one child; the earlier ones come back after.
class StopSignalsForwarded {
 public:
  StopSignalsForwarded() {
    struct sigaction sa {};
    sa.sa_handler = note_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignalsForwarded() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignalsForwarded(const StopSignalsForwarded&) = delete;
  StopSignalsForwarded& operator=(const StopSignalsForwarded&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// Waits for the child, stopping it at the deadline or on a stop signal to this process:
// SIGTERM lets the trainer's launcher take its ranks down; SIGKILL follows when it has not ended
// 10 s later.
int wait_until(pid_t pid, const ArmRunPlan& plan, const std::string& metrics, const char* head,
               bool tty, std::ostream& out, bool& stopped) {
  using Clock = std::chrono::steady_clock;
  std::optional<int> code;
  std::optional<Clock::time_point> killed_at;
  while (!(code = try_reap(pid))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if ((plan.deadline && Clock::now() > *plan.deadline) || g_stop_signal != 0) {
      if (!stopped) {
        ::kill(pid, SIGTERM);
        stopped = true;
        killed_at = Clock::now();
      } else if (Clock::now() - *killed_at > std::chrono::seconds(10)) {
        ::kill(pid, SIGKILL);
      }
    }
    if (tty)
      out << "\r" << head << ": step " << steps_written(metrics) << "/" << plan.steps << std::flush;
  }
  return *code;
}

}  // namespace

std::pair<int, std::string> restarts_logged(const std::string& log) {
  constexpr std::string_view kRestart = "zt: restart ";
  std::ifstream in(log);
  int count = 0;
  std::string first;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kRestart, 0) != 0) continue;
    if (++count > 1) continue;
    // "zt: restart 1/2: <how> after step S; all ranks start again from ...", where <how> may
    // hold a ';' of its own (the OOM killer's witness); zt.launch's line names no cause.
    const size_t why = line.find(": ", kRestart.size());
    const size_t then = line.rfind("all ranks start again");
    if (why == std::string::npos || then == std::string::npos || then < why + 2) continue;
    first = line.substr(why + 2, then - why - 2);
    while (!first.empty() && (first.back() == ' ' || first.back() == ';')) first.pop_back();
  }
  return {count, first};
}

RunMetrics run_arm(const ArmRunPlan& plan, const Arm& arm, const std::string& name,
                   const std::string& head, const std::string& who, std::ostream& out) {
  const std::string dir = plan.out_dir + "/runs/" + name;
  // An earlier run's folder goes first: its files left in the new run's would be read as its.
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) {
    throw IoError("cannot remove the earlier run's " + dir + " (" + ec.message() +
                  "); remove it, or give --out another folder");
  }
  make_output_folder(dir, "--out");
  std::vector<std::string> argv = plan.launcher;
  argv.insert(argv.end(), {self_executable(), "--config", plan.config_path});
  auto set = [&](const std::string& kv) {
    argv.push_back("--set");
    argv.push_back(kv);
  };
  for (const std::string& kv : plan.base) set(kv);
  // Each run is a fresh job: no live A/B unless the arm asks for one, no resuming another run.
  set("ab.arms=[]");
  for (const std::string& kv : arm.overrides) set(kv);
  set("run.steps=" + std::to_string(plan.steps));
  set("run.out_dir=" + dir);
  set("checkpoint.resume=\"\"");
  set("checkpoint.dir=\"" + dir + "/checkpoints\"");
  // A trace.dir of the base config would have every run write (and the last keep) one file.
  set("trace.dir=\"" + dir + "/trace\"");
  const std::string log = dir + ".log";
  const bool tty = isatty(STDOUT_FILENO) == 1 && &out == &std::cout;
  const auto t0 = std::chrono::steady_clock::now();
  const StopSignalsForwarded forwarded;
  // The run's ranks note their file tiers' folders here: a run stopped at the budget's end may
  // be killed mid-step (SIGKILL 10 s after SIGTERM), its launcher and ranks with it, and then
  // nothing else removes the GBs it left on the offload path. Only for a run on this host: a
  // launcher (srun) passes the variable to hosts where the folder is not.
  const std::string notes = plan.launcher.empty() ? make_offload_notes_folder() : "";
  if (!notes.empty()) ::setenv("ZT_OFFLOAD_NOTES", notes.c_str(), 1);
  pid_t pid = -1;
  try {
    pid = spawn_logged(argv, log);
  } catch (...) {
    if (!notes.empty()) {
      ::unsetenv("ZT_OFFLOAD_NOTES");
      remove_noted_offload_folders(notes, "");  // nothing started: only the folder goes
    }
    throw;
  }
  if (!notes.empty()) ::unsetenv("ZT_OFFLOAD_NOTES");
  bool stopped = false;
  const int code = wait_until(pid, plan, dir + "/metrics.jsonl", head.c_str(), tty, out, stopped);
  if (!notes.empty()) {
    for (const std::string& folder : remove_noted_offload_folders(notes, ""))
      out << "zt: removed offload files left by the stopped run: " << folder << "\n";
  }
  if (const int sig = g_stop_signal; sig != 0) {
    // Stopped from outside: no further run, trial or report (tune would go on to the next).
    out << (tty ? "\n" : "") << "zt: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": stopped "
        << who << " (exit " << code << "; its log: " << log << ")\n";
    out.flush();
    exit_without_library_teardown(128 + sig);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (code != 0 || stopped) {
    if (tty) out << "\n";
    std::string what = stopped ? "was stopped at the time budget's end (exit " +
                                     std::to_string(code) + ")"
                               : "exited " + std::to_string(code);
    if (!stopped && code > 128 && code < 128 + NSIG) {
      what += std::string(" (") + strsignal(code - 128) + ")";
    }
    throw ArmRunFailed(code,
                       who + " " + what + "; its output is " + log + ":" + last_lines(log, 6));
  }
  RunMetrics metrics = read_run_metrics(dir);
  // A run stopped from outside by a signal trainer ab did not get (a kill of the run itself)
  // saves and exits 0 short of its steps: compared on the steps it has, its arm's verdict and
  // its agreement rested on fewer steps than asked, without a word.
  const int64_t last = metrics.steps.empty() ? 0 : metrics.steps.back().step;
  if (last < plan.steps) {
    if (tty) out << "\n";
    throw ArmRunFailed(static_cast<int>(ErrorKind::kIo),
                       who + " exited 0 after step " + std::to_string(last) + " of " +
                           std::to_string(plan.steps) + " (stopped from outside?); its output is " +
                           log + ":" + last_lines(log, 6));
  }
  char tail[160];
  std::snprintf(tail, sizeof(tail), ": %zu steps in %.1f s, last loss %.4f", metrics.steps.size(),
                seconds, metrics.steps.back().loss);
  const auto [restarts, why] = restarts_logged(log);
  metrics.restarts = restarts;
  std::string restarted;
  if (restarts > 0) {
    restarted = ", restarted " +
                (restarts == 1 ? std::string("once") : std::to_string(restarts) + " times") + " (" +
                (why.empty() ? "" : why + "; ") + "its log: " + log + ")";
  }
  out << (tty ? "\r" : "") << head << tail << restarted << "\n" << std::flush;
  return metrics;
}

namespace {

// What the kind of a run's failure is by its exit code: zt's own codes as they are; a crash
// (SIGSEGV, SIGABRT, SIGFPE, SIGILL: the program's fault, not the machine's) internal; anything
// else the environment's, as I/O: killed from outside, the OOM killer's SIGKILL, a SIGBUS (a
// full /dev/shm, a mapped file cut short under the job).
ErrorKind kind_of_exit(int code) {
  if (code >= 2 && code <= 7) return static_cast<ErrorKind>(code);
  for (const int crash : {SIGSEGV, SIGABRT, SIGFPE, SIGILL}) {
    if (code == 128 + crash) return ErrorKind::kInternal;
  }
  return ErrorKind::kIo;
}

}  // namespace

ArmRunFailed::ArmRunFailed(int run_exit_code, const std::string& message)
    : Error(kind_of_exit(run_exit_code), message), run_exit_code_(run_exit_code) {}

namespace {

// One run of an arm: out_dir/runs/<arm>-<rep>.
RunMetrics run_arm(const ArmRunPlan& plan, const Arm& arm, int rep, int index, int total,
                   std::ostream& out) {
  char head[128];
  std::snprintf(head, sizeof(head), "[%d/%d] arm %s (%s), run %d", index, total, arm.name.c_str(),
                arm_label(arm).c_str(), rep);
  return run_arm(
      plan, arm, arm.name + "-" + std::to_string(rep), head,
      "the arm " + arm.name + " run " + std::to_string(rep) + " (" + arm_label(arm) + ")", out);
}

}  // namespace

AbResult run_ab_arms(const ArmRunPlan& plan, ArmResult a, ArmResult b, const AbArgs& ab,
                     const std::vector<std::string>& math_keys, std::ostream& out) {
  out << "zt ab: " << plan.config_path << ", " << ab.reps << " run(s) an arm (in A B B A order) of "
      << plan.steps << " steps, first " << ab.warmup << " of each left out\n  A: " << a.label
      << "\n  B: " << b.label << "\n";
  const int total = 2 * ab.reps;
  int index = 0;
  for (int rep = 1; rep <= ab.reps; ++rep) {
    const bool a_first = rep % 2 == 1;
    for (ArmResult* arm :
         a_first ? std::vector<ArmResult*>{&a, &b} : std::vector<ArmResult*>{&b, &a}) {
      try {
        arm->runs.push_back(run_arm(plan, arm->arm, rep, ++index, total, out));
      } catch (const ArmRunFailed& e) {
        // The runs before it are whole: say where, so that they are not run again to compare.
        std::string finished;
        for (const ArmResult* done : {&a, &b}) {
          for (const RunMetrics& run : done->runs) {
            finished += (finished.empty() ? "" : ", ") + done->arm.name + " " + run.path;
          }
        }
        if (finished.empty()) throw;
        throw ArmRunFailed(e.run_exit_code(),
                           std::string(e.what()) + "\nthe runs that finished: " + finished +
                               " (trainer compare RUN_A RUN_B compares an A run with a B run)");
      }
    }
  }
  // --allow-different-math: no agreement check, whatever the keys (the user knows they differ).
  AbResult result = analyse(std::move(a), std::move(b), ab.warmup, ab.rtol,
                            math_keys.empty() && !ab.allow_different_math, math_keys);
  if (math_keys.empty()) result.unchecked_reason = "--allow-different-math";
  return result;
}

}  // namespace zt::trainer
