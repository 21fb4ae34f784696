// Checkpoints through the trainer, end to end, where a kill, a signal or a full disk comes at a
// given moment (so these run alone): a job killed with SIGKILL resumes bit for bit; a kill in the
// middle of a save leaves the previous checkpoint the latest; a full disk gives one clear error,
// the right exit code, and loses nothing; restarts and stop signals (training saves; eval, sample
// and export stop between their steps, removing their files). What a job computes alone
// (loads at other world sizes, bad checkpoints) is checkpoint_jobs_test.cc's.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "../skip.h"
#include "../test_util.h"
#include "checkpoint_files.h"
#include "small_gpt_job.h"
#include "zt/host/checkpoint.h"
#include "zt/host/launcher.h"

namespace fs = std::filesystem;
using zt::test::all_values;
using zt::test::check_same_losses;
using zt::test::check_same_state;
using zt::test::contains;
using zt::test::quiet_small_gpt_job;
using zt::test::run_command;
using zt::test::step_folder;
using zt::test::TempDir;

namespace {

bool wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A trainer job started in the background in its own process group, output to `log`; its
// ranks are the launcher's children.
class BackgroundJob {
 public:
  BackgroundJob(const std::string& command, const std::string& log) {
    // Built before fork: the child only execs.
    const std::string shell = "exec " + command + " > " + log + " 2>&1";
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      execl("/bin/sh", "sh", "-c", shell.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~BackgroundJob() {
    if (pid_ <= 0 || exit_code_ >= 0) return;
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  BackgroundJob(const BackgroundJob&) = delete;
  BackgroundJob& operator=(const BackgroundJob&) = delete;

  // The launcher's pid (the shell execs it).
  pid_t pid() const { return pid_; }

  // The pid of rank `rank` (the child of the launcher whose environment says RANK=rank), or -1.
  pid_t rank_pid(int rank) const {
    std::ifstream children("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) +
                           "/children");
    const std::string wanted = "RANK=" + std::to_string(rank);
    for (pid_t child; children >> child;) {
      std::ifstream environ("/proc/" + std::to_string(child) + "/environ");
      for (std::string var; std::getline(environ, var, '\0');) {
        if (var == wanted) return child;
      }
    }
    return -1;
  }

  // The launcher's exit code (128 + signal when killed), or -1 when it runs past `timeout`.
  int wait(std::chrono::seconds timeout) {
    int status = 0;
    const bool ended = wait_until([&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
                                  std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    if (!ended) return -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// Rank `rank` killed with SIGKILL once `ready` holds: its pid, then the job's exit code and log.
struct KilledRank {
  pid_t victim = -1;
  int exit_code = -1;
  std::string log;
};

KilledRank kill_rank_when(BackgroundJob& job, int rank, const std::function<bool()>& ready,
                          const std::string& log) {
  KilledRank k;
  REQUIRE(wait_until(ready, std::chrono::seconds(60)));
  k.victim = job.rank_pid(rank);
  REQUIRE(k.victim > 0);
  REQUIRE(kill(k.victim, SIGKILL) == 0);
  k.exit_code = job.wait(std::chrono::seconds(120));
  k.log = zt::test::read_file(log);
  return k;
}

// How a job ended: its exit code and its log.
struct EndedJob {
  int exit_code = -1;
  std::string log;
};

// `command` started in the background, its output in `log`, and sent `sig` once `out_dir`'s
// metrics.jsonl holds `steps` steps: how it ended.
EndedJob signal_once_trained(const std::string& command, const std::string& out_dir,
                             const std::string& log, size_t steps, int sig) {
  BackgroundJob job(command, log);
  REQUIRE(
      wait_until([&] { return zt::test::losses_of(out_dir + "/metrics.jsonl").size() >= steps; },
                 std::chrono::seconds(60)));
  REQUIRE(kill(job.pid(), sig) == 0);
  EndedJob ended;
  ended.exit_code = job.wait(std::chrono::seconds(60));
  ended.log = zt::test::read_file(log);
  return ended;
}

std::vector<std::string> temporary_folders(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) found.push_back(e.path().string());
  }
  return found;
}

}  // namespace

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

TEST_CASE("checkpoint: a kill during a save leaves the previous one the latest, and the next start "
          "removes the rest") {
  TempDir dir;
  const fs::path ckpt = dir.path() / "out" / "checkpoints";
  std::string leftover;
  // The save must be caught in flight: a few tries.
  for (int attempt = 0; attempt < 5 && leftover.empty(); ++attempt) {
    BackgroundJob job(quiet_small_gpt_job(dir.file("out"), "--set run.steps=100000 "
                                                           "--set checkpoint.every_steps=1"),
                      dir.file("killed.log"));
    REQUIRE(wait_until([&] { return fs::exists(ckpt / "latest"); }, std::chrono::seconds(60)));
    REQUIRE(wait_until([&] { return !temporary_folders(ckpt).empty(); }, std::chrono::seconds(30)));
    const pid_t publisher = job.rank_pid(0);
    REQUIRE(publisher > 0);
    kill(publisher, SIGKILL);
    CHECK(job.wait(std::chrono::seconds(60)) == 128 + SIGKILL);
    const auto left = temporary_folders(ckpt);
    if (!left.empty()) leftover = left.front();
  }
  REQUIRE(!leftover.empty());
  const std::string latest = zt::latest_checkpoint(ckpt.string());
  REQUIRE(!latest.empty());
  zt::CheckpointReader reader(latest);
  CHECK(all_values(reader).size() == reader.kinds().size() * reader.tensors().size());

  auto r = run_command(quiet_small_gpt_job(
      dir.file("out"), "--set run.steps=" + std::to_string(reader.step() + 1) + " --resume auto"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "checkpoints: removed " + leftover));
  CHECK(contains(r.output, "resumed from " + latest));
  CHECK(temporary_folders(ckpt).empty());
}

TEST_CASE("checkpoint: a save killed after its folder's rename, before `latest` named it, is "
          "resumed from") {
  TempDir dir;
  const std::string straight = dir.file("straight"), resumed = dir.file("resumed");
  const std::string every = " --set checkpoint.every_steps=2 --set checkpoint.keep_last=0";
  auto r = run_command(quiet_small_gpt_job(straight, "--set run.steps=6" + every));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_command(quiet_small_gpt_job(resumed, "--set run.steps=4" + every));
  REQUIRE(r.exit_code == 0);

  // What the publisher leaves when killed between its two renames: step-4 whole, `latest` still
  // naming step-2, the new `latest` pending.
  const fs::path ckpt = fs::path(resumed) / "checkpoints";
  zt::test::write_file(ckpt / "latest", "step-00000002\n");
  zt::test::write_file(ckpt / "latest.tmp-4242", "step-00000004\n");
  CHECK(zt::latest_checkpoint(ckpt.string()) == step_folder(ckpt, 4));

  r = run_command(quiet_small_gpt_job(resumed, "--set run.steps=6 --resume auto" + every));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "checkpoints: " + step_folder(ckpt, 4) + " is the latest now"));
  CHECK(contains(r.output, "resumed from " + step_folder(ckpt, 4) + " at step 4"));
  CHECK(zt::test::read_file((ckpt / "latest").string()) == "step-00000006\n");
  CHECK(!fs::exists(ckpt / "latest.tmp-4242"));
  check_same_state(step_folder(fs::path(straight) / "checkpoints", 6), step_folder(ckpt, 6));
}

TEST_CASE("checkpoint: a disk that fills during a save stops the job with exit 5, and the "
          "previous checkpoint stays the latest") {
  TempDir dir;
  // One checkpoint's size, measured, sizes a filesystem that holds one but not two.
  auto r = run_command(
      quiet_small_gpt_job(dir.file("probe"), "--set run.steps=1 --set checkpoint.every_steps=1"));
  REQUIRE(r.exit_code == 0);
  const std::string probe = step_folder(fs::path(dir.file("probe")) / "checkpoints", 1);
  int64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(probe)) bytes += fs::file_size(e.path());
  const std::string small = dir.file("small");
  fs::create_directories(small);
  auto mount = run_command("mount -t tmpfs -o size=" + std::to_string(bytes * 6 / 5) + " tmpfs " +
                           small);
  if (mount.exit_code != 0) {
    ZT_SKIP_UNLESS_CI("cannot mount a small tmpfs here (" + mount.output + "); needs root");
  }
  struct Unmount {
    std::string path;
    ~Unmount() { run_command("umount " + path); }
  } unmount{small};
  r = run_command(
      quiet_small_gpt_job(dir.file("out"), "--set run.steps=4 --set checkpoint.every_steps=2 "
                                           "--set checkpoint.keep_last=1 --set checkpoint.dir=" +
                                               small));
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, small));
  CHECK(std::regex_search(r.output, std::regex("[0-9]+ bytes")));
  CHECK(zt::latest_checkpoint(small) == step_folder(small, 2));
  zt::CheckpointReader reader(step_folder(small, 2));
  CHECK(all_values(reader).size() == reader.kinds().size() * reader.tensors().size());
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
  // comes from --set launch.timeout_s (or its default); the manifest read is the first one.
  TempDir dir;
  const std::string ckpt = dir.file("checkpoints");
  auto r = run_command(quiet_small_gpt_job(
      dir.file("first"),
      "--set run.steps=2 --set checkpoint.every_steps=2 --set checkpoint.dir=" + ckpt));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string out = dir.file("eval.json");
  r = run_command("ZT_TEST_FAULT=stall_checkpoint_manifest:0:1 " + std::string(ZT_TEST_TRAINER) +
                  " eval --checkpoint " + ckpt + " --set launch.timeout_s=2 --out " + out);
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "io error: reading " + ckpt +
                               "/step-00000002/manifest.json has not returned after 1.0 s: the "
                               "storage stopped answering"));
  CHECK_FALSE(fs::exists(out));

  // trainer export: its bound from --set launch.timeout_s (it reads no config), and the
  // unfinished file removed by its last words (the process ends without unwinding).
  const std::string exported = dir.file("model.safetensors");
  r = run_command("ZT_TEST_FAULT=stall_checkpoint_read:0:3 " + std::string(ZT_TEST_TRAINER) +
                  " export --checkpoint " + ckpt + " --set launch.timeout_s=2 --out " + exported);
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "has not returned after 1.0 s: the storage stopped answering"));
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

