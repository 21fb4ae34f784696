#include "common/child_process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>

#include "zt/error.h"

namespace zt::bench {

namespace {

// Rank variables of the launchers the trainer recognises (core/src/rank_env.cc). Inherited, they
// would make the trainer act as one rank of someone else's job instead of spawning its own 2.
const char* const kRankEnv[] = {"RANK",
                                "WORLD_SIZE",
                                "LOCAL_RANK",
                                "LOCAL_WORLD_SIZE",
                                "MASTER_ADDR",
                                "MASTER_PORT",
                                "ZT_LAUNCHER",
                                "OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "SLURM_PROCID",
                                "SLURM_NTASKS",
                                "SLURM_LOCALID"};

}  // namespace

const std::vector<std::string>& bench_gpt_overrides() {
  // ~10.8M parameters (6 x 12 x 384^2 in the blocks): about 0.6 s a step for 2 ranks on two
  // cores.
  static const std::vector<std::string> kOverrides = {"model.n_layer=6", "model.d_model=384",
                                                      "model.n_head=6", "model.seq_len=128",
                                                      "model.vocab=256"};
  return kOverrides;
}

int run_logged(const std::vector<std::string>& argv, const std::string& log_path) {
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) throw IoError("cannot create " + log_path + ": " + std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(log);
    throw IoError(std::string("cannot fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    for (const char* name : kRankEnv) ::unsetenv(name);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "zt bench: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(log);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw IoError(std::string("waitpid on the child: ") + std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::string tail_lines(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += "  | " + l + "\n";
  return out;
}

}  // namespace zt::bench
