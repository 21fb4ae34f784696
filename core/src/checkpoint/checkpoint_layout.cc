#include "checkpoint/checkpoint_layout.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include <fcntl.h>
#include <stdio.h>

#include <cstring>

#include "util/posix_file.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"

namespace fs = std::filesystem;

namespace zt {
namespace ckpt {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

}  // namespace

std::string folder_named_by(const std::string& dir, const std::string& pointer) {
  std::error_code ec;
  const fs::path file = fs::path(dir) / pointer;
  if (!fs::is_regular_file(file, ec)) return "";
  std::string name;
  try {
    name = trimmed(read_whole_file(file.string()));
  } catch (const IoError&) {
    return "";
  }
  if (parse_step_folder(name) < 0) return "";
  const std::string folder = (fs::path(dir) / name).string();
  return is_complete_checkpoint(folder) ? folder : "";
}

std::string step_folder_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld", static_cast<long long>(step));
  return name;
}

std::string temp_folder_name(int64_t step, const std::string& job) {
  std::string safe = job.empty() ? "job" : job;
  for (char& c : safe) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return kTempPrefix + step_folder_name(step).substr(5) + "-" + safe;
}

std::string rank_file_name(int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof(name), "rank-%05d-of-%05d.safetensors", rank, world);
  return name;
}

int64_t parse_step_folder(const std::string& name) {
  if (!starts_with(name, "step-") || name.size() == 5 || name.size() > 5 + 18) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

namespace {

// A file-system error other than "not there" (EACCES, ESTALE, EIO of a shared file system) is
// not "no checkpoint": read as one, `--resume auto` started over from step 0, or from an older
// step, and the fresh run's first save pruned the real run's checkpoints.
void throw_unless_absent(const std::error_code& ec, const fs::path& what) {
  if (!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
    return;
  }
  throw IoError("cannot read " + what.string() + ": " + ec.message() +
                "; check that file system (which checkpoint is the newest cannot be told "
                "until it can be read)");
}

bool is_file(const fs::path& path) {
  std::error_code ec;
  const bool file = fs::is_regular_file(path, ec);
  throw_unless_absent(ec, path);
  return file;
}

}  // namespace

bool is_complete_checkpoint(const std::string& folder) {
  return is_file(fs::path(folder) / kManifestName) && is_file(fs::path(folder) / kManifestCrcName);
}

std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = parse_step_folder(it->path().filename().string());
    if (step >= 0 && is_complete_checkpoint(it->path().string())) {
      found.emplace_back(step, it->path().string());
    }
  }
  throw_unless_absent(ec, dir);
  std::sort(found.begin(), found.end());
  return found;
}

std::string older_checkpoint_hint(const std::string& folder) {
  const fs::path path = fs::path(folder).lexically_normal();
  const fs::path named = path.has_filename() ? path : path.parent_path();
  const int64_t step = parse_step_folder(named.filename().string());
  const std::string dir = named.parent_path().string();
  if (step < 0) return "resume from an older checkpoint";
  std::string before;
  try {
    for (const auto& [s, f] : complete_checkpoints(dir.empty() ? "." : dir)) {
      if (s < step) before = f;
    }
  } catch (const Error&) {
    return "resume from an older checkpoint";  // its folder unreadable: the error said enough
  }
  // Named: `--resume auto` takes the newest again, and a restart repeated the failure. No flag in
  // the text: a training job gives it to --resume, eval and sample to --checkpoint.
  if (before.empty()) {
    return "resume from an older checkpoint (none is left beside it in " +
           (dir.empty() ? std::string(".") : dir) + ")";
  }
  return "resume from an older checkpoint: " + before + " is the newest before it";
}

namespace {

// Swaps the folders `temp` and `final_path` in one step (renameat2's RENAME_EXCHANGE): a kill at
// any moment leaves a complete folder at `final_path`, the old one or the new one. False where
// the file system cannot (NFS, older kernels), with nothing changed.
bool exchange_folders(const std::string& temp, const std::string& final_path) {
#ifdef RENAME_EXCHANGE
  return ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0;
#else
  (void)temp;
  (void)final_path;
  return false;
#endif
}

}  // namespace

