// zt/host/file_lock.h: the exclusive lock the checkpoint folder and prepare-data's output hold.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
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

TEST_CASE("file lock: shared with the programs its holder starts, it lasts until they end") {
  zt::test::TempDir dir;
  const std::string path = (dir.path() / "job.lock").string();
  pid_t child = -1;
  {
    ExclusiveFileLock holder(path);
    REQUIRE(holder.held());
    holder.share_with_children();
    child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  // The holder's own file is closed; the child's copy of it (across exec) still holds the lock.
  const ExclusiveFileLock while_child(path);
  CHECK(while_child.state() == ExclusiveFileLock::State::busy);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  const ExclusiveFileLock after(path);
  CHECK(after.held());
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
