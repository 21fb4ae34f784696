// zt/host_memory.h: fields of /proc texts, this host's and process's numbers, and the allocator
// settings (the start-up heap's, which this program itself began with: startup_heap_test.cc).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../skip.h"
#include "zt/host_memory.h"

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

TEST_CASE("the peak resident size starts again from now when reset (a live A/B arm's own)") {
  {
    // 256 MiB touched and returned (a mapping of its own): the peak keeps it.
    std::vector<char> big(256 << 20);
    std::memset(big.data(), 1, big.size());
  }
  const int64_t before = zt::process_peak_rss_bytes();
  REQUIRE(before >= zt::process_rss_bytes() + (200 << 20));
  if (!zt::reset_process_peak_rss()) {
    ZT_SKIP("this kernel refuses /proc/self/clear_refs, so the peak cannot be reset");
  }
  const int64_t after = zt::process_peak_rss_bytes();
  CHECK(after < before - (200 << 20));
  CHECK(after >= zt::process_rss_bytes() - (16 << 20));
}

TEST_CASE("glibc_tunables_for_training adds huge pages for malloc's mappings, keeping the rest") {
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

TEST_CASE("GLIBC_TUNABLES is read as glibc reads it: every entry, the last setting of a name") {
  char a[] = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", b[] = "HOME=/root",
       c[] = "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0",
       empty[] = "GLIBC_TUNABLES=";
  char* two[] = {a, b, empty, c, nullptr};
  const std::string joined = zt::glibc_tunables(two);
  CHECK(joined == "glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0");
  CHECK(zt::glibc_tunable_value(joined, "glibc.malloc.hugetlb") == "0");
  CHECK(zt::glibc_tunable_value(joined, "glibc.malloc.arena_max") == "2");
  CHECK(zt::glibc_tunable_value(joined, "glibc.malloc.tcache_count").empty());
  // Only a whole name: neither a prefix of one nor a name that ends like it.
  CHECK(zt::glibc_tunable_value(joined, "glibc.malloc.huge").empty());
  CHECK(zt::glibc_tunable_value("x.glibc.malloc.hugetlb=1", "glibc.malloc.hugetlb").empty());
  char* none[] = {b, nullptr};
  CHECK(zt::glibc_tunables(none).empty());
  CHECK(zt::glibc_tunables(nullptr).empty());
  // The run header reports what glibc keeps, the later entry's 0.
  CHECK(zt::host_allocator_line(joined.c_str(), "always [madvise] never\n")
            .find("4 KiB pages (glibc.malloc.hugetlb=0 from the environment)") !=
        std::string::npos);
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
