// The timeline trace (zt/host/trace.h): spans become events only while recording, nest on their
// thread, named lanes keep their events in sequence, the file is Trace Event JSON that parses,
// and a thread's activity stack and waiting label are what a flight dump reads.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/host/trace.h"

namespace trace = zt::trace;
using zt::test::TempDir;

namespace {

// This thread's lane: the one whose events carry `name`.
const trace::Lane* lane_with(const std::vector<trace::Lane>& lanes, const std::string& name) {
  for (const auto& l : lanes) {
    for (const auto& e : l.events)
      if (std::string(e.name) == name) return &l;
  }
  return nullptr;
}

// The last lane named `name` (a rerun of a case in one process names another lane alike).
const trace::Lane* lane_named(const std::vector<trace::Lane>& lanes, const std::string& name) {
  const trace::Lane* found = nullptr;
  for (const auto& l : lanes)
    if (l.name == name) found = &l;
  return found;
}

}  // namespace

TEST_CASE("trace: scopes are events only while recording, nested on their thread") {
  trace::clear_events();
  { const trace::Scope off("before recording"); }
  trace::set_recording(true);
  {
    const trace::Scope outer("outer test span", 3, "forward", trace::kCompute);
    const trace::Scope inner("inner test span", trace::kCommWait);
  }
  trace::OpenSpan manual = trace::begin("manual test span", 1, "backward", trace::kCompute);
  trace::end(manual);
  trace::end(manual);  // ended: nothing more
  trace::set_recording(false);
  { const trace::Scope after("after recording"); }

  const auto lanes = trace::lanes();
  const trace::Lane* mine = lane_with(lanes, "outer test span");
  REQUIRE(mine != nullptr);
  std::vector<std::string> names;
  const trace::Event* outer = nullptr;
  const trace::Event* inner = nullptr;
  for (const auto& e : mine->events) {
    names.push_back(e.name);
    if (std::string(e.name) == "outer test span") outer = &e;
    if (std::string(e.name) == "inner test span") inner = &e;
  }
  CHECK(names.size() == 3);  // outer, inner, manual: nothing from before or after recording
  REQUIRE(outer != nullptr);
  REQUIRE(inner != nullptr);
  CHECK(outer->index == 3);
  CHECK(std::string(outer->what) == "forward");
  CHECK(inner->begin_ns >= outer->begin_ns);
  CHECK(inner->end_ns <= outer->end_ns);
  CHECK(std::string(inner->category) == trace::kCommWait);
}

TEST_CASE("trace: a named lane keeps its events in sequence, from whichever thread they come") {
  trace::clear_events();
  trace::set_recording(true);
  const int64_t t0 = trace::now_ns();
  trace::Event a;
  a.name = "all_gather";
  a.index = 1;
  a.category = trace::kComm;
  a.begin_ns = t0;
  a.end_ns = t0 + 1000;
  trace::add_lane_event("comm test", a);
  std::thread([&] {
    trace::Event b = a;
    b.index = 2;
    b.begin_ns = t0 + 500;  // issued while #1 ran: the lane starts it when #1 ended
    b.end_ns = t0 + 3000;
    trace::add_lane_event("comm test", b);
  }).join();
  trace::set_recording(false);
  const auto lanes = trace::lanes();
  const trace::Lane* comm = lane_named(lanes, "comm test");
  REQUIRE(comm != nullptr);
  REQUIRE(comm->events.size() == 2);
  CHECK(comm->events[0].end_ns == t0 + 1000);
  CHECK(comm->events[1].begin_ns == t0 + 1000);
  CHECK(comm->events[1].end_ns == t0 + 3000);
}

TEST_CASE("trace: the file is Trace Event JSON with lanes named and times shifted") {
  trace::clear_events();
  trace::name_this_thread("compute test lane", true);
  trace::set_recording(true);
  {
    trace::Scope s("file test span \"quoted\"", trace::kIo);
    s.set_bytes(4096);
    s.set_detail("rank0/optim.bin");
  }
  trace::set_recording(false);
  TempDir dir;
  const int64_t origin = trace::now_ns() - 5'000'000'000;  // 5 s ago
  trace::write_trace_file(dir.file("rank-3.json"), 3, "rank 3", 1'000'000, origin,
                          "{\"run\":\"t\"}");
  const auto j = nlohmann::json::parse(zt::test::read_file(dir.file("rank-3.json")));
  CHECK(j["otherData"]["run"] == "t");
  bool lane_named = false, span = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "compute test lane")
      lane_named = true;
    if (e["ph"] == "X" && e["name"] == "file test span \"quoted\"") {
      span = true;
      CHECK(e["pid"] == 3);
      CHECK(e["cat"] == "io");
      CHECK(e["args"]["bytes"] == 4096);
      CHECK(e["args"]["detail"] == "rank0/optim.bin");
      // Recorded within the last 5 s, shifted by the offset (1 ms) onto the origin.
      const double ts = e["ts"].get<double>();
      CHECK(ts > 1000.0);
      CHECK(ts < 5'001'000.0 + 60'000'000.0);
    }
  }
  CHECK(lane_named);
  CHECK(span);
  CHECK_THROWS_AS(trace::write_trace_file("/nonexistent-dir/x.json", 0, "r", 0, 0, ""),
                  zt::IoError);
}

