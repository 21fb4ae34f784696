// zt_startup_heap (zt/host_memory.h: advise_startup_heap, end_startup_heap_advice), as this test
// program itself started with it: the heap's huge-page advice exactly when it should be there,
// and glibc's usual padding once the program's initialisers have run. Cases of their own file:
// one skips in sanitized builds, whose allocator is the sanitizer's.
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

#include "../skip.h"
#include "zt/host_memory.h"
#include "zt/sanitized_build.h"

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
  // This program links zt_startup_heap, as the trainer does. Its environment as it started:
  // /proc/self/environ holds "NAME=value" strings, each ended by a NUL.
  std::string environ_text = file_text("/proc/self/environ");
  std::vector<char*> envp;
  for (size_t at = 0; at < environ_text.size();) {
    envp.push_back(environ_text.data() + at);
    const size_t end = environ_text.find('\0', at);
    if (end == std::string::npos) break;  // the last string ends with the text's own NUL
    at = end + 1;
  }
  envp.push_back(nullptr);
  const std::string tunables = zt::glibc_tunables(envp.data());
  const std::string hugetlb = zt::glibc_tunable_value(tunables, "glibc.malloc.hugetlb");
  const bool thp_madvise = zt::thp_in_madvise_mode();
#ifdef ZT_SANITIZED_BUILD
  // The hook is left out of sanitized builds, and their allocator is the sanitizer's.
  const bool expected = false;
#else
  // Unnamed, the hook advises the heap; named 1, glibc does as the heap grows; else no one does.
  const bool expected = thp_madvise && (hugetlb.empty() || hugetlb == "1");
#endif
  CAPTURE(tunables);
  CAPTURE(thp_madvise);
  CHECK(heap_advised() == expected);
  // A process whose tunables name the setting, in any entry, is left to glibc, whatever the value.
  char named[] = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
       other[] = "GLIBC_TUNABLES=glibc.malloc.arena_max=2",
       later[] = "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0";
  char* first_names[] = {named, nullptr};
  char* second_names[] = {other, later, nullptr};
  CHECK_FALSE(zt::advise_startup_heap(first_names));
  CHECK_FALSE(zt::advise_startup_heap(second_names));
}

TEST_CASE("after start-up the heap grows by glibc's own padding, not the start's 64 MiB") {
#ifdef ZT_SANITIZED_BUILD
  ZT_SKIP("a sanitized build's allocator is the sanitizer's, which never moves the heap's end");
#endif
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
