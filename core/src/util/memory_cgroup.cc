#include "zt/host/memory_cgroup.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "util/kernel_text.h"

namespace zt {

namespace {

namespace fs = std::filesystem;

// A whole non-negative number, or -1.
int64_t parse_count(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(begin, &end, 10);
  if (end == begin || errno == ERANGE || n < 0) return -1;
  while (*end == ' ' || *end == '\n') ++end;
  return *end == '\0' ? static_cast<int64_t>(n) : -1;
}

// The file names of each version's figures.
struct Files {
  const char* limit;
  const char* usage;
  const char* inactive_file;  // the memory.stat line
  const char* events;
};
constexpr Files kV1{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file",
                    "memory.oom_control"};
constexpr Files kV2{"memory.max", "memory.current", "inactive_file", "memory.events"};

const Files& files_of(int version) { return version == 1 ? kV1 : kV2; }

// Bytes a limit leaves above a usage, never negative (usage may run over until reclaim).
int64_t room(int64_t limit, int64_t usage) { return limit > usage ? limit - usage : 0; }

// v2 writes "max" for no limit; v1 writes the page counter's largest value, just under 2^63.
int64_t read_limit(const fs::path& dir, const Files& files) {
  const std::string text = read_kernel_text((dir / files.limit).string());
  if (text.empty() || text.rfind("max", 0) == 0) return -1;
  const int64_t n = parse_count(text);
  return n >= (int64_t{1} << 62) ? -1 : n;
}

// Charged bytes less the inactive file cache, which the kernel reclaims before it kills.
int64_t read_usage(const fs::path& dir, const Files& files) {
  const int64_t charged = parse_count(read_kernel_text((dir / files.usage).string()));
  if (charged < 0) return -1;
  const int64_t inactive = parse_keyed_count(read_kernel_text((dir / "memory.stat").string()),
                                             files.inactive_file);
  return inactive > 0 && inactive < charged ? charged - inactive : charged;
}

}  // namespace

int64_t MemoryCgroup::headroom() const { return limit < 0 || usage < 0 ? -1 : room(limit, usage); }

std::string MemoryCgroup::limit_file() const {
  if (limit_dir.empty()) return "";
  return limit_dir + "/" + files_of(version).limit;
}

std::string memory_cgroup_path(const std::string& proc_cgroup_text, int* version) {
  std::istringstream lines(proc_cgroup_text);
  std::string line, v2_path;
  while (std::getline(lines, line)) {
    // "ID:CONTROLLERS:PATH"; the path may hold ':' itself.
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      v2_path = path;
      continue;
    }
    std::istringstream names(controllers);
    std::string name;
    while (std::getline(names, name, ',')) {
      if (name == "memory") {
        *version = 1;
        return path;
      }
    }
  }
  *version = v2_path.empty() ? 0 : 2;
  return v2_path;
}

int64_t parse_keyed_count(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
        line[name.size()] == ' ') {
      return parse_count(line.substr(name.size() + 1));
    }
  }
  return -1;
}

int64_t oom_kills_now(const MemoryCgroup& cgroup) {
  if (cgroup.version == 0) return -1;
  return parse_keyed_count(read_kernel_text(cgroup.dir + "/" + files_of(cgroup.version).events),
                           "oom_kill");
}

int64_t system_oom_kills() {
  return parse_keyed_count(read_kernel_text("/proc/vmstat"), "oom_kill");
}

MemoryCgroup memory_cgroup_of(pid_t pid, const std::string& sys_root) {
  const std::string proc = pid == 0 ? "/proc/self/cgroup"
                                    : "/proc/" + std::to_string(pid) + "/cgroup";
  return memory_cgroup_in(read_kernel_text(proc), sys_root);
}

MemoryCgroup memory_cgroup_in(const std::string& proc_cgroup_text, const std::string& sys_root) {
  MemoryCgroup cg;
  int version = 0;
  const std::string path = memory_cgroup_path(proc_cgroup_text, &version);
  if (version == 0) return cg;
  // v1 mounts the memory controller at <root>/memory; v2 mounts at the root itself, or at
  // <root>/unified beside v1 controllers (the hybrid layout).
  fs::path mount = fs::path(sys_root) / "memory";
  if (version == 2) {
    std::error_code ec;
    mount = fs::exists(fs::path(sys_root) / "cgroup.controllers", ec)
                ? fs::path(sys_root)
                : fs::path(sys_root) / "unified";
  }
  std::string relative = path;
  relative.erase(0, relative.find_first_not_of('/'));  // all of it when the path is "/"
  const fs::path top = mount.lexically_normal();
  const fs::path dir = relative.empty() ? top : (top / relative).lexically_normal();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return cg;  // a namespace that hides the path from us
  const Files& files = files_of(version);
  cg.dir = dir.string();
  cg.version = version;
  cg.oom_kills = oom_kills_now(cg);
  // Up to the mount, the level with the least room is the one that binds.
  for (fs::path level = dir;; level = level.parent_path()) {
    const int64_t limit = read_limit(level, files);
    const int64_t usage = limit >= 0 ? read_usage(level, files) : -1;
    if (limit >= 0 && usage >= 0) {
      if (cg.limit < 0 || room(limit, usage) < cg.headroom()) {
        cg.limit = limit;
        cg.usage = usage;
        cg.limit_dir = level.string();
      }
    }
    if (level == top || level == level.parent_path()) break;
  }
  return cg;
}

}  // namespace zt
