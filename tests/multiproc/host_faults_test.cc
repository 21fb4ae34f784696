// Disk and memory faults that come from the host while a job runs: the offload disk filling up
// under it, the checkpoint folder turning read-only, a memory cgroup too small for the job (the
// fit check refuses it) or one whose limit the job reaches anyway (the kernel's OOM killer ends a
// rank, and the launcher says so). Each gives a clear message and the right exit code, and the
// previous checkpoint stays the latest and whole.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

#include "../skip.h"
#include "../test_util.h"
#include "checkpoint_files.h"
#include "small_gpt_job.h"
#include "zt/host/checkpoint.h"
#include "zt/host/memory_cgroup.h"

namespace fs = std::filesystem;
using zt::test::contains;
using zt::test::run_command;
using zt::test::step_folder;
using zt::test::TempDir;
using zt::test::write_file;

namespace {

// A tmpfs of `megabytes` mounted at `path` for the test's life.
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& path, int megabytes) : path_(path) {
    fs::create_directories(path);
    auto r = run_command("mount -t tmpfs -o size=" + std::to_string(megabytes) + "m tmpfs " + path +
                         " 2>&1");
    mounted_ = r.exit_code == 0;
    why_not_ = r.output;
  }
  ~SmallTmpfs() {
    if (mounted_) run_command("umount " + path_ + " 2>&1");
  }
  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }

 private:
  std::string path_;
  bool mounted_ = false;
  std::string why_not_;
};

// A memory cgroup of the test's own, below the one the test runs in, with a limit; removed at
// the end. Creating one needs root and a controller this process may write: cgroup v1's memory
// controller, or v2 with memory delegated to a child of this process's cgroup.
class LimitedCgroup {
 public:
  explicit LimitedCgroup(int64_t limit_bytes) {
    const zt::MemoryCgroup own = zt::memory_cgroup_of(0);
    if (own.version == 0) {
      why_not_ = "no memory cgroup is visible to this process";
      return;
    }
    dir_ = own.dir + "/zt-test-" + std::to_string(getpid());
    std::error_code ec;
    if (!fs::create_directory(dir_, ec) && ec) {
      why_not_ = "cannot create " + dir_ + ": " + ec.message();
      dir_.clear();
      return;
    }
    const std::string file = dir_ + (own.version == 1 ? "/memory.limit_in_bytes" : "/memory.max");
    std::ofstream limit(file);
    limit << limit_bytes << "\n";
    limit.close();
    if (!limit) why_not_ = "cannot write " + file + " (is the memory controller delegated here?)";
  }
  ~LimitedCgroup() {
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  bool usable() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }
  const std::string& dir() const { return dir_; }

  // `command` run inside the cgroup (a shell that moves itself there, then execs it).
  zt::test::CommandResult run(const TempDir& tmp, const std::string& command) const {
    write_file(tmp.file("in_cgroup.sh"),
               "echo $$ > " + dir_ + "/cgroup.procs || exit 99\nexec " + command + "\n");
    return run_command("bash " + tmp.file("in_cgroup.sh"));
  }

 private:
  std::string dir_;
  std::string why_not_;
};

std::string final_loss(const std::string& output) {
  const size_t at = output.find("final loss");
  return at == std::string::npos ? "" : output.substr(at, 17);
}

// Every tensor of every kind of the checkpoint reads back whole (reads check the checksums).
void check_whole(const std::string& folder) {
  zt::CheckpointReader reader(folder);
  const size_t read = zt::test::all_values(reader).size();
  CHECK(read == reader.kinds().size() * reader.tensors().size());
  CHECK(read > 0);
}

// A GPT of 12.9M parameters whose two ranks need about 1.4 GiB together (the fit check's
// estimate), so a 400 MiB cgroup is far too small for it.
std::string big_job(const std::string& out_dir, const std::string& extra) {
  return zt::test::small_gpt_job(out_dir, "--set model.n_layer=4 --set model.d_model=512 "
                                          "--set model.n_head=8 --set model.seq_len=256 " +
                                              extra);
}

constexpr int64_t kSmallCgroupBytes = int64_t{400} << 20;

// Starts `job` in the background, waits (up to 30 s) until `ready` (a shell condition) holds,
// runs `fault` (shell commands), waits for the job and prints "job exit N".
zt::test::CommandResult run_with_fault(const TempDir& dir, const std::string& job,
                                       const std::string& ready, const std::string& fault) {
  write_file(dir.file("fault.sh"), "timeout 300 " + job +
                                       " &\npid=$!\n"
                                       "for i in $(seq 1 3000); do " +
                                       ready + " && break; sleep 0.01; done\n" + fault +
                                       "\nwait $pid; echo \"job exit $?\"\n");
  return run_command("bash " + dir.file("fault.sh"));
}

}  // namespace

