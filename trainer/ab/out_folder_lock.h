// One `trainer ab` or `trainer tune` at a time in an --out folder. Each removes an earlier run's
// folder (out/runs/<name>) before it starts that run, so a second command given the same folder
// (both at their default, runs/ab or runs/tune, from one working folder) removed the first one's
// runs while they trained, their metrics and their checkpoint folder's lock with them.
// Thread safety: one object per command.
#pragma once

#include <string>

#include "zt/file_lock.h"

namespace zt::trainer {

class OutFolderLock {
 public:
  // Creates `out_dir` and locks out_dir/.zt-lock for as long as the object lives and the runs it
  // started run (the kernel releases it however the last of them ends). `command`: "trainer ab" or
  // "trainer tune", for the message. Throws ConfigError naming the holder when another process
  // holds it, IoError when the folder cannot be made or its lock file opened. A file system without
  // locks is let be.
  OutFolderLock(const std::string& out_dir, const std::string& command);

 private:
  ExclusiveFileLock lock_;
};

}  // namespace zt::trainer
