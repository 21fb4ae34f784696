#include "zt/host/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "util/fault_injection.h"
#include "util/posix_file.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/trace.h"

namespace zt {

namespace {

int64_t to_us(int64_t ns) { return ns / 1000; }

// The state a dump shows: done once completed; running when every earlier op of its group is
// done (ops of a communicator run in issue order, so it is the one on the wire); else issued.
std::vector<std::string> states_of(const std::deque<CollectiveRecord>& records) {
  std::vector<std::string> out(records.size());
  std::vector<std::string> blocked_groups;
  for (size_t i = 0; i < records.size(); ++i) {
    const CollectiveRecord& r = records[i];
    bool earlier_pending = false;
    for (const auto& g : blocked_groups) earlier_pending = earlier_pending || g == r.group;
    if (r.completed_ns != 0) {
      out[i] = r.failed ? "failed" : "done";
    } else {
      out[i] = earlier_pending ? "issued" : "running";
      blocked_groups.push_back(r.group);
    }
  }
  return out;
}

}  // namespace

FlightRecorder& FlightRecorder::instance() {
  static FlightRecorder* recorder = new FlightRecorder;  // used by threads until exit
  return *recorder;
}

void FlightRecorder::set_capacity(size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = std::max<size_t>(1, n);
}

void FlightRecorder::set_dump_path(const std::string& path, int rank, int world,
                                   std::chrono::milliseconds io_limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  path_ = path;
  rank_ = rank;
  world_ = world;
  io_limit_ = io_limit;
  // A new path is a new run's (a Python process's next engine): its first failure dumps too.
  failure_dumped_.store(false);
  // An earlier job's record at this path (srun requeued into the same out_dir; only zt's own
  // launcher clears the folder) would be read as this job's by the diagnosis if this rank then
  // hangs where it cannot dump. Gone from the start: this run's own is the only one there.
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

int64_t FlightRecorder::issued(CollectiveRecord record) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Exactly the last capacity_ records: every rank's dump covers the same stretch of sequence
  // numbers, which the diagnosis lines up.
  while (ring_.size() >= capacity_) {
    ring_.pop_front();
    ++first_key_;
  }
  ring_.push_back(std::move(record));
  return first_key_ + static_cast<int64_t>(ring_.size()) - 1;
}

void FlightRecorder::completed(int64_t key, int64_t completed_ns, bool failed) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (key < first_key_ || key - first_key_ >= static_cast<int64_t>(ring_.size())) return;
  CollectiveRecord& r = ring_[static_cast<size_t>(key - first_key_)];
  if (r.completed_ns != 0) return;
  r.completed_ns = completed_ns;
  r.failed = failed;
}

std::vector<CollectiveRecord> FlightRecorder::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {ring_.begin(), ring_.end()};
}

std::string FlightRecorder::to_json(const std::string& reason) const {
  std::deque<CollectiveRecord> records;
  int rank = 0, world = 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    records = ring_;
    rank = rank_;
    world = world_;
  }
  const int64_t now = trace::now_ns();
  const std::vector<std::string> states = states_of(records);
  std::string out = "{\"rank\":" + std::to_string(rank) + ",\"world\":" + std::to_string(world) +
                    ",\"pid\":" + std::to_string(getpid()) +
                    ",\"reason\":" + trace::json_quote(reason) +
                    ",\"now_us\":" + std::to_string(to_us(now)) + ",\n\"threads\":[";
  bool first = true;
  for (const trace::Activity& a : trace::activities()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += "{\"lane\":" + trace::json_quote(a.lane) + ",\"stack\":[";
    for (size_t i = 0; i < a.stack.size(); ++i)
      out += (i ? "," : "") + trace::json_quote(a.stack[i]);
    out += "],\"waiting\":" + trace::json_quote(a.waiting);
    if (!a.waiting.empty())
      out += ",\"waiting_since_us\":" + std::to_string(to_us(a.waiting_since_ns));
    out += "}";
  }
  out += "],\n\"collectives\":[";
  for (size_t i = 0; i < records.size(); ++i) {
    const CollectiveRecord& r = records[i];
    out += i ? ",\n" : "\n";
    out += "{\"seq\":" + std::to_string(r.seq) + ",\"group\":" + trace::json_quote(r.group) +
           ",\"op\":" + trace::json_quote(r.op) + ",\"bytes\":" + std::to_string(r.bytes) +
           ",\"dtype\":" + trace::json_quote(r.dtype) + ",\"phase\":" + trace::json_quote(r.phase) +
           ",\"state\":\"" + states[i] + "\",\"issued_us\":" + std::to_string(to_us(r.issued_ns));
    if (r.completed_ns != 0) out += ",\"completed_us\":" + std::to_string(to_us(r.completed_ns));
    out += "}";
  }
  out += "\n]}\n";
  return out;
}

