#include "zt/host/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <sstream>

#include "zt/error.h"
#include "zt/host/environment_block.h"
#include "zt/host/standard_streams.h"

namespace zt {

namespace {

// Rank variables of the launchers the trainer recognises (rank_env.cc). Inherited, they would
// make a child trainer act as one rank of someone else's job instead of spawning its own.
const char* const kRankEnv[] = {"RANK",
                                "WORLD_SIZE",
                                "LOCAL_RANK",
                                "LOCAL_WORLD_SIZE",
                                "MASTER_ADDR",
                                "MASTER_PORT",
                                "ZT_LAUNCHER",
                                "ZT_JOB_ID",
                                "ZT_RANK0_SPEAKS",
                                "OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "SLURM_PROCID",
                                "SLURM_NTASKS",
                                "SLURM_LOCALID",
                                "TORCHELASTIC_USE_AGENT_STORE",
                                "TORCHELASTIC_RESTART_COUNT"};

int exit_code_of(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

pid_t spawn_logged(const std::vector<std::string>& argv, const std::string& log_path,
                   bool truncate) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND);
  const int log = ::open(log_path.c_str(), flags, 0644);
  if (log < 0) {
    throw IoError("cannot create log file " + log_path + ": " + std::strerror(errno) +
                  "; choose a writable folder");
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's environment, made here: between fork and exec a child of a threaded parent may
  // call only async-signal-safe functions, and unsetenv takes glibc's environment lock, which
  // another thread of the parent may have held at the fork (the child would wait on it for good).
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    const bool rank_variable = std::any_of(
        std::begin(kRankEnv), std::end(kRankEnv),
        [&](const char* name) { return environment_entry_value(*e, name) != nullptr; });
    if (!rank_variable) env.push_back(*e);
  }
  env.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(log);
    throw IoError(std::string("cannot fork to run ") + argv.at(0) + ": " + std::strerror(err));
  }
  if (pid == 0) {
    // A parent killed without a word (SIGKILL, the OOM killer) stops its job too: a trainer gets
    // SIGTERM (it saves and stops) instead of training its whole run.steps with no one to read
    // its end or enforce a deadline. The setting survives exec; a parent gone already counts.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execve(args[0], args.data(), env.data());
    // Async-signal-safe: write, and glibc's untranslated constant text for errno (strerror may
    // translate, and stdio locks).
    const int err = errno;
    const char* why = ::strerrordesc_np(err);
    write_all_to(STDERR_FILENO, "zt: cannot run ");
    write_all_to(STDERR_FILENO, args[0]);
    write_all_to(STDERR_FILENO, ": ");
    write_all_to(STDERR_FILENO, why ? why : "unknown error");
    write_all_to(STDERR_FILENO, "\n");
    ::_exit(127);
  }
  ::close(log);
  return pid;
}

std::optional<int> try_reap(pid_t pid) {
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return exit_code_of(status);
    if (r == 0) return std::nullopt;
    if (errno != EINTR) {
      throw IoError("waitpid on child " + std::to_string(pid) + ": " + std::strerror(errno));
    }
  }
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw IoError("waitpid on child " + std::to_string(pid) + ": " + std::strerror(errno));
    }
  }
  return exit_code_of(status);
}

int run_logged(const std::vector<std::string>& argv, const std::string& log_path) {
  return wait_child(spawn_logged(argv, log_path));
}

bool is_executable_file(const std::string& path) {
  std::error_code ec;
  return ::access(path.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(path, ec);
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

}  // namespace zt
