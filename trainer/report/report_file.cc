#include "report/report_file.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "zt/error.h"

namespace zt::trainer {

void write_report_file(const std::string& path, const std::string& text,
                       const std::string& way_out) {
  // A name of this write's own: two commands writing one report (two `trainer compare --out` of
  // one folder) wrote one path.tmp together, and the mix of both was renamed into place.
  static std::atomic<int64_t> writes{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                          std::to_string(writes++);
  errno = 0;
  std::ofstream out(tmp);
  out << text;
  // Closed before the check: the last buffer is written at close, and NFS reports a full disk
  // or a quota there. A file cut short never replaces the one before it.
  out.close();
  if (!out) {
    // A stream keeps no error code of its own; errno is the failed call's where it was set.
    const int error = errno;
    std::remove(tmp.c_str());
    throw IoError("cannot write " + tmp +
                  (error != 0 ? " (" + std::string(std::strerror(error)) + ")" : "") + way_out);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    throw IoError("cannot rename " + tmp + " to " + path + " (" + std::strerror(error) + ")" +
                  way_out);
  }
}

void refuse_folder_as_file(const std::string& path, const std::string& named_by) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(named_by + ": " + path +
                      " is a folder, and this writes one file: give --out a file's name (in "
                      "that folder or elsewhere)");
  }
}

void make_folder_of(const std::string& path, const std::string& named_by) {
  refuse_folder_as_file(path, named_by);
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code made;
  if (!folder.empty() && !std::filesystem::create_directories(folder, made) && made) {
    throw IoError("cannot make " + folder.string() + " for " + named_by + " (" + made.message() +
                  "); give --out a file in a writable folder");
  }
}

std::vector<std::string> remove_previous_outputs(const std::string& dir,
                                                 const std::vector<std::string>& names) {
  std::vector<std::string> removed;
  std::error_code looked;
  if (names.empty() || !std::filesystem::is_regular_file(dir + "/" + names.front(), looked))
    return removed;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    std::error_code ec;
    if (std::filesystem::remove(path, ec)) removed.push_back(name);
    if (ec) {
      throw IoError("cannot remove " + path + ", an earlier run's result (" + ec.message() +
                    "): remove it, or give --out another folder");
    }
  }
  return removed;
}

void make_output_folder(const std::string& dir, const std::string& option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw IoError("cannot create " + option + " " + dir + " (" + ec.message() + "); give " +
                  option + " a folder this user can write");
  }
}

}  // namespace zt::trainer
