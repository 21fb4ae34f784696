#include "run/stop_signals.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "zt/host/rank_agreement.h"

namespace zt::trainer {

namespace {

std::atomic<int> g_signal{0};
std::atomic<int64_t> g_first_ns{0};
// remove_on_hard_stop's file: a fixed buffer the handler reads without allocating, valid while
// g_hard_stop_file_set says so.
char g_hard_stop_file[4096];
std::atomic<bool> g_hard_stop_file_set{false};

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // async-signal-safe
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

void on_signal(int sig) {
  if (g_signal.load() == 0) {
    g_first_ns.store(now_ns());
    g_signal.store(sig);
  } else if (sig == SIGINT && now_ns() - g_first_ns.load() > 1000000000) {
    if (g_hard_stop_file_set.load()) unlink(g_hard_stop_file);  // async-signal-safe
    _exit(128 + sig);
  }
}

}  // namespace

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

void remove_on_hard_stop(const std::string& path) {
  g_hard_stop_file_set.store(false);
  if (path.empty() || path.size() >= sizeof(g_hard_stop_file)) return;
  std::memcpy(g_hard_stop_file, path.c_str(), path.size() + 1);
  g_hard_stop_file_set.store(true);
}

int agreed_stop_signal(Communicator& comm) {
  return static_cast<int>(max_over_ranks(comm, static_cast<float>(g_signal.load())));
}

int stop_signal_received() { return g_signal.load(); }

std::string stop_signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

StoppedBySignal::StoppedBySignal(int sig, const std::string& what)
    : std::runtime_error(kStoppedByPrefix + stop_signal_name(sig) + ": " + what), signal_(sig) {}

}  // namespace zt::trainer
