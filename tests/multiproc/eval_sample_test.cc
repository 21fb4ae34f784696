// A checkpoint after training, end to end: `trainer eval` gives the validation loss training
// logged at that step at every world size, stage, strategy and offload (the engine test checks
// forward_eval itself against the units run in one process); checkpoint.keep_best keeps and names
// the best one; `trainer sample` gives the same text at every world size and stage, with ranks
// whose samples end early taking part until the last one anywhere ends; bad input is exit 2.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "small_gpt_job.h"

using zt::test::contains;
using zt::test::read_file;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

std::string trainer() { return ZT_TEST_TRAINER; }

// Trains the small GPT for 4 steps on 2 ranks at stage 3, evaluating on the test corpus's last
// tenth after steps 2 and 4 and saving a checkpoint then (the best kept). Returns step -> val_loss.
std::map<int64_t, double> train_with_checkpoints(const std::string& out_dir) {
  auto r = run_command(zt::test::small_gpt_job(
      out_dir, "--set run.steps=4 --set data.micro_batch=2 --set data.val_fraction=0.1 "
               "--set eval.every_steps=2 --set eval.batches=5 --set eval.micro_batch=2 "
               "--set checkpoint.every_steps=2 --set checkpoint.keep_last=1 "
               "--set checkpoint.keep_best=val_loss"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::map<int64_t, double> logged;
  std::istringstream lines(read_file(out_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == "eval") logged[j["step"]] = j["val_loss"];
  }
  REQUIRE(logged.size() == 2);
  return logged;
}

// 'text' for /bin/sh.
std::string quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

nlohmann::json sample(const std::string& checkpoint, const std::string& out,
                      const std::string& args) {
  // A run that exits 0 without writing must not be read as the last run's file.
  std::remove(out.c_str());
  auto r = run_command(trainer() + " sample --checkpoint " + checkpoint + " --out " + out +
                       " --samples 4 --max-new-tokens 24 --temperature 0.9 --top-k 20 --seed 5 " +
                       args);
  INFO(args);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, " tokens/s ("));
  return nlohmann::json::parse(read_file(out));
}

}  // namespace

TEST_CASE("trainer eval: a checkpoint's validation loss is the one training logged, at every "
          "world size, stage, strategy and offload, and keep_best keeps the lowest") {
  TempDir dir;
  const std::map<int64_t, double> logged = train_with_checkpoints(dir.file("out"));
  const std::string ckpts = dir.file("out/checkpoints");

  // keep_last = 1 and the best: the best's manifest records the lowest loss logged, and no other
  // checkpoint than it and the newest is left.
  const std::string best = read_file(ckpts + "/best");
  const auto manifest = nlohmann::json::parse(
      read_file(ckpts + "/" + best.substr(0, best.size() - 1) + "/manifest.json"));
  const double lowest = std::min(logged.at(2), logged.at(4));
  CHECK(manifest["metrics"]["val_loss"].get<double>() == lowest);
  CHECK(manifest["step"].get<int64_t>() == (lowest == logged.at(2) ? 2 : 4));
  CHECK(read_file(ckpts + "/latest") == "step-00000004\n");

  const std::string offload_nvme = "--set plugins.offload_optimizer=offload_nvme "
                                   "--set plugins.offload_param=offload_cpu "
                                   "--set zero.sub_group_size=4096 "
                                   "--set plugin.offload_nvme.path=" +
                                   dir.file("nvme");
  const std::vector<std::pair<int, std::string>> compositions = {
      {1, "--set zero.stage=0"},
      {1, ""},
      {2, "--set zero.stage=0"},
      {2, "--set zero.stage=1 --set plugins.shard=shard_tensor"},
      {2, "--set zero.stage=2 --set plugins.shard=shard_tensor"},
      {2, "--set zero.stage=2"},
      {2, "--set plugins.shard=shard_tensor"},
      {3, ""},
      {3, "--set plugins.shard=shard_tensor"},
      {3, "--set zero.stage=1"},
      {2, offload_nvme},
      {3, "--set zero.stage=2 --set plugins.offload_optimizer=offload_cpu"}};
  // The training run's flight record (a hang being looked into) outlives its evaluations, whose
  // out_dir is the run's.
  std::filesystem::create_directories(dir.file("out/flight"));
  { std::ofstream(dir.file("out/flight/rank-0.json")) << "{}\n"; }
  for (const auto& [world, extra] : compositions) {
    CAPTURE(world);
    CAPTURE(extra);
    const std::string out = dir.file("eval.json");
    auto r = run_command(trainer() + " eval --checkpoint " + ckpts + "/latest --nproc " +
                         std::to_string(world) + " --out " + out + " " + extra);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(read_file(out));
    CHECK(j["step"].get<int64_t>() == 4);
    CHECK(j["world"].get<int>() == world);
    CHECK(std::abs(j["val_loss"].get<double>() - logged.at(4)) <= 1e-6 * logged.at(4));
  }
  CHECK(std::filesystem::exists(dir.file("out/flight/rank-0.json")));
  // Under a config of the user's own (--config), and the best by its pointer.
  auto r = run_command(trainer() + " eval --checkpoint " + ckpts + "/best " +
                       zt::test::small_gpt_job(dir.file("out2"), "--set data.val_fraction=0.1 "
                                                                 "--set eval.micro_batch=2 "
                                                                 "--set eval.batches=5")
                           .substr(trainer().size()));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(read_file(dir.file("out2/eval.json")));
  CHECK(std::abs(j["val_loss"].get<double>() - lowest) <= 1e-6 * lowest);
}

