// Checkpoints through the trainer, checked by what the jobs compute and print, not by when
// anything happens (so these run beside other tests; the kills, signals and full disks of
// checkpoint_test.cc run alone): a checkpoint loads at another world size, stage, shard strategy
// and offload placement and the loss curve goes on; bad checkpoints give one clear error, the
// right exit code, and lose nothing; --resume auto without a checkpoint starts fresh.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "../test_util.h"
#include "checkpoint_files.h"
#include "small_gpt_job.h"
#include "zt/host/checkpoint.h"
#include "zt/host/safetensors.h"

namespace fs = std::filesystem;
using zt::test::all_values;
using zt::test::contains;
using zt::test::quiet_small_gpt_job;
using zt::test::run_command;
using zt::test::step_folder;
using zt::test::TempDir;

TEST_CASE("checkpoint: world 2 stage 3 -> world 3 stage 1 on NVMe (sync saves) -> world 1 stage 0 "
          "continues the loss curve") {
  TempDir dir;
  // Global batch 12 in every run; an lr that does not depend on run.steps, so a run of 4 steps
  // and one of 12 train alike.
  const std::string common =
      "--set data.micro_batch=2 --set run.lr_schedule=constant --set checkpoint.every_steps=4 ";
  auto r = run_command(quiet_small_gpt_job(
      dir.file("straight"), common + "--nproc 2 --set data.grad_accum=3 --set run.steps=12"));
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
    r = run_command(quiet_small_gpt_job(out, common + legs[leg]));
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
  // The last update shows in no loss: the final states, every element, as the straight run's.
  zt::test::check_close_state(step_folder(out + "/checkpoints", 12),
                              step_folder(dir.file("straight") + "/checkpoints", 12));
}

TEST_CASE("checkpoint: a MiCS job's gradient-codec residuals load where the shards moved") {
  TempDir dir;
  // int4 gradients with error feedback over MiCS groups of 2 on 4 ranks: each rank saves its
  // residual of the across-group all-reduce over its shard (half of every group). At world 2
  // with groups of 1 each rank's shard is the whole group: the saved half loads, the other half
  // starts from zero (it used to fail: "no saved piece covers them").
  const std::string common =
      "--set data.micro_batch=2 --set run.lr_schedule=constant --set checkpoint.every_steps=2 "
      "--set plugins.codec_gradients=codec_blockq --set codec.gradients.bits=4 "
      "--set zero.codec_error_feedback=true ";
  const std::string out = dir.file("run");
  auto r = run_command(quiet_small_gpt_job(
      out, common + "--nproc 4 --set zero.mics_shard_size=2 --set data.grad_accum=1 "
                    "--set run.steps=2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_command(quiet_small_gpt_job(
      out, common + "--nproc 2 --set zero.mics_shard_size=1 --set data.grad_accum=2 "
                    "--set run.steps=4 --resume auto"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "at step 2 (saved by: world 4"));
  const auto losses = zt::test::losses_of(out + "/metrics.jsonl");
  CHECK(losses.size() == 4);
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
  auto r = run_command(
      quiet_small_gpt_job(out, "--set run.steps=2 --set checkpoint.every_steps=2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string folder = step_folder(fs::path(out) / "checkpoints", 2);
  const std::string rank1 = folder + "/rank-00001-of-00002.safetensors";
  REQUIRE(fs::exists(rank1));
  const auto resume = [&](const std::string& from, const std::string& extra = "") {
    return run_command(
        quiet_small_gpt_job(out, "--set run.steps=4 --resume " + from + " " + extra));
  };

  {
    INFO("a flipped byte in a rank file: exit 5 naming the file and the tensor");
    const std::string tensor = flip_byte_in(rank1);
    r = resume(folder);
    INFO(r.output);
    CHECK(r.exit_code == 5);
    CHECK(contains(r.output, "rank-00001-of-00002.safetensors"));
    CHECK(contains(r.output, tensor));
    // The run saved no other: its folder is named as holding none older.
    CHECK(contains(r.output, "resume from an older checkpoint (none is left beside it in "));
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
    // Rank 0, which opens it, names the setting that gave the path, as the others do (one rank
    // alone: with two, rank 1's line named it before).
    r = resume(dir.file("empty"), "--set launch.nproc=1");
    INFO(r.output);
    CHECK(r.exit_code == 2);
    CHECK(contains(r.output, "config error: checkpoint.resume = \"" + dir.file("empty") +
                                 "\" (--set checkpoint.resume="));
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
      quiet_small_gpt_job(out, "--set run.steps=2 --set checkpoint.every_steps=2 --resume auto"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "no checkpoint under " + out + "/checkpoints: starting fresh"));
  CHECK(contains(r.output, "checkpoints: every 2 steps to " + out +
                               "/checkpoints (async, keep "
                               "last 2)"));
  CHECK(contains(r.output, "checkpoint: step 2 saved to " + out + "/checkpoints/step-00000002"));
  CHECK(contains(zt::test::read_file(out + "/metrics.jsonl"), "\"event\":\"checkpoint\""));
  r = run_command(quiet_small_gpt_job(out, "--set run.steps=2 --resume auto"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "is at step 2 and run.steps = 2: nothing left to train"));
  CHECK(metrics_steps(out) == 2);
}

TEST_CASE("checkpoint: resuming on a data file rewritten since the save says so, then and now, "
          "and on a copy of it nothing") {
  TempDir dir;
  const std::string out = dir.file("out"), data = dir.file("data.txt");
  fs::copy_file(ZT_TEST_CORPUS, data);
  const auto job = [&](const std::string& extra) {
    return zt::test::small_gpt_job(out, "--set run.log_every=1000 " + extra, data);
  };
  auto r = run_command(job("--set run.steps=2 --set checkpoint.every_steps=2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string step2 = step_folder(out + "/checkpoints", 2);
  const auto resume = [&] {
    return run_command(job("--set run.steps=3 --set checkpoint.every_steps=0 --resume " + step2));
  };
  // Copied away and back (as node-local staging does): another time, the same bytes, no word.
  fs::copy_file(data, data + ".copy");
  fs::remove(data);
  fs::rename(data + ".copy", data);
  r = resume();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "resumed from " + step2));
  CHECK(!contains(r.output, "changed since this checkpoint was saved"));
  // Its first byte rewritten, the size kept: named.
  const auto then = fs::file_size(data);
  {
    std::fstream file(data, std::ios::in | std::ios::out | std::ios::binary);
    const char first = static_cast<char>(file.get());
    file.seekp(0);
    file.put(first == 'x' ? 'y' : 'x');
  }
  r = resume();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "note: " + data + " changed since this checkpoint was saved (then " +
                               std::to_string(then) + " bytes, modified "));
  CHECK(contains(r.output, "; now " + std::to_string(then) + " bytes, modified "));
  // Rewritten with more text: named, with its size then and now.
  std::ofstream(data, std::ios::app) << "More text the checkpoint never saw.\n";
  r = resume();
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "; now " + std::to_string(fs::file_size(data)) + " bytes, modified "));
  CHECK(contains(r.output, "the data stream goes on at sample "));
}
