// Checkpoints through the trainer, end to end: a job killed with SIGKILL resumes bit for bit; a
// kill in the middle of a save leaves the previous checkpoint the latest; a checkpoint loads at
// another world size, stage, shard strategy and offload placement and the loss curve goes on;
// bad checkpoints and a full disk give one clear error, the right exit code, and lose nothing.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
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
#include "zt/host/safetensors.h"

namespace fs = std::filesystem;
using zt::test::all_values;
using zt::test::check_same_losses;
using zt::test::check_same_state;
using zt::test::contains;
using zt::test::run_command;
using zt::test::step_folder;
using zt::test::TempDir;

namespace {

// The shipped stage-3 config (2 ranks, shard_bucket, cosine schedule), small and quiet.
std::string tiny_job(const std::string& out_dir, const std::string& extra = "") {
  return zt::test::small_gpt_job(out_dir, "--set run.log_every=1000 " + extra);
}

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
  auto r = run_command(tiny_job(straight, total + " --set checkpoint.every_steps=1000"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const fs::path ckpt = fs::path(resumed) / "checkpoints";
  BackgroundJob job(tiny_job(resumed, total + " --set checkpoint.every_steps=3"),
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

  r = run_command(tiny_job(resumed, total + " --set checkpoint.every_steps=3 --resume auto"));
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
    BackgroundJob job(tiny_job(dir.file("out"), "--set run.steps=100000 "
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

  auto r = run_command(tiny_job(
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
  auto r = run_command(tiny_job(straight, "--set run.steps=6" + every));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_command(tiny_job(resumed, "--set run.steps=4" + every));
  REQUIRE(r.exit_code == 0);

  // What the publisher leaves when killed between its two renames: step-4 whole, `latest` still
  // naming step-2, the new `latest` pending.
  const fs::path ckpt = fs::path(resumed) / "checkpoints";
  zt::test::write_file(ckpt / "latest", "step-00000002\n");
  zt::test::write_file(ckpt / "latest.tmp-4242", "step-00000004\n");
  CHECK(zt::latest_checkpoint(ckpt.string()) == step_folder(ckpt, 4));

  r = run_command(tiny_job(resumed, "--set run.steps=6 --resume auto" + every));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "checkpoints: " + step_folder(ckpt, 4) + " is the latest now"));
  CHECK(contains(r.output, "resumed from " + step_folder(ckpt, 4) + " at step 4"));
  CHECK(zt::test::read_file((ckpt / "latest").string()) == "step-00000006\n");
  CHECK(!fs::exists(ckpt / "latest.tmp-4242"));
  check_same_state(step_folder(fs::path(straight) / "checkpoints", 6), step_folder(ckpt, 6));
}

TEST_CASE("checkpoint: world 2 stage 3 -> world 3 stage 1 on NVMe (sync saves) -> world 1 stage 0 "
          "continues the loss curve") {
  TempDir dir;
  // Global batch 12 in every run; an lr that does not depend on run.steps, so a run of 4 steps
  // and one of 12 train alike.
  const std::string common =
      "--set data.micro_batch=2 --set run.lr_schedule=constant --set checkpoint.every_steps=4 ";
  auto r = run_command(tiny_job(dir.file("straight"),
                                common + "--nproc 2 --set data.grad_accum=3 --set run.steps=12"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string out = dir.file("chain");
  const std::string legs[3] = {
      "--nproc 2 --set zero.stage=3 --set plugins.shard=shard_bucket --set data.grad_accum=3 "
      "--set run.steps=4",
      "--nproc 3 --set zero.stage=1 --set plugins.shard=shard_tensor --set data.grad_accum=2 "
      "--set plugins.offload_optimizer=offload_nvme --set plugin.offload_nvme.path=" +
          dir.file("nvme") +
          " --set zero.sub_group_size=4096 --set run.steps=8 --set checkpoint.async=false "
          "--resume auto",
      "--nproc 1 --set zero.stage=0 --set data.grad_accum=6 --set run.steps=12 --resume auto"};
  const std::string saved_by[2] = {
      "at step 4 (saved by: world 2, ZeRO stage 3, shard_bucket, optim_hybrid_adam, no offload",
      "at step 8 (saved by: world 3, ZeRO stage 1, shard_tensor, optim_hybrid_adam, offload "
      "optimizer states -> offload_nvme"};
  for (int leg = 0; leg < 3; ++leg) {
    CAPTURE(leg);
    r = run_command(tiny_job(out, common + legs[leg]));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    if (leg > 0) CHECK(contains(r.output, saved_by[leg - 1]));
    if (leg == 1) CHECK(contains(r.output, "/checkpoints (sync, keep last 2)"));
  }
  const auto expected = zt::test::losses_of(dir.file("straight") + "/metrics.jsonl");
  const auto got = zt::test::losses_of(out + "/metrics.jsonl");
  REQUIRE(expected.size() == 12);
  REQUIRE(got.size() == 12);
  for (size_t s = 0; s < 12; ++s) {
    INFO("step " << s + 1 << ": " << got[s] << " vs " << expected[s]);
    CHECK(std::abs(got[s] - expected[s]) <= 1e-5 * std::abs(expected[s]));
  }
  CHECK(got[0] != got[11]);  // it trained
}

namespace {

// Flips one byte in the middle of a rank file's data; returns the tensor whose bytes hold it.
std::string flip_byte_in(const std::string& file) {
  int64_t at = 0;
  std::string tensor;
  {
    zt::SafetensorsReader st(file);
    REQUIRE(!st.entries().empty());
    const zt::SafetensorsEntry& e = st.entries()[st.entries().size() / 2];
    at = st.header_bytes() + (e.begin + e.end) / 2;
    // "<kind>/<tensor>/<begin>-<end>"
    tensor = e.name.substr(e.name.find('/') + 1);
    tensor = tensor.substr(0, tensor.rfind('/'));
  }
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x10));
  return tensor;
}

int64_t metrics_steps(const std::string& out_dir) {
  return static_cast<int64_t>(zt::test::losses_of(out_dir + "/metrics.jsonl").size());
}

}  // namespace

TEST_CASE("checkpoint: bad checkpoints give one clear error and the right exit code, lose "
          "nothing") {
  TempDir dir;
  const std::string out = dir.file("out");
  auto r = run_command(tiny_job(out, "--set run.steps=2 --set checkpoint.every_steps=2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string folder = step_folder(fs::path(out) / "checkpoints", 2);
  const std::string rank1 = folder + "/rank-00001-of-00002.safetensors";
  REQUIRE(fs::exists(rank1));
  const auto resume = [&](const std::string& from, const std::string& extra = "") {
    return run_command(tiny_job(out, "--set run.steps=4 --resume " + from + " " + extra));
  };

  {
    INFO("a flipped byte in a rank file: exit 5 naming the file and the tensor");
    const std::string tensor = flip_byte_in(rank1);
    r = resume(folder);
    INFO(r.output);
    CHECK(r.exit_code == 5);
    CHECK(contains(r.output, "rank-00001-of-00002.safetensors"));
    CHECK(contains(r.output, tensor));
    flip_byte_in(rank1);  // back as it was
  }
  {
    INFO("a missing rank file: exit 5 naming it");
    fs::rename(rank1, rank1 + ".moved");
    r = resume(folder);
    INFO(r.output);
    CHECK(r.exit_code == 5);
    CHECK(contains(r.output, rank1));
    fs::rename(rank1 + ".moved", rank1);
  }
  {
    INFO("a checkpoint of another model: exit 2 naming the first tensor whose shape differs");
    r = resume(folder, "--set model.d_model=32");
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, zt::CheckpointReader(folder).tensors().front().name));
  }
  {
    INFO("a folder that is not a checkpoint: exit 2 naming it");
    fs::create_directories(dir.path() / "empty");
    r = resume(dir.file("empty"));
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "not a checkpoint"));
    CHECK(contains(r.output, dir.file("empty")));
  }
  // Nothing lost: the run's metrics and its checkpoint are as they were.
  CHECK(metrics_steps(out) == 2);
  CHECK(zt::latest_checkpoint(out + "/checkpoints") == folder);
  zt::CheckpointReader reader(folder);
  CHECK(all_values(reader).size() == reader.kinds().size() * reader.tensors().size());
}

TEST_CASE("checkpoint: --resume auto without a checkpoint starts fresh, and a finished run has "
          "nothing left") {
  TempDir dir;
  const std::string out = dir.file("out");
  auto r = run_command(
      tiny_job(out, "--set run.steps=2 --set checkpoint.every_steps=2 --resume auto"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "no checkpoint under " + out + "/checkpoints: starting fresh"));
  CHECK(contains(r.output, "checkpoints: every 2 steps to " + out +
                               "/checkpoints (async, keep "
                               "last 2)"));
  CHECK(contains(r.output, "checkpoint: step 2 saved to " + out + "/checkpoints/step-00000002"));
  CHECK(contains(zt::test::read_file(out + "/metrics.jsonl"), "\"event\":\"checkpoint\""));
  r = run_command(tiny_job(out, "--set run.steps=2 --resume auto"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "is at step 2 and run.steps = 2: nothing left to train"));
  CHECK(metrics_steps(out) == 2);
}

TEST_CASE("checkpoint: a disk that fills during a save stops the job with exit 5, and the "
          "previous checkpoint stays the latest") {
  TempDir dir;
  // One checkpoint's size, measured, sizes a filesystem that holds one but not two.
  auto r = run_command(
      tiny_job(dir.file("probe"), "--set run.steps=1 --set checkpoint.every_steps=1"));
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
  r = run_command(tiny_job(dir.file("out"), "--set run.steps=4 --set checkpoint.every_steps=2 "
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
  auto r = run_command(tiny_job(straight, total + " --set checkpoint.every_steps=1000"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  const fs::path ckpt = fs::path(healed) / "checkpoints";
  BackgroundJob job(tiny_job(healed, total + " --set checkpoint.every_steps=3 --max-restarts 2"),
                    dir.file("healed.log"));
  REQUIRE(wait_until([&] { return fs::exists(ckpt / "latest"); }, std::chrono::seconds(60)));
  const pid_t victim = job.rank_pid(1);
  REQUIRE(victim > 0);
  REQUIRE(kill(victim, SIGKILL) == 0);
  const int exit_code = job.wait(std::chrono::seconds(120));
  const std::string log = zt::test::read_file(dir.file("healed.log"));
  INFO(log);
  CHECK(exit_code == 0);
  CHECK(contains(
      log, "zt: restart 1/2: rank 1 (pid " + std::to_string(victim) + ") was killed by signal 9"));
  CHECK(contains(log, "; all ranks start again from checkpoint " + ckpt.string() + "/step-"));
  CHECK(contains(log, "resumed at step"));
  check_same_losses(straight, healed, steps);
  check_same_state(step_folder(fs::path(straight) / "checkpoints", steps),
                   step_folder(ckpt, steps));
}

TEST_CASE("restarts: a SIGTERM right after a rank died stops the job with that failure, quickly "
          "and without a restart") {
  // The chaos soak's finding: a rank dead (or killed by the forwarded signal before it caught
  // it) left the other waiting in a collective until the whole drain ran out.
  TempDir dir;
  const fs::path ckpt = fs::path(dir.file("out")) / "checkpoints";
  BackgroundJob job(tiny_job(dir.file("out"), "--set run.steps=100000 "
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
  const auto r = run_command(tiny_job(dir.file("out"),
                                      "--set run.steps=20 --set checkpoint.every_steps=1 "
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
  auto r = run_command(tiny_job(straight, total));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // No periodic checkpoints: the signal's save is the only one.
  BackgroundJob job(tiny_job(stopped, total), dir.file("stopped.log"));
  REQUIRE(wait_until([&] { return zt::test::losses_of(stopped + "/metrics.jsonl").size() >= 20; },
                     std::chrono::seconds(60)));
  REQUIRE(kill(job.pid(), SIGTERM) == 0);
  const int exit_code = job.wait(std::chrono::seconds(60));
  const std::string log = zt::test::read_file(dir.file("stopped.log"));
  INFO(log);
  CHECK(exit_code == 0);
  const fs::path ckpt = fs::path(stopped) / "checkpoints";
  const std::string latest = zt::latest_checkpoint(ckpt.string());
  REQUIRE(!latest.empty());
  const int64_t at = zt::CheckpointReader(latest).step();
  CHECK(at < steps);
  CHECK(contains(log, "zt: stopped by SIGTERM after step " + std::to_string(at) + " of " +
                          std::to_string(steps) + "; newest checkpoint: " + latest +
                          "; continue with --resume auto"));
  CHECK(zt::test::losses_of(stopped + "/metrics.jsonl").size() == static_cast<size_t>(at));
  r = run_command(tiny_job(stopped, total + " --resume auto"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  check_same_losses(straight, stopped, steps);
}

TEST_CASE("signals: SIGUSR1 (Slurm's warning before preemption) stops the job the same way") {
  TempDir dir;
  BackgroundJob job(tiny_job(dir.file("out"), "--set run.steps=100000"), dir.file("job.log"));
  REQUIRE(wait_until([&] { return zt::test::losses_of(dir.file("out/metrics.jsonl")).size() >= 5; },
                     std::chrono::seconds(60)));
  REQUIRE(kill(job.pid(), SIGUSR1) == 0);
  const int exit_code = job.wait(std::chrono::seconds(60));
  const std::string log = zt::test::read_file(dir.file("job.log"));
  INFO(log);
  CHECK(exit_code == 0);
  CHECK(contains(log, "zt: stopped by SIGUSR1 after step "));
  CHECK(!zt::latest_checkpoint(dir.file("out/checkpoints")).empty());
}

TEST_CASE("signals: a second SIGTERM to the launcher stops the ranks at once, without waiting") {
  // Steps of a few hundred ms, so the second signal lands while the first is being honoured.
  TempDir dir;
  BackgroundJob job(
      zt::test::small_gpt_job(dir.file("out"), "--set run.steps=100000 --set model.n_layer=6 "
                                               "--set model.d_model=512 --set model.n_head=8 "
                                               "--set model.seq_len=128 --set data.micro_batch=8"),
      dir.file("job.log"));
  REQUIRE(wait_until([&] { return zt::test::losses_of(dir.file("out/metrics.jsonl")).size() >= 2; },
                     std::chrono::seconds(120)));
  REQUIRE(kill(job.pid(), SIGTERM) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(kill(job.pid(), SIGTERM) == 0);
  const int exit_code = job.wait(std::chrono::seconds(30));
  const std::string log = zt::test::read_file(dir.file("job.log"));
  INFO(log);
  CHECK(exit_code == 128 + SIGTERM);
  CHECK(contains(log, "launcher received Terminated again; killing all ranks"));
  CHECK(!contains(log, "zt: stopped by SIGTERM"));
}
