#include "zt/host/process_cpus.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace zt {

int cpus_this_process_may_use() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace zt
