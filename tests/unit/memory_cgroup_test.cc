// zt/host/memory_cgroup.h: the memory cgroup of a process from /proc/PID/cgroup, the limit that
// binds on the way up, and the OOM-kill counts, read from a folder laid out as the kernel lays out
// /sys/fs/cgroup (v1 and v2), and from this host's own.
#include <doctest/doctest.h>

#include <filesystem>

#include "../skip.h"
#include "../test_util.h"
#include "zt/host/memory_cgroup.h"

using zt::test::TempDir;
using zt::test::write_file;

namespace fs = std::filesystem;

namespace {

// A v1 memory cgroup folder with its figures.
void v1_cgroup(const fs::path& dir, const std::string& limit, int64_t usage, int64_t inactive,
               int64_t oom_kills) {
  fs::create_directories(dir);
  write_file((dir / "memory.limit_in_bytes").string(), limit + "\n");
  write_file((dir / "memory.usage_in_bytes").string(), std::to_string(usage) + "\n");
  write_file((dir / "memory.stat").string(),
             "cache 1\ninactive_file 7\ntotal_inactive_file " + std::to_string(inactive) + "\n");
  write_file((dir / "memory.oom_control").string(),
             "oom_kill_disable 0\nunder_oom 0\noom_kill " + std::to_string(oom_kills) + "\n");
}

void v2_cgroup(const fs::path& dir, const std::string& max, int64_t current, int64_t inactive,
               int64_t oom_kills) {
  fs::create_directories(dir);
  write_file((dir / "memory.max").string(), max + "\n");
  write_file((dir / "memory.current").string(), std::to_string(current) + "\n");
  write_file((dir / "memory.stat").string(),
             "anon 5\nfile 9\ninactive_file " + std::to_string(inactive) + "\n");
  write_file((dir / "memory.events").string(),
             "low 0\nhigh 0\nmax 12\noom 2\noom_kill " + std::to_string(oom_kills) + "\n");
}

constexpr const char* kUnlimitedV1 = "9223372036854771712";

}  // namespace

TEST_CASE("memory_cgroup_path: v1's memory line wins, else v2's 0:: line, else none") {
  int version = -1;
  // The hybrid layout: v1 controllers beside a v2 hierarchy; memory is on v1.
  const std::string hybrid = "12:pids:/a\n4:memory:/process_api/job 7\n0::/user.slice/x\n";
  CHECK(zt::memory_cgroup_path(hybrid, &version) == "/process_api/job 7");
  CHECK(version == 1);
  CHECK(zt::memory_cgroup_path("3:cpu,memory,blkio:/slurm/uid_1/job_9\n", &version) ==
        "/slurm/uid_1/job_9");
  CHECK(version == 1);
  // "memoryx" is not "memory"; the path may hold a colon.
  CHECK(zt::memory_cgroup_path("5:memoryx:/no\n0::/system.slice/a:b.scope\n", &version) ==
        "/system.slice/a:b.scope");
  CHECK(version == 2);
  CHECK(zt::memory_cgroup_path("", &version).empty());
  CHECK(version == 0);
  CHECK(zt::memory_cgroup_path("garbage\n7:pids\n", &version).empty());
  CHECK(version == 0);
}

TEST_CASE("parse_keyed_count reads one named count, -1 when absent or not a count") {
  CHECK(zt::parse_keyed_count("oom 2\noom_kill 3\n", "oom_kill") == 3);
  CHECK(zt::parse_keyed_count("oom 2\noom_kill 3\n", "oom") == 2);
  CHECK(zt::parse_keyed_count("oom_kill_disable 0\noom_kill 4", "oom_kill") == 4);
  CHECK(zt::parse_keyed_count("oom_kill x\n", "oom_kill") == -1);
  CHECK(zt::parse_keyed_count("oom_kill -1\n", "oom_kill") == -1);
  CHECK(zt::parse_keyed_count("oom_kill 99999999999999999999\n", "oom_kill") == -1);
  CHECK(zt::parse_keyed_count("", "oom_kill") == -1);
}

