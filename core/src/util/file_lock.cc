#include "zt/host/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace zt {

void ExclusiveFileLock::share_with_children() const {
  if (fd_ >= 0) ::fcntl(fd_, F_SETFD, ::fcntl(fd_, F_GETFD) & ~FD_CLOEXEC);
}

ExclusiveFileLock::ExclusiveFileLock(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    error_ = errno;
    return;
  }
  int locked = ::flock(fd_, LOCK_EX | LOCK_NB);
  if (locked != 0 && errno == EBADF) {
    ::close(fd_);
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
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

std::string ExclusiveFileLock::holder() const {
  std::string line;
  std::getline(std::ifstream(path_), line);
  return line;
}

void ExclusiveFileLock::record_holder() const {
  if (!held()) return;
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::ofstream(path_, std::ios::trunc) << "pid " << ::getpid() << " on " << host << "\n";
}

}  // namespace zt
