#include "zt/host_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "util/kernel_text.h"

namespace zt {

namespace {

int64_t read_proc_kib(const char* path, const std::string& field) {
  return parse_proc_kib(read_kernel_text(path), field);
}

}  // namespace

int64_t parse_proc_kib(const std::string& text, const std::string& field) {
  const std::string key = field + ":";
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const char* number = line.c_str() + key.size();
    char* end = nullptr;
    errno = 0;
    const long long kib = std::strtoll(number, &end, 10);
    if (end == number || errno == ERANGE || kib < 0 ||
        kib > std::numeric_limits<int64_t>::max() / 1024) {
      return -1;
    }
    return static_cast<int64_t>(kib) * 1024;
  }
  return -1;
}

int64_t mem_available_bytes() { return read_proc_kib("/proc/meminfo", "MemAvailable"); }

int64_t process_rss_bytes() { return read_proc_kib("/proc/self/status", "VmRSS"); }

int64_t process_peak_rss_bytes() { return read_proc_kib("/proc/self/status", "VmHWM"); }

void configure_host_allocator() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

std::string glibc_tunables_for_training(const char* current) {
  const std::string given = current ? current : "";
  if (given.find("glibc.malloc.hugetlb") != std::string::npos) return given;
  return given.empty() ? "glibc.malloc.hugetlb=1" : given + ":glibc.malloc.hugetlb=1";
}

}  // namespace zt
