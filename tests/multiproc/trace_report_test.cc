// Seeing inside real runs of the small stage-3 GPT on 2 ranks: the timeline trace of every rank
// (lanes that nest, clocks side by side, merged into one file, parsed by speedscope in headless
// Chromium) and report.html at the end of every run (rendered in Chromium); and the waits on
// storage that stops answering where these files and the flight record go, and under the
// launcher's clean-up after its ranks. What they check is in the files and the messages, not in
// when things happen: they run beside other tests.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "../skip.h"
#include "../test_util.h"
#include "small_gpt_job.h"
#include "trace_file.h"

using nlohmann::json;
using zt::test::contains;
using zt::test::lanes_of;
using zt::test::read_json;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

// Events of one lane nest: each starts and ends inside the one open around it, or after it.
bool properly_nested(const std::vector<json>& events) {
  std::vector<double> open_ends;
  double last_begin = -1;
  for (const auto& e : events) {
    const double b = e["ts"], end = b + e["dur"].get<double>();
    if (b < last_begin) return false;  // the file lists parents before children, by start
    last_begin = b;
    // Times are printed to the nanosecond, so a span that starts where another ends may read
    // a rounding step earlier than ts + dur of that one.
    while (!open_ends.empty() && b >= open_ends.back() - 1e-3) open_ends.pop_back();
    if (!open_ends.empty() && end > open_ends.back() + 1e-3) return false;
    open_ends.push_back(end);
  }
  return true;
}

double start_of(const std::vector<json>& events, const std::string& name) {
  for (const auto& e : events)
    if (e["name"] == name) return e["ts"];
  return -1;
}

// [start, end] of the first complete event named `name` ({-1, -1} without one).
std::pair<double, double> span_of(const std::vector<json>& events, const std::string& name) {
  for (const auto& e : events) {
    if (e["name"] == name)
      return {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()};
  }
  return {-1, -1};
}

// Headless Chromium on a URL: the DOM after the page's scripts ran.
zt::test::CommandResult chromium_dom(const std::string& url) {
  return run_command("(timeout 120 chromium --headless --no-sandbox --disable-gpu "
                     "--virtual-time-budget=10000 --window-size=1400,900 --dump-dom '" +
                     url + "' 2>/dev/null)");
}

}  // namespace

