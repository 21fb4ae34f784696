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
#include "zt/bytes.h"
#include "zt/host/environment_block.h"
#include "zt/host/memory_cgroup.h"

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
#endif

constexpr const char* kTunables = "GLIBC_TUNABLES";

}  // namespace

bool thp_in_madvise_mode() {
  // With plain system calls: advise_startup_heap runs before the C++ library is initialised.
  const int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[128];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  return std::strstr(text, "[madvise]") != nullptr;
}

std::string glibc_tunables(char* const* envp) {
  std::string joined;
  for (char* const* slot = environment_find(envp, kTunables); slot;
       slot = environment_find(slot + 1, kTunables)) {
    const char* value = environment_entry_value(*slot, kTunables);
    if (*value == '\0') continue;
    if (!joined.empty()) joined += ':';
    joined += value;
  }
  return joined;
}

std::string glibc_tunable_value(const std::string& tunables, const std::string& name) {
  // "name=value" settings separated by ':'.
  std::string value;
  std::istringstream settings(tunables);
  for (std::string setting; std::getline(settings, setting, ':');) {
    if (setting.size() > name.size() && setting.compare(0, name.size(), name) == 0 &&
        setting[name.size()] == '=') {
      value = setting.substr(name.size() + 1);
    }
  }
  return value;
}

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

int64_t host_memory_room_bytes(std::string* source) {
  int64_t room = mem_available_bytes();
  std::string why = "available (MemAvailable)";
  const MemoryCgroup cgroup = memory_cgroup_of(0);
  if (cgroup.limited() && (room < 0 || cgroup.headroom() < room)) {
    room = cgroup.headroom();
    why = "left under the memory cgroup's limit (" + cgroup.limit_file() + ": " +
          size_text(cgroup.limit) + ", " + size_text(cgroup.usage) + " in use)";
  }
  if (source) *source = why;
  return room;
}

int64_t process_rss_bytes() { return read_proc_kib("/proc/self/status", "VmRSS"); }

int64_t process_peak_rss_bytes() { return read_proc_kib("/proc/self/status", "VmHWM"); }

bool reset_process_peak_rss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return written;
}

void configure_host_allocator() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

bool advise_startup_heap(char* const* envp) {
#if !defined(__GLIBC__)
  (void)envp;
  return false;
#else
  // glibc reads every GLIBC_TUNABLES entry: any that names the setting leaves the heap to glibc.
  for (char* const* slot = environment_find(envp, kTunables); slot;
       slot = environment_find(slot + 1, kTunables)) {
    if (glibc_tunables_name_hugetlb(environment_entry_value(*slot, kTunables))) return false;
  }
  if (!thp_in_madvise_mode()) return false;
  // keepcost: the free room at the heap's top, 0 before its first block. A block larger than it
  // makes glibc grow the heap now, by the block and the padding.
  if (mallinfo2().keepcost >= kFirstBlock) return false;
  mallopt(M_TOP_PAD, kStartupTopPad);
  void* first = std::malloc(kFirstBlock);
  // Back into the top first: the free trims what lies beyond the padding (about the block), so
  // the heap's end is known only after it. The advised pages then all stay in the heap.
  const auto start = reinterpret_cast<uintptr_t>(first);
  std::free(first);
  const uintptr_t from = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(sbrk(0)) & ~(kHugePage - 1);
  g_startup_heap_advised = first != nullptr && to > from &&
                           madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE) == 0;
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

std::string glibc_tunables_for_training(const std::string& current) {
  if (glibc_tunables_name_hugetlb(current.c_str())) return current;
  return current.empty() ? "glibc.malloc.hugetlb=1" : current + ":glibc.malloc.hugetlb=1";
}

std::string host_allocator_line(const char* tunables, const std::string& thp_enabled) {
#if !defined(__GLIBC__)
  (void)tunables;
  (void)thp_enabled;
  return "host allocator: not glibc (its settings were not checked)";
#else
  const std::string value = glibc_tunable_value(tunables ? tunables : "", "glibc.malloc.hugetlb");
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
  return host_allocator_line(glibc_tunables(environ).c_str(),
                             read_kernel_text("/sys/kernel/mm/transparent_hugepage/enabled"));
}

}  // namespace zt