bool FlightRecorder::dump(const std::string& reason) const noexcept {
  std::lock_guard<std::mutex> lock(dump_mutex_);
  return write_dump(reason);
}

namespace {

void write_dump_file(const std::string& path, const std::string& text,
                     std::chrono::milliseconds limit) {
  static std::atomic<int64_t> dumps{0};
  stall_if_injected("stall_flight_dump", dumps, limit);  // a test's storage that stopped answering
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  ckpt::replace_file_atomically(path, text);
}

}  // namespace

bool FlightRecorder::write_dump(const std::string& reason) const noexcept {
  try {
    std::string path;
    std::chrono::milliseconds limit;
    int rank;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      path = path_;
      limit = io_limit_;
      rank = rank_;
    }
    if (path.empty()) return false;
    const std::string text = to_json(reason);
    if (limit.count() <= 0) {
      write_dump_file(path, text, limit);
      return true;
    }
    // On a thread of its own, waited for at most the limit: blocked on storage that stopped
    // answering, it held back the error it came before (and every rank's, all dumping into the
    // one folder) for good. A thread stuck in the kernel is left behind; the process ends anyway.
    // While one is, no other starts: it would write the same temporary file, and each SIGUSR2
    // would leave one more thread behind.
    static const auto blocked = std::make_shared<std::atomic<bool>>(false);
    if (blocked->load()) {
      std::fprintf(stderr,
                   "zt: [rank %d] flight record not written: an earlier dump to %s has not "
                   "returned (its storage does not answer?)\n",
                   rank, path.c_str());
      return false;
    }
    blocked->store(true);
    auto ok = std::make_shared<std::atomic<bool>>(false);
    if (finished_within(limit, [path, text, limit, ok, done = blocked] {
          try {
            write_dump_file(path, text, limit);
            ok->store(true);
          } catch (...) {
          }
          done->store(false);
        })) {
      return ok->load();
    }
    std::fprintf(stderr,
                 "zt: [rank %d] flight record not written: %s did not return within %.0f s "
                 "(its storage does not answer?); going on without it\n",
                 rank, path.c_str(), std::chrono::duration<double>(limit).count());
    return false;
  } catch (...) {
    return false;
  }
}

bool FlightRecorder::dump_on_request() noexcept {
  // A failure's own dump says more about it than a later request (the launcher's, after the
  // failure) could: it is kept.
  std::lock_guard<std::mutex> lock(dump_mutex_);
  if (failure_dumped_.load()) return false;
  return write_dump("SIGUSR2");
}

bool FlightRecorder::dump_failure(const std::string& reason) noexcept {
  {
    // A failure before the first collective (a bad file, a refused model) has nothing to tell,
    // and its run leaves nothing behind.
    std::lock_guard<std::mutex> lock(mutex_);
    if (ring_.empty()) return false;
  }
  if (failure_dumped_.exchange(true)) return false;
  // A request's dump already writing finishes first; this one then replaces it.
  std::lock_guard<std::mutex> lock(dump_mutex_);
  return write_dump(reason);
}

namespace {

int g_dump_pipe[2] = {-1, -1};

void on_sigusr2(int) {
  const char byte = 1;
  // Only async-signal-safe work here; the dump runs on the thread reading the pipe.
  ssize_t n = write(g_dump_pipe[1], &byte, 1);
  (void)n;
}

}  // namespace

void dump_flight_record_on_sigusr2() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe(g_dump_pipe) != 0) return;
    std::thread([] {
      char byte = 0;
      for (;;) {
        const ssize_t got = read(g_dump_pipe[0], &byte, 1);
        // A stop signal (SIGTERM, SIGUSR1: no SA_RESTART) delivered to this thread cuts the read
        // short; ending here would lose every later dump.
        if (got < 0 && errno == EINTR) continue;
        if (got != 1) break;
        FlightRecorder::instance().dump_on_request();
      }
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = on_sigusr2;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, nullptr);
  });
}

}  // namespace zt
