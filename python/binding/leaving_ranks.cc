#include "python/binding/leaving_ranks.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>
#include <thread>

#include "zt/host/compose.h"
#include "zt/host/standard_streams.h"

namespace zt::python {

namespace {

// torchrun's agent sends SIGKILL 30 s after its SIGTERM: a removal still going on by then
// (a hung file system) is cut short either way.
constexpr int kRemovalLimitSeconds = 25;

int g_wake[2] = {-1, -1};  // the handler's pipe to the thread that removes the files
// Atomics (lock-free, so the handler may read them) since the remover thread resets the owner.
std::atomic<pid_t> g_owner{0};    // the process that made that thread: a fork's child has none
std::atomic<pid_t> g_trainer{0};  // the thread that made the newest engine with a file tier

void dies_by_default(int sig) {
  ::signal(sig, SIG_DFL);
  ::kill(::getpid(), sig);
}

bool elapsed(const timespec& since, int seconds) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t ns = (now.tv_sec - since.tv_sec) * int64_t{1000000000} +
                     (now.tv_nsec - since.tv_nsec);
  return ns >= int64_t{seconds} * 1000000000;
}

// Only async-signal-safe calls: the thread does the removal (it allocates).
void on_sigterm(int sig) {
  if (::getpid() != g_owner) {
    dies_by_default(sig);
    return;
  }
  const int saved = errno;
  // The training thread is held in here too, so that it issues no I/O against the files being
  // removed (a signal it blocks stays pending there; this thread waits either way).
  if (static_cast<pid_t>(::syscall(SYS_gettid)) != g_trainer)
    ::syscall(SYS_tgkill, g_owner.load(), g_trainer.load(), sig);
  const char byte = 1;
  // Non-blocking: a full pipe means a wake-up is pending already.
  if (::write(g_wake[1], &byte, 1) != 1 && errno != EAGAIN) {
    dies_by_default(sig);
    errno = saved;
    return;
  }
  // SIGTERM stays blocked on this thread while it waits, so the thread that removed the files
  // takes the SIGTERM it sends then and the process ends.
  timespec since{};
  ::clock_gettime(CLOCK_MONOTONIC, &since);
  while (!elapsed(since, kRemovalLimitSeconds)) {
    const timespec tick{0, 10 * 1000 * 1000};
    ::nanosleep(&tick, nullptr);
  }
  dies_by_default(sig);
  errno = saved;
}

void remove_then_die() {
  // A second SIGTERM (srun's and torchrun's agent's both) must not hold this thread in the
  // handler: it goes to another, and this one takes the last below.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &term, nullptr);
  char byte = 0;
  ssize_t got;
  while ((got = ::read(g_wake[0], &byte, 1)) < 0 && errno == EINTR) {
  }
  if (got != 1) {
    // The pipe was closed under it (os.closerange) and its numbers may name other files now:
    // SIGTERM goes back to its default action, and the files stay, as before.
    g_owner = 0;
    struct sigaction current {};
    if (::sigaction(SIGTERM, nullptr, &current) == 0 && current.sa_handler == on_sigterm)
      ::signal(SIGTERM, SIG_DFL);
    return;
  }
  std::string line;
  for (const std::string& folder : remove_own_offload_files()) line += " " + folder;
  if (!line.empty()) {
    // write(2), not stdio: the held thread may hold stderr's lock.
    write_all_to(STDERR_FILENO,
                 "zt: stopped by SIGTERM; removed this rank's offload files:" + line + "\n");
  }
  dies_by_default(SIGTERM);
  // Pending where every thread blocks it (the held ones do): taken here.
  ::pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
}

}  // namespace

void remove_offload_files_on_sigterm() {
  if (g_owner == ::getpid()) {
    // The newest engine's thread is the one training now (the first one's may have ended, and
    // its id gone to another thread).
    g_trainer = static_cast<pid_t>(::syscall(SYS_gettid));
    return;
  }
  struct sigaction current {};
  if (::sigaction(SIGTERM, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) != 0) return;
  // SIG_DFL, or ours inherited by a forked child that now makes an engine of its own.
  if (current.sa_handler != SIG_DFL && current.sa_handler != on_sigterm) return;
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) return;  // the files stay, as before: the job trains
  ::fcntl(wake[1], F_SETFL, O_NONBLOCK);
  g_wake[0] = wake[0];
  g_wake[1] = wake[1];
  g_trainer = static_cast<pid_t>(::syscall(SYS_gettid));
  try {
    std::thread(remove_then_die).detach();
  } catch (const std::system_error&) {
    ::close(wake[0]);
    ::close(wake[1]);
    return;
  }
  g_owner = ::getpid();
  struct sigaction action {};
  action.sa_handler = on_sigterm;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace zt::python
