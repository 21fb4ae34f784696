// Shell commands the benches run (dd, stat) and a scratch folder inside a user-given one.
// Thread safety: none needed; one thread runs the bench.
#pragma once

#include <string>

namespace zt::bench {

struct ShellResult {
  int exit_code = -1;  // exit status, or 128+signal
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh with stderr merged into stdout. After a stop signal
// (stop_on_signals) it throws StoppedBySignal instead of starting the command, and once the
// command ended; a `clean_up` command (taking simulated hosts down) runs and returns all the same.
// A signal sent to the bench alone is not passed on: the command runs to its end (the two-host
// benches' jobs, which a shell starts in the namespaces; Ctrl-C reaches them).
ShellResult run_shell(const std::string& command, bool clean_up = false);

// `text` as one shell word.
std::string shell_quote(const std::string& text);

// Runs dd with `operands` (e.g. "if=/dev/zero of=F bs=1M count=64 oflag=direct") under LC_ALL=C
// and returns the seconds dd itself reports (its start-up excluded). Throws IoError with dd's
// output when it fails.
double run_dd_seconds(const std::string& operands);

// A private folder made inside `parent` (created if missing) and removed with its contents:
// the bench never deletes anything of the user's, even with --dir pointing at a real folder.
class ScratchIn {
 public:
  explicit ScratchIn(const std::string& parent);
  ~ScratchIn();
  ScratchIn(const ScratchIn&) = delete;
  ScratchIn& operator=(const ScratchIn&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace zt::bench
