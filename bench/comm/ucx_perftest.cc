// zt_bench_comm's raw UCX rows: ucx_perftest tag_bw server/client pairs on loopback, each child
// bounded by a deadline, killed past it, and tied to our life with a parent-death signal.
#include "ucx_perftest.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "zt/error.h"
#include "zt/host/child_process.h"
#include "zt/host/launcher.h"

namespace zt::bench {

namespace {

using Clock = std::chrono::steady_clock;
// Generous: one run moves about 1 GiB, well under a second here.
constexpr std::chrono::seconds kRunTimeout{60};
// How long the client retries while the server is not listening yet.
constexpr std::chrono::seconds kConnectTimeout{10};
constexpr std::chrono::seconds kServerExitTimeout{10};

// Starts argv[0] with stdout and stderr in `log`; the child is killed if we die first.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  // Everything the child needs is built before fork: only async-signal-safe calls after it.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw IoError("cannot fork to run " + argv[0]);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// The child's wait status, or nullopt if it is still running at `deadline`.
std::optional<int> wait_until(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) throw IoError("lost track of child process " + std::to_string(pid));
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// Kills the child on scope exit unless it was reaped (release()).
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ > 0) kill_and_reap(pid_);
  }
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  pid_t pid() const { return pid_; }
  void release() { pid_ = -1; }

 private:
  pid_t pid_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last few lines, to quote a failing run.
std::string tail(const std::string& text, size_t max_chars = 600) {
  std::string t = text.size() > max_chars ? "..." + text.substr(text.size() - max_chars) : text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.empty() ? "(no output)" : t;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by ") + strsignal(WTERMSIG(status));
  return "ended with status " + std::to_string(status);
}

// Runs the client until it connects (the server may not be listening yet) and finishes.
// Returns its output.
std::string run_client(const std::vector<std::string>& argv, const std::string& log,
                       const std::string& what, const std::string& server_log) {
  const auto connect_deadline = Clock::now() + kConnectTimeout;
  for (;;) {
    ChildGuard client(spawn(argv, log));
    std::optional<int> status = wait_until(client.pid(), Clock::now() + kRunTimeout);
    if (!status) {
      throw CommError(what + ": the client did not finish within " +
                      std::to_string(kRunTimeout.count()) + " s; killed it. Output:\n" +
                      tail(read_text(log)));
    }
    client.release();
    std::string out = read_text(log);
    if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return out;
    const bool refused = out.find("Connection refused") != std::string::npos;
    if (!refused || Clock::now() >= connect_deadline) {
      throw CommError(what + ": the client " + describe(*status) + ":\n" + tail(out) +
                      "\nserver output:\n" + tail(read_text(server_log)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// One server/client pair on a free port; returns the client's bandwidth in bytes/s.
double run_pair(const std::string& exe, int64_t bytes, int iters, const std::string& dir) {
  const std::string what = "ucx_perftest tag_bw at " + size_label(bytes);
  const std::vector<std::string> common{
      "-t", "tag_bw", "-s", std::to_string(bytes), "-n", std::to_string(iters),
      // Its default (10000 warm-up messages, capped at iters/10) would be 1 message here.
      "-w", std::to_string(std::max(2, iters / 10)), "-p",
      std::to_string(pick_free_port("127.0.0.1"))};
  std::vector<std::string> server_argv{exe};
  server_argv.insert(server_argv.end(), common.begin(), common.end());
  std::vector<std::string> client_argv{exe, "127.0.0.1"};
  client_argv.insert(client_argv.end(), common.begin(), common.end());

  const std::string server_log = dir + "/perftest_server.log";
  ChildGuard server(spawn(server_argv, server_log));
  std::string out = run_client(client_argv, dir + "/perftest_client.log", what, server_log);
  // The server ends once its client is done; if it does not, the guard kills it.
  if (wait_until(server.pid(), Clock::now() + kServerExitTimeout)) server.release();
  try {
    return parse_perftest_final(out);
  } catch (const IoError& e) {
    throw IoError(what + ": " + e.what());
  }
}

}  // namespace

double parse_perftest_final(const std::string& output) {
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string head;
    fields >> head;
    if (head != "Final:") continue;
    // iterations, 50%ile / average / overall latency (us), average / overall bandwidth (MB/s),
    // average / overall message rate.
    double v[8];
    for (double& x : v) fields >> x;
    if (!fields) break;
    return v[5] * static_cast<double>(kMiB);  // ucx_perftest's "MB" is 2^20 bytes
  }
  throw IoError("no parsable 'Final:' line in ucx_perftest's output:\n" + tail(output));
}

std::string find_ucx_perftest() {
  std::string exe = find_on_path("ucx_perftest");
  if (exe.empty()) {
    throw IoError("ucx_perftest not found on PATH; install ucx-utils "
                  "(scripts/setup.sh installs it)");
  }
  return exe;
}

std::vector<Row> run_ucx_perftest(const Plan& plan, const std::string& scratch_dir) {
  const std::string exe = find_ucx_perftest();
  std::vector<Row> rows;
  for (int64_t bytes : plan.sizes_bytes) {
    const int iters = perftest_iters(bytes);
    std::fprintf(stderr, "zt_bench_comm: ucx_perftest tag_bw %s: %d message(s), %d rep(s)\n",
                 size_label(bytes).c_str(), iters, plan.reps);
    std::vector<double> times;
    for (int rep = 0; rep < plan.reps; ++rep) {
      times.push_back(static_cast<double>(bytes) / run_pair(exe, bytes, iters, scratch_dir));
    }
    Row row;
    row.backend = kUcxPerftest;
    row.op = kTagBw;
    row.bytes = bytes;
    row.world = 2;
    row.iters = iters;
    row.reps = plan.reps;
    row.seconds = median(times);
    row.min_seconds = *std::min_element(times.begin(), times.end());
    row.max_seconds = *std::max_element(times.begin(), times.end());
    row.note = "point-to-point, one direction: the client's overall bandwidth";
    rows.push_back(row);
  }
  return rows;
}

}  // namespace zt::bench
