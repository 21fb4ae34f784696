#include "rank_folder_owner.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "file_util.h"

namespace zt::nvme {

namespace {

namespace fs = std::filesystem;

int64_t bytes_under(const fs::path& folder) {
  int64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code unreadable;
    if (!it->is_regular_file(unreadable) || unreadable) continue;
    const uintmax_t size = it->file_size(unreadable);
    if (!unreadable) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

// The same file as the one its owner recorded ("DEV:INO"). Where another mount of the same files
// may keep its own locks (network and FUSE file systems, and any this does not know), the device
// must match too; on a local disk's file system only the inode counts, since its device number
// may change with a remount (overlayfs, btrfs subvolumes) while the files stay.
bool same_file(const std::string& recorded, const std::string& open_now, const std::string& path) {
  const size_t a = recorded.find(':'), b = open_now.find(':');
  if (a == std::string::npos || b == std::string::npos) return false;
  if (recorded.substr(a) != open_now.substr(b)) return false;  // the inode
  static const std::set<std::string> kLocal = {"ext4",  "xfs",       "btrfs", "tmpfs",
                                               "ramfs", "overlayfs", "zfs",   "f2fs"};
  return kLocal.count(file_system_name(path)) > 0 || recorded == open_now;
}

// The folder's owner is gone. Returns the owner file's lock, held, so no other tier judges the
// folder while this one removes it, and what its owner recorded; a null lock when anything says
// the owner may live.
std::pair<std::unique_ptr<ExclusiveFileLock>, LockHolder> take_if_owner_gone(
    const fs::path& rank_dir, const std::string& boot_id) {
  const std::string path = (rank_dir / kOwnerFile).string();
  // Another kernel's record (or none yet) is not judged, and needs no lock to tell.
  if (read_lock_holder(path).boot_id != boot_id) return {};
  auto lock = std::make_unique<ExclusiveFileLock>(path, ExclusiveFileLock::IfMissing::fail);
  if (!lock->held()) return {};
  // Read again under the lock: an owner records itself only once it holds it, so this record
  // is whole. Then every sign that the free lock may not mean a dead owner:
  LockHolder owner = read_lock_holder(path);
  if (owner.boot_id != boot_id) return {};
  // - the owner saw another file than this one (one remote file system mounted twice, each
  //   mount keeping its own locks);
  if (!same_file(owner.file_id, lock->file_id(), path)) return {};
  // - the file is no longer the folder's (its owner removed it as it ended, and maybe its folder
  //   was made again since);
  if (!lock->is_file_at_path()) return {};
  // - its process still runs (a lock the kernel lost, as NFS does when a lease expires).
  if (lock_holder_may_run(owner)) return {};
  return {std::move(lock), std::move(owner)};
}

}  // namespace

std::unique_ptr<ExclusiveFileLock> claim_rank_folder(const std::string& rank_dir) {
  const std::string path = (fs::path(rank_dir) / kOwnerFile).string();
  // Another process looking at the new file may hold its lock for a moment (tiers read the
  // record first and lock only a recorded one; other tools need not): waiting that out keeps the
  // folder from going unclaimed, which no tier would ever judge dead.
  for (int attempt = 0;; ++attempt) {
    auto owner = std::make_unique<ExclusiveFileLock>(path);
    if (owner->state() == ExclusiveFileLock::State::busy && attempt < 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (owner->held()) {
      owner->record_holder();
    } else if (owner->state() == ExclusiveFileLock::State::busy) {
      std::fprintf(stderr,
                   "offload_nvme: note: %s stays locked by another process; should this rank be "
                   "killed outright, nothing will know its folder for a dead rank's\n",
                   path.c_str());
    }
    return owner;
  }
}

void release_rank_folder(std::unique_ptr<ExclusiveFileLock>& owner) noexcept {
  if (!owner) return;
  ::unlink(owner->path().c_str());
  owner.reset();
}

std::vector<RemovedFolder> remove_dead_owners_folders(const std::string& path) {
  std::vector<RemovedFolder> removed;
  const std::string boot_id = this_boot_id();
  if (boot_id.empty()) return removed;  // no kernel to tell a free lock's meaning by
  // Listed first, removed after: a folder is not removed under a listing of its own folder.
  // Links are not followed: what they point to is not this path's.
  std::vector<fs::path> rank_dirs;
  std::error_code ec;
  for (fs::directory_iterator job(path, ec), end; !ec && job != end; job.increment(ec)) {
    std::error_code unreadable;
    if (job->path().filename().string().rfind("zt-", 0) != 0 ||
        !fs::is_directory(job->symlink_status(unreadable)))
      continue;
    for (fs::directory_iterator rank(job->path(), unreadable), done; !unreadable && rank != done;
         rank.increment(unreadable)) {
      std::error_code status;
      if (rank->path().filename().string().rfind("rank", 0) == 0 &&
          fs::is_directory(rank->symlink_status(status)))
        rank_dirs.push_back(rank->path());
    }
  }
  for (const fs::path& rank_dir : rank_dirs) {
    const auto [lock, owner] = take_if_owner_gone(rank_dir, boot_id);
    if (!lock) continue;
    RemovedFolder folder{rank_dir.string(), bytes_under(rank_dir), owner.text};
    // Checked once more just before: the folder by this name is still the judged one.
    if (!lock->is_file_at_path()) continue;
    std::error_code removing;
    fs::remove_all(rank_dir, removing);
    if (removing) continue;
    removed.push_back(std::move(folder));
    // Only while empty: another rank's folder in it, or one being made, keeps it.
    ::rmdir(rank_dir.parent_path().c_str());
  }
  return removed;
}

}  // namespace zt::nvme
