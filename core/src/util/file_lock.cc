#include "zt/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace zt {

void ExclusiveFileLock::share_with_children() const {
  if (fd_ >= 0) ::fcntl(fd_, F_SETFD, ::fcntl(fd_, F_GETFD) & ~FD_CLOEXEC);
}

ExclusiveFileLock::ExclusiveFileLock(const std::string& path, IfMissing missing) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (missing == IfMissing::create ? O_CREAT : 0),
               0644);
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

std::string ExclusiveFileLock::holder_boot_id() const {
  std::ifstream in(path_);
  std::string line;
  std::getline(in, line);  // "pid N on HOST"
  std::getline(in, line);
  constexpr const char* kBoot = "boot ";
  return line.rfind(kBoot, 0) == 0 ? line.substr(std::strlen(kBoot)) : "";
}

void ExclusiveFileLock::record_holder() const {
  if (!held()) return;
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  std::ofstream out(path_, std::ios::trunc);
  out << "pid " << ::getpid() << " on " << host << "\n";
  const std::string boot = this_boot_id();
  if (!boot.empty()) out << "boot " << boot << "\n";
}

bool ExclusiveFileLock::still_in_folder() const {
  struct stat st {};
  return fd_ >= 0 && ::fstat(fd_, &st) == 0 && st.st_nlink > 0;
}

std::string this_boot_id() {
  std::string id;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), id);
  return id;
}

}  // namespace zt
