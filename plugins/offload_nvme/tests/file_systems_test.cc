// offload_nvme on file systems other than the test disk: /dev/shm (tmpfs), and, each in a child
// process with its own mount namespace so the host's mounts are never touched, a 1 MiB tmpfs
// (no room), a read-only tmpfs (not writable) and a ramfs (refuses O_DIRECT: the buffered
// fallback). Where mounting is not permitted the test reports Skipped, saying why (tests/skip.h).
#include <doctest/doctest.h>
#include "nvme_test_support.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../../../tests/skip.h"
#include "zt/error.h"

namespace fs = std::filesystem;
using zt::nvme_test::count_of;
using zt::nvme_test::in_private_mount;
using zt::nvme_test::make_tier;
using zt::nvme_test::MountRun;
using zt::nvme_test::random_bytes;
using zt::nvme_test::region_files_in;
using zt::nvme_test::StderrCapture;
using zt::test::contains;
using zt::test::TempDir;

namespace {

constexpr int64_t kMiB = 1 << 20;

// Writes and reads back random bytes at unaligned and aligned lengths; "" when all came back.
std::string round_trip_problems(zt::OffloadTier& tier) {
  std::string problems;
  const int64_t region = tier.allocate("states", 4 * kMiB);
  for (int64_t bytes : {int64_t{1}, int64_t{4097}, 3 * kMiB + 5}) {
    const auto data = random_bytes(bytes, bytes);
    std::vector<uint8_t> back(bytes + 1);
    tier.write(region, 4096, data.data(), bytes)->wait();
    tier.read(region, 4096, back.data() + 1, bytes)->wait();
    if (std::memcmp(back.data() + 1, data.data(), bytes) != 0) {
      problems += "bytes differ after a round trip of " + std::to_string(bytes) + "; ";
    }
  }
  return problems;
}

// Does this kernel's file system under `dir` accept O_DIRECT at open?
bool accepts_o_direct(const std::string& dir) {
  const std::string path = dir + "/.zt-odirect-check";
  const int fd = open(path.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0600);
  const bool ok = fd >= 0;
  if (ok) close(fd);
  unlink(path.c_str());
  return ok;
}

std::string cannot_mount(const MountRun& run) {
  return "cannot mount a private file system here: " + run.text;
}

}  // namespace

TEST_CASE("on /dev/shm (tmpfs) data round-trips, buffered with one notice where tmpfs refuses "
          "O_DIRECT, direct where this kernel's tmpfs accepts it") {
  if (!fs::is_directory("/dev/shm")) ZT_SKIP("no /dev/shm on this machine");
  TempDir base;  // only for a unique job name
  const std::string job = base.path().filename().string();
  const bool direct = accepts_o_direct("/dev/shm");
  StderrCapture capture;
  std::string describe, problems;
  {
    auto tier = make_tier("/dev/shm", {}, job);
    tier->prepare(8 * kMiB);
    problems = round_trip_problems(*tier);
    tier->allocate("more", 4096);
    describe = tier->describe();
  }
  const std::string notes = capture.text();
  INFO("stderr: " << notes);
  INFO("describe: " << describe);
  CHECK(problems == "");
  CHECK_FALSE(fs::exists("/dev/shm/zt-" + job));
  if (direct) {
    // Linux 6.6+ tmpfs takes O_DIRECT (and serves it from memory): nothing to fall back from.
    MESSAGE("this kernel's tmpfs accepts O_DIRECT; the fallback is checked on ramfs below");
    CHECK(notes.empty());
    CHECK(contains(describe, "(O_DIRECT,"));
  } else {
    CHECK(count_of(notes, "refuses O_DIRECT") == 1);
    CHECK(contains(notes, "/dev/shm/zt-" + job + "/rank0"));
    CHECK(contains(notes, "tmpfs"));
    CHECK(contains(describe, "(buffered: O_DIRECT refused by tmpfs,"));
  }
}

