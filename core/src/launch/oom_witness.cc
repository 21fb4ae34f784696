#include "launch/oom_witness.h"

#include "zt/bytes.h"

namespace zt {

namespace {

constexpr const char* kWayOut =
    "; give the job more memory, or make a step need less (`trainer estimate` shows what it "
    "needs; offload, a higher zero.stage or a smaller micro batch lowers it)";

}  // namespace

OomWitness::OomWitness(pid_t pid)
    : cgroup_(memory_cgroup_of(pid)), host_kills_(system_oom_kills()) {}

std::string OomWitness::verdict() const {
  const int64_t cgroup_now = cgroup_.oom_kills >= 0 ? oom_kills_now(cgroup_) : -1;
  if (cgroup_now > cgroup_.oom_kills) {
    std::string where = "memory cgroup " + cgroup_.dir;
    if (cgroup_.limited()) {
      where += " reached its limit of " + size_text(cgroup_.limit) + " (" + cgroup_.limit_file() +
               ")";
    } else {
      where += " ran out of memory";
    }
    return "; the kernel's OOM killer ended it: " + where + kWayOut;
  }
  // The kernel counts every OOM kill, the host's too, in the victim's cgroup (since 4.13, the
  // same release that made the counter readable): a count that is known and did not rise clears
  // this rank. Another tenant's kill, counted host-wide, would call a person's kill -9 an OOM.
  if (cgroup_now >= 0) return "";
  const int64_t host_now = host_kills_ >= 0 ? system_oom_kills() : -1;
  if (host_now > host_kills_) {
    return "; the kernel's OOM killer ended it: the host ran out of memory (/proc/vmstat "
           "oom_kill rose from " +
           std::to_string(host_kills_) + " to " + std::to_string(host_now) + ")" + kWayOut;
  }
  return "";
}

}  // namespace zt
