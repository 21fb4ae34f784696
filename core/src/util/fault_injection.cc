#include "util/fault_injection.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "zt/error.h"

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
         std::string(kind) == "stall_checkpoint_manifest" ||
         std::string(kind) == "stall_checkpoint_write" || std::string(kind) == "slow_step" ||
         std::string(kind) == "stall_trace_write" || std::string(kind) == "stall_flight_dump" ||
         std::string(kind) == "stall_offload_cleanup")) {
      f.kind = kind;
      f.rank = rank;
      f.nth = nth;
    } else {
      std::fprintf(stderr,
                   "zt: ignoring %s=%s (expected skip_collective:RANK:SEQ or "
                   "stall_read:RANK:N or fail_read:RANK:N or stall_checkpoint_read:RANK:N or "
                   "stall_checkpoint_manifest:RANK:N or stall_checkpoint_write:RANK:N or "
                   "slow_step:RANK:MS or stall_trace_write:RANK:N or stall_flight_dump:RANK:N or "
                   "stall_offload_cleanup:0:N)\n",
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

void stall_if_injected(const char* kind, std::atomic<int64_t>& calls,
                       std::chrono::milliseconds limit) {
  const InjectedFault& fault = injected_fault();
  if (fault.kind != kind || fault.rank != env_rank()) return;
  if (++calls != fault.nth) return;
  std::this_thread::sleep_for(2 * limit + std::chrono::seconds(10));
  throw InternalError(std::string("the file operation stalled by ") + kTestFaultVar + "=" + kind +
                      " outlived its deadline: FileIoDeadline did not end the process");
}

void sleep_if_slow_step_injected() {
  const InjectedFault& fault = injected_fault();
  if (fault.kind != "slow_step" || fault.rank != env_rank()) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(fault.nth));
}

}  // namespace zt
