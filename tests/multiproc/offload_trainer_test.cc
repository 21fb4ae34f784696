// Offload through the trainer, end to end: the same loss as without offload, bytes per tier in
// the summary, files gone afterwards; and the faults a real disk gives: a folder that cannot be
// written, a filesystem too small, files deleted or truncated under a running job. Each fault
// must stop the job with the path, the bytes or the step, exit 5 (I/O), and no metrics line for
// a step that was not trained.
#include <ATen/Context.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "../skip.h"
#include "../test_util.h"
#include "checkpoint_files.h"
#include "small_gpt_job.h"

using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;
using zt::test::write_file;

namespace {

// The shipped stage-3 config, small, with optimizer states on NVMe and parameters in host memory.
std::string offload_job(const std::string& out_dir, const std::string& nvme,
                        const std::string& extra = "") {
  return zt::test::small_gpt_job(out_dir,
                                 "--set run.steps=3 --set plugins.offload_optimizer=offload_nvme "
                                 "--set plugins.offload_param=offload_cpu "
                                 "--set plugin.offload_nvme.path=" +
                                     nvme + " --set zero.sub_group_size=4096 " + extra);
}

int64_t lines_of(const std::string& path) {
  std::string text = zt::test::read_file(path);
  return std::count(text.begin(), text.end(), '\n');
}

bool no_job_folders(const std::filesystem::path& nvme) {
  if (!std::filesystem::exists(nvme)) return true;
  for (const auto& e : std::filesystem::directory_iterator(nvme)) {
    if (e.path().filename().string().rfind("zt-", 0) == 0) return false;
  }
  return true;
}

// Runs a long offloaded job, waits for `after_steps` metrics lines, runs `sabotage` (a shell
// command; $DIR is rank 0's NVMe folder) and waits for the job to end.
zt::test::CommandResult sabotage_run(const TempDir& dir, const std::string& sabotage,
                                     const std::string& extra = "") {
  const std::string nvme = dir.file("nvme");
  write_file(dir.file("run.sh"),
             "timeout 300 " +
                 offload_job(dir.file("out"), nvme, "--set run.steps=100000 " + extra) +
                 " &\n"
                 "pid=$!\n"
                 "for i in $(seq 1 600); do\n"
                 "  n=$(cat " +
                 dir.file("out") +
                 "/metrics.jsonl 2>/dev/null | wc -l)\n"
                 "  [ \"$n\" -ge 2 ] && break; sleep 0.05\n"
                 "done\n"
                 "DIR=$(ls -d " +
                 nvme +
                 "/zt-*/rank0)\n"
                 // Never `rm -f /*`: a job that failed or started late has no folder yet.
                 "if [ -z \"$DIR\" ] || [ ! -d \"$DIR\" ] || [ \"$n\" -lt 2 ]; then\n"
                 "  echo \"no rank folder to sabotage after 2 steps\"; kill $pid; exit 1\n"
                 "fi\n"
                 "echo \"sabotage in $DIR\"\n" +
                 sabotage +
                 "\n"
                 "wait $pid; echo \"job exit $?\"\n");
  return run_command("bash " + dir.file("run.sh"));
}

// The step the tier names in its error ("... at step N"), not a progress line's "step N/M".
int64_t failed_step(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex("at step (\\d+)"))) return -1;
  return std::stoll(m[1]);
}

}  // namespace

TEST_CASE("offload: NVMe optimizer states + host parameters train to the same losses and state, "
          "summary by tier") {
  TempDir dir;
  const std::string final_save = "--set checkpoint.every_steps=1000";
  auto plain = run_command(
      zt::test::small_gpt_job(dir.file("plain"), "--set run.steps=3 " + final_save));
  REQUIRE(plain.exit_code == 0);
  auto r = run_command(offload_job(dir.file("out"), dir.file("nvme"), final_save));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Every step's loss, to 17 digits (the final line's 4 decimals hid gaps below 5e-5).
  const std::vector<double> want = zt::test::losses_of(dir.file("plain/metrics.jsonl"));
  REQUIRE(want.size() == 3);
  CHECK(zt::test::losses_of(dir.file("out/metrics.jsonl")) == want);
  // The last update shows in no loss: the final states, every parameter and moment, bit for bit.
  zt::test::check_same_state(zt::test::step_folder(dir.file("plain/checkpoints"), 3),
                             zt::test::step_folder(dir.file("out/checkpoints"), 3));
  CHECK(contains(r.output, "offload: optimizer states + master -> offload_nvme"));
  CHECK(contains(r.output, "parameter shards -> offload_cpu"));
  CHECK(std::regex_search(r.output, std::regex("compute +offload_cpu +offload_nvme +total")));
  CHECK(contains(r.output, "offload I/O (rank 0): offload_cpu"));
  CHECK(std::regex_search(r.output, std::regex("offload_nvme read [1-9][0-9.]* MiB")));
  CHECK(no_job_folders(dir.file("nvme")));
}

