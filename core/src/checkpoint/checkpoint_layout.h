// Where a checkpoint's files live under checkpoint.dir and how a save is published: folder and
// file names, which folders are complete, the rename that makes one visible, `latest`, and the
// pruning of old ones. The public side (latest_checkpoint, resolve_checkpoint,
// remove_incomplete_checkpoints) is declared in zt/host/checkpoint.h.
// Thread safety: free functions; two publishes into one dir at once are not supported (only
// rank 0's writer thread publishes).
#pragma once

#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace zt::ckpt {

constexpr const char* kLockName = ".zt-lock";  // CheckpointDirLock
constexpr const char* kManifestName = "manifest.json";
// Written after the manifest: a folder holding it is complete.
constexpr const char* kManifestCrcName = "manifest.json.crc32";
constexpr const char* kLatestName = "latest";
// With CheckpointOptions::keep_best: the folder name of the checkpoint with the lowest metric.
constexpr const char* kBestName = "best";
constexpr const char* kTempPrefix = ".tmp-step-";
// ".old-step-00000012": a step folder a publish moved aside to put a new one of that step in its
// place, where the file system cannot swap the two (publish_by_moving_aside).
constexpr const char* kRetiredPrefix = ".old-";

// "step-00000012"
std::string step_folder_name(int64_t step);
// ".tmp-step-00000012-<job>", the job reduced to [A-Za-z0-9_-].
std::string temp_folder_name(int64_t step, const std::string& job);
// "rank-00000-of-00002.safetensors"
std::string rank_file_name(int rank, int world);
// The step of a "step-<digits>" name, or -1 for any other name.
int64_t parse_step_folder(const std::string& name);

// dir/<pointer> ("latest", "best") read: the complete folder it names, or "".
std::string folder_named_by(const std::string& dir, const std::string& pointer);
// `folder` holds manifest.json and its crc32 (what a publish leaves).
bool is_complete_checkpoint(const std::string& folder);
// Complete step-* folders under `dir` as (step, path), oldest step first; none for a missing dir.
std::vector<std::pair<int64_t, std::string>> complete_checkpoints(const std::string& dir);
// The way out of a damaged checkpoint `folder` (a step-N folder): "resume from an older
// checkpoint: <the newest complete one before it> is the newest before it", or that none is left
// beside it.
std::string older_checkpoint_hint(const std::string& folder);

// Makes the finished temporary folder `temp` visible as dir/<final_name>: writes the new
// `latest` as a pending dir/latest.tmp-<pid>, renames the folder (swapped with an older folder of
// that name, which is then removed; moved aside first where the file system cannot swap), fsyncs
// dir and commits the pending `latest`.
// Throws IoError naming the paths.
void publish_checkpoint(const std::string& dir, const std::string& temp,
                        const std::string& final_name);
// publish_checkpoint's way where renameat2 cannot swap folders (NFS, older kernels): an older
// dir/<final_name> is renamed to dir/.old-<final_name> before `temp` takes its name, and removed
// after `latest` names the new one. A kill between the two renames leaves the old folder aside,
// which the next start's remove_incomplete_checkpoints puts back (the new one, still temporary,
// is then removed): one of the two survives any kill. Throws IoError naming the paths.
void publish_by_moving_aside(const std::string& dir, const std::string& temp,
                             const std::string& final_name);
// The pending `latest` (dir/latest.tmp-*) a publish killed after its folder rename left, naming
// a complete folder (the highest step when several do) and written after the committed `latest`;
// both "" when none. Readers take it over `latest`: that folder is the newest the job saved.
struct PendingLatest {
  std::string pointer;  // dir/latest.tmp-<pid>
  std::string folder;   // the complete folder it names
};
PendingLatest pending_latest(const std::string& dir);
// Removes a checkpoint folder, its manifest crc32 first, so a removal cut short never leaves a
// folder that looks complete.
void remove_checkpoint_folder(const std::string& folder, std::error_code& ec);
// Removes complete checkpoints beyond the newest `keep_last` (0 keeps all), oldest step first,
// never `keep` (the one just published) nor `best` ("" = none; kept besides the newest
// keep_last when older than them). Only steps up to `keep`'s are counted and pruned: a newer
// one is another run's (this run resumed from an older step, or started afresh) and stays as
// it is. Returns the removed paths; a folder that cannot be removed is left (the next save
// tries again).
std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last,
                                           const std::string& keep, const std::string& best = "");

}  // namespace zt::ckpt
