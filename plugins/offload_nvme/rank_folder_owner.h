// Who owns a rank folder of offload_nvme, and the folders whose owner is gone.
//
// A tier holds an exclusive flock on <rank folder>/.zt-owner while it lives, with its pid, host,
// start time, kernel boot id and the file's device and inode written in it. A rank killed outright
// (SIGKILL, the OOM killer, a launcher that is not zt's: torchrun, srun) runs no destructor and
// leaves its folder, which can be tens of GB; the kernel drops its lock. The next tier started on
// the same path finds such folders and removes them: a lock that is free, on the very file its
// owner recorded (still in its folder), under this very kernel, whose process (pid and start time)
// is gone, can only be a dead owner's. Anything else stays: a folder without the file (in the
// making, or not zt's), one recorded under another kernel (another machine sharing the path,
// whose locks this one may not see) or through another mount, one whose lock is held or whose
// process still runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/file_lock.h"

namespace zt::nvme {

// The owner file's name in a rank folder (hidden: region files never start with '.').
inline constexpr const char* kOwnerFile = ".zt-owner";

// Takes the lock on `rank_dir`'s owner file and records this process in it; best effort (a file
// system without flock leaves the file empty, and then nobody ever removes the folder as a dead
// one's). Release with release_rank_folder before the folder is removed.
std::unique_ptr<ExclusiveFileLock> claim_rank_folder(const std::string& rank_dir);

// Removes the owner file while still holding its lock (so no other tier sees it free and still
// in the folder), then drops the lock. Never throws.
void release_rank_folder(std::unique_ptr<ExclusiveFileLock>& owner) noexcept;

struct RemovedFolder {
  std::string path;   // <path>/zt-<job>/rank<r>[.n]
  int64_t bytes = 0;  // what its files held
  std::string owner;  // "pid N on HOST", as it recorded itself
};

// Removes every rank folder under <path>/zt-*/ whose owner is gone, and a job folder left
// empty by that. Never throws: a folder that cannot be read or removed is left as it is.
std::vector<RemovedFolder> remove_dead_owners_folders(const std::string& path);

}  // namespace zt::nvme