TEST_CASE("trainer sample: the same text at world 1, 2 and 3 and every stage, and samples that "
          "end early leave no rank waiting") {
  TempDir dir;
  train_with_checkpoints(dir.file("out"));
  const std::string ckpt = dir.file("out/checkpoints");
  const auto reference = sample(ckpt, dir.file("ref.json"), "--nproc 1 --set zero.stage=0");
  REQUIRE(reference["samples"].size() == 4);
  // A stop byte that ends sample 1 early (its third token), so ranks finish at different forwards.
  std::vector<int64_t> first = reference["samples"][0]["tokens"];
  int64_t stop = first[2];
  for (size_t i = 2; stop == 0 && i < first.size(); ++i) stop = first[i];
  REQUIRE(stop != 0);
  // Each sample as the reference, cut after its first stop byte.
  std::vector<std::vector<int64_t>> expected;
  std::vector<std::string> ended_by;
  for (const auto& s : reference["samples"]) {
    std::vector<int64_t> tokens = s["tokens"];
    CHECK(tokens.size() == 24);
    auto at = std::find(tokens.begin(), tokens.end(), stop);
    ended_by.push_back(at == tokens.end() ? "budget" : "stop");
    if (at != tokens.end()) tokens.erase(at + 1, tokens.end());
    expected.push_back(tokens);
  }
  CHECK(expected[0].size() <= 3);
  const std::string with_stop = " --stop " + quoted(std::string(1, static_cast<char>(stop)));
  for (const std::string& args :
       {std::string("--nproc 1 --set zero.stage=0"), std::string("--nproc 2"),
        std::string("--nproc 3"), std::string("--nproc 3 --set plugins.shard=shard_tensor"),
        std::string("--nproc 2 --set zero.stage=2"), std::string("--nproc 2 --set zero.stage=1")}) {
    CAPTURE(args);
    const auto got = sample(ckpt, dir.file("s.json"), args + with_stop);
    REQUIRE(got["samples"].size() == 4);
    for (size_t s = 0; s < 4; ++s) {
      CAPTURE(s);
      CHECK(got["samples"][s]["tokens"].get<std::vector<int64_t>>() == expected[s]);
      CHECK(got["samples"][s]["ended_by"] == ended_by[s]);
    }
  }
  // One sample at world 3: two ranks only keep the third company.
  const auto one = sample(ckpt, dir.file("one.json"), "--nproc 3 --samples 1" + with_stop);
  CHECK(one["samples"][0]["tokens"].get<std::vector<int64_t>>() == expected[0]);
}

