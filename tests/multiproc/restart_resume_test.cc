// Checkpoints through the trainer where a job is killed, restarted or resumed, or its
// checkpoint storage stops answering, checked by what the job computes and says, not by when:
// a job killed with SIGKILL resumes bit for bit; restarts under --max-restarts (a killed rank,
// one before the first save, a live A/B job, one rank alone, a failure at the same step every
// time); resumes where a rank sees the checkpoints elsewhere or not at all; a second job on a
// folder in use; loads and saves that stop answering end with exit 5 naming the file. The kill
// comes once a file says the job got far enough, so these run beside other tests; those whose
// kill or signal must land at a given moment are checkpoint_test.cc's, and run alone.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "../skip.h"
#include "../test_util.h"
#include "background_job.h"
#include "checkpoint_files.h"
#include "small_gpt_job.h"
#include "zt/host/checkpoint.h"
#include "zt/host/launcher.h"

namespace fs = std::filesystem;
using zt::test::all_values;
using zt::test::BackgroundJob;
using zt::test::check_same_losses;
using zt::test::check_same_state;
using zt::test::contains;
using zt::test::kill_rank_when;
using zt::test::KilledRank;
using zt::test::quiet_small_gpt_job;
using zt::test::run_command;
using zt::test::step_folder;
using zt::test::TempDir;
using zt::test::wait_until;

