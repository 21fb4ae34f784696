// Timeline trace and "what is this thread doing": the instrument behind `[trace]` (a Trace Event
// JSON file per rank, opened by Perfetto, chrome://tracing and speedscope) and behind the flight
// recorder's diagnosis of a hang (flight_recorder.h).
//
// Code marks what it does with a Scope (or begin()/end() where a span starts and ends in
// different callbacks, as a unit's backward does). A scope always goes on its thread's activity
// stack, which the flight recorder reads when a job hangs (a few relaxed stores: cheap enough to
// be always on). Only while recording is on (set_recording(true), between the trace's first and
// last step) does a scope also become an event of its thread's lane; when it is off, nothing else
// happens. Events of one thread nest properly: scopes are closed in reverse order.
// Lanes are threads: the training thread ("compute"), a comm plugin's progress thread ("comm"),
// storage threads ("offload io"), the checkpoint writer. Each thread names its lane once.
// Thread safety: every function may be called from any thread; write_trace_file() may run while
// other threads record (their events up to that moment are written).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"

namespace zt::trace {

// Categories: what an event is, for viewers (colour) and for sums (bench trace).
inline constexpr const char* kCompute = "compute";
inline constexpr const char* kCommWait = "comm_wait";
inline constexpr const char* kReadWait = "read_wait";
inline constexpr const char* kWriteWait = "write_wait";
inline constexpr const char* kOptimizer = "optimizer";
inline constexpr const char* kComm = "comm";  // a collective on the comm lane, issue to completion
inline constexpr const char* kIo = "io";      // a tier read or write on the storage lane
inline constexpr const char* kCheckpoint = "checkpoint";
inline constexpr const char* kData = "data";
inline constexpr const char* kStep = "step";

ZT_API extern std::atomic<bool> g_recording;
// True while events are recorded. Never throws.
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }
// Turns recording on or off for every thread. Never throws.
ZT_API void set_recording(bool on);

// CLOCK_MONOTONIC in nanoseconds, the clock of every event. Never throws.
ZT_API int64_t now_ns();

// Names the calling thread's lane (once; later calls keep the first name unless `replace`).
ZT_API void name_this_thread(const std::string& lane, bool replace = false);

// One finished event, as recorded.
struct Event {
  const char* name = "";  // static text: "unit", "all_gather", "read"
  int64_t index = -1;     // shown after the name when >= 0: "unit 3" ("all_gather #12" for the
                          // collective categories, where it is a sequence number)
  const char* what = "";  // static text shown after that: "forward" -> "unit 3 forward"
  const char* category = kCompute;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t bytes = -1;  // an argument when >= 0
  std::string detail;  // an argument when not empty: a file, a group, a dtype
};

// A span on the calling thread: on its activity stack for its lifetime, and an event when
// recording was on at its start.
//   name, what: static strings (they are kept by pointer); index >= 0 is shown between them.
class ZT_API Scope {
 public:
  Scope(const char* name, int64_t index, const char* what, const char* category);
  explicit Scope(const char* name, const char* category = kCompute)
      : Scope(name, -1, "", category) {}
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  // Arguments of the event (kept only while recording).
  void set_bytes(int64_t bytes) { bytes_ = bytes; }
  void set_detail(std::string detail);

 private:
  const char* name_;
  int64_t index_;
  const char* what_;
  const char* category_;
  int64_t begin_ns_ = 0;  // 0: not recording
  int64_t bytes_ = -1;
  std::string detail_;
};

// A span whose start and end are separate calls (a unit's backward starts in one autograd hook
// and ends in the next, or where backward returns). It belongs to the lane of the thread that
// began it, as a Scope there would, and end() may run on another thread: LibTorch runs the hooks
// of CUDA tensors on its device thread, not on the one that called backward. The spans a thread
// began end in reverse order, and while another thread ends one the beginning thread runs
// nothing that traces (the hooks of one backward run one at a time; backward returns after the
// last).
struct OpenSpan {
  std::shared_ptr<void> lane;  // the beginning thread's; empty when nothing is open
};
ZT_API OpenSpan begin(const char* name, int64_t index, const char* what, const char* category);
// Ends `span` on its lane and empties it; nothing for an empty one. Never throws but bad_alloc.
ZT_API void end(OpenSpan& span);

// Adds an event the caller timed itself to the named lane ("comm world", "offload io"), a lane of
// its own whichever thread adds to it: a collective completes on a plugin's progress thread or on
// the thread that waits for it. The lane keeps its events in sequence: one starts no earlier than
// the one added before it ended (ops of a communicator run one at a time). Kept only while
// recording. Never throws but bad_alloc.
ZT_API void add_lane_event(const std::string& lane, Event event);

// What a thread is doing now, outermost first ("step", "unit 3 forward", "wait all_gather
// #812 (6.0 MiB)"), as its scopes and waits say.
struct Activity {
  std::string lane;
  std::vector<std::string> stack;
  std::string waiting;  // set_waiting()'s label; "" when not blocked
  int64_t waiting_since_ns = 0;
};
// The calling thread is blocked on `label` ("all_gather #812 (6.0 MiB, unit 3 forward)",
// "offload read of optim.exp_avg (4.0 MiB, runs/nvme/rank0-job)") until clear_waiting().
ZT_API void set_waiting(const std::string& label);
ZT_API void clear_waiting();
// The calling thread's innermost scope ("unit 3 forward"), "" outside any. Never throws.
ZT_API std::string current_activity();
// Every lane's current activity (threads that have run a scope), for a dump. Never throws.
ZT_API std::vector<Activity> activities();

// The events recorded so far, per lane: (lane name, thread id, events), oldest first.
struct Lane {
  std::string name;
  int tid = 0;
  std::vector<Event> events;
};
ZT_API std::vector<Lane> lanes();
// Drops every recorded event (lanes and names stay). Never throws.
ZT_API void clear_events();

// How many events a lane keeps before it drops the rest (and says so in the file).
inline constexpr size_t kMaxEventsPerLane = 2000000;

// Writes the events in Trace Event JSON: one process `pid` named `process_name`, one thread per
// lane (its name as metadata), "X" events with ts/dur in microseconds, where
// ts = (begin_ns + offset_ns - origin_ns) / 1000; `offset_ns` moves this rank's clock onto the
// job's (measured at rendezvous) and origin_ns is the job's time zero. `metadata` (a JSON object
// text, or "") goes to "otherData". Throws IoError naming the file. `io_limit` > 0 bounds the
// file's writing (FileIoDeadline, `way_out` its advice), not the events' formatting before it.
ZT_API void write_trace_file(const std::string& path, int pid, const std::string& process_name,
                             int64_t offset_ns, int64_t origin_ns, const std::string& metadata,
                             std::chrono::milliseconds io_limit = std::chrono::milliseconds(0),
                             const std::string& way_out = "");

// `text` as a JSON string literal, quotes included, each ill-formed UTF-8 part as U+FFFD (JSON
// readers refuse the bytes). Never throws (but std::bad_alloc).
ZT_API std::string json_quote(const std::string& text);

}  // namespace zt::trace
