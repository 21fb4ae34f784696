// The memory cgroup a process runs in, as the Linux kernel shows it, and the kernel's count of
// processes its OOM killer ended. A container's or a Slurm job's memory limit is a cgroup's, not
// the host's: the memory-fit check compares a job with the room left under that limit (the
// host's MemAvailable does not know it), and the launcher tells a rank the OOM killer ended
// (its count rose while the rank died of SIGKILL) from one that someone killed.
//  - cgroup v2: memory.max, memory.current, memory.stat (inactive_file), memory.events (oom_kill)
//  - cgroup v1: memory.limit_in_bytes, memory.usage_in_bytes, memory.stat (total_inactive_file),
//    memory.oom_control (oom_kill)
// The limit that binds is the tightest of the cgroup's and its ancestors'.
// Thread safety: reentrant; every call reads /proc and /sys afresh.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "zt/api.h"

namespace zt {

struct MemoryCgroup {
  std::string dir;         // its folder under /sys/fs/cgroup; "" when none was found
  int version = 0;         // 1 or 2; 0 when none was found
  std::string limit_dir;   // the folder whose limit binds (dir or an ancestor); "" when none
  int64_t limit = -1;      // that limit in bytes; -1 when no cgroup on the way up has one
  int64_t usage = -1;      // bytes charged to limit_dir less its inactive file cache; -1 unknown
  int64_t oom_kills = -1;  // processes of `dir` the OOM killer ended; -1 when unknown

  bool limited() const { return limit >= 0; }
  // Bytes the cgroup may still take before the kernel reclaims or kills: limit - usage (0 at
  // least); -1 when unlimited or unknown.
  int64_t headroom() const;
  // The limit's file, for messages: "<limit_dir>/memory.max" or ".../memory.limit_in_bytes".
  std::string limit_file() const;
};

// The memory cgroup of process `pid` (0: this process), from /proc/PID/cgroup and the files the
// kernel mounts under `sys_root`.
ZT_API MemoryCgroup memory_cgroup_of(pid_t pid, const std::string& sys_root = "/sys/fs/cgroup");
// The same from a /proc/PID/cgroup text already read (tests give a folder of their own as
// `sys_root`).
ZT_API MemoryCgroup memory_cgroup_in(const std::string& proc_cgroup_text,
                                     const std::string& sys_root);

// The OOM kills `cgroup.dir` counts now (its count may have risen since `cgroup` was read);
// -1 when unknown.
ZT_API int64_t oom_kills_now(const MemoryCgroup& cgroup);

// The memory cgroup path in the text of /proc/PID/cgroup: a v1 line whose controllers include
// "memory" wins (the hybrid layout keeps memory on v1), else the v2 line "0::PATH". Sets
// `version` to 1 or 2; "" and 0 when neither is there.
ZT_API std::string memory_cgroup_path(const std::string& proc_cgroup_text, int* version);

// The value of a "name value" line ("oom_kill 3" in memory.events, "inactive_file 4096" in
// memory.stat); -1 when no line has that name or its number is malformed.
ZT_API int64_t parse_keyed_count(const std::string& text, const std::string& name);

// Processes the OOM killer ended on this host since boot (/proc/vmstat oom_kill, Linux 4.13+);
// -1 when unknown.
ZT_API int64_t system_oom_kills();

}  // namespace zt
