// The program's side of rank_forking.h: a constructor of zt's core library, run before any other
// static initializer of it (priority 101) and after every library it depends on, LibTorch's
// included, was initialized.
#include "launch/rank_forking.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace zt {

std::string fork_ranks_value(int report_fd, pid_t launcher, const std::vector<int>& stderr_fds) {
  std::string value = std::to_string(report_fd) + ":" + std::to_string(launcher) + ":";
  for (size_t r = 0; r < stderr_fds.size(); ++r)
    value += (r == 0 ? "" : ",") + std::to_string(stderr_fds[r]);
  return value;
}

namespace {

// Parsed without allocating where it can fail: nothing of the C++ runtime is needed yet.
constexpr int kMaxForkedRanks = 4096;

struct ForkRequest {
  int report_fd = -1;
  pid_t launcher = 0;
  int ranks = 0;
  int stderr_fds[kMaxForkedRanks];
};

// strtol on "<n><sep>", advancing `p` past the separator; false on anything else.
bool take_number(const char*& p, char sep, long& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtol(p, &end, 10);
  if (errno != 0 || end == p || *end != sep) return false;
  p = end + (sep == '\0' ? 0 : 1);
  return true;
}

bool parse(const char* value, ForkRequest& req) {
  const char* p = value;
  long n = 0;
  if (!take_number(p, ':', n)) return false;
  req.report_fd = static_cast<int>(n);
  if (!take_number(p, ':', n)) return false;
  req.launcher = static_cast<pid_t>(n);
  while (*p != '\0' && req.ranks < kMaxForkedRanks) {
    const char* comma = std::strchr(p, ',');
    if (!take_number(p, comma ? ',' : '\0', n)) return false;
    req.stderr_fds[req.ranks++] = static_cast<int>(n);
  }
  return req.ranks > 0 && *p == '\0';
}

void say(const char* text) {
  ssize_t ignored = write(2, text, std::strlen(text));
  (void)ignored;
}

// Writes `value` into the environment's own string for `name` (`name=` followed by the
// launcher's placeholder, as wide as the widest rank), the rest of it NULs: getenv then reads
// the rank, and so does anyone reading /proc/<pid>/environ to tell the ranks apart, which shows
// the strings a process started with and would not see a setenv. Returns false when the
// variable is missing or too short for the value.
bool set_in_place(const char* name, int value) {
  const size_t name_len = std::strlen(name);
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, name, name_len) != 0 || (*e)[name_len] != '=') continue;
    char* digits = *e + name_len + 1;
    const size_t width = std::strlen(digits);
    char text[16];
    const int n = std::snprintf(text, sizeof text, "%d", value);
    if (n <= 0 || static_cast<size_t>(n) > width) return false;
    std::memcpy(digits, text, static_cast<size_t>(n));
    std::memset(digits + n, '\0', width - static_cast<size_t>(n));
    return true;
  }
  return false;
}

// In the child for `rank`: the environment and stderr an exec'd rank would have. Returns once
// the launcher is its parent (the first process exited) and will signal it if it dies.
void become_rank(const ForkRequest& req, int rank, pid_t first) {
  if (!set_in_place("RANK", rank) || !set_in_place("LOCAL_RANK", rank)) {
    say("zt: a forked rank found no RANK and LOCAL_RANK as wide as its number\n");
    _exit(127);
  }
  if (dup2(req.stderr_fds[rank], 2) < 0) _exit(127);
  for (int r = 0; r < req.ranks; ++r) close(req.stderr_fds[r]);
  close(req.report_fd);
  // The first process exits right after its last fork: waits are milliseconds, bounded here.
  const timespec pause{0, 1000000};
  for (int i = 0; getppid() == first; ++i) {
    if (i == 60000) {
      say("zt: a forked rank was not handed to its launcher within 60 s\n");
      _exit(127);
    }
    nanosleep(&pause, nullptr);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);           // as an exec'd rank's (launcher.cc)
  if (getppid() != req.launcher) _exit(127);  // the launcher is gone already
}

__attribute__((constructor(101))) void fork_ranks_if_asked() {
  const char* value = std::getenv(kForkRanksVariable);
  if (value == nullptr) return;
  ForkRequest req;
  const bool ok = parse(value, req);
  unsetenv(kForkRanksVariable);  // neither the ranks nor what they start fork again
  if (!ok) {
    say("zt: ZT_FORK_RANKS is malformed; it is set by zt's launcher only\n");
    _exit(127);
  }
  const pid_t first = getpid();
  for (int r = 0; r < req.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      become_rank(req, r, first);
      return;
    }
    const pid_t report = pid > 0 ? pid : -errno;
    if (write(req.report_fd, &report, sizeof report) != sizeof report || pid < 0) _exit(127);
  }
  _exit(0);
}

}  // namespace

}  // namespace zt
