#include "zt/host_memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
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

#if defined(__GLIBC__)
constexpr int kStartupTopPad = 64 << 20;        // LibTorch's initialisers take about 40 MiB
constexpr int kGlibcDefaultTopPad = 128 << 10;  // DEFAULT_TOP_PAD of glibc's malloc
// Below glibc's smallest threshold for a mapping of its own (128 KiB), so it comes from the heap.
constexpr size_t kFirstBlock = 64 << 10;
constexpr uintptr_t kHugePage = 2 << 20;

// Constant-initialised: set before any initialiser runs, read after.
bool g_startup_heap_advised = false;

// With plain system calls: this runs before the C++ library is initialised.
bool thp_in_madvise_mode() {
  const int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[128];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  return std::strstr(text, "[madvise]") != nullptr;
}
#endif

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

bool advise_startup_heap(const char* tunables) {
#if !defined(__GLIBC__)
  (void)tunables;
  return false;
#else
  if (glibc_tunables_name_hugetlb(tunables) || !thp_in_madvise_mode()) return false;
  // keepcost: the free room at the heap's top, 0 before its first block. A block larger than it
  // makes glibc grow the heap now, by the block and the padding.
  if (mallinfo2().keepcost >= kFirstBlock) return false;
  mallopt(M_TOP_PAD, kStartupTopPad);
  void* first = std::malloc(kFirstBlock);
  const uintptr_t from = (reinterpret_cast<uintptr_t>(first) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(sbrk(0)) & ~(kHugePage - 1);
  g_startup_heap_advised = first != nullptr && to > from &&
                           madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE) == 0;
  // Back into the top: trimming keeps the padding, so the advised pages stay in the heap.
  std::free(first);
  if (!g_startup_heap_advised) mallopt(M_TOP_PAD, kGlibcDefaultTopPad);
  return g_startup_heap_advised;
#endif
}

void end_startup_heap_advice() {
#if defined(__GLIBC__)
  if (!g_startup_heap_advised) return;
  g_startup_heap_advised = false;
  mallopt(M_TOP_PAD, kGlibcDefaultTopPad);
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