void publish_checkpoint(const std::string& dir, const std::string& temp,
                        const std::string& final_name) {
  const std::string final_path = (fs::path(dir) / final_name).string();
  const std::string latest = (fs::path(dir) / kLatestName).string();
  std::error_code ec;
  // The same step saved again (a run resumed from an older checkpoint): the two are swapped,
  // then the old one (now at `temp`) removed. Removing it first lost both to a kill between
  // the removal and the rename: the new one, still temporary, was removed at the next start.
  // `latest` is written only after the swap: pending before it, it named the old folder of
  // this step (another run's), which a kill there made the latest.
  if (fs::exists(final_path, ec) && exchange_folders(temp, final_path)) {
    fsync_dir(dir);
    commit_replacement(write_replacement(latest, final_name + "\n"), latest);
    remove_checkpoint_folder(temp, ec);
    return;
  }
  publish_by_moving_aside(dir, temp, final_name);
}

void publish_by_moving_aside(const std::string& dir, const std::string& temp,
                             const std::string& final_name) {
  const std::string final_path = (fs::path(dir) / final_name).string();
  const std::string latest = (fs::path(dir) / kLatestName).string();
  std::string retired;
  std::error_code ec;
  if (fs::exists(final_path, ec)) {
    retired = (fs::path(dir) / (kRetiredPrefix + final_name)).string();
    // One an earlier publish failed to remove is older still: a folder of this step stands.
    remove_checkpoint_folder(retired, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      throw IoError("cannot remove " + retired + ", an older " + final_name +
                    " an earlier save moved aside: " + ec.message() + "; remove it by hand");
    }
    fs::rename(final_path, retired, ec);
    if (ec) {
      throw IoError("cannot move " + final_path + " (left by an earlier run) aside to " + retired +
                    ": " + ec.message() + "; remove it by hand");
    }
  }
  // From here to the new folder's rename any failure (a full disk or quota for the pending
  // `latest`, an I/O error) puts the old folder back: the caller then removes the new one, and
  // the next start removed the old one as a stopped save's, losing both.
  std::string pending;
  try {
    if (!retired.empty()) fsync_dir(dir);
    // The new `latest` is written before the rename and committed after it: a kill between the
    // two leaves it pending beside a complete folder, which readers take as the latest (a kill
    // there used to leave `latest` one checkpoint behind, and a restart lost a whole interval).
    pending = write_replacement(latest, final_name + "\n");
    fs::rename(temp, final_path, ec);
    if (ec) {
      throw IoError("cannot rename " + temp + " to " + final_path + ": " + ec.message() +
                    "; the previous checkpoint stays the latest");
    }
  } catch (...) {
    std::error_code ignored;
    if (!pending.empty()) fs::remove(pending, ignored);
    if (!retired.empty()) fs::rename(retired, final_path, ignored);
    throw;
  }
  fsync_dir(dir);
  commit_replacement(pending, latest);
  // Left where it cannot go: the next start removes it, a folder of its step standing.
  if (!retired.empty()) remove_checkpoint_folder(retired, ec);
}

PendingLatest pending_latest(const std::string& dir) {
  PendingLatest newest;
  int64_t newest_step = -1;
  std::error_code ec;
  // A pointer is pending only if written after `latest` was (a commit renames the pointer, so
  // `latest` keeps the time its own pointer was written): one left by a process killed long ago
  // (a Python engine does not clean up at start) is older than the `latest` later saves
  // committed, and taking it sent a resume back to that old step. Equal times (a coarse clock)
  // are settled by the step.
  const std::string committed = folder_named_by(dir, kLatestName);
  const int64_t committed_step = committed.empty()
                                     ? -1
                                     : parse_step_folder(fs::path(committed).filename().string());
  const auto committed_time = fs::last_write_time(fs::path(dir) / kLatestName, ec);
  const bool has_committed = !ec && !committed.empty();
  const std::string prefix = std::string(kLatestName) + ".tmp-";
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!starts_with(name, prefix)) continue;
    const std::string folder = folder_named_by(dir, name);
    const std::string named = fs::path(folder).filename().string();
    const int64_t step = folder.empty() ? -1 : parse_step_folder(named);
    // Only a name as publish_checkpoint spells it: a pointer cut short must not name another.
    if (step < 0 || named != step_folder_name(step) || step <= newest_step) continue;
    if (has_committed) {
      std::error_code time_ec;
      const auto written = fs::last_write_time(it->path(), time_ec);
      if (time_ec || written < committed_time ||
          (written == committed_time && step <= committed_step))
        continue;
    }
    newest = {it->path().string(), folder};
    newest_step = step;
  }
  return newest;
}

