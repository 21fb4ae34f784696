// A rank that srun, mpirun or torchrun started runs with glibc.malloc.hugetlb=1 in
// GLIBC_TUNABLES, as the ranks zt's own launcher starts do (zt/host_memory.h says what it does).
// glibc reads its tunables only when a process starts, so such a rank execs itself once more with
// it. This runs from the executable's DT_PREINIT_ARRAY: before the initialisers of any shared
// library, LibTorch's among them, so the restart costs the dynamic loader's work again (0.4 s on a
// 2-core VM, most of it binding LibTorch's symbols), not the whole start-up a restart from main
// would (0.75 s). Measured without the tunable: 4 ranks on two hosts at 1 Gbit/s faulted 4.6x as
// often (their 4 MiB-or-larger blocks in 4 KiB pages) and took 15% more time per step
// (bench/README.md, codec). A single process restarts later, once its config says it is one
// (app/job.cc); a launcher does not, since its ranks get the variable. A value that names
// glibc.malloc.hugetlb is the user's and stays; a failed exec runs on as is (the run header's
// allocator line says so). Sanitized builds skip it: their allocator is the sanitizer's, which
// glibc's tunables do not reach, and nothing instrumented may run this early.
#include <unistd.h>

#include <string>
#include <vector>

#include "zt/host/environment_block.h"
#include "zt/host/rendezvous.h"
#include "zt/host_memory.h"
#include "zt/sanitized_build.h"

namespace {

#ifndef ZT_SANITIZED_BUILD
// Every library is relocated by now and malloc works, so std::string, the rank discovery and
// execve do; no C++ static object of any library is constructed yet, and none is used here. The
// environment is the one the kernel passed (`envp`): libc's environ is set only as main starts.
void restart_rank_with_huge_page_tunable(int, char** argv, char** envp) {
  const auto lookup = [envp](const char* name) { return zt::environment_value(envp, name); };
  // Every GLIBC_TUNABLES entry, as glibc reads them: the restart keeps them all, in one entry.
  const std::string current = zt::glibc_tunables(envp);
  if (zt::glibc_tunables_name_hugetlb(current.c_str())) return;
  try {
    if (!zt::discover_rank_env(lookup).found) return;
  } catch (...) {
    return;  // a malformed rank environment: main says what is wrong with it
  }
  // The environment as given, with the tunables replaced.
  std::string wanted = "GLIBC_TUNABLES=" + zt::glibc_tunables_for_training(current);
  std::vector<char*> env;
  for (char** e = envp; e && *e; ++e)
    if (!zt::environment_entry_value(*e, "GLIBC_TUNABLES")) env.push_back(*e);
  env.push_back(wanted.data());
  env.push_back(nullptr);
  // The executable by its own path, so the process keeps its name (top, ps -e, killall trainer):
  // exec'd as /proc/self/exe it would be named "exe". argv[0] stays as given (ps -f, pgrep -f).
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  const char* path = "/proc/self/exe";
  if (n > 0 && static_cast<size_t>(n) < sizeof self - 1) {
    self[n] = '\0';
    if (access(self, X_OK) == 0) path = self;  // not a file replaced or deleted since it started
  }
  execve(path, argv, env.data());
}

__attribute__((section(".preinit_array"),
               used)) void (*const restart_entry)(int, char**,
                                                  char**) = restart_rank_with_huge_page_tunable;
#endif

}  // namespace
