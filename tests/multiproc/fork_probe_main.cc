// zt_fork_probe: one rank of the launcher's tests of LaunchSpec::fork_ranks. A program linked
// with zt's core (as the ranks that fork from one start must be) that reports what a rank can
// see of how it was started, to $ZT_CHECK_OUT/rank<RANK>.txt, one "name value" per line:
//   exec_random  the 16 bytes the kernel gives each exec (AT_RANDOM), in hex: ranks forked from
//                one start share them, ranks started by exec each of their own differ;
//   pid, ppid    this rank's and its parent's;
//   rank, local_rank, world  RANK, LOCAL_RANK and WORLD_SIZE;
//   proc_rank    RANK as /proc/self/environ shows it (what tools outside the process read);
//   fork_variable  1 if ZT_FORK_RANKS is still set (it must not be: the core removes it);
//   ranks_forked   1 if ZT_RANKS_FORKED is set (it must be, exactly in forked ranks).
// Then it writes "probe rank R" to stderr and, by its one argument: "exit" exits 0, "fail:R:C"
// exits C on rank R (0 elsewhere) after a line "rank R fails", "sleep" sleeps 5 minutes.
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "zt/host/launcher.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string proc_environ_rank() {
  std::ifstream in("/proc/self/environ");
  for (std::string var; std::getline(in, var, '\0');) {
    if (var.rfind("RANK=", 0) == 0) return var.substr(5);
  }
  return "none";
}

std::string exec_random() {
  const auto* bytes = reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM));
  std::string hex;
  char two[3];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(two, sizeof two, "%02x", bytes[i]);
    hex += two;
  }
  return hex;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "exit";
  const std::string rank = env_or("RANK", "-1");
  {
    std::ofstream out(env_or("ZT_CHECK_OUT", ".") + "/rank" + rank + ".txt");
    out << "exec_random " << exec_random() << "\n"
        << "pid " << getpid() << "\n"
        << "ppid " << getppid() << "\n"
        << "rank " << rank << "\n"
        << "local_rank " << env_or("LOCAL_RANK", "-1") << "\n"
        << "world " << env_or("WORLD_SIZE", "-1") << "\n"
        << "proc_rank " << proc_environ_rank() << "\n"
        << "fork_variable " << (std::getenv("ZT_FORK_RANKS") ? 1 : 0) << "\n"
        << "ranks_forked " << (std::getenv(zt::kRanksForkedVariable) ? 1 : 0) << "\n"
        << "self " << zt::self_executable() << "\n";
  }
  std::fprintf(stderr, "probe rank %s\n", rank.c_str());
  if (mode.rfind("fail:", 0) == 0) {
    const size_t colon = mode.find(':', 5);
    if (rank == mode.substr(5, colon - 5)) {
      std::fprintf(stderr, "rank %s fails\n", rank.c_str());
      return std::atoi(mode.c_str() + colon + 1);
    }
    return 0;
  }
  if (mode == "sleep") std::this_thread::sleep_for(std::chrono::minutes(5));
  return 0;
}