TEST_CASE("trace: every rank's timeline nests, lines up across ranks and merges into one file") {
  TempDir dir;
  const auto r = run_command(zt::test::small_gpt_job(
      dir.file("run"), "--set run.steps=5 --set trace.enabled=true --set 'trace.steps=[2, 3]' "
                       "--set checkpoint.every_steps=3 --set model.activation_checkpointing=true "
                       "--set run.name=traced-run"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<std::pair<double, double>> step2;
  for (int rank = 0; rank < 2; ++rank) {
    const json trace = read_json(dir.file("run/trace/rank-" + std::to_string(rank) + ".json"));
    auto lanes = lanes_of(trace);
    REQUIRE(lanes.count("compute") == 1);
    REQUIRE(lanes.count("comm world") == 1);
    const auto& compute = lanes["compute"];
    CHECK(properly_nested(compute));
    CHECK(properly_nested(lanes["comm world"]));
    // Only the traced steps; each unit's forward, backward and recompute; the waits; Adam.
    CHECK(start_of(compute, "step 1") < 0);
    CHECK(start_of(compute, "step 2") >= 0);
    CHECK(start_of(compute, "step 3") >= 0);
    CHECK(start_of(compute, "step 4") < 0);
    for (const char* name : {"unit 0 forward", "unit 1 backward", "recompute", "comm wait",
                             "optimizer update", "data", "checkpoint snapshot"}) {
      INFO(name);
      CHECK(start_of(compute, name) >= 0);
    }
    bool gather_with_bytes = false;
    for (const auto& e : lanes["comm world"]) {
      const std::string n = e["name"];
      if (n.rfind("all_gather #", 0) == 0 && e["args"]["bytes"].get<int64_t>() > 0)
        gather_with_bytes = true;
    }
    CHECK(gather_with_bytes);
    CHECK(trace["otherData"]["engine_times"]["forward_backward"].get<double>() > 0);
    CHECK(trace["otherData"]["world"] == 2);
    CHECK(trace["otherData"]["run"] == "traced-run");
    step2.push_back(span_of(compute, "step 2"));
  }
  // One clock: each rank's step 2 waits in its collectives for the other's step 2, so on a clock
  // the ranks share the two spans overlap (each ends after the other started).
  REQUIRE(step2.size() == 2);
  CHECK(step2[0].second > step2[1].first);
  CHECK(step2[1].second > step2[0].first);

  const auto merged = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " + dir.file("run"));
  INFO(merged.output);
  REQUIRE(merged.exit_code == 0);
  const json all = read_json(dir.file("run/trace/merged.json"));
  std::set<int> pids;
  for (const auto& e : all["traceEvents"]) pids.insert(e["pid"].get<int>());
  CHECK(pids == std::set<int>{0, 1});
  CHECK(all["otherData"]["ranks"].size() == 2);
  // --out: the merged file where it says, the same file.
  const auto elsewhere = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " +
                                     dir.file("run") + " --out " + dir.file("elsewhere.json"));
  INFO(elsewhere.output);
  REQUIRE(elsewhere.exit_code == 0);
  CHECK(read_json(dir.file("elsewhere.json")) == all);
  const auto none = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " + dir.file("nope"));
  CHECK(none.exit_code == 2);
  CHECK(contains(none.output, "[trace] enabled = true"));

  // Resumed past the traced steps (as a restart after a failure is), the job records none of
  // them: the first run's files stay as they were, not replaced by empty ones.
  const std::string before = zt::test::read_file(dir.file("run/trace/rank-1.json"));
  const auto resumed = run_command(zt::test::small_gpt_job(
      dir.file("run"), "--set run.steps=6 --set trace.enabled=true --set 'trace.steps=[2, 3]' "
                       "--set model.activation_checkpointing=true --resume auto"));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(contains(resumed.output, "resumed from"));
  CHECK(zt::test::read_file(dir.file("run/trace/rank-1.json")) == before);

  // A file of a larger earlier run beside them (rank 2 of this 2-rank job) is not merged in.
  std::filesystem::copy_file(dir.file("run/trace/rank-1.json"), dir.file("run/trace/rank-2.json"));
  const auto stale = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " + dir.file("run"));
  CHECK(stale.exit_code == 2);
  CHECK(contains(stale.output, "rank-2.json names rank 2, past its 2-rank job: the folder "
                               "holds traces of two runs"));
  std::filesystem::remove(dir.file("run/trace/rank-2.json"));
  // A rerun of the same size whose rank 1 wrote no trace (a full disk) left the first run's:
  // the ranks' common clock origin tells the two runs apart.
  json rerun = read_json(dir.file("run/trace/rank-1.json"));
  REQUIRE(rerun["otherData"]["clock_origin_ns"] ==
          read_json(dir.file("run/trace/rank-0.json"))["otherData"]["clock_origin_ns"]);
  rerun["otherData"]["clock_origin_ns"] = rerun["otherData"]["clock_origin_ns"].get<int64_t>() + 1;
  zt::test::write_file(dir.file("run/trace/rank-1.json"), rerun.dump());
  const auto mixed = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " + dir.file("run"));
  CHECK(mixed.exit_code == 2);
  CHECK(contains(mixed.output, "are of two runs (their clock origins differ)"));
  // A rank with no file at all: merged without it, said.
  std::filesystem::remove(dir.file("run/trace/rank-1.json"));
  const auto partial = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " +
                                   dir.file("run"));
  CHECK(partial.exit_code == 0);
  CHECK(contains(partial.output, "the job had 2 ranks, and rank(s) 1 wrote no trace file"));

  // Valid JSON that is no trace (a flight record's folder, `[]`) is refused by name: `[]` threw
  // out as an internal error, a flight record merged nothing and exited 0.
  std::filesystem::create_directories(dir.file("other"));
  zt::test::write_file(dir.file("other/rank-0.json"), "[]\n");
  const auto other = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " +
                                 dir.file("other"));
  CHECK(other.exit_code == 2);
  CHECK(contains(other.output, dir.file("other/rank-0.json") +
                                   " is not a trace file zt wrote (no traceEvents array)"));
  zt::test::write_file(dir.file("other/rank-0.json"), "{\"world\": 1, \"ops\": []}\n");
  const auto flight = run_command(std::string(ZT_TEST_TRAINER) + " trace merge " +
                                  dir.file("other"));
  CHECK(flight.exit_code == 2);
  CHECK(contains(flight.output, "no traceEvents array"));
  CHECK_FALSE(std::filesystem::exists(dir.file("other/merged.json")));
}

