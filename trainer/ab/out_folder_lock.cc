#include "ab/out_folder_lock.h"

#include <cstring>

#include "report/report_file.h"
#include "zt/error.h"

namespace zt::trainer {

namespace {

std::string made(const std::string& out_dir) {
  make_output_folder(out_dir, "--out");
  return out_dir + "/.zt-lock";
}

}  // namespace

OutFolderLock::OutFolderLock(const std::string& out_dir, const std::string& command)
    : lock_(made(out_dir)) {
  switch (lock_.state()) {
    case ExclusiveFileLock::State::held:
      lock_.record_holder();  // for the message another command gets
      // Killed outright, this command's run (its trainer job) stops on its parent-death signal
      // but may still save into its folder for a while: the lock stays until it ends too.
      lock_.share_with_children();
      return;
    case ExclusiveFileLock::State::busy: {
      const std::string holder = lock_.holder();
      throw ConfigError("--out " + out_dir + " is in use by another trainer ab or tune (" +
                        (holder.empty() ? std::string("another process") : holder) + " holds " +
                        lock_.path() + "): each removes the runs it starts again under " + out_dir +
                        "/runs, so two in one folder remove each other's; give this " + command +
                        " another --out, or wait for the other");
    }
    case ExclusiveFileLock::State::cannot_open:
      throw IoError("cannot open " + lock_.path() + " (" + lock_.open_problem() +
                    "): --out must be a folder this user can write; give another");
    case ExclusiveFileLock::State::no_locks:
    case ExclusiveFileLock::State::cannot_lock:
      return;  // nothing to hold it with: the command runs as before
  }
}

}  // namespace zt::trainer
