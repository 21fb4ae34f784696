// A trainer job in the background for the multi-process tests that act on it while it runs (a
// kill, a signal): its launcher's pid, the pid of one of its ranks, its exit code with a
// deadline; and a rank killed once a condition holds. Include after doctest and test_util.h.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace zt::test {

// Whether `ready` held within `timeout` (asked every millisecond).
inline bool wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A trainer job started in the background in its own process group, output to `log`; its
// ranks are the launcher's children.
class BackgroundJob {
 public:
  BackgroundJob(const std::string& command, const std::string& log) {
    // Built before fork: the child only execs.
    const std::string shell = "exec " + command + " > " + log + " 2>&1";
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      execl("/bin/sh", "sh", "-c", shell.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~BackgroundJob() {
    if (pid_ <= 0 || exit_code_ >= 0) return;
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // The launcher's pid (the shell execs it).
  pid_t pid() const { return pid_; }

  // The pid of rank `rank` (the child of the launcher whose environment says RANK=rank), or -1.
  pid_t rank_pid(int rank) const {
    std::ifstream children("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) +
                           "/children");
    const std::string wanted = "RANK=" + std::to_string(rank);
    for (pid_t child; children >> child;) {
      std::ifstream environ("/proc/" + std::to_string(child) + "/environ");
      for (std::string var; std::getline(environ, var, '\0');) {
        if (var == wanted) return child;
      }
    }
    return -1;
  }

  // The launcher's exit code (128 + signal when killed), or -1 when it runs past `timeout`.
  int wait(std::chrono::seconds timeout) {
    int status = 0;
    const bool ended = wait_until([&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
                                  std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    if (!ended) return -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// Rank `rank` killed with SIGKILL once `ready` holds: its pid, then the job's exit code and log.
struct KilledRank {
  pid_t victim = -1;
  int exit_code = -1;
  std::string log;
};

inline KilledRank kill_rank_when(BackgroundJob& job, int rank, const std::function<bool()>& ready,
                                 const std::string& log) {
  KilledRank k;
  REQUIRE(wait_until(ready, std::chrono::seconds(60)));
  k.victim = job.rank_pid(rank);
  REQUIRE(k.victim > 0);
  REQUIRE(kill(k.victim, SIGKILL) == 0);
  k.exit_code = job.wait(std::chrono::seconds(120));
  k.log = zt::test::read_file(log);
  return k;
}

}  // namespace zt::test