TEST_CASE("memory_cgroup_in, v1: the tightest limit on the way up binds, less inactive cache") {
  TempDir root;
  const fs::path mem = root.path() / "memory";
  v1_cgroup(mem, kUnlimitedV1, 900 << 20, 0, 0);
  // The job's parent allows 1 GiB with 900 MiB in use (100 MiB of room); the job allows 512 MiB
  // with 300 MiB charged, 100 MiB of it inactive file cache (312 MiB of room): the parent binds.
  v1_cgroup(mem / "batch", std::to_string(1 << 30), 900 << 20, 0, 0);
  v1_cgroup(mem / "batch" / "job", std::to_string(512 << 20), 300 << 20, 100 << 20, 3);
  zt::MemoryCgroup cg = zt::memory_cgroup_in("4:memory:/batch/job\n", root.path().string());
  CHECK(cg.version == 1);
  CHECK(cg.dir == (mem / "batch" / "job").string());
  CHECK(cg.oom_kills == 3);
  REQUIRE(cg.limited());
  CHECK(cg.limit_dir == (mem / "batch").string());
  CHECK(cg.limit == 1 << 30);
  CHECK(cg.headroom() == 124 << 20);
  CHECK(cg.limit_file() == (mem / "batch" / "memory.limit_in_bytes").string());

  // With the parent unlimited, the job's own limit binds, its inactive cache not counted.
  v1_cgroup(mem / "batch", kUnlimitedV1, 900 << 20, 0, 0);
  cg = zt::memory_cgroup_in("4:memory:/batch/job\n", root.path().string());
  CHECK(cg.limit_dir == (mem / "batch" / "job").string());
  CHECK(cg.limit == 512 << 20);
  CHECK(cg.usage == 200 << 20);
  CHECK(cg.headroom() == 312 << 20);

  // The count read again sees a kill that came after.
  v1_cgroup(mem / "batch" / "job", std::to_string(512 << 20), 300 << 20, 100 << 20, 4);
  CHECK(zt::oom_kills_now(cg) == 4);
}

TEST_CASE("memory_cgroup_in, v2: \"max\" is no limit, the root path and hybrid mounts work") {
  TempDir root;
  write_file(root.file("cgroup.controllers"), "cpu memory pids\n");
  v2_cgroup(root.path() / "user.slice", "max", 5 << 20, 0, 0);
  zt::MemoryCgroup cg = zt::memory_cgroup_in("0::/user.slice\n", root.path().string());
  CHECK(cg.version == 2);
  CHECK(cg.dir == (root.path() / "user.slice").string());
  CHECK(cg.oom_kills == 0);
  CHECK_FALSE(cg.limited());
  CHECK(cg.headroom() == -1);
  CHECK(cg.limit_file().empty());

  v2_cgroup(root.path() / "user.slice", "268435456", 300 << 20, 10 << 20, 1);
  cg = zt::memory_cgroup_in("0::/user.slice\n", root.path().string());
  REQUIRE(cg.limited());
  CHECK(cg.limit == 256 << 20);
  CHECK(cg.usage == 290 << 20);
  CHECK(cg.headroom() == 0);  // over its limit (reclaim pending): no room, never negative
  CHECK(cg.limit_file() == (root.path() / "user.slice" / "memory.max").string());
  CHECK(cg.oom_kills == 1);

  // A process in the root cgroup: the mount itself, no limit files there.
  cg = zt::memory_cgroup_in("0::/\n", root.path().string());
  CHECK(cg.version == 2);
  CHECK(cg.dir == root.path().string());
  CHECK_FALSE(cg.limited());

  // Hybrid: v2 mounted at <root>/unified when <root> holds v1 controllers.
  TempDir hybrid;
  v2_cgroup(hybrid.path() / "unified" / "a", "1048576", 1024, 0, 0);
  cg = zt::memory_cgroup_in("0::/a\n", hybrid.path().string());
  CHECK(cg.dir == (hybrid.path() / "unified" / "a").string());
  CHECK(cg.limit == 1 << 20);
}

TEST_CASE("memory_cgroup_in: a path the mount does not show is no cgroup, not an error") {
  TempDir root;
  fs::create_directories(root.path() / "memory");
  zt::MemoryCgroup cg = zt::memory_cgroup_in("4:memory:/elsewhere\n", root.path().string());
  CHECK(cg.version == 0);
  CHECK(cg.dir.empty());
  CHECK_FALSE(cg.limited());
  CHECK(zt::oom_kills_now(cg) == -1);
}

TEST_CASE("memory_cgroup_of: this process's cgroup as the kernel shows it, and the host's count") {
  const zt::MemoryCgroup cg = zt::memory_cgroup_of(0);
  if (cg.version == 0) ZT_SKIP("no memory cgroup is visible to this process (/proc/self/cgroup)");
  CHECK(fs::is_directory(cg.dir));
  CHECK(cg.oom_kills >= 0);
  CHECK(zt::oom_kills_now(cg) >= cg.oom_kills);
  if (cg.limited()) CHECK(cg.limit > 0);
  CHECK(zt::system_oom_kills() >= 0);  // Linux 4.13 and later
}
