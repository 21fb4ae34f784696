#include "zt/host/trace.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "util/fault_injection.h"
#include "util/posix_file.h"
#include "zt/error.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/utf8.h"

namespace zt::trace {

std::atomic<bool> g_recording{false};

namespace {

// A detail kept once for the whole process, by pointer: a run has few distinct ones (a region
// and its tier, the phase that issued a collective), each seen every step. A fixed-size copy cut
// a tier's file path off and could split a UTF-8 character, which made the trace invalid JSON.
const char* interned_detail(const std::string& detail) {
  if (detail.empty()) return "";
  static std::mutex mutex;
  static auto* kept = new std::unordered_set<std::string>;  // used by threads until exit
  constexpr size_t kMaxDistinct = size_t{1} << 16;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = kept->find(detail);
  if (it != kept->end()) return it->c_str();
  if (kept->size() >= kMaxDistinct) return "(detail not kept: more than 65536 distinct details)";
  return kept->insert(detail).first->c_str();
}

// An event as a lane keeps it: fixed size, so recording allocates nothing per event. Measured
// here: events kept in growing vectors with their own strings interleaved small long-lived blocks
// with the step's tensors in the heap, and a 2-rank stage-3 step took 13% longer (2x the page
// faults). A lane reserves kReservedEvents at its first event (about 8 MiB: above the mmap
// threshold zt sets, so outside the heap the tensors use).
struct StoredEvent {
  const char* name;
  int64_t index;
  const char* what;
  const char* category;
  int64_t begin_ns, end_ns, bytes;
  const char* detail;

  static StoredEvent of(const Event& e) {
    return {e.name,     e.index,  e.what,  e.category,
            e.begin_ns, e.end_ns, e.bytes, interned_detail(e.detail)};
  }
  Event event() const { return {name, index, what, category, begin_ns, end_ns, bytes, detail}; }
};
constexpr size_t kReservedEvents = size_t{1} << 17;

// One thread's lane. The owner thread writes its activity slots without a lock (atomics, so a
// dump from another thread reads them safely); events and the waiting label are under `mutex`,
// which only a dump or a write ever contends.
struct LaneState {
  static constexpr int kSlots = 32;
  struct Slot {
    std::atomic<const char*> name{""};
    std::atomic<int64_t> index{-1};
    std::atomic<const char*> what{""};
    std::atomic<const char*> category{kCompute};
  };
  std::mutex mutex;
  std::string name;
  int tid = 0;
  std::vector<StoredEvent> events;
  bool dropped = false;
  std::string waiting;
  int64_t waiting_since_ns = 0;
  Slot slots[kSlots];
  std::atomic<int> depth{0};
  // begin() spans not ended yet: the owner thread's, or another's that ends one (trace.h)
  std::vector<Event> open;

  void push(const char* n, int64_t index, const char* what, const char* category) {
    const int d = depth.load(std::memory_order_relaxed);
    if (d < kSlots) {
      slots[d].name.store(n, std::memory_order_relaxed);
      slots[d].index.store(index, std::memory_order_relaxed);
      slots[d].what.store(what, std::memory_order_relaxed);
      slots[d].category.store(category, std::memory_order_relaxed);
    }
    depth.store(d + 1, std::memory_order_release);
  }
  void pop() { depth.store(std::max(0, depth.load(std::memory_order_relaxed) - 1)); }
  void record(const Event& e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (events.size() >= kMaxEventsPerLane) {
      dropped = true;
      return;
    }
    if (events.capacity() == 0) events.reserve(kReservedEvents);
    events.push_back(StoredEvent::of(e));
  }
};

struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<LaneState>> lanes;
  std::map<std::string, std::shared_ptr<LaneState>> named;  // add_lane_event's lanes
  std::map<std::string, int64_t> named_end_ns;              // their last event's end
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may record during exit
  return *r;
}

// A new lane, registered; the caller holds the registry's mutex.
std::shared_ptr<LaneState> new_lane(Registry& r, const std::string& name) {
  auto l = std::make_shared<LaneState>();
  l->tid = static_cast<int>(r.lanes.size()) + 1;
  l->name = name.empty() ? "thread " + std::to_string(l->tid) : name;
  r.lanes.push_back(l);
  return l;
}

const std::shared_ptr<LaneState>& this_lane_ptr() {
  thread_local std::shared_ptr<LaneState> lane = [] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return new_lane(r, "");
  }();
  return lane;
}

LaneState& this_lane() { return *this_lane_ptr(); }

