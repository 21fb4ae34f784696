// zt/file_lock.h: the exclusive lock the checkpoint folder, prepare-data's output and
// offload_nvme's rank folders hold.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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
  CHECK(record.start > 0);
  CHECK(zt::lock_holder_may_run(record));
}

TEST_CASE("file lock: whether a recorded holder may still run, by pid, start time and kernel") {
  zt::LockHolder me;
  me.pid = ::getpid();
  me.boot_id = zt::this_boot_id();
  me.start = -1;
  CHECK(zt::lock_holder_may_run(me));  // its pid runs, and no start time says it is another
  // This process's own start time, read as record_holder() reads it.
  zt::test::TempDir dir;
  const ExclusiveFileLock lock((dir.path() / "l").string());
  REQUIRE(lock.held());
  lock.record_holder();
  me.start = zt::read_lock_holder(lock.path()).start;
  CHECK(zt::lock_holder_may_run(me));
  zt::LockHolder reused = me;  // the pid, since given to a later process
  reused.start = me.start - 1;
  CHECK_FALSE(zt::lock_holder_may_run(reused));
  // A child that ended: reaped, no process; not yet reaped, a zombie. Both gone.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  std::string text;  // the child's /proc/PID/stat once it is a zombie
  for (int i = 0; i < 500 && text.find(") Z ") == std::string::npos; ++i) {
    ::usleep(10000);
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::getline(stat, text);
  }
  REQUIRE(text.find(") Z ") != std::string::npos);
  std::istringstream after_name(text.substr(text.rfind(')') + 1));
  std::vector<std::string> fields;  // from field 3 (the state) on
  for (std::string f; after_name >> f;) fields.push_back(f);
  REQUIRE(fields.size() > 19);
  zt::LockHolder zombie = me;
  zombie.pid = child;
  zombie.start = -1;
  // Without a start time an existing pid counts as running, even a zombie's: only a recorded
  // start tells. With the child's own start time (field 22), its zombie is gone.
  CHECK(zt::lock_holder_may_run(zombie));
  zombie.start = std::stoll(fields[19]);
  CHECK_FALSE(zt::lock_holder_may_run(zombie));
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  CHECK_FALSE(zt::lock_holder_may_run(zombie));
  zombie.start = -1;
  CHECK_FALSE(zt::lock_holder_may_run(zombie));  // no such process at all
  // Another kernel's holder: nothing here can tell.
  zt::LockHolder elsewhere = reused;
  elsewhere.boot_id = "01234567-89ab-cdef-0123-456789abcdef";
  CHECK(zt::lock_holder_may_run(elsewhere));
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

TEST_CASE("file lock: a lock file that is a link or a FIFO is refused, and what it points at is "
          "left as it was") {
  zt::test::TempDir dir;
  // A checkpoint folder received from someone else, its lock a link to a file of the user's.
  const std::string victim = (dir.path() / "victim").string();
  std::ofstream(victim) << "precious\n";
  const std::string link = (dir.path() / ".zt-lock").string();
  REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
  const ExclusiveFileLock lock(link);
  CHECK(lock.state() == ExclusiveFileLock::State::cannot_open);
  CHECK(lock.open_problem().find("symbolic link") != std::string::npos);
  lock.record_holder();  // not held: writes nothing
  std::string text;
  std::getline(std::ifstream(victim), text);
  CHECK(text == "precious");
  // A dangling link is not followed to make its target either.
  const std::string dangling = (dir.path() / "dangling.lock").string();
  const std::string target = (dir.path() / "made-through-the-link").string();
  REQUIRE(::symlink(target.c_str(), dangling.c_str()) == 0);
  CHECK(ExclusiveFileLock(dangling).state() == ExclusiveFileLock::State::cannot_open);
  CHECK_FALSE(std::filesystem::exists(target));
  // A FIFO (open() waited for a writer) and a folder are no lock file either.
  const std::string fifo = (dir.path() / "fifo.lock").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const ExclusiveFileLock on_fifo(fifo);
  CHECK(on_fifo.state() == ExclusiveFileLock::State::cannot_open);
  CHECK(on_fifo.open_problem().find("not a plain file") != std::string::npos);
  const std::string folder = (dir.path() / "folder.lock").string();
  std::filesystem::create_directory(folder);
  const ExclusiveFileLock on_folder(folder);
  CHECK(on_folder.state() == ExclusiveFileLock::State::cannot_open);
  CHECK(on_folder.open_problem().find("not a plain file") != std::string::npos);
  // A plain file is still made and held, with its holder recorded.
  const ExclusiveFileLock plain((dir.path() / "plain.lock").string());
  REQUIRE(plain.held());
  plain.record_holder();
  CHECK(plain.holder().rfind("pid ", 0) == 0);
}
