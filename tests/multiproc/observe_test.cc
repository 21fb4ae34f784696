// Seeing inside real runs of the small stage-3 GPT on 2 ranks: the timeline trace of every rank
// (lanes that nest, clocks side by side, merged into one file, parsed by speedscope in headless
// Chromium), report.html at the end of every run (rendered in Chromium), and the flight recorder
// naming an injected fault (a stalled offload read, a skipped collective) with exit 4 within the
// timeout, launch.check_collectives stopping at the first mismatch, and SIGUSR2.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "../skip.h"
#include "../test_util.h"
#include "small_gpt_job.h"

using nlohmann::json;
using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

json read_json(const std::string& path) { return json::parse(zt::test::read_file(path)); }

// The "X" events of each thread of a trace file, by lane name.
std::map<std::string, std::vector<json>> lanes_of(const json& trace) {
  std::map<int, std::string> names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"]] = e["args"]["name"];
  }
  std::map<std::string, std::vector<json>> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") out[names[e["tid"]]].push_back(e);
  }
  return out;
}

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

// The sequence number of the loss all-reduce of step 1 (the last collective of the step), read
// from the job's own trace of that step: skipping it on one rank leaves the math of the next
// step intact, so the job fails in communication, not in numerics.
int64_t loss_all_reduce_seq(const TempDir& dir) {
  const auto r = run_command(zt::test::small_gpt_job(
      dir.file("probe"), "--set run.steps=1 --set trace.enabled=true --set 'trace.steps=[1, 1]'"));
  REQUIRE(r.exit_code == 0);
  const json trace = read_json(dir.file("probe/trace/rank-0.json"));
  int64_t seq = -1;
  const std::regex name("all_reduce #([0-9]+)");
  const auto lanes = lanes_of(trace);
  REQUIRE(lanes.count("comm world") == 1);
  for (const auto& e : lanes.at("comm world")) {
    std::smatch m;
    const std::string n = e["name"];
    if (std::regex_match(n, m, name) && e.contains("args") &&
        e["args"].value("detail", "") == "issued in step 1")
      seq = std::stoll(m[1]);
  }
  return seq;
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

TEST_CASE("flight recorder: a stalled offload read is named, and the job exits 4 in time") {
  TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_command(
      "ZT_TEST_FAULT=stall_read:0:20 " +
      zt::test::small_gpt_job(dir.file("run"),
                              "--set run.steps=6 --set plugins.offload_optimizer=offload_nvme "
                              "--set plugin.offload_nvme.path=" +
                                  dir.file("nvme") + " --set launch.timeout_s=5"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.output);
  CHECK(r.exit_code == 4);
  CHECK(seconds < 60);
  const std::regex line("zt: flight record: rank 1 waits in [a-z_]+ #([0-9]+) \\([^)]*\\) on "
                        "world since [0-9.]+ s; rank 0's last completed is #([0-9]+) \\(last "
                        "issued #[0-9]+\\) and it is in offload read of ");
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, line));
  CHECK(std::stoll(m[2]) == std::stoll(m[1]) - 1);
  const json rank0 = read_json(dir.file("run/flight/rank-0.json"));
  const json rank1 = read_json(dir.file("run/flight/rank-1.json"));
  CHECK(rank0["rank"] == 0);
  CHECK(rank1["collectives"].size() > 10);

  // `trainer flight` takes the job's size from the records: a rank without one (here rank 1's
  // file gone) is named, not left out as if the job were smaller...
  const std::string flight = std::string(ZT_TEST_TRAINER) + " flight " + dir.file("run");
  std::filesystem::rename(dir.file("run/flight/rank-1.json"), dir.file("rank-1.json"));
  const auto one_left = run_command(flight);
  INFO(one_left.output);
  CHECK(one_left.exit_code == 0);
  CHECK(contains(one_left.output, "rank 1 left no flight record"));
  // ...and a larger earlier job's record beside them is refused, not diagnosed with them.
  std::filesystem::rename(dir.file("rank-1.json"), dir.file("run/flight/rank-1.json"));
  std::filesystem::copy_file(dir.file("run/flight/rank-1.json"),
                             dir.file("run/flight/rank-2.json"));
  const auto stale = run_command(flight);
  INFO(stale.output);
  CHECK(stale.exit_code == 2);
  CHECK(contains(stale.output, "rank-2.json names rank 2, past its 2-rank job"));
  // A record whose job size is damaged is refused, where a billion files were looked for.
  std::filesystem::create_directories(dir.file("huge/flight"));
  zt::test::write_file(dir.file("huge/flight/rank-0.json"), "{\"world\": 1000000000}\n");
  const auto huge = run_command(std::string(ZT_TEST_TRAINER) + " flight " + dir.file("huge"));
  CHECK(huge.exit_code == 2);
  CHECK(contains(huge.output, dir.file("huge/flight/rank-0.json") +
                                  " says the job had 1000000000 ranks, more than any job zt "
                                  "starts"));
}

