// zt/file_lock.h: the exclusive lock the checkpoint folder, prepare-data's output and
// offload_nvme's rank folders hold.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "../test_util.h"
#include "zt/file_lock.h"

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
  // The whole record: pid and host, the kernel (a uuid, this process's) and the file.
  const zt::LockHolder record = zt::read_lock_holder(path);
  CHECK(record.text == holder);
  CHECK(record.pid == ::getpid());
  CHECK_FALSE(record.host.empty());
  CHECK(zt::this_boot_id().size() == 36);
  CHECK(record.boot_id == zt::this_boot_id());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(record.file_id == std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino));
  CHECK(record.file_id == first.file_id());
}

TEST_CASE("file lock: another process's lock file is looked at without making one, and one "
          "removed while open is seen gone") {
  zt::test::TempDir dir;
  const std::string path = (dir.path() / "owner").string();
  {
    const ExclusiveFileLock looking(path, ExclusiveFileLock::IfMissing::fail);
    CHECK(looking.state() == ExclusiveFileLock::State::cannot_open);
    CHECK(looking.error() == ENOENT);
  }
  CHECK_FALSE(std::filesystem::exists(path));
  {
    const ExclusiveFileLock owner(path);
    REQUIRE(owner.held());
    CHECK(owner.is_file_at_path());
    const zt::LockHolder none = zt::read_lock_holder(path);  // nothing recorded
    CHECK(none.pid == -1);
    CHECK(none.boot_id.empty());
    const ExclusiveFileLock looking(path, ExclusiveFileLock::IfMissing::fail);
    CHECK(looking.state() == ExclusiveFileLock::State::busy);
  }
  // Opened before its owner removed it, locked after: held, but no longer the folder's, also
  // once another file of that name is made there.
  const ExclusiveFileLock late(path, ExclusiveFileLock::IfMissing::fail);
  REQUIRE(late.held());
  CHECK(late.is_file_at_path());
  REQUIRE(::unlink(path.c_str()) == 0);
  CHECK_FALSE(late.is_file_at_path());
  const ExclusiveFileLock again(path);
  REQUIRE(again.held());
  CHECK_FALSE(late.is_file_at_path());
  CHECK(again.is_file_at_path());
  // Neither a link nor a FIFO is looked at through (open() on a FIFO waited for a writer).
  const std::string link = (dir.path() / "link").string(), fifo = (dir.path() / "fifo").string();
  REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(ExclusiveFileLock(link, ExclusiveFileLock::IfMissing::fail).state() ==
        ExclusiveFileLock::State::cannot_open);
  CHECK(zt::read_lock_holder(fifo).text.empty());
}

TEST_CASE("file lock: a file that cannot be made says why") {
  zt::test::TempDir dir;
  const ExclusiveFileLock lock((dir.path() / "missing-folder" / "job.lock").string());
  CHECK(lock.state() == ExclusiveFileLock::State::cannot_open);
  CHECK(lock.error() == ENOENT);
  CHECK_FALSE(lock.held());
}