bool is_collective(const char* category) {
  return std::strcmp(category, kComm) == 0 || std::strcmp(category, kCommWait) == 0;
}

// The lanes registered so far (a copy: a dump reads them while threads add more).
std::vector<std::shared_ptr<LaneState>> all_lanes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.lanes;
}

std::string label(const char* name, int64_t index, const char* what, const char* category) {
  std::string s = name;
  if (index >= 0) s += (is_collective(category) ? " #" : " ") + std::to_string(index);
  if (what && *what) s += std::string(" ") + what;
  return s;
}

std::string slot_label(const LaneState::Slot& slot) {
  return label(
      slot.name.load(std::memory_order_relaxed), slot.index.load(std::memory_order_relaxed),
      slot.what.load(std::memory_order_relaxed), slot.category.load(std::memory_order_relaxed));
}

void append_event_json(std::string& out, const Event& e, int pid, int tid, int64_t shift_ns) {
  char buf[160];
  out += "{\"ph\":\"X\",\"name\":";
  out += json_quote(label(e.name, e.index, e.what, e.category));
  out += ",\"cat\":";
  out += json_quote(e.category);
  std::snprintf(buf, sizeof buf, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f", pid, tid,
                static_cast<double>(e.begin_ns + shift_ns) / 1000.0,
                static_cast<double>(e.end_ns - e.begin_ns) / 1000.0);
  out += buf;
  if (e.bytes >= 0 || !e.detail.empty()) {
    out += ",\"args\":{";
    if (e.bytes >= 0) out += "\"bytes\":" + std::to_string(e.bytes);
    if (!e.detail.empty()) {
      if (e.bytes >= 0) out += ",";
      out += "\"detail\":" + json_quote(e.detail);
    }
    out += "}";
  }
  out += "}";
}

}  // namespace

void set_recording(bool on) { g_recording.store(on, std::memory_order_relaxed); }

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void name_this_thread(const std::string& lane, bool replace) {
  LaneState& l = this_lane();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (replace || l.name.rfind("thread ", 0) == 0) l.name = lane;
}

Scope::Scope(const char* name, int64_t index, const char* what, const char* category)
    : name_(name), index_(index), what_(what), category_(category) {
  this_lane().push(name, index, what, category);
  if (recording()) begin_ns_ = now_ns();
}

Scope::~Scope() {
  LaneState& lane = this_lane();
  if (begin_ns_ != 0) {
    Event e;
    e.name = name_;
    e.index = index_;
    e.what = what_;
    e.category = category_;
    e.begin_ns = begin_ns_;
    e.end_ns = now_ns();
    e.bytes = bytes_;
    e.detail = std::move(detail_);
    lane.record(std::move(e));
  }
  lane.pop();
}

void Scope::set_detail(std::string detail) {
  if (begin_ns_ != 0) detail_ = std::move(detail);
}

OpenSpan begin(const char* name, int64_t index, const char* what, const char* category) {
  const std::shared_ptr<LaneState>& ptr = this_lane_ptr();
  LaneState& lane = *ptr;
  lane.push(name, index, what, category);
  Event e;
  e.name = name;
  e.index = index;
  e.what = what;
  e.category = category;
  e.begin_ns = recording() ? now_ns() : 0;
  lane.open.push_back(std::move(e));
  return {ptr};
}

void end(OpenSpan& span) {
  // The beginning thread's lane, also from another thread (see trace.h for why that is safe).
  const std::shared_ptr<void> owner = std::move(span.lane);
  if (!owner) return;
  LaneState& lane = *static_cast<LaneState*>(owner.get());
  if (lane.open.empty()) return;
  Event e = std::move(lane.open.back());
  lane.open.pop_back();
  lane.pop();
  if (e.begin_ns == 0 || !recording()) return;
  e.end_ns = now_ns();
  lane.record(std::move(e));
}

void add_lane_event(const std::string& lane, Event event) {
  if (!recording()) return;
  std::shared_ptr<LaneState> target;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto& l = r.named[lane];
    if (!l) l = new_lane(r, lane);
    target = l;
    int64_t& last_end = r.named_end_ns[lane];
    event.begin_ns = std::max(event.begin_ns, last_end);
    event.end_ns = std::max(event.end_ns, event.begin_ns);
    last_end = event.end_ns;
  }
  target->record(std::move(event));
}

