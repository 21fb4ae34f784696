// zt/host_memory.h: fields of /proc texts, this host's and process's numbers, and the allocator
// settings (the huge-page start this test program itself began with).
#include <doctest/doctest.h>
#include <malloc.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "zt/host_memory.h"
#include "zt/sanitized_build.h"

namespace {

// The shape of /proc/meminfo: "Field:" padded with spaces, the number, "kB".
constexpr const char* kMeminfo = "MemTotal:       65755420 kB\n"
                                 "MemFree:         1234567 kB\n"
                                 "MemAvailable:   41234560 kB\n"
                                 "Buffers:          345678 kB\n"
                                 "HugePages_Total:       0\n";

}  // namespace

TEST_CASE("parse_proc_kib reads one field in bytes, by its exact name") {
  CHECK(zt::parse_proc_kib(kMeminfo, "MemAvailable") == int64_t{41234560} * 1024);
  CHECK(zt::parse_proc_kib(kMeminfo, "MemTotal") == int64_t{65755420} * 1024);
  // A field without a unit is still its number (in kB by the caller's contract).
  CHECK(zt::parse_proc_kib(kMeminfo, "HugePages_Total") == 0);
  // "Mem" is a prefix of three fields but not a field itself.
  CHECK(zt::parse_proc_kib(kMeminfo, "Mem") == -1);
  // /proc/self/status separates with a tab; the last line may lack its newline.
  CHECK(zt::parse_proc_kib("Name:\tzt\nVmHWM:\t  311500 kB\nVmRSS:\t 280000 kB", "VmRSS") ==
        int64_t{280000} * 1024);
}

TEST_CASE("parse_proc_kib: -1 when the field is absent or its number is not one") {
  // Kernels before 3.14 have no MemAvailable.
  CHECK(zt::parse_proc_kib("MemTotal: 1000 kB\nMemFree: 10 kB\n", "MemAvailable") == -1);
  CHECK(zt::parse_proc_kib("", "MemAvailable") == -1);
  CHECK(zt::parse_proc_kib("MemAvailable: many kB\n", "MemAvailable") == -1);
  CHECK(zt::parse_proc_kib("MemAvailable: -5 kB\n", "MemAvailable") == -1);
  CHECK(zt::parse_proc_kib("MemAvailable: 99999999999999999999 kB\n", "MemAvailable") == -1);
  // Too large to be bytes in int64.
  CHECK(zt::parse_proc_kib("MemAvailable: 9223372036854775 kB\n", "MemAvailable") == -1);
  // Only a line that starts with the field counts.
  CHECK(zt::parse_proc_kib(" MemAvailable: 5 kB\n", "MemAvailable") == -1);
}

TEST_CASE("this host and process report plausible numbers") {
  // Linux reports all three; a process that runs this test is resident and has peaked.
  const int64_t available = zt::mem_available_bytes();
  const int64_t rss = zt::process_rss_bytes();
  const int64_t peak = zt::process_peak_rss_bytes();
  CHECK(available > 0);
  CHECK(rss > 0);
  CHECK(peak >= rss);
  CHECK(rss % 1024 == 0);
}

