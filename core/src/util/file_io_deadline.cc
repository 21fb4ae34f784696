#include "zt/host/file_io_deadline.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "zt/error.h"
#include "zt/host/standard_streams.h"

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;

// The last words may meet the same stuck storage: the process ends after this at most (or half
// the scope's limit, so that peers waiting `launch.timeout_s` for this rank still see it end).
constexpr std::chrono::milliseconds kLastWordsLimit{10000};
// What the error line's write to stderr may take.
constexpr std::chrono::milliseconds kLastLineLimit{2000};

struct Scope {
  std::thread::id thread;
  std::string what;
  std::string cause;  // why such a call does not return: "the storage stopped answering ..."
  std::string way_out;
  ErrorKind kind;  // the line's word and the exit code
  std::chrono::milliseconds limit;
  Clock::time_point deadline;
};

// A file system's call that does not return: what FileIoDeadline names.
constexpr const char* kStorageCause =
    "the storage stopped answering (a network file system's server gone, a failing disk?)";

struct Watch {
  pid_t pid = 0;  // the process it watches for
  std::mutex mutex;
  std::condition_variable changed;
  std::map<uint64_t, Scope> scopes;  // by id: a thread's newest scope has its largest id
  // When the watchdog wakes next by itself: a scope due earlier wakes it. Scopes opened one after
  // another with one limit are due later than the one it waits for, which it finds closed (or
  // still open) then: no wake-up per read.
  Clock::time_point wakes_at = Clock::time_point::max();
  bool watched = false;  // this process's watchdog runs
  std::vector<std::function<std::string()>> last_words;
  std::function<std::string()> line_start;
};

constexpr uint64_t kNotWatched = ~uint64_t{0};

// Never destroyed: a scope may close, and the watchdog wait, while static destructors run.
std::atomic<Watch*> g_watch{nullptr};
// Scope ids across fork(): a scope the forking thread had open, closed in the child, names no
// scope of the child's.
std::atomic<uint64_t> g_next_id{0};

// This process's Watch. A forked child starts one of its own on first use, with no scopes (its
// parent's threads are not its), no watchdog, no last words and the default line start: the
// parent's copy may be in the middle of a change, its mutex held, by a thread the child does not
// have. A child that execs, as most do, never allocates one.
Watch& watch() {
  Watch* w = g_watch.load(std::memory_order_acquire);
  const pid_t pid = ::getpid();
  if (w && w->pid == pid) return *w;
  auto fresh = std::make_unique<Watch>();
  fresh->pid = pid;
  if (g_watch.compare_exchange_strong(w, fresh.get(), std::memory_order_acq_rel)) {
    return *fresh.release();
  }
  return *w;  // another thread of this process made it first
}

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