TEST_CASE(
    "launch.device = cuda with a LibTorch that has no CUDA stops before training, naming it, with "
    "offload and without") {
  if (at::hasCUDA()) {
    ZT_SKIP("this LibTorch has a CUDA device: the case is about one that has none");
  }
  TempDir dir;
  // offload_cpu pinned its host memory for the device, and LibTorch refused in its own words.
  auto r = run_command(offload_job(dir.file("out"), dir.file("nvme"), "--set launch.device=cuda"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "launch.device (--set launch.device=cuda) = \"cuda\", but this "
                           "LibTorch has no CUDA device"));
  CHECK_FALSE(contains(r.output, "step 1/"));
  // Without offload too: the engine computes on the CPU whatever the key says, and the job would
  // have trained there as if it were on a GPU.
  r = run_command(zt::test::small_gpt_job(dir.file("out2"), "--set launch.device=cuda"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "the engine computes on the CPU in this release"));
  CHECK_FALSE(contains(r.output, "step 1/"));
}

TEST_CASE("offload fault: a folder that cannot be created stops before training, naming it") {
  TempDir dir;
  // A path under a regular file cannot become a folder, whoever runs the test (root included).
  const std::string bad = std::string(ZT_TEST_SOURCE_DIR) + "/README.md/nvme";
  auto r = run_command(offload_job(dir.file("out"), bad));
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, bad));
  CHECK(contains(r.output, "plugin.offload_nvme.path"));
  CHECK_FALSE(contains(r.output, "step 1/"));
}

TEST_CASE(
    "offload fault: a filesystem too small for the states stops before training with the bytes") {
  TempDir dir;
  const std::string small = dir.file("small");
  std::filesystem::create_directories(small);
  auto mount = run_command("mount -t tmpfs -o size=1m tmpfs " + small + " 2>&1");
  if (mount.exit_code != 0) {
    ZT_SKIP_UNLESS_CI("cannot mount a 1 MiB tmpfs here (" + mount.output + "); needs root");
  }
  // 430k parameters: about 2.5 MiB of optimizer states per rank, over the 1 MiB filesystem. The
  // memory-fit check refuses the job before any rank starts (the tier's own check in prepare()
  // is tested with the plugin).
  auto r = run_command(
      offload_job(dir.file("out"), small, "--set model.d_model=128 --set model.n_head=4"));
  run_command("umount " + small);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(std::regex_search(r.output, std::regex("disk " + small +
                                               " \\(offload_nvme\\): needs [0-9.]+ "
                                               "MiB \\(2 rank\\(s\\) x [0-9]+ bytes")));
  CHECK(std::regex_search(r.output, std::regex("over the [0-9.]+ [KM]iB free there")));
  CHECK(contains(r.output, "zero.offload_optimizer_fraction"));
  CHECK_FALSE(contains(r.output, "step 1/"));
}

TEST_CASE(
    "offload fault: files deleted under a running job stop it at that step, nothing more logged") {
  TempDir dir;
  auto r = sabotage_run(dir, "rm -f \"$DIR\"/*");
  INFO(r.output);
  CHECK(contains(r.output, "job exit 5"));
  CHECK(contains(r.output, "deleted"));
  CHECK(contains(r.output, dir.file("nvme")));
  const size_t error_at = r.output.find("io error: offload_nvme");
  REQUIRE(error_at != std::string::npos);
  const int64_t step = failed_step(r.output.substr(error_at));
  REQUIRE(step > 0);
  // Steps before the failing one were trained and logged; the failing one was not.
  CHECK(lines_of(dir.file("out") + "/metrics.jsonl") == step - 1);
  CHECK_FALSE(contains(r.output, "summary:"));
  CHECK(no_job_folders(dir.file("nvme")));
}

TEST_CASE(
    "offload fault: files truncated under a running job stop it, naming path, bytes and step") {
  TempDir dir;
  // Parameters on NVMe too, so shards are also read during forward, mid-step. A file cut while
  // the step rewrites it whole heals with the right bytes, so the files are cut for a while:
  // whichever comes first, a short read mid-step, the step's own size check or the tier's check of
  // what it reads back (a cut file read as zeros), must stop the job.
  auto r = sabotage_run(
      dir,
      "for i in $(seq 1 100); do for f in \"$DIR\"/*; do truncate -s 0 \"$f\" 2>/dev/null; done; "
      "sleep 0.02; done",
      "--set plugins.offload_param=offload_nvme");
  INFO(r.output);
  CHECK(contains(r.output, "job exit 5"));
  CHECK(contains(r.output, dir.file("nvme")));
  // "io error: offload_nvme" from the plugin, "io error: offload:" from the read-back check.
  const size_t at = r.output.find("io error: offload");
  REQUIRE(at != std::string::npos);
  CHECK(std::regex_search(r.output.substr(at),
                          std::regex("truncated|ends before it|read back different")));
  const int64_t step = failed_step(r.output.substr(at));
  REQUIRE(step > 0);
  CHECK(lines_of(dir.file("out") + "/metrics.jsonl") == step - 1);
  CHECK_FALSE(contains(r.output, "summary:"));
  CHECK(no_job_folders(dir.file("nvme")));
}
