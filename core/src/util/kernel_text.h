// The whole text of a file the Linux kernel serves (/proc, /sys/fs/cgroup), or "" when it cannot
// be read: such files are absent on some kernels and hidden in some namespaces, and their readers
// take "" as "unknown" rather than as an error.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace zt {

inline std::string read_kernel_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace zt