TEST_CASE("trainer sample: --seed draws other text, --temperature 0 and --top-k 1 draw the most "
          "likely token whatever the seed") {
  TempDir dir;
  train_with_checkpoints(dir.file("out"));
  const std::string ckpt = dir.file("out/checkpoints");
  auto tokens_of = [](const nlohmann::json& got) {
    std::vector<std::vector<int64_t>> all;
    for (const auto& s : got["samples"]) all.push_back(s["tokens"].get<std::vector<int64_t>>());
    return all;
  };
  // sample() draws at temperature 0.9 from the top 20 with seed 5 unless these say otherwise.
  const auto seed5 = tokens_of(sample(ckpt, dir.file("a.json"), "--nproc 1"));
  const auto seed6 = tokens_of(sample(ckpt, dir.file("b.json"), "--nproc 1 --seed 6"));
  CHECK(seed5 != seed6);
  const auto greedy5 = tokens_of(sample(ckpt, dir.file("c.json"), "--nproc 1 --temperature 0"));
  const auto greedy6 = tokens_of(
      sample(ckpt, dir.file("d.json"), "--nproc 1 --temperature 0 --seed 6"));
  CHECK(greedy5 == greedy6);
  CHECK(greedy5 != seed5);
  const auto top1 = tokens_of(sample(ckpt, dir.file("e.json"), "--nproc 1 --top-k 1 --seed 6"));
  CHECK(top1 == greedy5);
  // A prompt past the model's context (seq_len 32, byte-level text: 32 characters) conditions the
  // samples by its last 32 tokens, as nanoGPT's sample.py crops, and says so: greedy, it draws
  // what its tail alone draws.
  const std::string long_prompt = "The quick brown fox jumps over the lazy dog, then sleeps.";
  const std::string tail = long_prompt.substr(long_prompt.size() - 32);
  const auto greedy_after = [&](const std::string& prompt, const std::string& out) {
    // A sample's "tokens" are the ones it drew, after the prompt.
    return tokens_of(
        sample(ckpt, dir.file(out), "--nproc 1 --temperature 0 --prompt " + quoted(prompt)))[0];
  };
  CHECK(greedy_after(long_prompt, "f.json") == greedy_after(tail, "g.json"));
  const auto said = run_command(trainer() + " sample --checkpoint " + ckpt +
                                " --nproc 1 --max-new-tokens 2 --prompt " + quoted(long_prompt));
  INFO(said.output);
  CHECK(contains(said.output, "note: the prompt is " + std::to_string(long_prompt.size()) +
                                  " tokens and the model's context 32: only its last 32 "
                                  "condition the samples"));
}

TEST_CASE("trainer eval and sample: bad input is a clear error before anything runs (exit 2, or 5 "
          "for an --out that cannot be written)") {
  TempDir dir;
  train_with_checkpoints(dir.file("out"));
  const std::string ckpt = dir.file("out/checkpoints");
  auto tokens = run_command(trainer() + " sample --checkpoint " + ckpt + " --tokens 10,300");
  CHECK(tokens.exit_code == 2);
  CHECK(contains(tokens.output, "--tokens id 300 (at position 1) is not a token of this model: "
                                "model.vocab = 256"));
  auto no_val = run_command(trainer() + " eval --checkpoint " + ckpt +
                            " --set data.val_fraction=0 --set eval.every_steps=0 "
                            "--set checkpoint.keep_best=''");
  CHECK(no_val.exit_code == 2);
  CHECK(contains(no_val.output, "trainer eval needs validation data"));
  auto missing = run_command(trainer() + " eval --checkpoint " + dir.file("nowhere"));
  CHECK(missing.exit_code == 2);
  CHECK(contains(missing.output, "not a checkpoint"));
  // --out under a file: said before the evaluation (it was said after the whole of it), at
  // world 2 as well (rank 0 makes the folder; rank 1 learns of its failure).
  zt::test::write_file(dir.file("a_file"), "in the way\n");
  auto unwritable = run_command(trainer() + " eval --checkpoint " + ckpt + " --nproc 2 --out " +
                                dir.file("a_file/eval.json"));
  CHECK(unwritable.exit_code == 5);
  CHECK(contains(unwritable.output, "cannot make " + dir.file("a_file") + " for --out " +
                                        dir.file("a_file/eval.json")));
  CHECK_FALSE(contains(unwritable.output, "validation loss"));
  // --out a folder: refused before the evaluation too (exit 2), where its rename failed after it.
  std::filesystem::create_directories(dir.file("results"));
  auto folder = run_command(trainer() + " eval --checkpoint " + ckpt + " --out " +
                            dir.file("results"));
  CHECK(folder.exit_code == 2);
  CHECK(contains(folder.output, "--out " + dir.file("results") + ": " + dir.file("results") +
                                    " is a folder, and this writes one file"));
  CHECK_FALSE(contains(folder.output, "validation loss"));
  // A bare token file (no index) names no tokenizer: a prompt's bytes are not its ids.
  {
    std::ofstream bare(dir.file("bare.bin"), std::ios::binary);
    const std::vector<uint16_t> ids(4000, 65);
    bare.write(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(uint16_t));
  }
  auto bare = run_command(trainer() + " sample --checkpoint " + ckpt +
                          " --set data.kind=tokens --set data.path=" + dir.file("bare.bin") +
                          " --prompt hi");
  CHECK(bare.exit_code == 2);
  CHECK(contains(bare.output, "--prompt cannot be encoded: data.kind = \"tokens\""));
  CHECK(contains(bare.output, dir.file("bare.idx") + " (the index trainer prepare-data writes"));
  auto no_flag = run_command(trainer() + " sample");
  CHECK(no_flag.exit_code == 2);
  CHECK(contains(no_flag.output, "trainer sample needs --checkpoint DIR"));
  auto keep_best = run_command(
      zt::test::small_gpt_job(dir.file("out3"), "--set checkpoint.keep_best=val_loss"));
  CHECK(keep_best.exit_code == 2);
  CHECK(contains(keep_best.output, "checkpoint.keep_best = \"val_loss\" ranks checkpoints by "
                                   "their validation loss, but eval.every_steps is 0"));
}

