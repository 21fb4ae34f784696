#include "common/child_process.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <fstream>

#include "common/bench_util.h"
#include "run/stop_signals.h"
#include "zt/error.h"
#include "zt/host/child_process.h"

namespace zt::bench {

const std::vector<std::string>& bench_gpt_overrides() {
  // ~10.8M parameters (6 x 12 x 384^2 in the blocks): about 0.6 s a step for 2 ranks on two
  // cores.
  static const std::vector<std::string> kOverrides = {"model.n_layer=6", "model.d_model=384",
                                                      "model.n_head=6", "model.seq_len=128",
                                                      "model.vocab=256"};
  return kOverrides;
}

std::vector<std::string> bench_gpt_command(const std::string& trainer, const std::string& root,
                                           const std::string& out_dir, int64_t steps,
                                           const std::vector<std::string>& more) {
  std::vector<std::string> argv = {trainer, "--config", root + "/configs/zero3.toml"};
  std::vector<std::string> sets = bench_gpt_overrides();
  sets.insert(sets.end(), {"run.out_dir=" + out_dir, "data.path=" + root + "/README.md",
                           "run.steps=" + std::to_string(steps), "run.report=false"});
  sets.insert(sets.end(), more.begin(), more.end());
  for (const std::string& kv : sets) argv.insert(argv.end(), {"--set", kv});
  return argv;
}

int run_logged(const std::vector<std::string>& argv, const std::string& log_path) {
  // A stop asked for before this job: it does not start.
  stop_if_signalled("about to run " + argv[0]);
  const pid_t pid = zt::spawn_logged(argv, log_path);
  // From here the stop signals reach the bench only inside ppoll, which unblocks them while it
  // waits for the child's pidfd: one that came before (after the spawn) is seen below, one that
  // comes later wakes the wait (EINTR). Blocked after the spawn, not before: the job would
  // inherit the mask through exec and never see Ctrl-C.
  sigset_t stops, before;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&stops, sig);
  ::pthread_sigmask(SIG_BLOCK, &stops, &before);
  sigset_t waiting = before;
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigdelset(&waiting, sig);
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  // Ctrl-C reaches the whole process group, the job included; a signal sent to the bench alone
  // (kill, a scheduler) is passed on, once, so that the job stops as soon as it would.
  bool passed_on = false;
  const auto pass_on_stop = [&] {
    if (const int sig = trainer::stop_signal_received(); sig != 0 && !passed_on) {
      ::kill(pid, sig);
      passed_on = true;
    }
  };
  for (;;) {
    pass_on_stop();
    if (pidfd < 0) {
      // No pidfd (a kernel before 5.3): a blocking wait, which a signal interrupts (EINTR) and
      // passes on; one that comes between the check and the wait is passed on only after the
      // job.
      ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
      siginfo_t info{};
      while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 &&
             errno == EINTR) {
        pass_on_stop();
      }
      break;
    }
    pollfd ended{pidfd, POLLIN, 0};
    if (::ppoll(&ended, 1, nullptr, &waiting) > 0) break;  // the child ended (not reaped)
    if (errno != EINTR) break;                             // try_reap names what is wrong
  }
  if (pidfd >= 0) ::close(pidfd);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  const int code = zt::wait_child(pid);
  stop_if_signalled("running " + argv[0]);
  return code;
}

std::string tail_lines(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += "  | " + l + "\n";
  return out;
}

}  // namespace zt::bench