TEST_CASE(
    "trace: a trace.dir that cannot be made, or a window past the run, is said, and it trains") {
  TempDir dir;
  zt::test::write_file(dir.file("taken"), "a file where trace.dir's parent would be\n");
  const auto r = run_command(zt::test::small_gpt_job(
      dir.file("run"), "--set run.steps=3 --set trace.enabled=true --set 'trace.steps=[1, 2]' "
                       "--set trace.dir=" +
                           dir.file("taken/trace")));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "trace not written, training goes on: cannot create trace.dir"));
  // A window after the run's last step is said, not passed over in silence.
  const auto late = run_command(zt::test::small_gpt_job(
      dir.file("late"), "--set run.steps=2 --set trace.enabled=true --set 'trace.steps=[5, 6]'"));
  INFO(late.output);
  CHECK(late.exit_code == 0);
  CHECK(contains(late.output, "trace.steps = [5, 6] starts after the run's last step "
                              "(run.steps = 2): nothing is traced"));
}

TEST_CASE("trace: a trace.dir whose storage stops answering ends the job with exit 5, naming the "
          "file") {
  // ZT_TEST_FAULT holds rank 1's write of its trace as a hung network file system would: every
  // rank writes at the same step, and with all of them blocked nothing ended the job.
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_command(
      "ZT_TEST_FAULT=stall_trace_write:1:1 " +
      zt::test::small_gpt_job(dir.file("run"),
                              "--set run.steps=3 --set trace.enabled=true "
                              "--set 'trace.steps=[1, 2]' --set launch.timeout_s=8"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(seconds < 60);  // a bound on the hang, not a speed: the deadline is 4 s
  CHECK(contains(r.output, "rank 1 reported: io error: writing the trace " +
                               dir.file("run/trace/rank-1.json") +
                               " has not returned after 4.0 s: the storage stopped answering"));
  CHECK(contains(r.output, "check that trace.dir's storage answers"));
}

TEST_CASE("trace: speedscope parses a real run's trace in headless Chromium") {
  const std::string viewer = ZT_TEST_SOURCE_DIR "/.tools/node_modules/speedscope/dist/release";
  if (!std::filesystem::exists(viewer + "/index.html")) {
    ZT_SKIP_UNLESS_CI("speedscope is not installed in .tools/ (scripts/setup.sh installs it)");
  }
  ZT_SKIP_WITHOUT_CHROMIUM();
  TempDir dir;
  const auto r = run_command(zt::test::small_gpt_job(
      dir.file("run"), "--set run.steps=4 --set trace.enabled=true --set 'trace.steps=[2, 3]'"));
  REQUIRE(r.exit_code == 0);
  // As speedscope's own command line opens a file: a script that hands it the bytes.
  const auto b64 = run_command("base64 -w0 " + dir.file("run/trace/rank-0.json"));
  REQUIRE(b64.exit_code == 0);
  zt::test::write_file(dir.file("load.js"),
                       "speedscope.loadFileFromBase64(\"rank-0.json\", \"" + b64.output + "\")");
  const auto dom = chromium_dom("file://" + viewer +
                                "/index.html#localProfilePath=" + dir.file("load.js"));
  INFO(dom.output.substr(0, 600));
  REQUIRE(dom.exit_code == 0);
  // The title names the loaded file, and the profile list holds the rank's lanes with their
  // time: speedscope parsed the events (an unparsable file leaves its import screen).
  CHECK(contains(dom.output, "<title>rank-0.json - speedscope</title>"));
  CHECK(contains(dom.output, "rank 0 (pid 0), compute (tid 1)"));
  CHECK(contains(dom.output, "comm world"));
  CHECK(std::regex_search(dom.output, std::regex("[0-9.]+ms</td>")));
}

TEST_CASE("report: every run writes report.html, and it renders in headless Chromium") {
  ZT_SKIP_WITHOUT_CHROMIUM();
  TempDir dir;
  const auto r = run_command(
      zt::test::small_gpt_job(dir.file("run"), "--set run.steps=6 --set checkpoint.every_steps=3"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "report: " + dir.file("run/report.html")));
  CHECK(contains(r.output, "MFU: "));
  std::istringstream metrics(zt::test::read_file(dir.file("run/metrics.jsonl")));
  std::string line, last_step;
  while (std::getline(metrics, line))
    if (line.rfind("{\"step\":", 0) == 0) last_step = line;
  const json last = json::parse(last_step);
  CHECK(last["mfu"].get<double>() > 0);
  CHECK(last["mfu"].get<double>() < 1.5);
  CHECK(last["step_bytes"]["collectives"].get<int64_t>() > 0);
  const auto dom = chromium_dom("file://" + dir.file("run/report.html"));
  INFO(dom.output.substr(0, 400));
  REQUIRE(dom.exit_code == 0);
  CHECK(contains(dom.output, "data-charts-drawn=\"7/7\""));
  CHECK(contains(dom.output, "data-script-errors=\"0\""));

  // Made again later, elsewhere; and not at all when turned off.
  const auto again = run_command(std::string(ZT_TEST_TRAINER) + " report " + dir.file("run") +
                                 " --out " + dir.file("again.html"));
  CHECK(again.exit_code == 0);
  CHECK(std::filesystem::exists(dir.file("again.html")));
  // From the metrics file itself: beside it. From a folder without one: named as missing.
  std::filesystem::remove(dir.file("run/report.html"));
  const auto of_file = run_command(std::string(ZT_TEST_TRAINER) + " report " +
                                   dir.file("run/metrics.jsonl"));
  INFO(of_file.output);
  CHECK(of_file.exit_code == 0);
  CHECK(std::filesystem::exists(dir.file("run/report.html")));
  std::filesystem::create_directories(dir.file("empty"));
  const auto empty = run_command(std::string(ZT_TEST_TRAINER) + " report " + dir.file("empty"));
  CHECK(empty.exit_code == 2);
  CHECK(contains(empty.output, "no metrics file " + dir.file("empty/metrics.jsonl")));
  const auto off = run_command(
      zt::test::small_gpt_job(dir.file("off"), "--set run.steps=2 --set run.report=false"));
  CHECK(off.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("off/report.html")));
}

TEST_CASE("flight recorder: a dump whose storage stops answering is given up after half "
          "launch.timeout_s, said, and the job goes on, starting no second dump behind it") {
  // ZT_TEST_FAULT holds the rank's first dump (SIGUSR2's here; a failure's takes the same way)
  // as a hung network file system would: on a failure's way it held back the error for good.
  TempDir dir;
  const std::string log = dir.file("log");
  const std::string job = "ZT_TEST_FAULT=stall_flight_dump:0:1 " +
                          zt::test::small_gpt_job(
                              dir.file("run"),
                              "--set launch.nproc=1 --set run.steps=2500 --set run.log_every=100 "
                              "--set launch.timeout_s=4");
  // SIGUSR2 once step 100 is logged, and again once the first dump was given up.
  const auto until = [&log](const std::string& text) {
    return "for i in $(seq 300); do grep -q '" + text + "' " + log +
           " 2>/dev/null && break; sleep 0.1; done; ";
  };
  const auto r = run_command("(" + job + " > " + log + " 2>&1 & pid=$!; " + until("step 100/") +
                             "kill -USR2 $pid; " + until("did not return within") +
                             "kill -USR2 $pid; wait $pid; echo exit=$?)");
  const std::string out = zt::test::read_file(log);
  INFO(r.output << out);
  CHECK(contains(r.output, "exit=0"));
  CHECK(contains(out, "step 2500/2500"));
  const std::string record = dir.file("run/flight/rank-0.json");
  CHECK(contains(out, "zt: [rank 0] flight record not written: " + record +
                          " did not return within 2 s (its storage does not answer?); going on "
                          "without it"));
  CHECK(contains(out, "zt: [rank 0] flight record not written: an earlier dump to " + record +
                          " has not returned"));
}

TEST_CASE("flight recorder: SIGUSR2 to the launcher reaches every rank, each writes its record, "
          "and the job trains on") {
  // The launcher took SIGUSR2's default action: it ended, and its ranks with it, no record
  // written. Its ranks start with the signal ignored until they take it.
  TempDir dir;
  const std::string log = dir.file("log");
  const std::string job = zt::test::small_gpt_job(
      dir.file("run"),
      "--set run.steps=600 --set run.log_every=100 --set launch.flight_records=16");
  const auto r = run_command(zt::test::sigusr2_after_step_100(job, log));
  const std::string out = zt::test::read_file(log);
  INFO(r.output << out);
  CHECK(contains(r.output, "exit=0"));
  CHECK(contains(out, "step 600/600"));
  CHECK(contains(out, "to the launcher: sent on to every rank"));
  for (const char* rank : {"0", "1"}) {
    CAPTURE(rank);
    const json dump = read_json(dir.file(std::string("run/flight/rank-") + rank + ".json"));
    CHECK(dump["reason"] == "SIGUSR2");
    CHECK(dump["collectives"].size() == 16);
  }
}

TEST_CASE("a launcher whose clean-up of a killed rank's offload files does not return ends with "
          "the ranks' verdict, and the next job on the path removes them") {
  // ZT_TEST_FAULT holds the launcher's removal of the files (as an NVMe device that stalled its
  // ranks would): it held the job's end, and its verdict, for good.
  TempDir dir;
  const std::string nvme = dir.file("nvme");
  const std::string tier = "--set plugins.offload_optimizer=offload_nvme "
                           "--set plugin.offload_nvme.path=" +
                           nvme;
  const std::string job = "ZT_TEST_FAULT=stall_offload_cleanup:0:1 " +
                          zt::test::small_gpt_job(
                              dir.file("run"),
                              "--set run.steps=100000 --set launch.timeout_s=5 " + tier);
  const std::string log = dir.file("log");
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 (the process whose environment says RANK=1) killed once step 10 is logged.
  const auto r = run_command(
      "(" + job + " > " + log + " 2>&1 & pid=$!; for i in $(seq 600); do grep -q 'step 10/' " +
      log + " 2>/dev/null && break; sleep 0.1; done; for p in $(pgrep -f -- '" + dir.file("run") +
      "'); do tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -qx RANK=1 && kill -KILL $p; "
      "done; wait $pid; echo exit=$?)");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string out = zt::test::read_file(log);
  INFO(r.output << out);
  CHECK_FALSE(contains(r.output, "exit=0"));
  CHECK(contains(out, "rank 1"));
  CHECK(contains(out, "zt: offload files its stopped ranks left were not removed: their storage "
                      "did not answer within 10 s; the next job on the same path removes them"));
  CHECK(seconds < 60);  // a bound on the hang, not a speed: the wait is 10 s
  const auto entries = [&nvme] {
    std::vector<std::string> found;
    std::error_code ec;
    for (std::filesystem::recursive_directory_iterator it(nvme, ec), end; !ec && it != end;
         it.increment(ec))
      if (it->is_regular_file()) found.push_back(it->path());
    return found;
  };
  CHECK_FALSE(entries().empty());  // the killed rank's files are still there
  const auto next = run_command(
      zt::test::small_gpt_job(dir.file("next"), "--set run.steps=1 " + tier));
  INFO(next.output);
  REQUIRE(next.exit_code == 0);
  CHECK(entries().empty());
}
