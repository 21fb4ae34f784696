#include "ab/switch_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "zt/error.h"
#include "zt/host/checkpoint.h"

namespace zt::trainer {

namespace {

std::string mark_path(const std::string& dir) {
  return (std::filesystem::path(dir) / kSwitchFolderMark).string();
}

void write_mark(const std::string& dir) {
  const std::string path = mark_path(dir);
  // O_EXCL never follows a link in the way: the mark is a new file or the write fails.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    const char text[] = "live A/B switch states: zt removes this folder's saves\n";
    const ssize_t n = ::write(fd, text, sizeof text - 1);
    if (n != static_cast<ssize_t>(sizeof text - 1)) err = n < 0 ? errno : ENOSPC;
    if (::close(fd) != 0 && err == 0) err = errno;  // NFS reports a full disk or quota at close
    // A mark cut short still marks: a folder this job could not mark stays unmarked.
    if (err != 0) ::unlink(path.c_str());
  }
  if (err != 0) {
    throw IoError("cannot write " + path + " (" + std::strerror(err) +
                  "), the mark of a live A/B switch folder; " +
                  (err == EEXIST ? "remove what is in its place"
                                 : "make room there or give ab.switch_dir a folder the job can "
                                   "write"));
  }
}

}  // namespace

// A regular file, not a link: a mark planted as a link to elsewhere marks nothing.
bool is_switch_folder(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::symlink_status(mark_path(dir), ec));
}

std::vector<std::string> claim_switch_folder(const std::string& dir, const std::string& where) {
  if (!is_switch_folder(dir)) {
    const std::vector<std::string> found = list_saves(dir);
    if (!found.empty()) {
      throw ConfigError(where + ": ab.switch_dir = '" + dir + "' holds checkpoint files (" +
                        found.front() +
                        (found.size() > 1 ? " and " + std::to_string(found.size() - 1) + " more"
                                          : std::string()) +
                        ") that no live A/B job marked as its own; a switch would prune them and "
                        "the job's end remove them: give a folder of its own (or '' for "
                        "<run.out_dir>/ab-switch), or remove them if they are a stopped live A/B "
                        "job's");
    }
    std::error_code ec;
    std::filesystem::remove(mark_path(dir), ec);  // a link or other thing in the way
    write_mark(dir);
  }
  return remove_saves(dir);
}

std::vector<std::string> remove_switch_states(const std::string& dir) {
  if (!is_switch_folder(dir)) return {};
  std::vector<std::string> removed = remove_saves(dir);
  std::error_code ec;
  std::filesystem::remove(mark_path(dir), ec);
  remove_checkpoint_dir(dir);  // the lock, and the folder once empty
  return removed;
}

}  // namespace zt::trainer
