#include "rank_folder_owner.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace zt::nvme {

namespace {

namespace fs = std::filesystem;

int64_t bytes_under(const fs::path& folder) {
  int64_t bytes = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code unreadable;
    if (it->is_regular_file(unreadable)) bytes += static_cast<int64_t>(it->file_size(unreadable));
  }
  return bytes;
}

// The folder's owner is gone: its lock file, recorded under this kernel, is free and still the
// folder's. Returns the lock, held, so no other tier judges the folder while it is removed.
std::unique_ptr<ExclusiveFileLock> take_if_owner_gone(const fs::path& rank_dir,
                                                      const std::string& boot_id) {
  auto lock = std::make_unique<ExclusiveFileLock>((rank_dir / kOwnerFile).string(),
                                                  ExclusiveFileLock::IfMissing::fail);
  // Read after the lock: an owner writes its record only once it holds it, so a record read
  // now is complete, and one an owner is still writing is never judged (its lock is held).
  if (!lock->held() || !lock->still_in_folder() || lock->holder_boot_id() != boot_id) return {};
  return lock;
}

}  // namespace

std::unique_ptr<ExclusiveFileLock> claim_rank_folder(const std::string& rank_dir) {
  auto owner = std::make_unique<ExclusiveFileLock>((fs::path(rank_dir) / kOwnerFile).string());
  owner->record_holder();  // only where held
  return owner;
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
  std::vector<fs::path> rank_dirs;
  std::error_code ec;
  for (fs::directory_iterator job(path, ec), end; !ec && job != end; job.increment(ec)) {
    std::error_code unreadable;
    if (job->path().filename().string().rfind("zt-", 0) != 0 || !job->is_directory(unreadable))
      continue;
    for (fs::directory_iterator rank(job->path(), unreadable), done; !unreadable && rank != done;
         rank.increment(unreadable)) {
      if (rank->path().filename().string().rfind("rank", 0) == 0) rank_dirs.push_back(rank->path());
    }
  }
  for (const fs::path& rank_dir : rank_dirs) {
    const std::unique_ptr<ExclusiveFileLock> lock = take_if_owner_gone(rank_dir, boot_id);
    if (!lock) continue;
    RemovedFolder folder{rank_dir.string(), bytes_under(rank_dir), lock->holder()};
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
