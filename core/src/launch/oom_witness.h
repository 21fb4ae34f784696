// Whether the kernel's OOM killer ended a rank: the launcher reads the OOM-kill counts of the
// rank's memory cgroup (or, where the cgroup has no count, of the host) when the rank starts,
// and again when it died of SIGKILL. A count that rose says who killed it (a SIGKILL from a
// person or a scheduler leaves it alone), and the message names the cgroup, its limit and the
// way out.
// Thread safety: none; the launcher's thread owns it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "zt/host/memory_cgroup.h"

namespace zt {

class OomWitness {
 public:
  OomWitness() = default;
  // Reads the counts for the process `pid` (just started).
  explicit OomWitness(pid_t pid);

  // For a rank that died of SIGKILL: "" when no count rose since the rank started, else the
  // words that follow "was killed by signal 9 (Killed)", from "; the kernel's OOM killer..." on.
  std::string verdict() const;

 private:
  MemoryCgroup cgroup_;
  int64_t host_kills_ = -1;
};

}  // namespace zt
