// The flight recorder in real runs of the small stage-3 GPT on 2 ranks: naming an injected fault
// (a stalled offload read, a skipped collective) with exit 4 within the timeout,
// launch.check_collectives stopping at the first mismatch, and SIGUSR2; and the offload files of
// a rank the launcher killed after such a stall. Their timing is part of what they check, so they
// run alone (the trace and the report: trace_report_test.cc).
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>

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
