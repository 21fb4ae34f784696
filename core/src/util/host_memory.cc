#include "zt/host_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cerrno>
#include <cstdlib>
#include <cstring>
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

bool glibc_tunables_name_hugetlb(const char* current) {
  return current && std::strstr(current, "glibc.malloc.hugetlb") != nullptr;
}

std::string glibc_tunables_for_training(const char* current) {
  const std::string given = current ? current : "";
  if (glibc_tunables_name_hugetlb(current)) return given;
  return given.empty() ? "glibc.malloc.hugetlb=1" : given + ":glibc.malloc.hugetlb=1";
}

std::string host_allocator_line(const char* tunables, const std::string& thp_enabled) {
#if !defined(__GLIBC__)
  (void)tunables;
  (void)thp_enabled;
  return "host allocator: not glibc (its settings were not checked)";
#else
  const std::string given = tunables ? tunables : "";
  const std::string key = "glibc.malloc.hugetlb=";
  const size_t at = given.find(key);
  const std::string value = at == std::string::npos
                                ? ""
                                : given.substr(at + key.size(),
                                               given.find(':', at) - at - key.size());
  // The mode is the bracketed word: "always [madvise] never".
  const size_t open = thp_enabled.find('['), close = thp_enabled.find(']');
  const std::string mode = open != std::string::npos && close > open
                               ? thp_enabled.substr(open + 1, close - open - 1)
                               : "";
  const std::string line = "host allocator: glibc, blocks of 4 MiB or more in ";
  if (mode == "never") {
    return line + "4 KiB pages: this host has transparent huge pages off "
                  "(/sys/kernel/mm/transparent_hugepage/enabled)";
  }
  if (value.empty()) {
    return line + "4 KiB pages (512 faults where a huge page takes one): start the ranks with "
                  "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (zt's launcher and the trainer do)";
  }
  if (value == "0") return line + "4 KiB pages (glibc.malloc.hugetlb=0 from the environment)";
  if (value == "1") {
    return line + "transparent huge pages (glibc.malloc.hugetlb=1; THP " +
           (mode.empty() ? std::string("mode unknown") : mode) + ")";
  }
  return line + "huge pages (glibc.malloc.hugetlb=" + value + " from the environment)";
#endif
}

std::string host_allocator_line() {
  // "" (unknown) where the kernel has no transparent huge pages.
  return host_allocator_line(std::getenv("GLIBC_TUNABLES"),
                             read_kernel_text("/sys/kernel/mm/transparent_hugepage/enabled"));
}

}  // namespace zt
