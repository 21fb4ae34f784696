// zt/host/file_lock.h: the exclusive lock the checkpoint folder and prepare-data's output hold.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "../test_util.h"
#include "zt/host/file_lock.h"

namespace fs = std::filesystem;
using zt::ExclusiveFileLock;

TEST_CASE("file lock: one holder at a time, released when its holder ends") {
  zt::test::TempDir dir;
  const std::string path = (dir.path() / "job.lock").string();
  {
    ExclusiveFileLock first(path);
    REQUIRE(first.held());
    CHECK(first.error() == 0);
    CHECK(fs::exists(path));  // created
    // flock belongs to the open file: a second open, even in this process, finds it taken.
    ExclusiveFileLock second(path);
    CHECK(second.state() == ExclusiveFileLock::State::busy);
    CHECK_FALSE(second.held());
  }
  ExclusiveFileLock after(path);
  CHECK(after.held());
  CHECK(fs::exists(path));  // the file stays: removing it would race a new taker
}

TEST_CASE("file lock: the holder is named to the one refused") {
  zt::test::TempDir dir;
  const std::string path = (dir.path() / "job.lock").string();
  ExclusiveFileLock first(path);
  REQUIRE(first.held());
  CHECK(first.holder().empty());  // nothing recorded yet
  first.record_holder();
  const ExclusiveFileLock second(path);
  CHECK(second.state() == ExclusiveFileLock::State::busy);
  const std::string holder = second.holder();
  CHECK(holder.rfind("pid " + std::to_string(::getpid()) + " on ", 0) == 0);
  second.record_holder();  // not held: writes nothing
  CHECK(first.holder() == holder);
}

TEST_CASE("file lock: a file that cannot be made says why") {
  zt::test::TempDir dir;
  const ExclusiveFileLock lock((dir.path() / "missing-folder" / "job.lock").string());
  CHECK(lock.state() == ExclusiveFileLock::State::cannot_open);
  CHECK(lock.error() == ENOENT);
  CHECK_FALSE(lock.held());
}
