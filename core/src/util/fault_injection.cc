#include "util/fault_injection.h"

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "zt/error.h"

namespace zt {

// Each fault ZT_TEST_FAULT may name, with its form: one table for the parse and its message.
constexpr struct {
  const char* kind;
  const char* form;
} kFaults[] = {
    {"skip_collective", "RANK:SEQ"},
    {"stall_read", "RANK:N"},
    {"fail_read", "RANK:N"},
    {"stall_checkpoint_read", "RANK:N"},
    {"stall_checkpoint_manifest", "RANK:N"},
    {"stall_checkpoint_write", "RANK:N"},
    {"slow_step", "RANK:MS"},
    {"stall_trace_write", "RANK:N"},
    {"stall_flight_dump", "RANK:N"},
    {"stall_offload_cleanup", "0:N"},
};

const InjectedFault& injected_fault() {
  static const InjectedFault fault = [] {
    InjectedFault f;
    const char* text = std::getenv(kTestFaultVar);
    if (!text || !*text) return f;
    char kind[32] = {0};
    int rank = -1;
    long long nth = 0;
    const bool parsed = std::sscanf(text, "%31[a-z_]:%d:%lld", kind, &rank, &nth) == 3;
    for (const auto& known : kFaults) {
      if (parsed && std::string(kind) == known.kind) {
        f.kind = kind;
        f.rank = rank;
        f.nth = nth;
        return f;
      }
    }
    std::string expected;
    for (const auto& known : kFaults)
      expected += std::string(expected.empty() ? "" : " or ") + known.kind + ":" + known.form;
    std::fprintf(stderr, "zt: ignoring %s=%s (expected %s)\n", kTestFaultVar, text,
                 expected.c_str());
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