// Runs `work` on a thread of its own and waits `limit` for it: true when it ended in time.
bool run_within(std::function<void()> work, std::chrono::milliseconds limit) {
  struct Done {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  try {
    std::thread([done, work = std::move(work)] {
      work();
      const std::lock_guard<std::mutex> lock(done->mutex);
      done->done = true;
      done->cv.notify_all();
    }).detach();
  } catch (const std::system_error&) {
    return false;  // no thread to spare
  }
  std::unique_lock<std::mutex> lock(done->mutex);
  return done->cv.wait_for(lock, limit, [&] { return done->done; });
}

// `inner`: what a scope opened inside `expired` on its thread names ("" when none).
[[noreturn]] void end_process(const Scope& expired, const std::string& inner,
                              std::vector<std::function<std::string()>> words,
                              const std::function<std::string()>& line_start) {
  std::string start = "zt: ";
  try {
    if (line_start) start = line_start();
  } catch (...) {  // keep "zt: "
  }
  // The last words may meet the same stuck storage: they get kLastWordsLimit at most.
  auto said = std::make_shared<std::string>();
  const bool words_ended = words.empty() || run_within(
                                                [said, words = std::move(words), start] {
    for (const auto& w : words) {
      try {
        const std::string line = w();
        if (!line.empty()) *said += start + line + "\n";
      } catch (...) {  // the process ends with its own error
      }
    }
                                                },
                                                std::min(kLastWordsLimit, expired.limit / 2));
  std::string text = words_ended ? *said : std::string();
  // The error is the last line: a launcher names a failed rank by it.
  text += start + (expired.kind == ErrorKind::kIo ? "io error: " : "comm error: ");
  text += inner.empty() ? expired.what : inner + " (while " + expired.what + ")";
  text += " has not returned after " + seconds_text(expired.limit) + " s: " + expired.cause +
          " and this process ends rather than hang; " + expired.way_out + "\n";
  // stderr may be a pipe nobody drains (a launcher's relay holding back): written within a bound.
  run_within([text] { write_all_to(STDERR_FILENO, text); }, kLastLineLimit);
  // No flush, no teardown: stdout, or a lock a stuck thread holds, may be on the same storage.
  ::_exit(static_cast<int>(expired.kind));
}

void run_watchdog() {
  Watch& w = watch();
  std::unique_lock<std::mutex> lock(w.mutex);
  for (;;) {
    if (w.scopes.empty()) {
      w.wakes_at = Clock::time_point::max();
      w.changed.wait(lock);
      continue;
    }
    auto first = w.scopes.begin();
    for (auto it = w.scopes.begin(); it != w.scopes.end(); ++it) {
      if (it->second.deadline < first->second.deadline) first = it;
    }
    if (Clock::now() < first->second.deadline) {
      const Clock::time_point until = first->second.deadline;
      w.wakes_at = until;
      w.changed.wait_until(lock, until);
      continue;
    }
    std::string inner;
    for (auto it = std::next(first); it != w.scopes.end(); ++it) {
      if (it->second.thread == first->second.thread) inner = it->second.what;
    }
    // Copies: the scopes may close (and the map change) once the lock is released.
    const Scope expired = first->second;
    std::vector<std::function<std::string()>> words = w.last_words;
    const std::function<std::string()> line_start = w.line_start;
    lock.unlock();
    end_process(expired, inner, std::move(words), line_start);
  }
}

// Opens a scope on this thread: its id, or kNotWatched for a limit of 0 or less.
uint64_t open_scope(Scope scope) {
  if (scope.limit.count() <= 0) return kNotWatched;
  Watch& w = watch();
  const std::lock_guard<std::mutex> lock(w.mutex);
  if (!w.watched) {
    std::thread(run_watchdog).detach();
    w.watched = true;
  }
  const uint64_t id = g_next_id++;
  scope.thread = std::this_thread::get_id();
  scope.deadline = Clock::now() + scope.limit;
  if (scope.deadline < w.wakes_at) w.changed.notify_one();
  w.scopes[id] = std::move(scope);
  return id;
}

void close_scope(uint64_t id) {
  if (id == kNotWatched) return;
  Watch& w = watch();
  const std::lock_guard<std::mutex> lock(w.mutex);
  w.scopes.erase(id);
}

}  // namespace

FileIoDeadline::FileIoDeadline(std::string what, std::chrono::milliseconds limit,
                               std::string way_out)
    : id_(open_scope(
          {{}, std::move(what), kStorageCause, std::move(way_out), ErrorKind::kIo, limit, {}})) {}

FileIoDeadline::~FileIoDeadline() { close_scope(id_); }

CallDeadline::CallDeadline(std::string what, std::chrono::milliseconds limit, std::string cause,
                           std::string way_out)
    : id_(open_scope({{},
                      std::move(what),
                      std::move(cause),
                      std::move(way_out),
                      ErrorKind::kComm,
                      limit,
                      {}})) {}

CallDeadline::~CallDeadline() { close_scope(id_); }

void add_file_io_last_words(std::function<std::string()> words) {
  Watch& w = watch();
  const std::lock_guard<std::mutex> lock(w.mutex);
  w.last_words.push_back(std::move(words));
}

void set_file_io_line_start(std::function<std::string()> start) {
  Watch& w = watch();
  const std::lock_guard<std::mutex> lock(w.mutex);
  w.line_start = std::move(start);
}

bool finished_within(std::chrono::milliseconds limit, std::function<void()> fn) {
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> done = finished->get_future();
  auto call = [fn = std::move(fn), finished] {
    try {
      fn();
    } catch (...) {
    }
    finished->set_value();
  };
  try {
    std::thread(call).detach();
  } catch (const std::system_error&) {
    call();  // no thread to be had (a process or cgroup limit): unbounded, as before
  }
  return done.wait_for(limit) == std::future_status::ready;
}

}  // namespace zt
