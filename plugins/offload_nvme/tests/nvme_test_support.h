// Helpers for offload_nvme's tests: the plugin loaded the way the engine loads it, random bytes,
// the region files of a tier, stderr captured, and a child process with its own mount namespace
// (for a tiny, a read-only or an O_DIRECT-refusing file system without touching the host's).
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "zt/host/plugin_loader.h"
#include "zt/offload.h"
#include "zt/options.h"

namespace zt::nvme_test {

inline zt::PluginCatalog& catalog() {
  static zt::PluginCatalog instance;
  return instance;
}

// A tier of the plugin with `values` over the defaults and `path` as its folder.
inline std::unique_ptr<zt::OffloadTier> make_tier(const std::string& path,
                                                  std::map<std::string, zt::Value> values = {},
                                                  const std::string& job = "test", int rank = 0) {
  const zt::OffloadPlugin& plugin = catalog().offload("offload_nvme", "plugins.offload_optimizer");
  values["path"] = path;
  zt::OffloadContext context;
  context.rank = rank;
  context.role = "plugins.offload_optimizer";
  context.job = job;
  return plugin.create(zt::Options("plugin.offload_nvme", plugin.options(), values, {}), context);
}

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// The files in a folder, by name, sorted; empty when it does not exist.
inline std::vector<std::string> files_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The region files in a rank folder, by name, sorted: its files but the tier's owner file (the
// one name starting with '.'; region names never do).
inline std::vector<std::string> region_files_in(const std::filesystem::path& dir) {
  std::vector<std::string> names = files_in(dir);
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& name) { return name.rfind('.', 0) == 0; }),
              names.end());
  return names;
}

// Redirects this process's stderr (fd 2) into a file until text() or destruction.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    char tmpl[] = "/tmp/zt-stderr-XXXXXX";
    fd_ = mkstemp(tmpl);
    path_ = tmpl;
    saved_ = dup(2);
    dup2(fd_, 2);
  }
  ~StderrCapture() { text(); }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  // Restores stderr (once) and returns what was written meanwhile.
  const std::string& text() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      close(fd_);
      saved_ = -1;
      text_ = zt::test::read_file(path_);
      unlink(path_.c_str());
    }
    return text_;
  }

 private:
  int fd_ = -1;
  int saved_ = -1;
  std::string path_;
  std::string text_;
};

inline int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// What a child with a private mount returned.
struct MountRun {
  bool mounted = false;  // false: mounting was not permitted; `text` says why
  std::string text;      // the body's result, or the reason it did not run
};

// Runs `body(dir)` in a child process with its own mount namespace in which `fstype` is mounted
// at `dir` with `flags`/`data` (unshare(CLONE_NEWNS) as root; else a user namespace, as
// `unshare -rm` does). The child is single-threaded after fork, which a user namespace needs,
// and its mounts vanish with it, so a failing test leaves nothing mounted on the host.
inline MountRun in_private_mount(const std::string& dir, const std::string& fstype,
                                 unsigned long flags, const std::string& data,
                                 const std::function<std::string(const std::string&)>& body) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {false, std::string("pipe: ") + std::strerror(errno)};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    auto reply = [&](char tag, const std::string& text) {
      std::string out = tag + text;
      size_t done = 0;
      while (done < out.size()) {
        const ssize_t n = ::write(pipe_fds[1], out.data() + done, out.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      _exit(0);
    };
    if (unshare(CLONE_NEWNS) != 0) {
      const uid_t uid = getuid();
      const gid_t gid = getgid();
      if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        reply('S', std::string("unshare(CLONE_NEWNS) and unshare(CLONE_NEWUSER|CLONE_NEWNS): ") +
                       std::strerror(errno));
      }
      zt::test::write_file("/proc/self/setgroups", "deny");
      zt::test::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
      zt::test::write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      reply('S', std::string("making / private: ") + std::strerror(errno));
    }
    if (mount(fstype.c_str(), dir.c_str(), fstype.c_str(), flags, data.c_str()) != 0) {
      reply('S', "mount -t " + fstype + " -o " + data + " " + dir + ": " + std::strerror(errno));
    }
    std::string result;
    try {
      result = body(dir);
    } catch (const std::exception& e) {
      result = std::string("unexpected exception: ") + e.what();
    }
    umount(dir.c_str());
    reply('R', result);
  }
  close(pipe_fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (out.empty()) {
    return {true, "the child died (status " + std::to_string(status) + ") without an answer"};
  }
  return {out[0] == 'R', out.substr(1)};
}

}  // namespace zt::nvme_test