void remove_checkpoint_folder(const std::string& folder, std::error_code& ec) {
  // A step folder that is a link (to another run's checkpoint, to resume from) goes as a link:
  // through it, the crc32 file below would be the other run's, which then reads as incomplete
  // and is removed whole by that run's next start.
  if (fs::is_symlink(fs::symlink_status(folder, ec))) {
    fs::remove(folder, ec);
    return;
  }
  // The crc32 file first: a removal cut short leaves a folder no reader takes as complete. Where
  // that file cannot go, nothing else does (a folder missing rank files behind a crc32 would
  // read as complete).
  fs::remove(fs::path(folder) / kManifestCrcName, ec);
  if (ec) return;
  fs::remove_all(folder, ec);
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last,
                                           const std::string& keep, const std::string& best) {
  std::vector<std::string> removed;
  if (keep_last <= 0) return removed;
  auto same = [](const std::string& path, const std::string& other) {
    return !other.empty() && fs::path(path).filename() == fs::path(other).filename();
  };
  auto all = complete_checkpoints(dir);
  // Steps beyond the one just saved are not this run's past: counted, they took this run's
  // own older checkpoints (keep_last 2 kept one of them); pruned, another run lost its newest.
  const int64_t keep_step = keep.empty() ? -1
                                         : parse_step_folder(fs::path(keep).filename().string());
  if (keep_step >= 0) {
    all.erase(std::remove_if(all.begin(), all.end(),
                             [&](const auto& entry) { return entry.first > keep_step; }),
              all.end());
  }
  int64_t count = static_cast<int64_t>(all.size());
  // The best one older than the newest keep_last is kept besides them, so it does not count.
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) {
    if (same(all[i].second, best) && !same(all[i].second, keep)) --count;
  }
  for (const auto& [step, path] : all) {
    if (count <= keep_last) break;
    if (same(path, keep) || same(path, best)) continue;
    std::error_code ec;
    remove_checkpoint_folder(path, ec);
    if (!ec) removed.push_back(path);
    --count;
  }
  return removed;
}

}  // namespace ckpt

std::string latest_checkpoint(const std::string& dir) {
  // Read once: a pointer committed meanwhile is read as `latest` below, naming the same folder.
  const std::string pending = ckpt::pending_latest(dir).folder;
  if (!pending.empty()) return pending;
  std::string named = ckpt::folder_named_by(dir, ckpt::kLatestName);
  if (!named.empty()) return named;
  auto all = ckpt::complete_checkpoints(dir);
  return all.empty() ? "" : all.back().second;
}

std::string best_checkpoint(const std::string& dir) {
  return ckpt::folder_named_by(dir, ckpt::kBestName);
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(path) / ckpt::kManifestName, ec)) return path;
  // dir/latest or dir/best: the folder it names.
  const std::string name = fs::path(path).filename().string();
  if ((name == ckpt::kLatestName || name == ckpt::kBestName) && fs::is_regular_file(path, ec)) {
    const std::string parent = fs::path(path).parent_path().string();
    std::string named = ckpt::folder_named_by(parent.empty() ? "." : parent, name);
    if (!named.empty()) return named;
    throw ConfigError("not a checkpoint: " + path +
                      " does not name a complete checkpoint folder "
                      "beside it; give the folder itself, or " +
                      (parent.empty() ? "." : parent) + " for its latest");
  }
  // A path with a typo is not "a folder without checkpoints".
  if (!fs::exists(path, ec) && !ec) {
    throw ConfigError("not a checkpoint: " + path +
                      " does not exist; check the path (checkpoint.dir, or one of its step-N "
                      "folders)");
  }
  std::string latest = latest_checkpoint(path);
  if (!latest.empty()) return latest;
  throw ConfigError("not a checkpoint: " + path +
                    " holds no manifest.json and no complete step-* folder; give a folder that "
                    "zt's [checkpoint] wrote (checkpoint.dir, or one of its step-N folders)");
}