TEST_CASE("host faults: an offload disk that fills mid-run does not stop the job: its files' "
          "blocks were reserved at the start, and the losses are the unfilled run's") {
  TempDir dir;
  const std::string nvme = dir.file("nvme");
  SmallTmpfs disk(nvme, 64);
  if (!disk.mounted())
    ZT_SKIP_UNLESS_CI("cannot mount a small tmpfs here (" + disk.why_not() + ")");
  const std::string job = "--set run.steps=60 --set run.log_every=1 "
                          "--set plugins.offload_optimizer=offload_nvme "
                          "--set plugins.offload_param=offload_nvme --set zero.sub_group_size=4096 "
                          "--set plugin.offload_nvme.path=" +
                          nvme;
  auto plain = run_command(zt::test::small_gpt_job(dir.file("plain"), job));
  INFO(plain.output);
  REQUIRE(plain.exit_code == 0);
  // The same job, and once it logged 3 steps another writer takes every free byte of the disk.
  auto r = run_with_fault(
      dir, zt::test::small_gpt_job(dir.file("out"), job),
      "[ \"$(cat " + dir.file("out") + "/metrics.jsonl 2>/dev/null | wc -l)\" -ge 3 ]",
      "dd if=/dev/zero of=" + nvme +
          "/filler bs=1M 2>&1 | grep -c 'No space left' | "
          "sed 's/^/disk full: /'\ndf -k " +
          nvme + " | tail -n 1\necho \"steps logged by then: $(cat " + dir.file("out") +
          "/metrics.jsonl | wc -l)\"");
  INFO(r.output);
  CHECK(contains(r.output, "disk full: 1"));
  CHECK(std::regex_search(r.output, std::regex(" 0 +100% " + nvme)));
  std::smatch by_then;
  REQUIRE(std::regex_search(r.output, by_then, std::regex("steps logged by then: ([0-9]+)")));
  CHECK(std::stoi(by_then[1]) < 60);  // the job trained on with the disk full
  CHECK(contains(r.output, "job exit 0"));
  CHECK(final_loss(r.output) == final_loss(plain.output));
  CHECK_FALSE(final_loss(r.output).empty());
  // Every step's loss as the metrics record it (full precision), not only the summary's 4
  // decimals: a tier that lost one write to the full disk would leave later losses a little off.
  const auto plain_losses = zt::test::losses_of(dir.file("plain/metrics.jsonl"));
  CHECK(plain_losses.size() == 60);
  CHECK(zt::test::losses_of(dir.file("out/metrics.jsonl")) == plain_losses);
  // The job's own files went away at its end; the filler is all that is left.
  int left = 0;
  for (const auto& e : fs::directory_iterator(nvme)) left += e.path().filename() != "filler";
  CHECK(left == 0);
}

TEST_CASE("host faults: a resume onto a full run.out_dir disk trains: its metrics file is cut "
          "back to the checkpoint's step in place") {
  // A resume rewrites metrics.jsonl up to the checkpoint's step. Through a copy and a rename it
  // failed on a full disk, left the partial copy behind and told the user to make a writable
  // folder writable; every restart of the job then failed the same way before its first step.
  TempDir dir;
  const std::string out = dir.file("out");
  SmallTmpfs disk(out, 8);
  if (!disk.mounted())
    ZT_SKIP_UNLESS_CI("cannot mount a small tmpfs here (" + disk.why_not() + ")");
  const std::string ckpt = dir.file("ckpt");
  const std::string job = "--set run.steps=6 --set checkpoint.every_steps=3 --set "
                          "checkpoint.keep_last=2 --set checkpoint.dir=" +
                          ckpt;
  auto r = run_command(zt::test::small_gpt_job(out, job));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto first = zt::test::losses_of(out + "/metrics.jsonl");
  REQUIRE(first.size() == 6);
  auto fill = run_command("dd if=/dev/zero of=" + out + "/filler bs=4k 2>&1; df -k " + out +
                          " | tail -n 1");
  INFO(fill.output);
  REQUIRE(std::regex_search(fill.output, std::regex(" 0 +100% " + out)));
  r = run_command(zt::test::small_gpt_job(out, job + " --resume " + step_folder(ckpt, 3)));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "resumed at step 3"));
  CHECK_FALSE(contains(r.output, "cannot rewrite metrics file"));
  CHECK_FALSE(fs::exists(out + "/metrics.jsonl.tmp"));
  // Steps 1-3 as the first run logged them, and after them at most the steps this run could
  // still write (none, or as many as the cut freed room for), never the first run's 4-6 again.
  const auto kept = zt::test::losses_of(out + "/metrics.jsonl");
  REQUIRE(kept.size() >= 3);
  CHECK(kept.size() <= 6);
  for (size_t s = 0; s < kept.size(); ++s) {
    INFO("step " << s + 1);
    CHECK(kept[s] == first[s]);  // a resume is bit for bit: the same losses
  }
  std::ifstream metrics(out + "/metrics.jsonl");
  int64_t last_step = 0;
  for (std::string line; std::getline(metrics, line);) {
    const size_t at = line.rfind("{\"step\":", 0);
    if (at == std::string::npos) continue;
    const int64_t step = std::atoll(line.c_str() + 8);
    CHECK(step == last_step + 1);
    last_step = step;
  }
}

