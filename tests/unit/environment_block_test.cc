// zt/host/environment_block.h: the start-up hooks' reading of the environment the kernel passed.
#include <doctest/doctest.h>

#include <string>

#include "zt/host/environment_block.h"

TEST_CASE("an environment entry's value is found by its exact name only") {
  CHECK(std::string(zt::environment_entry_value("GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
                                                "GLIBC_TUNABLES")) == "glibc.malloc.hugetlb=1");
  CHECK(std::string(zt::environment_entry_value("RANK=", "RANK")).empty());
  // A name that the entry's name begins with, or that begins with the entry's name, is another.
  CHECK(zt::environment_entry_value("RANKS=3", "RANK") == nullptr);
  CHECK(zt::environment_entry_value("RANK=3", "RANKS") == nullptr);
  CHECK(zt::environment_entry_value("RANK", "RANK") == nullptr);
  CHECK(zt::environment_entry_value("LOCAL_RANK=1", "RANK") == nullptr);
}

TEST_CASE("an environment block gives the first entry that names the variable, as getenv does") {
  char a[] = "LOCAL_RANK=1", b[] = "RANK=2", c[] = "RANK=5", d[] = "WORLD_SIZE=4";
  char* envp[] = {a, b, c, d, nullptr};
  CHECK(std::string(zt::environment_value(envp, "RANK")) == "2");
  CHECK(std::string(zt::environment_value(envp, "WORLD_SIZE")) == "4");
  CHECK(zt::environment_value(envp, "MASTER_ADDR") == nullptr);
  char* empty[] = {nullptr};
  CHECK(zt::environment_value(empty, "RANK") == nullptr);
  CHECK(zt::environment_value(nullptr, "RANK") == nullptr);
}

TEST_CASE("every entry that names a variable is found in turn, in the block's order") {
  char a[] = "GLIBC_TUNABLES=glibc.malloc.arena_max=2", b[] = "HOME=/root",
       c[] = "GLIBC_TUNABLES=glibc.malloc.hugetlb=0";
  char* envp[] = {a, b, c, nullptr};
  char* const* first = zt::environment_find(envp, "GLIBC_TUNABLES");
  REQUIRE(first == &envp[0]);
  char* const* second = zt::environment_find(first + 1, "GLIBC_TUNABLES");
  REQUIRE(second == &envp[2]);
  CHECK(zt::environment_find(second + 1, "GLIBC_TUNABLES") == nullptr);
  CHECK(zt::environment_find(envp, "GLIBC") == nullptr);
  CHECK(zt::environment_find(nullptr, "HOME") == nullptr);
}
