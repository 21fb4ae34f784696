// The folder a live A/B job's switches pass the model states through (ab.switch_dir). Its saves
// are removed at the job's start (a killed job's), its end, and by the launcher once a killed
// job's ranks are reaped, so zt must know they are switch states and not another run's
// checkpoints given by mistake: the job that holds the folder marks it, and only a marked folder
// has saves removed.
// Thread safety: rank 0's training thread, or the launcher; the folder's lock (CheckpointDirLock)
// keeps a second job out.
#pragma once

#include <string>
#include <vector>

namespace zt::trainer {

// The file that says a folder's saves are live A/B switch states.
inline constexpr const char* kSwitchFolderMark = ".zt-ab-switch";

// `dir` holds the mark (a regular file, not a link).
bool is_switch_folder(const std::string& dir);

// Marks `dir` (which the caller has locked) as this job's switch folder and removes the saves a
// killed live A/B job left there, returning their paths. A folder that holds saves (list_saves)
// but no mark (a run's checkpoint.dir given as ab.switch_dir) is a ConfigError naming `where`,
// the folder and a save, and loses nothing. IoError when the mark cannot be written.
std::vector<std::string> claim_switch_folder(const std::string& dir, const std::string& where);

// In a marked folder: its saves, then the mark, the lock, and the folder once empty (anything
// else stays). An unmarked folder is left as it is. Returns the saves removed. Best effort, as
// remove_checkpoint_dir.
std::vector<std::string> remove_switch_states(const std::string& dir);

}  // namespace zt::trainer