TEST_CASE("checkpoint: a job killed with SIGKILL resumes and trains on bit for bit") {
  TempDir dir;
  const int64_t steps = 60;
  const std::string straight = dir.file("straight"), resumed = dir.file("resumed");
  const std::string total = " --set run.steps=" + std::to_string(steps);
  auto r = run_command(quiet_small_gpt_job(straight, total + " --set checkpoint.every_steps=1000"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const fs::path ckpt = fs::path(resumed) / "checkpoints";
  BackgroundJob job(quiet_small_gpt_job(resumed, total + " --set checkpoint.every_steps=3"),
                    dir.file("killed.log"));
  REQUIRE(wait_until([&] { return fs::exists(ckpt / "latest"); }, std::chrono::seconds(60)));
  const pid_t victim = job.rank_pid(1);
  REQUIRE(victim > 0);
  REQUIRE(kill(victim, SIGKILL) == 0);
  const int killed_exit = job.wait(std::chrono::seconds(60));
  const std::string killed_log = zt::test::read_file(dir.file("killed.log"));
  INFO(killed_log);
  CHECK(killed_exit == 128 + SIGKILL);
  CHECK(contains(killed_log, "was killed by signal 9"));
  // The kill landed mid-run: the job never reached its last step.
  REQUIRE(zt::test::losses_of(resumed + "/metrics.jsonl").size() < static_cast<size_t>(steps));
  REQUIRE(!fs::exists(step_folder(ckpt, steps)));

  const std::string latest = zt::latest_checkpoint(ckpt.string());
  REQUIRE(!latest.empty());
  zt::CheckpointReader reader(latest);
  const int64_t saved = reader.step();
  CHECK(saved % 3 == 0);
  CHECK(all_values(reader).size() == reader.kinds().size() * reader.tensors().size());

  r = run_command(
      quiet_small_gpt_job(resumed, total + " --set checkpoint.every_steps=3 --resume auto"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "resumed from " + latest + " at step " + std::to_string(saved) +
                               " (saved by: world 2, ZeRO stage 3, shard_bucket"));
  CHECK(contains(r.output, "resumed at step " + std::to_string(saved)));
  // metrics.jsonl: the killed run's steps up to the checkpoint, then the resumed run's.
  check_same_losses(straight, resumed, steps);
  check_same_state(step_folder(fs::path(straight) / "checkpoints", steps),
                   step_folder(ckpt, steps));
}

TEST_CASE("restarts: a rank killed mid-run under max_restarts = 2 is restarted from the latest "
          "checkpoint, and the job ends on the uninterrupted run's losses and state") {
  TempDir dir;
  const int64_t steps = 60;
  const std::string straight = dir.file("straight"), healed = dir.file("healed");
  const std::string total = " --set run.steps=" + std::to_string(steps);
  auto r = run_command(quiet_small_gpt_job(straight, total + " --set checkpoint.every_steps=1000"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const fs::path ckpt = fs::path(healed) / "checkpoints";
  BackgroundJob job(
      quiet_small_gpt_job(healed, total + " --set checkpoint.every_steps=3 --max-restarts 2"),
      dir.file("healed.log"));
  const KilledRank k = kill_rank_when(
      job, 1, [&] { return fs::exists(ckpt / "latest"); }, dir.file("healed.log"));
  INFO(k.log);
  CHECK(k.exit_code == 0);
  CHECK(contains(k.log, "zt: restart 1/2: rank 1 (pid " + std::to_string(k.victim) +
                            ") was killed by signal 9"));
  CHECK(contains(k.log, "; all ranks start again from checkpoint " + ckpt.string() + "/step-"));
  CHECK(contains(k.log, "resumed at step"));
  check_same_losses(straight, healed, steps);
  check_same_state(step_folder(fs::path(straight) / "checkpoints", steps),
                   step_folder(ckpt, steps));
}

TEST_CASE("restarts: a live A/B job, which cannot resume, starts again from the beginning, also "
          "when it was given --resume auto") {
  // Its restart used to add --resume auto once it had saved, which a live A/B job refuses: the
  // restart ended in a config error (exit 2) telling the user to start fresh.
  TempDir dir;
  const int64_t steps = 12;
  const std::string straight = dir.file("straight"), healed = dir.file("healed");
  const std::string job = " --set run.steps=" + std::to_string(steps) +
                          " --set 'ab.arms=[\"plugins.shard=shard_bucket\", "
                          "\"plugins.shard=shard_tensor\"]' --set ab.switch_every=2 --set "
                          "checkpoint.every_steps=3";
  auto r = run_command(quiet_small_gpt_job(straight, job));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const fs::path ckpt = fs::path(healed) / "checkpoints";
  BackgroundJob background(quiet_small_gpt_job(healed, job + " --resume auto --max-restarts 1"),
                           dir.file("healed.log"));
  const KilledRank k = kill_rank_when(
      background, 1, [&] { return fs::exists(ckpt / "latest"); }, dir.file("healed.log"));
  INFO(k.log);
  CHECK(k.exit_code == 0);
  CHECK(contains(k.log, "; all ranks start again from the beginning (a live A/B job, [ab] arms, "
                        "cannot resume from a checkpoint)"));
  CHECK_FALSE(contains(k.log, "cannot resume from a checkpoint yet"));
  check_same_losses(straight, healed, steps);
}

TEST_CASE("restarts: a job of one rank under max_restarts is supervised, and its killed rank "
          "started again from the latest checkpoint") {
  // A single process used to become the rank itself: one that died was not started again.
  TempDir dir;
  const int64_t steps = 40;
  const std::string straight = dir.file("straight"), healed = dir.file("healed");
  const std::string total = " --set run.steps=" + std::to_string(steps) + " --nproc 1";
  auto r = run_command(quiet_small_gpt_job(straight, total + " --set checkpoint.every_steps=1000"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const fs::path ckpt = fs::path(healed) / "checkpoints";
  BackgroundJob job(
      quiet_small_gpt_job(healed, total + " --set checkpoint.every_steps=3 --max-restarts 1"),
      dir.file("healed.log"));
  const KilledRank k = kill_rank_when(
      job, 0, [&] { return fs::exists(ckpt / "latest"); }, dir.file("healed.log"));
  INFO(k.log);
  CHECK(k.exit_code == 0);
  CHECK(contains(k.log, "zt: restart 1/1: rank 0 (pid " + std::to_string(k.victim) +
                            ") was killed by signal 9"));
  CHECK(contains(k.log, "resumed at step"));
  check_same_losses(straight, healed, steps);
  check_same_state(step_folder(fs::path(straight) / "checkpoints", steps),
                   step_folder(ckpt, steps));
}

TEST_CASE("checkpoint.dir: a second job on a folder another job saves into stops at once, "
          "naming the holder, and the first goes on") {
  TempDir dir;
  const std::string shared = dir.file("shared");
  const std::string both = " --set checkpoint.every_steps=2 --set checkpoint.dir=" + shared;
  BackgroundJob first(quiet_small_gpt_job(dir.file("first"), "--set run.steps=100000" + both),
                      dir.file("first.log"));
  REQUIRE(wait_until([&] { return fs::exists(fs::path(shared) / "latest"); },
                     std::chrono::seconds(60)));
  // Its cleanup at start removed the first job's save in progress, and its saves and prunes
  // took the first one's checkpoints.
  // With restarts allowed: another start would only meet the same refusal.
  const auto second = run_command(
      quiet_small_gpt_job(dir.file("second"), "--set run.steps=4 --max-restarts 2" + both));
  INFO(second.output);
  CHECK(second.exit_code == 2);
  CHECK(contains(second.output, "checkpoint.dir " + shared + " is in use by another job (pid " +
                                    std::to_string(first.rank_pid(0))));
  CHECK_FALSE(contains(second.output, "zt: restart 1/"));
  CHECK_FALSE(fs::exists(dir.file("second") + "/metrics.jsonl"));
  REQUIRE(kill(first.pid(), SIGTERM) == 0);
  const int first_code = first.wait(std::chrono::seconds(60));
  const std::string log = zt::test::read_file(dir.file("first.log"));
  INFO(log);
  CHECK(first_code == 0);
  CHECK(contains(log, "zt: stopped by SIGTERM after step "));
  // Released with the job: the next one on the folder resumes from it.
  const auto next = run_command(
      quiet_small_gpt_job(dir.file("first"), "--set run.steps=1 --resume auto" + both));
  INFO(next.output);
  CHECK_FALSE(contains(next.output, "is in use by another job"));
}

TEST_CASE("resume: every rank loads the folder rank 0 chose, and a rank that cannot see it "
          "(node-local checkpoint.dir) stops the job, naming it") {
  // Rank 1 runs in a mount namespace of its own with an empty tmpfs over checkpoint.dir, as a
  // node-local disk on another host is: it resolved `latest` there itself, found none and started
  // from step 0 while rank 0 went on from step 2, and the two trained on from different states.
  if (run_command("unshare -m true").exit_code != 0) {
    ZT_SKIP_UNLESS_CI(
        "unshare -m (a mount namespace, for rank 1's own view of a folder) fails here");
  }
  TempDir dir;
  const std::string ckpt = dir.file("checkpoints");
  const std::string folder = " --set checkpoint.dir=" + ckpt;
  const auto saved = run_command(quiet_small_gpt_job(
      dir.file("first"), "--set run.steps=2 --set checkpoint.every_steps=2" + folder));
  INFO(saved.output);
  REQUIRE(saved.exit_code == 0);
  const int port = zt::pick_free_port("127.0.0.1");
  auto rank = [&](int r) {
    return "RANK=" + std::to_string(r) +
           " WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
           std::to_string(port) + " " +
           quiet_small_gpt_job(
               dir.file("second"),
               "--set run.steps=4 --set launch.timeout_s=60 --resume auto" + folder);
  };
  zt::test::write_file(dir.file("rank1.sh"),
                       "mount -t tmpfs none " + ckpt + " && exec env " + rank(1));
  zt::test::write_file(dir.file("two_hosts.sh"),
                       rank(0) + " > " + dir.file("rank0.log") + " 2>&1 &\nleader=$!\n" +
                           "unshare -m bash " + dir.file("rank1.sh") +
                           "\necho \"rank 1 exit $?\"\nkill -9 $leader; wait $leader\n");
  const auto r = run_command("bash " + dir.file("two_hosts.sh"));
  INFO(r.output);
  INFO(zt::test::read_file(dir.file("rank0.log")));
  CHECK(contains(r.output, "rank 1 exit 5"));  // an IoError: a stale cache is worth a restart
  CHECK(contains(r.output, "rank 1 finds no folder " + ckpt +
                               "/step-00000002, the checkpoint rank 0 loads for "
                               "checkpoint.resume = \"auto\" (--set checkpoint.resume=\"auto\"; "
                               "checkpoint.dir " +
                               ckpt + "): every rank loads the folder rank 0 chose"));
  CHECK(contains(r.output, "one folder that every host sees alike"));
  CHECK_FALSE(fs::exists(dir.file("second") + "/metrics.jsonl"));
}

TEST_CASE("resume: a rank that sees the checkpoints at a path of its own (its checkpoint.dir) "
          "loads rank 0's step there, and the job goes on as an uninterrupted one") {
  // Rank 1's mount namespace shows the checkpoint folder only at another path, as one shared
  // file system mounted elsewhere on another host: the folder bound at `elsewhere`, then an
  // empty tmpfs over checkpoint.dir. Rank 1 is given `elsewhere` as its checkpoint.dir, so it
  // finds rank 0's step folder only under its own path. The two ranks are placed as the
  // launcher places those of the runs they are compared with (two on this host, a core each):
  // as ranks alone on their hosts (LOCAL_WORLD_SIZE=1, both cores each), their losses left the
  // uninterrupted run's in the last bits once the data (then README.md) changed.
  if (run_command("unshare -m true").exit_code != 0) {
    ZT_SKIP_UNLESS_CI(
        "unshare -m (a mount namespace, for rank 1's own view of a folder) fails here");
  }
  TempDir dir;
  const std::string ckpt = dir.file("checkpoints"), elsewhere = dir.file("mounted_elsewhere");
  const std::string run = dir.file("run"), straight = dir.file("straight");
  auto r = run_command(
      quiet_small_gpt_job(straight, "--set run.steps=4 --set checkpoint.every_steps=1000"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_command(quiet_small_gpt_job(
      run, "--set run.steps=2 --set checkpoint.every_steps=2 --set checkpoint.dir=" + ckpt));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  fs::create_directories(elsewhere);
  const int port = zt::pick_free_port("127.0.0.1");
  auto rank = [&](int n, const std::string& folder) {
    return "RANK=" + std::to_string(n) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(n) +
           " LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
           quiet_small_gpt_job(run,
                               "--set run.steps=4 --set checkpoint.every_steps=2 "
                               "--set launch.timeout_s=60 --resume auto --set checkpoint.dir=" +
                                   folder);
  };
  zt::test::write_file(dir.file("rank1.sh"), "mount --bind " + ckpt + " " + elsewhere +
                                                 " && mount -t tmpfs none " + ckpt +
                                                 " && exec env " + rank(1, elsewhere));
  zt::test::write_file(dir.file("two_hosts.sh"),
                       rank(0, ckpt) + " > " + dir.file("rank0.log") + " 2>&1 &\nleader=$!\n" +
                           "unshare -m bash " + dir.file("rank1.sh") +
                           "\necho \"rank 1 exit $?\"\nwait $leader\necho \"rank 0 exit $?\"\n");
  r = run_command("bash " + dir.file("two_hosts.sh"));
  const std::string rank0 = zt::test::read_file(dir.file("rank0.log"));
  INFO(r.output);
  INFO(rank0);
  CHECK(contains(r.output, "rank 1 exit 0"));
  CHECK(contains(r.output, "rank 0 exit 0"));
  CHECK(contains(rank0, "resumed from " + ckpt + "/step-00000002 at step 2"));
  check_same_losses(straight, run, 4);
  // Its step-4 save, rank 1's part written through its own path, is whole at rank 0's, and
  // holds the uninterrupted run's state.
  CHECK(zt::CheckpointReader(zt::latest_checkpoint(ckpt)).step() == 4);
  check_same_state(step_folder(fs::path(straight) / "checkpoints", 4), step_folder(ckpt, 4));
}

TEST_CASE("resume: a rank whose checkpoint read blocks (storage that stopped answering) ends the "
          "job with exit 5 after half launch.timeout_s, naming the file, its offload files "
          "removed") {
  // ZT_TEST_FAULT holds rank 1's first read of a rank file, as a hung network file system holds
  // a read: no system call returns, so only the deadline can end it. Rank 0 waits for rank 1 in
  // a collective meanwhile, and its own timeout (launch.timeout_s) would name that collective.
  TempDir dir;
  const std::string ckpt = " --set checkpoint.dir=" + dir.file("checkpoints");
  const std::string nvme = dir.file("nvme");
  auto r = run_command(quiet_small_gpt_job(
      dir.file("first"), "--set run.steps=2 --set checkpoint.every_steps=2" + ckpt));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto start = std::chrono::steady_clock::now();
  r = run_command("ZT_TEST_FAULT=stall_checkpoint_read:1:1 " +
                  quiet_small_gpt_job(dir.file("second"),
                                      "--set run.steps=4 --set launch.timeout_s=8 --resume auto "
                                      "--set plugins.offload_optimizer=offload_nvme "
                                      "--set plugin.offload_nvme.path=" +
                                          nvme + ckpt));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(seconds < 60);  // a bound on the hang, not a speed: the deadline is 4 s
  const std::regex blocked(
      "zt: error: rank 1 \\(pid [0-9]+\\) exited with code 5.*; rank 1 reported: io error: "
      "opening [^ ]+/step-00000002/rank-0000[01]-of-00002\\.safetensors has not returned after "
      "4\\.0 s: the storage stopped answering");
  CHECK(std::regex_search(r.output, blocked));
  CHECK(contains(r.output, "opening " + dir.file("checkpoints") + "/step-00000002/rank-0000"));
  CHECK(contains(r.output, "each checkpoint file operation may take half of it"));
  CHECK(contains(r.output, "zt: [rank 1] ending on a stuck file operation; removed this rank's "
                           "offload files: " +
                               nvme + "/zt-"));
  std::vector<std::string> left;
  std::error_code ec;
  for (fs::directory_iterator it(nvme, ec), end; !ec && it != end; it.increment(ec))
    left.push_back(it->path());
  CHECK_FALSE(ec);  // the job made its tier there
  CHECK(left.empty());
}

TEST_CASE("save: a rank whose checkpoint write blocks (storage that stopped answering) ends the "
          "job with exit 5 after half checkpoint.timeout_s (at least 10 s), naming the file") {
  // ZT_TEST_FAULT holds rank 1's third file operation of a save (after making its folder and
  // creating its rank file: the file's first write), as a hung network file system holds a write:
  // it hung the job (a synchronous save, on the training thread) where each read of a load was
  // bounded.
  TempDir dir;
  const auto start = std::chrono::steady_clock::now();
  auto r = run_command(
      "ZT_TEST_FAULT=stall_checkpoint_write:1:3 " +
      quiet_small_gpt_job(dir.file("run"),
                          "--set run.steps=4 --set checkpoint.every_steps=2 "
                          "--set checkpoint.async=false "
                          "--set checkpoint.timeout_s=2 --set launch.timeout_s=60"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(seconds < 60);  // a bound on the hang, not a speed: the deadline is 10 s
  const std::regex blocked(
      "rank 1 reported: io error: writing [0-9]+ bytes at offset [0-9]+ of "
      "[^ ]+/\\.tmp-step-00000002-[^ /]+/rank-00001-of-00002\\.safetensors has not returned "
      "after 10\\.0 s: the storage stopped answering");
  CHECK(std::regex_search(r.output, blocked));
  CHECK(contains(r.output, "raise checkpoint.timeout_s (each file operation of a save may take "
                           "half of it, at least 10 s)"));
  // Nothing of the save was published: the job has no checkpoint to resume from.
  CHECK(zt::latest_checkpoint(dir.file("run") + "/checkpoints").empty());
}

TEST_CASE("eval without --config, and export: a checkpoint whose read blocks ends them with exit "
          "5 after half launch.timeout_s, naming the file") {
  // The config eval reads from the checkpoint is what would set the bound, so the bound there
  // comes from --set launch.timeout_s (or its default); the manifest read is the first one. 4 s:
  // 2 s for each file operation, and 1 s for export's last words, beside other tests.
  TempDir dir;
  const std::string ckpt = dir.file("checkpoints");
  auto r = run_command(quiet_small_gpt_job(
      dir.file("first"),
      "--set run.steps=2 --set checkpoint.every_steps=2 --set checkpoint.dir=" + ckpt));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string out = dir.file("eval.json");
  r = run_command("ZT_TEST_FAULT=stall_checkpoint_manifest:0:1 " + std::string(ZT_TEST_TRAINER) +
                  " eval --checkpoint " + ckpt + " --set launch.timeout_s=4 --out " + out);
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "io error: reading " + ckpt +
                               "/step-00000002/manifest.json has not returned after 2.0 s: the "
                               "storage stopped answering"));
  CHECK_FALSE(fs::exists(out));

  // trainer export: its bound from --set launch.timeout_s (it reads no config), and the
  // unfinished file removed by its last words (the process ends without unwinding).
  const std::string exported = dir.file("model.safetensors");
  r = run_command("ZT_TEST_FAULT=stall_checkpoint_read:0:3 " + std::string(ZT_TEST_TRAINER) +
                  " export --checkpoint " + ckpt + " --set launch.timeout_s=4 --out " + exported);
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "has not returned after 2.0 s: the storage stopped answering"));
  CHECK(contains(r.output, "removed the unfinished " + exported + ".tmp"));
  CHECK_FALSE(fs::exists(exported));
  CHECK_FALSE(zt::test::file_starting_with(exported + ".tmp"));
}

TEST_CASE("live A/B: a job whose rank 0 is killed outright after a switch leaves no copy of its "
          "model states in ab.switch_dir") {
  // Rank 0 holds the switch folder and removes its states when it fails by an error; killed by
  // SIGKILL (the OOM killer) it cannot, and on /dev/shm they held memory. The launcher removes
  // them once every rank is reaped.
  TempDir dir;
  const std::string out = dir.file("live"), switch_dir = dir.file("live/ab-switch");
  BackgroundJob job(quiet_small_gpt_job(out, "--set 'ab.arms=[\"plugins.shard=shard_tensor\", "
                                             "\"plugins.shard=shard_bucket\"]' "
                                             "--set ab.switch_every=2 --set run.steps=100000 "
                                             "--set launch.timeout_s=10"),
                    dir.file("live.log"));
  const KilledRank k = kill_rank_when(
      job, 0,
      [&] {
    return !zt::latest_checkpoint(switch_dir).empty() &&
           zt::test::losses_of(out + "/metrics.jsonl").size() >= 4;
      },
      dir.file("live.log"));
  INFO(k.log);
  CHECK(k.exit_code == 128 + SIGKILL);
  CHECK(contains(k.log, "model states the stopped live A/B job left"));
  CHECK_FALSE(fs::exists(switch_dir));
}

TEST_CASE("restarts: a rank killed before the job's first save starts it again as it started, "
          "not from a checkpoint an earlier run left in the folder") {
  TempDir dir;
  const int64_t steps = 40;
  const std::string total = " --set run.steps=" + std::to_string(steps);
  const std::string shared = " --set checkpoint.dir=" + dir.file("shared");
  // The earlier run: its step 8 is the folder's latest when the job starts.
  auto r = run_command(quiet_small_gpt_job(
      dir.file("earlier"), "--set run.steps=8 --set checkpoint.every_steps=4" + shared));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string straight = dir.file("straight"), healed = dir.file("healed");
  r = run_command(quiet_small_gpt_job(straight, total + " --set checkpoint.every_steps=1000"));
  REQUIRE(r.exit_code == 0);

  // It saves only after its last step, so the kill comes before any save of its own.
  BackgroundJob job(quiet_small_gpt_job(healed, total + shared +
                                                    " --set checkpoint.every_steps=1000 "
                                                    "--max-restarts 1"),
                    dir.file("healed.log"));
  const KilledRank k = kill_rank_when(
      job, 1, [&] { return !zt::test::read_file(healed + "/metrics.jsonl").empty(); },
      dir.file("healed.log"));
  INFO(k.log);
  CHECK(k.exit_code == 0);
  CHECK(contains(k.log, "; all ranks start again from the beginning (the job saved no checkpoint"));
  CHECK_FALSE(contains(k.log, "resumed at step"));
  check_same_losses(straight, healed, steps);
  check_same_state(step_folder(fs::path(straight) / "checkpoints", steps),
                   step_folder(dir.file("shared"), steps));
}

TEST_CASE("restarts: a job that fails at the same step every time stops with that failure") {
  // An lr this large makes the loss non-finite at the same step on every attempt (exit 6).
  TempDir dir;
  const auto r = run_command(quiet_small_gpt_job(
      dir.file("out"), "--set run.steps=20 --set checkpoint.every_steps=1 "
                       "--set plugin.optim_hybrid_adam.lr=1e30 --max-restarts 3"));
  INFO(r.output);
  CHECK(r.exit_code == 6);
  CHECK(contains(r.output, "zt: restart 1/3: rank "));
  CHECK(!contains(r.output, "zt: restart 2/3"));
  CHECK(contains(r.output, "failed again after step "));
  CHECK(contains(r.output, "restarting cannot get past it"));
  CHECK(contains(r.output, "numeric error"));
}