TEST_CASE("on a file system refusing O_DIRECT (ramfs) the tier falls back to buffered I/O with "
          "one notice naming the path and why, and the data is right") {
  TempDir dir;
  const MountRun run = in_private_mount(dir.path().string(), "ramfs", 0, "",
                                        [](const std::string& mnt) {
    if (accepts_o_direct(mnt)) return std::string("ramfs accepted O_DIRECT");
    StderrCapture capture;
    std::string problems, describe;
    {
      auto tier = make_tier(mnt);
      tier->prepare(8 * kMiB);
      problems = round_trip_problems(*tier);
      tier->allocate("a", 1);
      tier->allocate("b", 5 * kMiB);
      describe = tier->describe();
    }
    const std::string notes = capture.text();
    std::string out;
    if (!problems.empty()) out += problems;
    if (count_of(notes, "refuses O_DIRECT") != 1) out += "notices: [" + notes + "]; ";
    if (!contains(notes, mnt + "/zt-test/rank0 (ramfs)")) out += "notice lacks path: " + notes;
    if (!contains(notes, "Invalid argument (EINVAL)")) out += "notice lacks why: " + notes;
    if (!contains(describe, "(buffered: O_DIRECT refused by ramfs, io_uring queue depth 8")) {
      out += "describe: " + describe + "; ";
    }
    if (fs::exists(mnt + "/zt-test")) out += "the job folder is left; ";
    return out.empty() ? std::string("ok") : out;
  });
  if (!run.mounted) ZT_SKIP_UNLESS_CI(cannot_mount(run));
  CHECK(run.text == "ok");
}

// (No ';' in test names: CTest would split the name there.)
TEST_CASE("prepare() on a 1 MiB tmpfs fails naming the bytes needed and free, and allocate() "
          "beyond the free space fails naming the file and bytes, leaving no file") {
  TempDir dir;
  const MountRun run = in_private_mount(dir.path().string(), "tmpfs", 0, "size=1m",
                                        [](const std::string& mnt) {
    std::string out;
    // A killed job's folder beside this one's: the message names it with its size.
    std::filesystem::create_directories(mnt + "/zt-killed/rank0");
    std::ofstream(mnt + "/zt-killed/rank0/m-1.bin") << std::string(300 * 1024, 'x');
    auto tier = make_tier(mnt);
    try {
      tier->prepare(2 * kMiB);
      out += "prepare(2 MiB) passed; ";
    } catch (const zt::IoError& e) {
      const std::string m = e.what();
      if (!contains(m, "2097152 bytes (2.0 MiB) needed") || !contains(m, " free") ||
          !contains(m, mnt + "/zt-test/rank0") || !contains(m, "bigger filesystem") ||
          !contains(m, "zt-killed (307200 bytes")) {
        out += "prepare message: " + m + "; ";
      }
      // The free figure is the tmpfs's, at most its 1 MiB.
      const size_t at = m.find("needed, ");
      if (at == std::string::npos || std::stoll(m.substr(at + 8)) > kMiB) {
        out += "free bytes wrong in: " + m + "; ";
      }
    }
    try {
      tier->prepare(256 * 1024);
    } catch (const std::exception& e) {
      out += std::string("prepare(256 KiB) failed: ") + e.what() + "; ";
    }
    try {
      tier->allocate("too_big", 4 * kMiB);
      out += "allocate(4 MiB) passed; ";
    } catch (const zt::IoError& e) {
      const std::string m = e.what();
      if (!contains(m, mnt + "/zt-test/rank0/too_big-") || !contains(m, "4194304 bytes") ||
          !contains(m, "No space left on device")) {
        out += "allocate message: " + m + "; ";
      }
    }
    if (!region_files_in(mnt + "/zt-test/rank0").empty())
      out += "a file was left after the failure; ";
    return out.empty() ? std::string("ok") : out;
  });
  if (!run.mounted) ZT_SKIP_UNLESS_CI(cannot_mount(run));
  CHECK(run.text == "ok");
}

TEST_CASE("prepare() on a read-only tmpfs fails naming the folder and the reason") {
  TempDir dir;
  const MountRun run = in_private_mount(dir.path().string(), "tmpfs", MS_RDONLY, "size=4m",
                                        [](const std::string& mnt) {
    try {
      make_tier(mnt)->prepare(kMiB);
      return std::string("prepare passed on a read-only mount");
    } catch (const zt::IoError& e) {
      const std::string m = e.what();
      if (contains(m, mnt + "/zt-test for ") && contains(m, "Read-only file system") &&
          contains(m, "plugin.offload_nvme.path")) {
        return std::string("ok");
      }
      return "message: " + m;
    }
  });
  if (!run.mounted) ZT_SKIP_UNLESS_CI(cannot_mount(run));
  CHECK(run.text == "ok");
}
