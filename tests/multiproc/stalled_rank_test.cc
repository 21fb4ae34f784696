// A rank stalled in an offload read (ZT_TEST_FAULT) in real runs of the small stage-3 GPT on 2
// ranks: the flight record names where it waits and the job exits 4 within the timeout, and the
// offload files of the rank the launcher killed after its drain are removed, also where only the
// ranks' notes name them. What they check is in the messages and the files, and the bounds on
// time are loose (a hang, not a speed): they run beside other tests (the timing cases of the
// flight recorder: observe_test.cc).
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "../test_util.h"
#include "small_gpt_job.h"
#include "trace_file.h"

using nlohmann::json;
using zt::test::contains;
using zt::test::read_json;
using zt::test::run_command;
using zt::test::TempDir;

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