std::string finish_interrupted_publish(const std::string& dir) {
  const ckpt::PendingLatest pending = ckpt::pending_latest(dir);
  if (pending.pointer.empty()) return "";
  ckpt::commit_replacement(pending.pointer, (fs::path(dir) / ckpt::kLatestName).string());
  return pending.folder;
}

namespace {

// What a save that has not finished leaves: its temporary folder, and the pending `latest` or
// `best` it was about to commit.
bool unfinished_save_name(const std::string& name) {
  return ckpt::starts_with(name, ckpt::kTempPrefix) ||
         ckpt::starts_with(name, std::string(ckpt::kLatestName) + ".tmp-") ||
         ckpt::starts_with(name, std::string(ckpt::kBestName) + ".tmp-");
}

// ".old-step-00000012": a step folder publish_by_moving_aside moved aside.
bool is_retired_step_folder(const std::string& name) {
  if (!ckpt::starts_with(name, ckpt::kRetiredPrefix)) return false;
  const std::string rest = name.substr(std::strlen(ckpt::kRetiredPrefix));
  const int64_t step = ckpt::parse_step_folder(rest);
  return step >= 0 && rest == ckpt::step_folder_name(step);
}

// ".tmp-step-00000012-<job>" -> "step-00000012".
std::string step_of_temp(const std::string& name) {
  const std::string rest = name.substr(std::strlen(ckpt::kTempPrefix));
  return "step-" + rest.substr(0, rest.find('-'));
}

}  // namespace

std::vector<std::string> remove_incomplete_checkpoints(const std::string& dir) {
  // A pending `latest` naming a complete folder is not incomplete: it is committed, or kept where
  // the commit fails (readers take it as it is).
  std::string keep;
  try {
    finish_interrupted_publish(dir);
  } catch (const IoError&) {
    keep = ckpt::pending_latest(dir).pointer;
  }
  std::vector<std::string> found, removed;
  std::error_code ec;
  // Missing for sure: an error reading it (ESTALE or EIO on NFS) made exists() false, and a
  // complete checkpoint was removed.
  const auto crc_missing = [](const fs::path& folder) {
    std::error_code status_error;
    return fs::status(folder / ckpt::kManifestCrcName, status_error).type() ==
           fs::file_type::not_found;
  };
  std::vector<std::string> retired;
  std::vector<std::string> temp_steps;  // the step folder names of temporary save folders
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_retired_step_folder(name) && it->is_directory(ec)) retired.push_back(name);
    if (ckpt::starts_with(name, ckpt::kTempPrefix)) temp_steps.push_back(step_of_temp(name));
    // Temporary save folders, `latest` replacements a kill cut short, and step folders whose
    // removal (a prune) a kill cut short: a removal takes the crc32 file first, and only a
    // complete folder is ever renamed to step-N, so no later save or prune would take them.
    if (unfinished_save_name(name) ||
        (ckpt::parse_step_folder(name) >= 0 && it->is_directory(ec) && crc_missing(it->path()))) {
      found.push_back(it->path().string());
    }
  }
  std::sort(found.begin(), found.end());
  const auto remove_found = [&](bool temp_folders) {
    for (const std::string& path : found) {
      const bool temp = ckpt::starts_with(fs::path(path).filename().string(), ckpt::kTempPrefix);
      if (path == keep || temp != temp_folders) continue;
      fs::remove_all(path, ec);
      if (!ec) removed.push_back(path);
    }
  };
  // Pending pointers first: one naming a step put back below would make another run's folder
  // the latest.
  remove_found(false);
  // A folder a publish moved aside (publish_by_moving_aside) is put back where that publish was
  // cut short (its new folder still temporary, no step-N); otherwise it is left over (its
  // removal failed after the publish) and removed, or a pruned step came back.
  for (const std::string& name : retired) {
    const fs::path aside = fs::path(dir) / name;
    const std::string step_name = name.substr(std::strlen(ckpt::kRetiredPrefix));
    const fs::path step = fs::path(dir) / step_name;
    const bool cut_short = std::find(temp_steps.begin(), temp_steps.end(), step_name) !=
                           temp_steps.end();
    if (cut_short && fs::status(step, ec).type() == fs::file_type::not_found) {
      fs::rename(aside, step, ec);
    } else {
      ckpt::remove_checkpoint_folder(aside.string(), ec);
      if (!ec) removed.push_back(aside.string());
    }
  }
  // Temporary folders last: with one gone, a folder moved aside would read as left over.
  remove_found(true);
  std::sort(removed.begin(), removed.end());
  return removed;
}