TEST_CASE("trainer sample: byte-level text with model.vocab past 256 draws bytes only") {
  // The ids past 255 are padding no text has; drawn, an id of 300 printed as the byte 44.
  TempDir dir;
  auto r = run_command(zt::test::small_gpt_job(
      dir.file("out"), "--set model.vocab=512 --set run.steps=1 --set checkpoint.every_steps=1"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // A flat distribution after one step (temperature 5, no top-k): half of 512 ids lie past 255.
  // --out in folders that do not exist yet: made, as eval's.
  r = run_command(trainer() + " sample --checkpoint " + dir.file("out/checkpoints") + " --out " +
                  dir.file("new/sub/s.json") +
                  " --samples 4 --max-new-tokens 32 --temperature 5 --seed 3 --nproc 1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto got = nlohmann::json::parse(read_file(dir.file("new/sub/s.json")));
  REQUIRE(got["samples"].size() == 4);
  for (const auto& s : got["samples"]) {
    const std::vector<int64_t> tokens = s["tokens"];
    CHECK(tokens.size() == 32);
    for (int64_t t : tokens) CHECK(t < 256);
  }
}

TEST_CASE("trainer eval and sample without --config load no plugin from the folders the "
          "checkpoint's recorded config names, and --plugin-dir does") {
  TempDir dir;
  // Trained with a plugin folder of its own (empty: the job's plugins come from the build).
  const std::string folder = dir.file("job-plugins");
  std::filesystem::create_directories(folder);
  auto r = run_command(zt::test::small_gpt_job(
      dir.file("out"), "--set run.steps=2 --set checkpoint.every_steps=2 --set 'plugins.dirs=[\"" +
                           folder + "\"]'"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // Then a checkpoint from elsewhere ships a library there under the name of a plugin the job
  // loads: searched first, it was loaded (here it is no library, so loading it fails loudly).
  zt::test::write_file(folder + "/libzt_comm_ucx.so", "not a shared library\n");
  const std::string ckpt = dir.file("out/checkpoints");
  r = run_command(trainer() + " sample --checkpoint " + ckpt + " --max-new-tokens 4");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  // Said once, by the process that speaks for the job (not by each rank, nor again after the
  // trainer's own restart at start-up).
  const std::string note = "names plugin folders (plugins.dirs: " + folder +
                           ") that are not searched: a checkpoint does not choose where code is "
                           "loaded from";
  CHECK(contains(r.output, note));
  CHECK(r.output.find(note) == r.output.rfind(note));
  // Named by the user, the folder is searched as before.
  r = run_command(trainer() + " sample --checkpoint " + ckpt + " --max-new-tokens 4 --plugin-dir " +
                  folder);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, folder + "/libzt_comm_ucx.so"));
}
