// The flight recorder in real runs of the small stage-3 GPT on 2 ranks where timing is part of
// what is checked, so they run alone: a skipped collective found with exit 4 within the timeout,
// launch.check_collectives stopping at the first mismatch, and SIGUSR2 on a running rank (a
// stalled offload read and the files its killed rank left: stalled_rank_test.cc; the trace and
// the report: trace_report_test.cc).
#include <doctest/doctest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

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
  const auto r = run_command(zt::test::sigusr2_after_step_100(job, dir.file("log")));
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