namespace {

// A live A/B job of 6 steps whose config has no file tier and whose arm b puts the optimizer
// states on NVMe under `nvme`; rank 0's 6th read there stalls (ZT_TEST_FAULT, given by the
// caller), rank 1 times out, and the launcher ends rank 0 with SIGKILL after its drain.
std::string job_whose_arm_b_alone_uses_nvme(const TempDir& dir, const std::string& nvme) {
  return zt::test::small_gpt_job(
      dir.file("run"),
      "--set run.steps=6 --set launch.timeout_s=5 --set "
      "'ab.arms=[\"plugins.shard=shard_bucket\", \"plugins.offload_optimizer=offload_nvme\"]' "
      "--set ab.switch_every=2 --set plugin.offload_nvme.path=" +
          nvme);
}

}  // namespace

TEST_CASE("a killed rank's offload files of a live A/B arm that alone uses the tier are removed") {
  // The job's own config has no file tier; arm b puts the optimizer on NVMe. Rank 0's 6th read
  // there stalls, rank 1 times out, and the launcher ends rank 0 with SIGKILL after its drain:
  // no destructor of rank 0 removes its files, and the job's config names no tier the launcher
  // could clean. The ranks noted the folder they made (ZT_OFFLOAD_NOTES).
  TempDir dir;
  const std::string nvme = dir.file("nvme");
  const auto r = run_command("ZT_TEST_FAULT=stall_read:0:6 " +
                             job_whose_arm_b_alone_uses_nvme(dir, nvme));
  INFO(r.output);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.output, "removed offload files left by stopped ranks: " + nvme + "/zt-"));
  std::vector<std::string> left;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(nvme, ec), end; !ec && it != end; it.increment(ec))
    left.push_back(it->path());
  CHECK_FALSE(ec);  // arm b made its folder there
  CHECK(left.empty());
}

TEST_CASE("a launcher given a notes folder (as trainer tune and ab give one) has its ranks note "
          "there, cleans its own job, and leaves the folder to its giver") {
  // The giver reads the folder after the launcher ended: a tune trial killed at the budget's
  // end with its launcher leaves its ranks' NVMe folders to tune alone. The job as above: rank
  // 0 killed, arm b's tier named in no config the launcher reads, only in the notes.
  TempDir dir;
  const std::string nvme = dir.file("nvme"), notes = dir.file("notes");
  std::filesystem::create_directories(notes);
  const auto r = run_command("ZT_OFFLOAD_NOTES=" + notes + " ZT_TEST_FAULT=stall_read:0:6 " +
                             job_whose_arm_b_alone_uses_nvme(dir, nvme));
  INFO(r.output);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.output, "removed offload files left by stopped ranks: " + nvme + "/zt-"));
  bool noted = false;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(notes, ec), end; !ec && it != end; it.increment(ec))
    noted = noted || contains(zt::test::read_file(it->path()), nvme + "/zt-");
  CHECK(noted);  // in the folder it was given, which stays
}