namespace {

// `dir`/.zt-lock, creating `dir` first (the lock is taken before anything is saved there). A
// folder that cannot be made is said with its own reason (a read-only file system, a file in
// the way): the lock file's open would only say that the file does not exist.
std::string lock_path_in(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw IoError("cannot create the folder " + dir + " (" + ec.message() +
                  "): give a folder this job can write (checkpoint.dir, ab.switch_dir or "
                  "save_checkpoint's directory, as this job saves there)");
  }
  return (fs::path(dir) / ckpt::kLockName).string();
}

}  // namespace

CheckpointDirLock::CheckpointDirLock(const std::string& dir) : lock_(lock_path_in(dir)) {
  const std::string& path = lock_.path();
  switch (lock_.state()) {
    case ExclusiveFileLock::State::held:
      lock_.record_holder();  // for the message another job gets
      return;
    case ExclusiveFileLock::State::cannot_open:
      throw IoError("cannot open " + path + " (" + lock_.open_problem() +
                    "): checkpoint.dir must be a folder this job can write; give another");
    case ExclusiveFileLock::State::busy: {
      const std::string holder = lock_.holder();
      throw ConfigError("checkpoint.dir " + dir + " is in use by another job (" +
                        (holder.empty() ? std::string("its rank 0") : holder) + " holds " + path +
                        "): two jobs saving into one folder remove each other's checkpoints; give "
                        "this job a folder of its own (checkpoint.dir, or run.out_dir; Python's "
                        "save_checkpoint directory), or stop the other first");
    }
    case ExclusiveFileLock::State::no_locks:
    case ExclusiveFileLock::State::cannot_lock: break;
  }
  throw IoError("cannot lock " + path + " (" + std::strerror(lock_.error()) +
                "); checkpoint.dir must be on a file system with flock (local, or NFSv4)");
}

std::vector<std::string> list_saves(const std::string& dir) {
  std::vector<std::string> saved;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == ckpt::kLatestName || name == ckpt::kBestName || unfinished_save_name(name) ||
        is_retired_step_folder(name) || ckpt::parse_step_folder(name) >= 0) {
      saved.push_back(it->path().string());
    }
  }
  std::sort(saved.begin(), saved.end());
  return saved;
}

std::vector<std::string> remove_saves(const std::string& dir) {
  std::vector<std::string> removed;
  for (std::string& path : list_saves(dir)) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (!ec) removed.push_back(std::move(path));
  }
  return removed;
}

std::vector<std::string> remove_checkpoint_dir(const std::string& dir) {
  std::vector<std::string> removed = remove_saves(dir);
  std::error_code ec;
  fs::remove(fs::path(dir) / ckpt::kLockName, ec);
  fs::remove(dir, ec);  // only when empty
  return removed;
}

}  // namespace zt