void set_waiting(const std::string& what) {
  LaneState& lane = this_lane();
  std::lock_guard<std::mutex> lock(lane.mutex);
  lane.waiting = what;
  lane.waiting_since_ns = now_ns();
}

void clear_waiting() {
  LaneState& lane = this_lane();
  std::lock_guard<std::mutex> lock(lane.mutex);
  lane.waiting.clear();
}

std::string current_activity() {
  LaneState& lane = this_lane();
  const int depth = std::min(lane.depth.load(std::memory_order_relaxed), LaneState::kSlots);
  return depth > 0 ? slot_label(lane.slots[depth - 1]) : std::string();
}

std::vector<Activity> activities() {
  std::vector<Activity> out;
  for (const auto& l : all_lanes()) {
    Activity a;
    const int depth = std::min(l->depth.load(std::memory_order_acquire), LaneState::kSlots);
    for (int i = 0; i < depth; ++i) {
      a.stack.push_back(slot_label(l->slots[i]));
    }
    std::lock_guard<std::mutex> lock(l->mutex);
    a.lane = l->name;
    a.waiting = l->waiting;
    a.waiting_since_ns = l->waiting_since_ns;
    if (!a.stack.empty() || !a.waiting.empty()) out.push_back(std::move(a));
  }
  return out;
}

std::vector<Lane> lanes() {
  std::vector<Lane> out;
  for (const auto& l : all_lanes()) {
    std::lock_guard<std::mutex> lock(l->mutex);
    Lane lane{l->name, l->tid, {}};
    lane.events.reserve(l->events.size());
    for (const StoredEvent& e : l->events) lane.events.push_back(e.event());
    out.push_back(std::move(lane));
  }
  return out;
}

void clear_events() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& l : r.lanes) {
    std::lock_guard<std::mutex> lane_lock(l->mutex);
    l->events.clear();  // keeps the reservation: the next trace allocates nothing again
    l->dropped = false;
  }
  r.named_end_ns.clear();
}

std::string json_quote(const std::string& raw) {
  // A path or a --set value may be Latin-1: JSON readers refuse ill-formed UTF-8 (trace merge
  // refused the whole file), so each ill-formed part becomes U+FFFD.
  const std::string text = is_valid_utf8(raw) ? raw : replace_invalid_utf8(raw);
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void write_trace_file(const std::string& path, int pid, const std::string& process_name,
                      int64_t offset_ns, int64_t origin_ns, const std::string& metadata,
                      std::chrono::milliseconds io_limit, const std::string& way_out) {
  std::vector<Lane> all = lanes();
  bool dropped = false;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const auto& l : r.lanes) dropped = dropped || l->dropped;
  }
  const int64_t shift = offset_ns - origin_ns;
  std::string out = "{\"traceEvents\":[\n";
  out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":0,\"args\":{\"name\":" + json_quote(process_name) + "}}";
  out += ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":0,\"args\":{\"sort_index\":" + std::to_string(pid) + "}}";
  for (Lane& lane : all) {
    if (lane.events.empty()) continue;
    out += ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(pid) +
           ",\"tid\":" + std::to_string(lane.tid) + ",\"args\":{\"name\":" + json_quote(lane.name) +
           "}}";
    // Parents before their children: viewers that stack "X" events expect them in that order.
    std::stable_sort(lane.events.begin(), lane.events.end(), [](const Event& a, const Event& b) {
      if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
      return a.end_ns > b.end_ns;
    });
    for (const Event& e : lane.events) {
      out += ",\n";
      append_event_json(out, e, pid, lane.tid, shift);
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":";
  out += metadata.empty() ? "{}" : metadata;
  if (dropped) {
    out.pop_back();
    out += std::string(metadata.empty() || metadata == "{}" ? "" : ",") +
           "\"dropped\":\"a lane reached " + std::to_string(kMaxEventsPerLane) +
           " events; later ones are missing (trace fewer steps)\"}";
  }
  out += "}\n";
  const FileIoDeadline deadline("writing the trace " + path, io_limit, way_out);
  // A test's storage that stops answering (ZT_TEST_FAULT=stall_trace_write:RANK:N): the
  // deadline must end the process long before this sleep ends.
  static std::atomic<int64_t> writes{0};
  stall_if_injected("stall_trace_write", writes, io_limit);
  try {
    ckpt::replace_file_atomically(path, out);
  } catch (const IoError& e) {
    throw IoError(std::string(e.what()) +
                  " (the trace: is trace.dir on a full or read-only disk?)");
  }
}

}  // namespace zt::trace