TEST_CASE("restarts: a SIGTERM right after a rank died stops the job with that failure, quickly "
          "and without a restart") {
  // The chaos soak's finding: a rank dead (or killed by the forwarded signal before it caught
  // it) left the other waiting in a collective until the whole drain ran out.
  TempDir dir;
  const fs::path ckpt = fs::path(dir.file("out")) / "checkpoints";
  BackgroundJob job(
      quiet_small_gpt_job(dir.file("out"), "--set run.steps=100000 "
                                           "--set checkpoint.every_steps=5 --max-restarts 2"),
      dir.file("job.log"));
  REQUIRE(wait_until([&] { return fs::exists(ckpt / "latest"); }, std::chrono::seconds(60)));
  const pid_t victim = job.rank_pid(1);
  REQUIRE(victim > 0);
  REQUIRE(kill(victim, SIGKILL) == 0);
  REQUIRE(kill(job.pid(), SIGTERM) == 0);
  const auto start = std::chrono::steady_clock::now();
  const int exit_code = job.wait(std::chrono::seconds(60));
  const std::string log = zt::test::read_file(dir.file("job.log"));
  INFO(log);
  CHECK(exit_code == 128 + SIGKILL);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK(contains(log, "rank 1 (pid " + std::to_string(victim) + ") was killed by signal 9"));
  CHECK(!contains(log, "zt: restart 1/2"));
  CHECK(!zt::latest_checkpoint(ckpt.string()).empty());  // what was saved stays loadable
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

TEST_CASE("signals: SIGTERM to the launcher stops the ranks after a step with a checkpoint and "
          "exit 0, and --resume auto continues on the uninterrupted run's losses") {
  TempDir dir;
  const int64_t steps = 1000;  // the signal comes after step 20: hundreds of steps to spare
  const std::string straight = dir.file("straight"), stopped = dir.file("stopped");
  const std::string total = " --set run.steps=" + std::to_string(steps);
  auto r = run_command(quiet_small_gpt_job(
      straight, total + " --set checkpoint.every_steps=" + std::to_string(steps)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // No periodic checkpoints: the signal's save is the only one.
  const EndedJob ended = signal_once_trained(quiet_small_gpt_job(stopped, total), stopped,
                                             dir.file("stopped.log"), 20, SIGTERM);
  const std::string& log = ended.log;
  INFO(log);
  CHECK(ended.exit_code == 0);
  const fs::path ckpt = fs::path(stopped) / "checkpoints";
  const std::string latest = zt::latest_checkpoint(ckpt.string());
  REQUIRE(!latest.empty());
  const int64_t at = zt::CheckpointReader(latest).step();
  CHECK(at < steps);
  CHECK(contains(log, "zt: stopped by SIGTERM after step " + std::to_string(at) + " of " +
                          std::to_string(steps) + "; newest checkpoint: " + latest +
                          "; continue with --resume auto"));
  CHECK(zt::test::losses_of(stopped + "/metrics.jsonl").size() == static_cast<size_t>(at));
  // The resumed run saves after its last step, as the uninterrupted one did.
  r = run_command(quiet_small_gpt_job(
      stopped, total + " --resume auto --set checkpoint.every_steps=" + std::to_string(steps)));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  check_same_losses(straight, stopped, steps);
  check_same_state(step_folder(fs::path(straight) / "checkpoints", steps),
                   step_folder(ckpt, steps));
}

TEST_CASE("signals: ranks whose launcher is killed end at once, saving nothing") {
  // Their parent-death signal was SIGTERM, which a training rank takes for "save and stop after
  // this step": they saved a checkpoint with no launcher to relay their output or restart them.
  TempDir dir;
  const std::string out = dir.file("run");
  BackgroundJob job(quiet_small_gpt_job(out, "--set run.steps=100000"), dir.file("run.log"));
  REQUIRE(wait_until([&] { return zt::test::losses_of(out + "/metrics.jsonl").size() >= 3; },
                     std::chrono::seconds(60)));
  const pid_t ranks[] = {job.rank_pid(0), job.rank_pid(1)};
  REQUIRE(ranks[0] > 0);
  REQUIRE(ranks[1] > 0);
  REQUIRE(kill(job.pid(), SIGKILL) == 0);
  CHECK(job.wait(std::chrono::seconds(10)) == 128 + SIGKILL);
  // Gone, or a zombie its new parent has yet to reap.
  const auto ended = [](pid_t pid) {
    const std::string stat = zt::test::read_file("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    return stat.empty() || (paren != std::string::npos && stat.compare(paren + 2, 1, "Z") == 0);
  };
  CHECK(wait_until([&] { return ended(ranks[0]) && ended(ranks[1]); }, std::chrono::seconds(10)));
  CHECK_FALSE(fs::exists(fs::path(out) / "checkpoints" / "latest"));
}

TEST_CASE("signals: a run resumed from an older step saves its own state on a stop, whatever "
          "the folder's latest (another run's, just written) says") {
  TempDir dir;
  const std::string first = dir.file("first"), second = dir.file("second");
  const std::string ckpt = first + "/checkpoints";
  // Run A saves steps 2 and 4; `latest` names step 4, written a moment ago.
  auto r = run_command(quiet_small_gpt_job(
      first, "--set run.steps=4 --set checkpoint.every_steps=2 --set checkpoint.keep_last=5"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Run B rolls back to step 2 into the same folder, saves nothing on its own, and is stopped
  // within checkpoint.min_interval_s of A's save: it must save its step, not leave A's step 4
  // for the next --resume auto to continue as if it were B's.
  const EndedJob ended = signal_once_trained(
      quiet_small_gpt_job(second, "--set run.steps=100000 --set checkpoint.every_steps=0 "
                                  "--set checkpoint.min_interval_s=3600 --set checkpoint.dir=" +
                                      ckpt + " --resume " + step_folder(ckpt, 2)),
      second, dir.file("second.log"), 5, SIGTERM);
  const std::string& log = ended.log;
  INFO(log);
  CHECK(ended.exit_code == 0);
  const std::string latest = zt::latest_checkpoint(ckpt);
  REQUIRE(!latest.empty());
  const int64_t at = zt::CheckpointReader(latest).step();
  CHECK(at > 4);
  CHECK(contains(log, "zt: stopped by SIGTERM after step " + std::to_string(at)));
}

TEST_CASE("signals: SIGUSR1 (Slurm's warning before preemption) stops the job the same way, and "
          "the stop's save records its step's evaluation") {
  TempDir dir;
  // Every step evaluated (on one batch), none saved periodically: the stop's save is of an
  // evaluated step, and keep_best must be able to rank it.
  const EndedJob ended = signal_once_trained(
      quiet_small_gpt_job(
          dir.file("out"),
          "--set run.steps=100000 --set data.val_fraction=0.1 --set eval.every_steps=1 "
          "--set eval.batches=1 "
          "--set checkpoint.every_steps=100000 --set checkpoint.keep_best="
          "'\"val_loss\"'"),
      dir.file("out"), dir.file("job.log"), 5, SIGUSR1);
  INFO(ended.log);
  CHECK(ended.exit_code == 0);
  CHECK(contains(ended.log, "zt: stopped by SIGUSR1 after step "));
  const std::string latest = zt::latest_checkpoint(dir.file("out/checkpoints"));
  REQUIRE(!latest.empty());
  CHECK(zt::CheckpointReader(latest).meta().metrics.count("val_loss") == 1);
  CHECK(zt::best_checkpoint(dir.file("out/checkpoints")) == latest);
}

TEST_CASE("signals: with checkpoint.save_on_stop = false a stop saves nothing") {
  // As trainer tune's trials stop: after the step, without the checkpoint a stop would write.
  TempDir dir;
  const EndedJob ended = signal_once_trained(
      quiet_small_gpt_job(dir.file("out"),
                          "--set run.steps=100000 --set checkpoint.save_on_stop=false"),
      dir.file("out"), dir.file("job.log"), 3, SIGTERM);
  const std::string& log = ended.log;
  INFO(log);
  CHECK(ended.exit_code == 0);
  CHECK(contains(log, "zt: stopped by SIGTERM after step "));
  CHECK(contains(log, "nothing saved at the stop (checkpoint.save_on_stop = false); newest "
                      "checkpoint: none"));
  CHECK(zt::latest_checkpoint(dir.file("out/checkpoints")).empty());
  CHECK_FALSE(contains(log, "checkpoint: step"));
}

TEST_CASE("signals: one Ctrl-C delivered twice saves, a second SIGINT a second later stops the "
          "ranks at once, a second SIGTERM lets them save") {
  // The terminal's SIGINT and a wrapper's forwarded copy, 20 ms apart: one stop, with its save.
  TempDir twice;
  BackgroundJob once(quiet_small_gpt_job(twice.file("out"), "--set run.steps=100000"),
                     twice.file("job.log"));
  REQUIRE(
      wait_until([&] { return zt::test::losses_of(twice.file("out/metrics.jsonl")).size() >= 2; },
                 std::chrono::seconds(60)));
  REQUIRE(kill(once.pid(), SIGINT) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(kill(once.pid(), SIGINT) == 0);
  const int once_code = once.wait(std::chrono::seconds(60));
  const std::string once_log = zt::test::read_file(twice.file("job.log"));
  INFO(once_log);
  CHECK(once_code == 0);
  CHECK(contains(once_log, "zt: stopped by SIGINT after step "));
  CHECK(!contains(once_log, "killing all ranks"));
  CHECK(!zt::latest_checkpoint(twice.file("out/checkpoints")).empty());

  // Steps of 4.5 s on any host (ZT_TEST_FAULT=slow_step: rank 0 sleeps at the start of each, and
  // rank 1 waits for it in the step's first collective): the ranks are still in step 2 when the
  // second SIGINT comes, 1.2 s after the first. (Steps of 8 micro steps of a larger GPT took 7-11 s
  // here, and under the 3 s needed on a faster host, where the case could only skip.)
  TempDir dir;
  auto slow_steps = [](const std::string& out_dir) {
    return "env ZT_TEST_FAULT=slow_step:0:4500 " +
           zt::test::small_gpt_job(out_dir, "--set run.steps=100000");
  };
  // Once step 1 is logged, the first signal comes 1 s into step 2. Not at once: the ranks agree
  // on a stop after the step's metrics line, so a signal sent as that line appears may still stop
  // them after step 1, saving before the second signal comes.
  const auto into_step_2 = std::chrono::seconds(1);
  BackgroundJob job(slow_steps(dir.file("out")), dir.file("job.log"));
  REQUIRE(wait_until([&] { return zt::test::losses_of(dir.file("out/metrics.jsonl")).size() >= 1; },
                     std::chrono::seconds(120)));
  std::this_thread::sleep_for(into_step_2);
  REQUIRE(kill(job.pid(), SIGINT) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  REQUIRE(kill(job.pid(), SIGINT) == 0);
  const int exit_code = job.wait(std::chrono::seconds(30));
  const std::string log = zt::test::read_file(dir.file("job.log"));
  INFO(log);
  CHECK(exit_code == 128 + SIGINT);
  CHECK(contains(log, "launcher received Interrupt again; killing all ranks"));
  CHECK(!contains(log, "zt: stopped by SIGINT"));

  // Slurm's SIGTERM again at the end of a grace time, to the launcher and to each rank (as a
  // job step's processes all get it), 1.2 s after the first: the ranks still save and exit 0.
  // Slow steps again, so that the second comes while they finish theirs.
  TempDir again;
  BackgroundJob second(slow_steps(again.file("out")), again.file("job.log"));
  REQUIRE(
      wait_until([&] { return zt::test::losses_of(again.file("out/metrics.jsonl")).size() >= 1; },
                 std::chrono::seconds(120)));
  const std::vector<pid_t> ranks = {second.rank_pid(0), second.rank_pid(1)};
  REQUIRE(ranks[0] > 0);
  REQUIRE(ranks[1] > 0);
  std::this_thread::sleep_for(into_step_2);
  REQUIRE(kill(second.pid(), SIGTERM) == 0);
  // Past the ranks' 1 s window for a signal forwarded twice, and within the step or the save.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  // Still stopping: a job done by now would pass what follows without meeting the second one.
  for (pid_t r : ranks) {
    std::ifstream stat("/proc/" + std::to_string(r) + "/stat");
    std::string pid, name, state;
    stat >> pid >> name >> state;
    INFO("rank pid ", r, " state '", state, "'");
    REQUIRE((!state.empty() && state != "Z"));
  }
  REQUIRE(kill(second.pid(), SIGTERM) == 0);
  for (pid_t r : ranks) kill(r, SIGTERM);
  const int saved = second.wait(std::chrono::seconds(60));
  const std::string saved_log = zt::test::read_file(again.file("job.log"));
  INFO(saved_log);
  CHECK(saved == 0);
  CHECK(contains(saved_log, "zt: stopped by SIGTERM"));
  CHECK(!contains(saved_log, "killing all ranks"));
}

TEST_CASE("signals: Ctrl-C stops trainer eval, sample and export between their steps: exit 130, "
          "nothing written, their tier files and temporary file removed") {
  // Their signals' default action ended them where they were, leaving the NVMe tier's files and
  // the export's <out>.tmp-<pid> behind.
  TempDir dir;
  const std::string run = dir.file("run");
  // 14M parameters (57 MB to export, in 0.5 s here): the export's temporary file lives long after
  // the test sees it appear.
  auto r = run_command(quiet_small_gpt_job(
      run, "--set model.n_layer=2 --set model.d_model=768 --set model.n_head=6 --set run.steps=1 "
           "--set checkpoint.every_steps=1 --set data.val_fraction=0.1"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string trainer = ZT_TEST_TRAINER, ckpt = run + "/checkpoints", nvme = dir.file("nvme");
  // Parameter shards in files; in one process nobody else would remove them.
  const std::string in_files =
      " --set zero.param_persistence_threshold=0 --set plugins.offload_param=offload_nvme "
      "--set plugin.offload_nvme.path=" +
      nvme;
  const std::string tier = " --nproc 1" + in_files;
  // What is under the tier's path: the job's folder with rank0 in it while the task runs (made
  // after the handlers are in place).
  const auto under_nvme = [&] {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(nvme, ec)) names.push_back(e.path());
    return names;
  };
  const auto tier_made = [&](int ranks) {
    int made = 0;
    for (const std::string& name : under_nvme()) {
      const std::string folder = fs::path(name).filename();
      made += folder == "rank0" || folder == "rank1" ? 1 : 0;
    }
    return made == ranks;
  };
  struct Task {
    const char* name;
    std::string command, result;
  };
  const Task tasks[] = {{"eval",
                         trainer + " eval --checkpoint " + ckpt + tier +
                             " --set eval.batches=1000000 --out " + dir.file("eval.json"),
                         dir.file("eval.json")},
                        {"sample",
                         trainer + " sample --checkpoint " + ckpt + tier +
                             " --max-new-tokens 1000000 --out " + dir.file("sample.json"),
                         dir.file("sample.json")}};
  for (const Task& task : tasks) {
    INFO(task.name);
    BackgroundJob job(task.command, dir.file(std::string(task.name) + ".log"));
    REQUIRE(wait_until([&] { return tier_made(1); }, std::chrono::seconds(120)));
    REQUIRE(kill(job.pid(), SIGINT) == 0);
    const int code = job.wait(std::chrono::seconds(60));
    const std::string log = zt::test::read_file(dir.file(std::string(task.name) + ".log"));
    INFO(log);
    CHECK(code == 128 + SIGINT);
    CHECK(contains(log,
                   std::string("zt: stopped by SIGINT: trainer ") + task.name + " stopped after "));
    CHECK_FALSE(fs::exists(task.result));
    const std::vector<std::string> left = under_nvme();
    CHECK_MESSAGE(left.empty(),
                  "left under " << nvme << ": " << (left.empty() ? "" : left.front()));
  }

  // Two ranks under zt's launcher, which forwards its Ctrl-C: both stop before the same pass and
  // remove their own files (the launcher had none to remove), and no error line follows theirs.
  {
    BackgroundJob job(trainer + " eval --checkpoint " + ckpt + " --nproc 2" + in_files +
                          " --set eval.batches=1000000 --out " + dir.file("eval2.json"),
                      dir.file("eval2.log"));
    REQUIRE(wait_until([&] { return tier_made(2); }, std::chrono::seconds(120)));
    REQUIRE(kill(job.pid(), SIGINT) == 0);
    const int code = job.wait(std::chrono::seconds(60));
    const std::string log = zt::test::read_file(dir.file("eval2.log"));
    INFO(log);
    CHECK(code == 128 + SIGINT);
    for (const char* rank : {"0", "1"}) {
      CHECK(contains(log, std::string("zt: [rank ") + rank +
                              "] stopped by SIGINT: trainer eval stopped after "));
    }
    CHECK(!contains(log, "zt: error:"));
    CHECK(!contains(log, "removed offload files left by stopped ranks"));
    CHECK_FALSE(fs::exists(dir.file("eval2.json")));
    CHECK(under_nvme().empty());
  }

  const std::string out = dir.file("model.safetensors");
  BackgroundJob job(trainer + " export --checkpoint " + ckpt + " --out " + out,
                    dir.file("export.log"));
  REQUIRE(wait_until([&] { return zt::test::file_starting_with(out + ".tmp"); },
                     std::chrono::seconds(120)));
  REQUIRE(kill(job.pid(), SIGINT) == 0);
  const int code = job.wait(std::chrono::seconds(60));
  const std::string log = zt::test::read_file(dir.file("export.log"));
  INFO(log);
  CHECK(code == 128 + SIGINT);
  CHECK(contains(log, "zt: stopped by SIGINT: trainer export stopped after "));
  CHECK(contains(log, out + " not written, " + out + ".tmp-"));
  CHECK(contains(log, " removed"));
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(zt::test::file_starting_with(out + ".tmp"));

  // An export stuck in a checkpoint read (storage that stopped answering) does not reach its
  // next check: a second Ctrl-C a second later ends it at once, and its temporary file goes too
  // (no destructor runs: the handler removes it).
  BackgroundJob stuck("env ZT_TEST_FAULT=stall_checkpoint_read:0:1 " + trainer +
                          " export --checkpoint " + ckpt + " --out " + out +
                          " --set launch.timeout_s=120",
                      dir.file("stuck.log"));
  REQUIRE(wait_until([&] { return zt::test::file_starting_with(out + ".tmp"); },
                     std::chrono::seconds(120)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // into the stalled read
  REQUIRE(kill(stuck.pid(), SIGINT) == 0);
  // Well past the 1 s that makes it Ctrl-C again: the export is stuck either way.
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  REQUIRE(kill(stuck.pid(), SIGINT) == 0);
  const int hard = stuck.wait(std::chrono::seconds(20));  // the read's deadline is a minute away
  const std::string stuck_log = zt::test::read_file(dir.file("stuck.log"));
  INFO(stuck_log);
  CHECK(hard == 128 + SIGINT);
  CHECK_FALSE(contains(stuck_log, "trainer export stopped after "));  // not at a check
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(zt::test::file_starting_with(out + ".tmp"));
}
