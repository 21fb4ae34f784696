#include "zt/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

namespace zt {

void ExclusiveFileLock::share_with_children() const {
  if (fd_ >= 0) ::fcntl(fd_, F_SETFD, ::fcntl(fd_, F_GETFD) & ~FD_CLOEXEC);
}

ExclusiveFileLock::ExclusiveFileLock(const std::string& path, IfMissing missing) : path_(path) {
  // Never through a link (a lock in a folder received from someone else, pointing at a file of
  // the user's, would have its holder record written over that file), and never waiting in
  // open() for a writer of a FIFO someone put there.
  const int looking = O_NOFOLLOW | O_NONBLOCK | (missing == IfMissing::create ? O_CREAT : 0);
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | looking, 0644);
  if (fd_ < 0) {
    error_ = errno;
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    error_ = EINVAL;  // open_problem() words it
    ::close(fd_);
    fd_ = -1;
    return;
  }
  int locked = ::flock(fd_, LOCK_EX | LOCK_NB);
  if (locked != 0 && errno == EBADF) {
    ::close(fd_);
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd_ < 0) {
      error_ = errno;
      return;
    }
    locked = ::flock(fd_, LOCK_EX | LOCK_NB);
  }
  if (locked == 0) {
    state_ = State::held;
    return;
  }
  error_ = errno;
  ::close(fd_);
  fd_ = -1;
  if (error_ == EWOULDBLOCK) {
    state_ = State::busy;
  } else if (error_ == ENOSYS || error_ == EOPNOTSUPP || error_ == ENOLCK) {
    state_ = State::no_locks;
  } else {
    state_ = State::cannot_lock;
  }
}

ExclusiveFileLock::~ExclusiveFileLock() {
  // Closing releases the lock. The file stays: removing it would race a process that has just
  // opened it, which would then lock a file no longer in the folder.
  if (fd_ >= 0) ::close(fd_);
}

std::string ExclusiveFileLock::open_problem() const {
  struct stat st {};
  if (state_ == State::cannot_open && ::lstat(path_.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return "it is a symbolic link, which a lock file is never: remove the link, and zt makes "
             "a plain file there";
    }
    if (!S_ISREG(st.st_mode)) return "it is not a plain file: remove what is there";
  }
  return std::strerror(error_);
}

std::string ExclusiveFileLock::holder() const {
  std::string line;
  std::getline(std::ifstream(path_), line);
  return line;
}

LockHolder read_lock_holder(const std::string& path) {
  LockHolder h;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return h;
  struct stat st {};
  std::string text(4096, '\0');  // a record is three short lines
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) n = ::read(fd, text.data(), text.size());
  ::close(fd);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::istringstream in(text);
  std::getline(in, h.text);
  constexpr std::string_view kPid = "pid ", kOn = " on ";
  const size_t on = h.text.find(kOn);
  if (h.text.rfind(kPid, 0) == 0 && on != std::string::npos) {
    h.pid = std::strtoll(h.text.c_str() + kPid.size(), nullptr, 10);
    h.host = h.text.substr(on + kOn.size());
  }
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("boot ", 0) == 0) h.boot_id = line.substr(5);
    if (line.rfind("file ", 0) == 0) h.file_id = line.substr(5);
    if (line.rfind("start ", 0) == 0) h.start = std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return h;
}

namespace {

// The state letter and start time (clock ticks since boot) of process `pid` as this pid
// namespace sees it, from /proc/PID/stat; false when there is no such process.
bool process_state(int64_t pid, char& state, int64_t& start) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return false;
  // "PID (COMM) S ...": COMM may hold spaces and parentheses, so fields count from the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  for (int n = 3; fields >> field; ++n) {
    if (n == 3) state = field.empty() ? '?' : field[0];
    if (n == 22) {
      start = std::strtoll(field.c_str(), nullptr, 10);
      return true;
    }
  }
  return false;
}

}  // namespace

bool lock_holder_may_run(const LockHolder& holder) {
  if (holder.boot_id.empty() || holder.boot_id != this_boot_id()) return true;
  if (holder.pid <= 0) return true;
  char state = '?';
  int64_t start = -1;
  if (!process_state(holder.pid, state, start)) return false;  // no process with that pid here
  if (holder.start < 0) return true;  // nothing to tell a later process with its pid by
  return start == holder.start && state != 'Z';
}

void ExclusiveFileLock::record_holder() const {
  if (!held()) return;
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::ostringstream out;
  out << "pid " << ::getpid() << " on " << host << "\n";
  const std::string boot = this_boot_id();
  if (!boot.empty()) out << "boot " << boot << "\n";
  out << "file " << file_id() << "\n";
  char state = '?';
  int64_t start = -1;
  if (process_state(::getpid(), state, start)) out << "start " << start << "\n";
  // Not through a link either: one made at the path since the lock was taken is left alone.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;
  const std::string text = out.str();
  [[maybe_unused]] const ssize_t written = ::write(fd, text.data(), text.size());
  ::close(fd);
}

std::string ExclusiveFileLock::file_id() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

bool ExclusiveFileLock::is_file_at_path() const {
  struct stat open_file {
  }, at_path{};
  return fd_ >= 0 && ::fstat(fd_, &open_file) == 0 && open_file.st_nlink > 0 &&
         ::lstat(path_.c_str(), &at_path) == 0 && at_path.st_dev == open_file.st_dev &&
         at_path.st_ino == open_file.st_ino;
}

std::string this_boot_id() {
  std::string id;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), id);
  return id;
}

}  // namespace zt