TEST_CASE("glibc_tunables_for_training adds huge pages for malloc's mappings, keeping the rest") {
  CHECK(zt::glibc_tunables_for_training(nullptr) == "glibc.malloc.hugetlb=1");
  CHECK(zt::glibc_tunables_for_training("") == "glibc.malloc.hugetlb=1");
  CHECK(zt::glibc_tunables_for_training("glibc.malloc.arena_max=2") ==
        "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  // The user's own choice of the same tunable stands.
  CHECK(zt::glibc_tunables_for_training("glibc.malloc.hugetlb=0") == "glibc.malloc.hugetlb=0");
}

TEST_CASE("a process needs no restart for huge pages once its tunables name them, either way") {
  CHECK_FALSE(zt::glibc_tunables_name_hugetlb(nullptr));
  CHECK_FALSE(zt::glibc_tunables_name_hugetlb(""));
  CHECK_FALSE(zt::glibc_tunables_name_hugetlb("glibc.malloc.arena_max=2"));
  CHECK(zt::glibc_tunables_name_hugetlb("glibc.malloc.hugetlb=1"));
  CHECK(zt::glibc_tunables_name_hugetlb("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"));
  // What the trainer restarts with never asks for another restart.
  CHECK(zt::glibc_tunables_name_hugetlb(
      zt::glibc_tunables_for_training("glibc.malloc.arena_max=2").c_str()));
}

TEST_CASE("the run header's allocator line says which pages large blocks get, and the fix") {
  const std::string madvise = "always [madvise] never\n";
  const std::string huge = zt::host_allocator_line("glibc.malloc.hugetlb=1", madvise);
  CHECK(huge.find("in transparent huge pages (glibc.malloc.hugetlb=1; THP madvise)") !=
        std::string::npos);
  // Found among other tunables.
  CHECK(zt::host_allocator_line("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1:x=1", madvise) ==
        huge);
  // Unset: 4 KiB pages, and the line gives the variable to set.
  for (const char* unset : {static_cast<const char*>(nullptr), "glibc.malloc.arena_max=2"}) {
    const std::string line = zt::host_allocator_line(unset, madvise);
    CHECK(line.find("4 KiB pages") != std::string::npos);
    CHECK(line.find("GLIBC_TUNABLES=glibc.malloc.hugetlb=1") != std::string::npos);
  }
  // The user's 0 is named as theirs; a host without THP gets 4 KiB pages whatever is asked.
  CHECK(zt::host_allocator_line("glibc.malloc.hugetlb=0", madvise)
            .find("4 KiB pages (glibc.malloc.hugetlb=0 from the environment)") !=
        std::string::npos);
  const std::string off = zt::host_allocator_line("glibc.malloc.hugetlb=1",
                                                  "always madvise [never]");
  CHECK(off.find("4 KiB pages: this host has transparent huge pages off") != std::string::npos);
  CHECK(zt::host_allocator_line("glibc.malloc.hugetlb=1", "").find("THP mode unknown") !=
        std::string::npos);
}

namespace {

std::string file_text(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Whether a mapping of this process's heap carries the huge-page advice ("hg" in its VmFlags).
bool heap_advised() {
  std::istringstream smaps(file_text("/proc/self/smaps"));
  bool in_heap = false;
  for (std::string line; std::getline(smaps, line);) {
    // A mapping's first line is "start-end perms offset dev inode [name]"; its fields follow.
    const bool header = !line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
                        line.find('-') < line.find(' ');
    if (header) in_heap = line.size() >= 6 && line.compare(line.size() - 6, 6, "[heap]") == 0;
    if (in_heap && line.rfind("VmFlags:", 0) == 0 && line.find(" hg") != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a test program starts with its heap in huge pages, as the trainer does, unless told") {
  // This program links zt_startup_heap, as the trainer does. Its GLIBC_TUNABLES as it started:
  // /proc/self/environ holds "NAME=value" strings, each ended by a NUL.
  std::istringstream environ_text(file_text("/proc/self/environ"));
  std::string tunables;
  for (std::string entry; std::getline(environ_text, entry, '\0');) {
    if (entry.rfind("GLIBC_TUNABLES=", 0) == 0) tunables = entry.substr(entry.find('=') + 1);
  }
  const bool thp_madvise =
      file_text("/sys/kernel/mm/transparent_hugepage/enabled").find("[madvise]") !=
      std::string::npos;
#ifdef ZT_SANITIZED_BUILD
  const bool expected = false;  // the hook is left out of sanitized builds
#else
  const bool expected = thp_madvise && tunables.find("glibc.malloc.hugetlb") == std::string::npos;
#endif
  CAPTURE(tunables);
  CAPTURE(thp_madvise);
  CHECK(heap_advised() == expected);
  // A process whose tunables name the setting is left to glibc, whatever the value.
  CHECK_FALSE(zt::advise_startup_heap("glibc.malloc.hugetlb=1"));
  CHECK_FALSE(zt::advise_startup_heap("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"));
}

TEST_CASE("after start-up the heap grows by glibc's own padding, not the start's 64 MiB") {
  // Past the room at its top, in blocks below glibc's smallest threshold for a mapping of their
  // own: the heap must grow. With the start's padding left in place it would grow 64 MiB more.
  const size_t room = mallinfo2().keepcost;
  constexpr size_t kBlock = 100 << 10;
  const size_t count = (room + (8u << 20)) / kBlock;
  const auto before = reinterpret_cast<uintptr_t>(sbrk(0));
  std::vector<void*> blocks;
  for (size_t i = 0; i < count; ++i) blocks.push_back(std::malloc(kBlock));
  const auto after = reinterpret_cast<uintptr_t>(sbrk(0));
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
  CAPTURE(room);
  CHECK(after > before);
  CHECK(after - before < (24u << 20));
}
