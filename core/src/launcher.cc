#include "zt/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "zt/error.h"

namespace zt {

namespace {

std::atomic<int> g_forwarded_signal{0};

void on_signal(int sig) { g_forwarded_signal.store(sig); }

std::string describe_status(int status) {
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

pid_t spawn_rank(const LaunchSpec& spec, int rank, int port) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  auto set = [&env_strings](const std::string& k, const std::string& v) {
    for (auto& s : env_strings) {
      if (s.compare(0, k.size() + 1, k + "=") == 0) { s = k + "=" + v; return; }
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
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    throw IoError("launcher: cannot fork rank " + std::to_string(rank) + ": " + strerror(errno));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "zt launcher: exec failed\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
  }
  return pid;
}

}  // namespace

int pick_free_port(const std::string& addr) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw IoError(std::string("cannot create a socket: ") + strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    int err = errno;
    close(fd);
    throw IoError("cannot bind a socket on " + addr + " to find a free port: " + strerror(err));
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
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

  g_forwarded_signal.store(0);
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::vector<pid_t> pids(spec.nproc, -1);
  LaunchResult result;
  result.rank_codes.assign(spec.nproc, -1);
  std::vector<bool> running(spec.nproc, false);
  int alive = 0;
  auto stop_all = [&](int sig) {
    for (int r = 0; r < spec.nproc; ++r) if (running[r]) kill(pids[r], sig);
  };
  try {
    for (int r = 0; r < spec.nproc; ++r) {
      pids[r] = spawn_rank(spec, r, port);
      running[r] = true;
      ++alive;
    }
  } catch (...) {
    stop_all(SIGKILL);
    for (int r = 0; r < spec.nproc; ++r) if (running[r]) waitpid(pids[r], nullptr, 0);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    throw;
  }

  auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point kill_at{};
  bool stopping = false;
  while (alive > 0) {
    bool reaped = false;
    for (int r = 0; r < spec.nproc; ++r) {
      int status = 0;
      // Per pid, never -1: the caller may have other children we must not reap.
      if (!running[r] || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      reaped = true;
      running[r] = false;
      --alive;
      result.rank_codes[r] = code_of(status);
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && result.failed_rank < 0 && !stopping) {
        result.failed_rank = r;
        result.exit_code = code_of(status);
        result.message = "rank " + std::to_string(r) + " (pid " + std::to_string(pids[r]) +
                         ") " + describe_status(status);
        if (spec.stop_all_on_failure && alive > 0) {
          result.message += "; stopping the other " + std::to_string(alive) + " rank(s)";
          stopping = true;
          stop_all(SIGTERM);
          kill_at = std::chrono::steady_clock::now() + spec.grace;
        }
      }
    }
    if (reaped) continue;
    auto now = std::chrono::steady_clock::now();
    if (int sig = g_forwarded_signal.exchange(0); sig != 0 && !stopping) {
      result.message = std::string("launcher received ") + strsignal(sig) + "; stopping all ranks";
      result.exit_code = 128 + sig;
      stopping = true;
      stop_all(SIGTERM);
      kill_at = now + spec.grace;
    }
    if (!stopping && spec.timeout.count() > 0 && now - start > spec.timeout) {
      result.message = "job exceeded its " + std::to_string(spec.timeout.count()) +
                       " ms limit; stopping all ranks";
      result.exit_code = 124;
      stopping = true;
      stop_all(SIGTERM);
      kill_at = now + spec.grace;
    }
    if (stopping && now > kill_at) stop_all(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace zt
