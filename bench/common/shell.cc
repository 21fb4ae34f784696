#include "common/shell.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/bench_util.h"
#include "zt/error.h"

namespace zt::bench {

ShellResult run_shell(const std::string& command, bool clean_up) {
  // A stop asked for before this command: it does not run.
  if (!clean_up) stop_if_signalled("about to run `" + command + "`");
  ShellResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw IoError("zt_bench_nvme: cannot run `" + command + "`");
  std::array<char, 4096> buf;
  for (;;) {
    const size_t n = fread(buf.data(), 1, buf.size(), pipe);
    result.output.append(buf.data(), n);
    if (n > 0) continue;
    // A stop signal interrupts the read (the handlers do not restart calls): the command's
    // output is read to its end all the same, and the stop comes after it.
    if (!ferror(pipe) || errno != EINTR) break;
    clearerr(pipe);
  }
  const int status = pclose(pipe);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
  if (!clean_up) stop_if_signalled("running `" + command + "`");
  return result;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

double run_dd_seconds(const std::string& operands) {
  const std::string command = "dd " + operands;
  const ShellResult r = run_shell("LC_ALL=C " + command);
  // dd's own figure is on its last line: "..., 0.59 s, 1.8 GB/s".
  const size_t at = r.output.rfind("copied, ");
  if (r.exit_code != 0 || at == std::string::npos) {
    throw IoError("`" + command + "` failed (exit " + std::to_string(r.exit_code) +
                  "): " + r.output);
  }
  return std::strtod(r.output.c_str() + at + 8, nullptr);
}

ScratchIn::ScratchIn(const std::string& parent) {
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  std::string tmpl = (std::filesystem::path(parent) / "zt_bench_nvme.XXXXXX").string();
  if (ec || !mkdtemp(tmpl.data())) {
    throw IoError("zt_bench_nvme: cannot create a folder in " + parent + "; pass --dir");
  }
  path_ = tmpl;
}

ScratchIn::~ScratchIn() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace zt::bench
