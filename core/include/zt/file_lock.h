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

#include <string>

#include "zt/api.h"

namespace zt {

class ZT_API ExclusiveFileLock {
 public:
  enum class State {
    held,         // this object holds the lock
    busy,         // another open file holds it (another process, or this one elsewhere)
    no_locks,     // the file system keeps no locks (Lustre without -o flock, some FUSE mounts)
    cannot_open,  // the file could not be opened or created: error() says why
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
  // "pid N on HOST" of the holder, as it recorded itself (record_holder()), or "" when unknown.
  std::string holder() const;
  // The boot id (this_boot_id()) the holder recorded, or "" when none was.
  std::string holder_boot_id() const;
  // Writes "pid N on HOST" and this_boot_id() into the file, for the message another process's
  // holder() gives and for holder_boot_id(). Best effort: the lock is what counts. Only while
  // held().
  void record_holder() const;
  // Whether the file is still linked into its folder (false once its owner removed it while
  // another process had it open). Only while held().
  bool still_in_folder() const;
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

// The boot id of the running kernel (/proc/sys/kernel/random/boot_id), or "" where it cannot be
// read. A free flock proves its holder gone only among processes of one kernel: another
// machine's lock on a shared file system (NFSv3 keeps flock local) is invisible here, so a lock
// file whose recorded boot id is another one says nothing about its holder.
ZT_API std::string this_boot_id();

}  // namespace zt
