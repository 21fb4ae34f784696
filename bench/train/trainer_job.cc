// Runs the trainer for one bench job (fork + exec, no shell, so paths need no quoting).
#include "trainer_job.h"

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

// A GPT of ~10.8M parameters (6 x 12 x 384^2 in the blocks): inside the 10-30M range
// and about 0.6 s a step for 2 ranks on two cores. The rest of the model comes from the config.
const char* const kModelOverrides[] = {"model.n_layer=6", "model.d_model=384", "model.n_head=6",
                                       "model.seq_len=128", "model.vocab=256"};

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

std::vector<std::string> trainer_command(const Plan& plan, const JobSpec& job,
                                         const std::string& out_dir) {
  // Absolute paths into the source tree, so the bench runs from any folder.
  const std::string root = ZT_BENCH_SOURCE_DIR;
  std::vector<std::string> argv = {plan.trainer, "--config", root + "/configs/zero3.toml"};
  auto set = [&](const std::string& kv) {
    argv.push_back("--set");
    argv.push_back(kv);
  };
  set("zero.stage=" + std::to_string(job.stage));
  set(std::string("plugins.shard=") + job.strategy.plugin);
  set("launch.nproc=" + std::to_string(kRanks));
  set("run.steps=" + std::to_string(plan.steps));
  set("run.out_dir=" + out_dir);
  set("data.path=" + root + "/README.md");
  for (const char* kv : kModelOverrides) set(kv);
  // Besides the plugins and the folder, configs/zero3_offload.toml differs from zero3.toml only
  // in its tile size and bounce-buffer pool (which the engine's aligned tiles do not use).
  if (job.offloaded()) set("zero.sub_group_size=" + std::to_string(kOffloadSubGroup));
  if (*job.offload_optimizer)
    set(std::string("plugins.offload_optimizer=") + job.offload_optimizer);
  if (*job.offload_param) set(std::string("plugins.offload_param=") + job.offload_param);
  if (std::string(job.offload_optimizer) == "offload_nvme" ||
      std::string(job.offload_param) == "offload_nvme") {
    set("plugin.offload_nvme.path=" + plan.nvme_path);
  }
  return argv;
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
    throw IoError(std::string("cannot fork the trainer: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    for (const char* name : kRankEnv) ::unsetenv(name);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "zt_bench_train: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(log);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw IoError(std::string("waitpid on the trainer: ") + std::strerror(errno));
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
