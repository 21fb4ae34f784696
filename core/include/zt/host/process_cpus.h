// How many CPUs this process may run on: its affinity mask (what Slurm's --cpus-per-task, a
// container's cpuset or taskset gave it), not the host's online CPUs, which
// std::thread::hardware_concurrency() counts (128 on a node where a task was given 8).
// Thread safety: reads the kernel's view of this process; safe from any thread.
#pragma once

#include "zt/api.h"

namespace zt {

// At least 1.
ZT_API int cpus_this_process_may_use();

}  // namespace zt
