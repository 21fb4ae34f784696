// An exclusive lock on a file (flock), taken without waiting and held while the object lives.
//
// Why one helper, in the plugin SDK: the checkpoint folder's lock, prepare-data's output lock
// and offload_nvme's rank-folder owner files need the same care. The file is opened read-only where
// it can be (a file open for writing keeps its file system from being remounted read-only) and for
// writing where the file system needs that (NFS emulates flock with a write lock, and refuses it on
// a read-only file with EBADF). The kernel releases the lock however the process ends, so a killed
// holder leaves nothing to clean up. Thread safety: one object per thread; the lock is the
// process's (flock locks belong to the open file).
#pragma once

#include <cstdint>
#include <string>

#include "zt/api.h"

namespace zt {

// What a lock's holder recorded of itself (ExclusiveFileLock::record_holder), read back from the
// file; a field it did not record is empty (pid -1).
struct LockHolder {
  std::string text;     // "pid N on HOST", for messages
  int64_t pid = -1;     // in the holder's pid namespace
  std::string host;     // its gethostname()
  std::string boot_id;  // this_boot_id() of its kernel
  std::string file_id;  // "DEV:INO" of the lock file as the holder's kernel saw it (file_id())
  int64_t start = -1;   // when its process started, in clock ticks since boot (/proc/PID/stat)
};

class ZT_API ExclusiveFileLock {
 public:
  enum class State {
    held,         // this object holds the lock
    busy,         // another open file holds it (another process, or this one elsewhere)
    no_locks,     // the file system keeps no locks (Lustre without -o flock, some FUSE mounts)
    cannot_open,  // the file could not be opened or created (or path() is a symbolic link or
                  // not a plain file: a lock file is never followed): error() says why
    cannot_lock,  // flock failed otherwise: error() says why
  };

  // What the constructor does when `path` does not exist.
  enum class IfMissing {
    create,  // creates it (mode 0644) and locks it
    fail,    // cannot_open with ENOENT: for a process looking at another's lock file, which
             // must not make one where its owner has just removed it
  };

  // Opens `path` and tries to lock it. Never throws: state() says what happened, and the caller
  // words the error for its own users.
  explicit ExclusiveFileLock(const std::string& path, IfMissing missing = IfMissing::create);
  ~ExclusiveFileLock();  // closes the file, which releases the lock; the file stays
  ExclusiveFileLock(const ExclusiveFileLock&) = delete;
  ExclusiveFileLock& operator=(const ExclusiveFileLock&) = delete;

  State state() const { return state_; }
  bool held() const { return state_ == State::held; }
  const std::string& path() const { return path_; }
  // errno of the call that failed; 0 when held.
  int error() const { return error_; }
  // Why cannot_open, in words for a message: strerror(error()), or what is at path() in the
  // way (a symbolic link, which is never followed, or something else than a plain file).
  std::string open_problem() const;
  // "pid N on HOST" of the holder, as it recorded itself (record_holder()), or "" when unknown.
  std::string holder() const;
  // Writes this process's pid and host, this_boot_id() and file_id() into the file, for the
  // message another process's holder() gives and for read_lock_holder(). Best effort: the lock is
  // what counts. Only while held().
  void record_holder() const;
  // "DEV:INO" of the open file, or "" when not held.
  std::string file_id() const;
  // Whether the file at path() is still the one this object has open: false once its owner
  // removed it (or removed it and made another) while this process had it open. Only while
  // held().
  bool is_file_at_path() const;
  // Lets the programs this process starts (fork + exec) inherit the locked file, so the lock
  // lasts until the last of them ends too: a command killed outright while its child still
  // works in the folder (the child stopping on its parent-death signal) keeps it held. Only
  // while held().
  void share_with_children() const;

 private:
  std::string path_;
  int fd_ = -1;
  State state_ = State::cannot_open;
  int error_ = 0;
};

// What the holder of the lock file `path` recorded of itself, read without taking the lock (and
// without following a link or waiting on a FIFO put there); empty fields where `path` holds no
// record.
ZT_API LockHolder read_lock_holder(const std::string& path);

// Whether the process `holder` recorded may still run: a process of this pid namespace with its
// pid, started at its recorded time (so not a later process given the same pid, as a restarted
// container's ranks are), not a zombie. True where nothing here can tell: a holder of another
// kernel (boot id), or one that recorded no start time and whose pid exists.
ZT_API bool lock_holder_may_run(const LockHolder& holder);

// The boot id of the running kernel (/proc/sys/kernel/random/boot_id), or "" where it cannot be
// read. A free flock proves its holder gone only among processes of one kernel: another
// machine's lock on a shared file system may be invisible here (an NFS mount with
// local_lock=flock or nolock, a FUSE file system that keeps locks in each client's kernel), so a
// lock file whose recorded boot id is another one says nothing about its holder.
ZT_API std::string this_boot_id();

}  // namespace zt
