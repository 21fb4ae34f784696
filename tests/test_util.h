// Helpers shared by zt's tests: temporary folders, running a command and capturing its output,
// reading files. Paths of built artefacts come from compile definitions set in CMake.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace zt::test {

// Sets or clears an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvVar() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A TCP socket listening on a port of 127.0.0.1 the kernel chose: a port in use, for as long as
// it lives.
class ListeningSocket {
 public:
  // `backlog`: connections the kernel completes while nobody accepts them.
  explicit ListeningSocket(int backlog = 1) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::listen(fd_, backlog) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      throw std::runtime_error(std::string("cannot listen on 127.0.0.1: ") + std::strerror(errno));
    }
    port_ = ntohs(sa.sin_port);
  }
  ~ListeningSocket() { ::close(fd_); }
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

struct CommandResult {
  int exit_code = -1;  // exit status, or 128+signal
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh, stderr merged into stdout.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  int status = pclose(pipe);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  return result;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// A fresh folder under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zt-test-XXXXXX").string();
    // A failed mkdtemp returns null: a path built from it was undefined behaviour.
    if (mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("cannot create a temporary folder " + tmpl + ": " +
                               std::strerror(errno));
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The "loss" of every line of a metrics.jsonl, in order (the trainer writes it with 17 digits,
// so equal strings mean equal doubles).
inline std::vector<double> losses_of(const std::filesystem::path& metrics) {
  std::vector<double> out;
  std::ifstream in(metrics);
  std::string line;
  const std::string key = "\"loss\":";
  while (std::getline(in, line)) {
    const size_t at = line.find(key);
    if (at != std::string::npos)
      out.push_back(std::strtod(line.c_str() + at + key.size(), nullptr));
  }
  return out;
}

// The message of the E that `f()` throws: "wrong exception type: ..." for another exception,
// "no exception" when it throws none.
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Whether a file whose path starts with `prefix` (a folder's path, then the start of a name)
// exists: a temporary file named after its writer ("out.tmp-<pid>").
inline bool file_starting_with(const std::string& prefix) {
  const std::filesystem::path p(prefix);
  std::error_code ec;
  for (std::filesystem::directory_iterator it(p.parent_path(), ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename().string().rfind(p.filename().string(), 0) == 0) return true;
  }
  return false;
}

}  // namespace zt::test
