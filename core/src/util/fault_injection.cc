#include "util/fault_injection.h"

#include <cstdio>
#include <cstdlib>

namespace zt {

const InjectedFault& injected_fault() {
  static const InjectedFault fault = [] {
    InjectedFault f;
    const char* text = std::getenv(kTestFaultVar);
    if (!text || !*text) return f;
    char kind[32] = {0};
    int rank = -1;
    long long nth = 0;
    if (std::sscanf(text, "%31[a-z_]:%d:%lld", kind, &rank, &nth) == 3 &&
        (std::string(kind) == "skip_collective" || std::string(kind) == "stall_read" ||
         std::string(kind) == "fail_read" || std::string(kind) == "stall_checkpoint_read" ||
         std::string(kind) == "stall_checkpoint_manifest")) {
      f.kind = kind;
      f.rank = rank;
      f.nth = nth;
    } else {
      std::fprintf(stderr,
                   "zt: ignoring %s=%s (expected skip_collective:RANK:SEQ or "
                   "stall_read:RANK:N or fail_read:RANK:N or stall_checkpoint_read:RANK:N or "
                   "stall_checkpoint_manifest:RANK:N)\n",
                   kTestFaultVar, text);
    }
    return f;
  }();
  return fault;
}

int env_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : 0;
}

}  // namespace zt