TEST_CASE("host faults: a checkpoint folder that turns read-only mid-run stops the job at the "
          "next save with exit 5, naming it, and the previous checkpoint stays the latest") {
  TempDir dir;
  const std::string ckpt = dir.file("ckpt");
  SmallTmpfs disk(ckpt, 64);
  if (!disk.mounted())
    ZT_SKIP_UNLESS_CI("cannot mount a small tmpfs here (" + disk.why_not() + ")");
  auto r = run_with_fault(
      dir,
      zt::test::small_gpt_job(dir.file("out"), "--set run.steps=100000 "
                                               "--set checkpoint.every_steps=50 "
                                               "--set checkpoint.dir=" +
                                                   ckpt),
      "[ -e " + step_folder(ckpt, 50) + " ]",
      "mount -o remount,ro " + ckpt + " && echo 'read-only now'");
  INFO(r.output);
  REQUIRE(contains(r.output, "read-only now"));
  CHECK(contains(r.output, "job exit 5"));
  CHECK(std::regex_search(r.output, std::regex("io error: cannot create checkpoint folder " + ckpt +
                                               "/\\.tmp-step-[0-9]+-[0-9a-f-]+: Read-only file "
                                               "system; make checkpoint.dir writable or point it "
                                               "elsewhere")));
  CHECK_FALSE(contains(r.output, "summary:"));
  // 50 steps between saves leave the remount time to land before the next save begins (at 4, a
  // save could begin first, and fail at its manifest instead); one may still have finished.
  const std::string latest = zt::latest_checkpoint(ckpt);
  CHECK((latest == step_folder(ckpt, 50) || latest == step_folder(ckpt, 100)));
  check_whole(latest);
}

TEST_CASE("host faults: a memory cgroup whose limit is below what the job needs refuses it before "
          "any rank starts, naming the limit (exit 2)") {
  TempDir dir;
  LimitedCgroup cgroup(kSmallCgroupBytes);
  if (!cgroup.usable())
    ZT_SKIP_UNLESS_CI("no memory cgroup of the test's own: " + cgroup.why_not());
  auto r = cgroup.run(dir, big_job(dir.file("out"), "--set run.steps=2"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(std::regex_search(
      r.output, std::regex("host RAM: needs 1\\.[0-9]+ GiB .* over the "
                           "[0-9.]+ MiB left under the memory cgroup's limit "
                           "\\(" +
                           cgroup.dir() + "/memory\\.(limit_in_bytes|max): 400\\.0 MiB")));
  CHECK_FALSE(contains(r.output, "step 1/"));
  CHECK_FALSE(fs::exists(dir.file("out") + "/metrics.jsonl"));
}

TEST_CASE("host faults: a rank the kernel's OOM killer ends under a cgroup limit is named as out "
          "of memory (exit 137), and the checkpoint before stays the latest and whole") {
  TempDir dir;
  LimitedCgroup cgroup(kSmallCgroupBytes);
  if (!cgroup.usable())
    ZT_SKIP_UNLESS_CI("no memory cgroup of the test's own: " + cgroup.why_not());
  const std::string ckpt = dir.file("out") + "/checkpoints";
  auto first = run_command(big_job(dir.file("out"), "--set run.steps=2 --set run.log_every=1 "
                                                    "--set checkpoint.every_steps=2"));
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  REQUIRE(zt::latest_checkpoint(ckpt) == step_folder(ckpt, 2));
  // Resumed in the cgroup, told it may use 20 GiB, so the fit check lets it start.
  auto r = cgroup.run(dir, big_job(dir.file("out"), "--set run.steps=4 --resume auto "
                                                    "--set launch.memory_limit_gb=20"));
  INFO(r.output);
  CHECK(r.exit_code == 137);
  CHECK(
      std::regex_search(r.output, std::regex("zt: error: rank [01] \\(pid [0-9]+\\) was killed "
                                             "by signal 9 \\(Killed\\); the kernel's OOM "
                                             "killer ended it: memory cgroup " +
                                             cgroup.dir() + " reached its limit of 400\\.0 MiB")));
  CHECK(contains(r.output, "`trainer estimate` shows what it needs"));
  CHECK(zt::latest_checkpoint(ckpt) == step_folder(ckpt, 2));
  check_whole(step_folder(ckpt, 2));
}