TEST_CASE("trace: a long detail with non-ASCII text is kept whole, and the file stays JSON") {
  // A tier's label names its files; a fixed 72-byte copy cut the path and, here, the "é" in two.
  const std::string detail = "offload read of optim.exp_avg (4.0 MiB, offload_nvme: files under "
                             "/mnt/données/zt-offload/rank-0)";
  REQUIRE(detail.size() > 72);
  trace::clear_events();
  trace::set_recording(true);
  for (int i = 0; i < 3; ++i) {
    trace::Scope s("long detail span", trace::kIo);
    s.set_detail(detail);
  }
  trace::set_recording(false);
  TempDir dir;
  trace::write_trace_file(dir.file("rank-0.json"), 0, "rank 0", 0, trace::now_ns(), "{}");
  const auto j = nlohmann::json::parse(zt::test::read_file(dir.file("rank-0.json")));
  int spans = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "long detail span") continue;
    ++spans;
    CHECK(e["args"]["detail"] == detail);
  }
  CHECK(spans == 3);
}

TEST_CASE("trace: a Latin-1 path in a detail becomes U+FFFD, and the file stays JSON") {
  trace::clear_events();
  trace::set_recording(true);
  {
    trace::Scope s("latin-1 span", trace::kIo);
    s.set_detail("offload read under /mnt/donn\xE9"
                 "es/zt");  // é in Latin-1: not UTF-8
  }
  trace::set_recording(false);
  TempDir dir;
  trace::write_trace_file(dir.file("rank-0.json"), 0, "rank 0", 0, trace::now_ns(), "{}");
  const auto j = nlohmann::json::parse(zt::test::read_file(dir.file("rank-0.json")));
  bool found = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "latin-1 span") continue;
    found = true;
    CHECK(e["args"]["detail"] == "offload read under /mnt/donn\xEF\xBF\xBD"
                                 "es/zt");
  }
  CHECK(found);
  CHECK(trace::json_quote("caf\xC3\xA9") == "\"caf\xC3\xA9\"");  // valid UTF-8 as it is
}

TEST_CASE("trace: a span begun on one thread and ended on another is an event of the first") {
  // As a unit's backward on a GPU: begun in a hook on LibTorch's device thread, ended where
  // backward returns, on the thread that called it.
  trace::clear_events();
  trace::set_recording(true);
  trace::OpenSpan span;
  std::string inside;
  std::thread([&] {
    trace::name_this_thread("span begun here");
    span = trace::begin("unit", 4, "backward", trace::kCompute);
    inside = trace::current_activity();
  }).join();
  const trace::Scope here("ending thread's scope");
  trace::end(span);
  trace::set_recording(false);
  CHECK(inside == "unit 4 backward");
  CHECK(!span.lane);
  CHECK(trace::current_activity() == "ending thread's scope");  // its own stack untouched
  const auto lanes = trace::lanes();
  const trace::Lane* begun = lane_named(lanes, "span begun here");
  REQUIRE(begun != nullptr);
  REQUIRE(begun->events.size() == 1);
  CHECK(std::string(begun->events[0].name) == "unit");
  CHECK(begun->events[0].index == 4);
  CHECK(begun->events[0].end_ns >= begun->events[0].begin_ns);
  for (const auto& a : trace::activities()) {
    // The beginning thread's activity stack is empty again: nothing stale in a hang's dump.
    for (const auto& entry : a.stack) CHECK(entry != "unit 4 backward");
  }
}

TEST_CASE("trace: a thread's activity and waiting label are readable from another thread") {
  const trace::Scope step("activity test step", 7, "", trace::kStep);
  const trace::Scope unit("unit", 2, "forward", trace::kCompute);
  trace::set_waiting("all_gather #12 (6.0 MiB) on world");
  CHECK(trace::current_activity() == "unit 2 forward");
  std::vector<trace::Activity> seen;
  std::thread([&] { seen = trace::activities(); }).join();
  bool found = false;
  for (const auto& a : seen) {
    if (a.waiting != "all_gather #12 (6.0 MiB) on world") continue;
    found = true;
    REQUIRE(a.stack.size() >= 2);
    CHECK(a.stack[a.stack.size() - 2] == "activity test step 7");
    CHECK(a.stack.back() == "unit 2 forward");
    CHECK(a.waiting_since_ns > 0);
  }
  CHECK(found);
  trace::clear_waiting();
}