TEST_CASE("flight recorder: a skipped collective is found, and the job exits 4 in time") {
  TempDir dir;
  const int64_t seq = loss_all_reduce_seq(dir);
  REQUIRE(seq > 0);
  const std::string fault = "ZT_TEST_FAULT=skip_collective:1:" + std::to_string(seq) + " ";
  const auto r = run_command(
      fault +
      zt::test::small_gpt_job(dir.file("run"), "--set run.steps=4 --set launch.timeout_s=5"));
  INFO(r.output);
  CHECK(r.exit_code == 4);
  const std::string at = "#" + std::to_string(seq);
  CHECK(contains(r.output, "zt: flight record: the ranks' collectives differ at " + at +
                               " on world: rank 0 issued all_reduce " + at));
  CHECK(contains(r.output, "rank 1 issued "));

  // launch.check_collectives stops at that op, naming both sides, before anything hangs: no
  // collective ran into the timeout (its message says "no progress for").
  const auto checked = run_command(
      fault + zt::test::small_gpt_job(dir.file("checked"),
                                      "--set run.steps=4 --set launch.timeout_s=30 "
                                      "--set launch.check_collectives=true"));
  INFO(checked.output);
  CHECK(checked.exit_code == 4);
  CHECK_FALSE(contains(checked.output, "no progress for"));
  CHECK(contains(checked.output, "collective mismatch on world (launch.check_collectives)"));
  CHECK(contains(checked.output, "issues all_reduce " + at));
  CHECK(contains(checked.output, "where rank 1 issues"));
}

TEST_CASE("flight recorder: SIGUSR2 makes a running rank write its record and go on") {
  TempDir dir;
  // One rank, started in the background; SIGUSR2 once it trains; it finishes normally.
  // launch.flight_records: the record keeps the last 16 of the job's thousands of collectives.
  const std::string job = zt::test::small_gpt_job(
      dir.file("run"), "--set launch.nproc=1 --set run.steps=1000 --set run.log_every=100 "
                       "--set launch.flight_records=16");
  const auto r = run_command("(" + job + " > " + dir.file("log") +
                             " 2>&1 & pid=$!; for i in $(seq 200); do grep -q 'step 100/' " +
                             dir.file("log") +
                             " 2>/dev/null && break; sleep 0.1; done; kill "
                             "-USR2 $pid; wait $pid; echo exit=$?)");
  const std::string log = zt::test::read_file(dir.file("log"));
  INFO(r.output << log);
  CHECK(contains(r.output, "exit=0"));
  // run.log_every: a progress line every 100 steps, none between.
  CHECK(contains(log, "step 1000/1000"));
  CHECK_FALSE(contains(log, "step 101/"));
  CHECK_FALSE(contains(log, "step 999/"));
  const json dump = read_json(dir.file("run/flight/rank-0.json"));
  CHECK(dump["reason"] == "SIGUSR2");
  REQUIRE(dump["collectives"].size() == 16);
  // The last 16, in order: caught after step 100, the job had issued far more.
  CHECK(dump["collectives"].back()["seq"].get<int64_t>() > 100);
  for (size_t i = 1; i < dump["collectives"].size(); ++i) {
    CHECK(dump["collectives"][i]["seq"].get<int64_t>() ==
          dump["collectives"][i - 1]["seq"].get<int64_t>() + 1);
  }
  const auto flight = run_command(std::string(ZT_TEST_TRAINER) + " flight " + dir.file("run"));
  CHECK(flight.exit_code == 0);
  // Caught between collectives, or inside one (then named as the op it waits in).
  const bool described = contains(flight.output, "flight record: rank 0's last completed "
                                                 "collective is #") ||
                         contains(flight.output, "flight record: rank 0 waits in ");
  CHECK(described);
}
