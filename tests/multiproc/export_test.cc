// trainer export and model.init_from, end to end: a checkpoint of a 2-rank stage-3 run exported
// under Hugging Face GPT-2 names in HF's Conv1D layout (every tensor's values equal to the
// checkpoint's, bf16 and fp16 rounded to nearest even), an MLP under its own names, the errors for
// a folder that is not a checkpoint and an unwritable --out, and the round trip: a run started from
// the export of step 2 computes exactly the loss the checkpointed run computed at step 3.
#include <c10/util/Half.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../test_util.h"
#include "small_gpt_job.h"
#include "zt/host/checkpoint.h"
#include "zt/host/safetensors.h"

using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

// The file's tensor `name`; fails the case (rather than crash) when the file lacks it.
const zt::SafetensorsEntry& entry(const zt::SafetensorsReader& file, const std::string& name) {
  const zt::SafetensorsEntry* e = file.find(name);
  REQUIRE_MESSAGE(e != nullptr, "no tensor " << name);
  return *e;
}

std::string trainer() { return ZT_TEST_TRAINER; }

std::string small_gpt(const std::string& out_dir, const std::string& data,
                      const std::string& extra) {
  return zt::test::small_gpt_job(out_dir, extra, data);
}

std::string export_cmd(const std::string& checkpoint, const std::string& out,
                       const std::string& dtype = "fp32") {
  return trainer() + " export --checkpoint " + checkpoint + " --out " + out + " --dtype " + dtype;
}

template <typename T>
std::vector<T> read_entry(const zt::SafetensorsReader& file, const std::string& name) {
  const zt::SafetensorsEntry& e = entry(file, name);
  std::vector<T> out(static_cast<size_t>(e.end - e.begin) / sizeof(T));
  file.read(e, 0, out.data(), e.end - e.begin);
  return out;
}

std::vector<float> param_of(const zt::CheckpointReader& ckpt, const std::string& name) {
  const zt::CheckpointTensor* t = ckpt.find_tensor(name);
  REQUIRE_MESSAGE(t != nullptr, name);
  std::vector<float> out(static_cast<size_t>(t->numel()));
  ckpt.read(name, "param", 0, t->numel(), out.data());
  return out;
}

// fp32 -> bf16 rounded to nearest, ties to even (what at::Tensor::to(kBFloat16) does for
// finite values), spelled out independently of LibTorch.
uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// Hugging Face GPT-2's name of each tensor of zt's GPT of `layers` blocks, spelled out here as
// its model files name them, and whether HF keeps it transposed (Conv1D: [in, out], where zt's
// linear layers are [out, in]).
struct HfName {
  std::string zt, hf;
  bool transposed;
};
std::vector<HfName> gpt2_names(int layers) {
  std::vector<HfName> names{{"wte.weight", "transformer.wte.weight", false},
                            {"wpe.weight", "transformer.wpe.weight", false},
                            {"ln_f.weight", "transformer.ln_f.weight", false},
                            {"ln_f.bias", "transformer.ln_f.bias", false}};
  const std::pair<const char*, const char*> linear[] = {{"attn.qkv", "attn.c_attn"},
                                                        {"attn.proj", "attn.c_proj"},
                                                        {"mlp.fc", "mlp.c_fc"},
                                                        {"mlp.proj", "mlp.c_proj"}};
  for (int i = 0; i < layers; ++i) {
    const std::string zt = "block" + std::to_string(i) + ".",
                      hf = "transformer.h." + std::to_string(i) + ".";
    for (const auto& [ln, hf_ln] : {std::pair{"ln1", "ln_1"}, std::pair{"ln2", "ln_2"}}) {
      names.push_back({zt + ln + ".weight", hf + hf_ln + ".weight", false});
      names.push_back({zt + ln + ".bias", hf + hf_ln + ".bias", false});
    }
    for (const auto& [ours, theirs] : linear) {
      names.push_back({zt + ours + ".weight", hf + theirs + ".weight", true});
      names.push_back({zt + ours + ".bias", hf + theirs + ".bias", false});
    }
  }
  return names;
}

// [rows, cols] row-major -> its transpose.
std::vector<float> transposed(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> out(m.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = m[r * cols + c];
  }
  return out;
}

}  // namespace

TEST_CASE("export: a stage-3 checkpoint as Hugging Face GPT-2 safetensors, fp32 and bf16") {
  TempDir dir;
  auto r = run_command(small_gpt(dir.path().string(), ZT_TEST_CORPUS,
                                 "--set run.steps=2 --set checkpoint.every_steps=2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string checkpoints = dir.file("checkpoints"), out = dir.file("m.safetensors");
  r = run_command(export_cmd(checkpoints, out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "exported step 2 of "));
  CHECK(contains(r.output, ": 28 tensors, "));
  CHECK(contains(r.output, "fp32"));
  CHECK(contains(r.output, "Hugging Face GPT-2 names, n_head 2 -> " + out));
  CHECK_FALSE(zt::test::file_starting_with(out + ".tmp"));

  zt::SafetensorsReader file(out);
  CHECK(file.metadata().at("format") == "pt");
  // The heads, which no shape tells: recorded, printed, and checked by model.init_from (a file
  // of 2 heads loaded into 4 computed another function without a word).
  CHECK(file.metadata().at("zt.n_head") == "2");
  // With the sizes the shapes tell, the GPT2Config the file fits: recorded and printed.
  const std::string config = "GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, "
                             "n_head=2)";
  CHECK(file.metadata().at("zt.gpt2_config") == config);
  CHECK(contains(r.output, "GPT2LMHeadModel(" + config + ") takes its tensors"));
  // Not named model.safetensors: no config.json beside it.
  CHECK_FALSE(std::filesystem::exists(dir.file("config.json")));
  // Named as Hugging Face names a model's weights: its config.json beside it, the same sizes
  // (and GPT-2's tanh GELU, tied head) in GPT2Config's keys, for from_pretrained(folder).
  std::filesystem::create_directories(dir.file("hf"));
  const auto hf = run_command(export_cmd(checkpoints, dir.file("hf/model.safetensors"), "bf16"));
  INFO(hf.output);
  REQUIRE(hf.exit_code == 0);
  CHECK(contains(hf.output, dir.file("hf/config.json") + " beside it"));
  const nlohmann::json hf_config = nlohmann::json::parse(
      zt::test::read_file(dir.file("hf/config.json")));
  CHECK(hf_config["model_type"] == "gpt2");
  CHECK(hf_config["architectures"][0] == "GPT2LMHeadModel");
  CHECK(hf_config["vocab_size"] == 256);
  CHECK(hf_config["n_positions"] == 32);
  CHECK(hf_config["n_embd"] == 64);
  CHECK(hf_config["n_layer"] == 2);
  CHECK(hf_config["n_head"] == 2);
  CHECK(hf_config["activation_function"] == "gelu_new");
  CHECK(hf_config["tie_word_embeddings"] == true);
  CHECK(hf_config["torch_dtype"] == "bfloat16");
  CHECK_FALSE(zt::test::file_starting_with(dir.file("hf/config.json.tmp")));
  // An export that fails while it writes the weights (a piece of a parameter damaged, found by
  // its checksum as it is read) leaves the folder's pair as it was: the weights and the
  // config.json of their model, not that config beside a half-made model or the reverse.
  const std::string damaged = dir.file("damaged/step-00000002");
  std::filesystem::create_directories(dir.file("damaged"));
  std::filesystem::copy(checkpoints + "/step-00000002", damaged);
  r = run_command("python3 -c 'import json, struct, sys; p = sys.argv[1]; b = bytearray(open(p, "
                  "\"rb\").read()); "
                  "n = struct.unpack(\"<Q\", b[:8])[0]; h = json.loads(b[8:8 + n]); "
                  "k = sorted(k for k in h if k.startswith(\"param/\"))[-1]; "
                  "o = 8 + n + h[k][\"data_offsets\"][0]; b[o:o + 4] = struct.pack(\"<f\", 1e30); "
                  "open(p, \"wb\").write(b)' " +
                  damaged + "/rank-00001-of-00002.safetensors");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const std::string pair_weights = zt::test::read_file(dir.file("hf/model.safetensors")),
                    pair_config = zt::test::read_file(dir.file("hf/config.json"));
  const auto failed = run_command(export_cmd(damaged, dir.file("hf/model.safetensors")));
  INFO(failed.output);
  CHECK(failed.exit_code == 5);
  CHECK(contains(failed.output, "checksum mismatch in "));
  CHECK(zt::test::read_file(dir.file("hf/model.safetensors")) == pair_weights);
  CHECK(zt::test::read_file(dir.file("hf/config.json")) == pair_config);
  CHECK_FALSE(zt::test::file_starting_with(dir.file("hf/config.json.tmp")));
  CHECK_FALSE(zt::test::file_starting_with(dir.file("hf/model.safetensors.tmp")));
  // model.init_from of that folder's file reads the config.json beside it: as written, it loads;
  // a GPT2Config zt's GPT does not compute (another GELU), or other heads, is refused by name.
  const std::string from_hf = "--set run.steps=1 --set model.init_from=" +
                              dir.file("hf/model.safetensors");
  auto loads = run_command(small_gpt(dir.file("from_hf"), ZT_TEST_CORPUS, from_hf));
  INFO(loads.output);
  CHECK(loads.exit_code == 0);
  nlohmann::json other = hf_config;
  other["activation_function"] = "gelu";
  zt::test::write_file(dir.file("hf/config.json"), other.dump());
  auto gelu = run_command(small_gpt(dir.file("gelu"), ZT_TEST_CORPUS, from_hf));
  INFO(gelu.output);
  CHECK(gelu.exit_code == 2);
  CHECK(contains(gelu.output, dir.file("hf/config.json") +
                                  " beside the file says activation_function = \"gelu\""));
  other = hf_config;
  other["n_head"] = 4;
  zt::test::write_file(dir.file("hf/config.json"), other.dump());
  auto four = run_command(small_gpt(dir.file("four"), ZT_TEST_CORPUS, from_hf));
  INFO(four.output);
  CHECK(four.exit_code == 2);
  CHECK(contains(four.output, "says n_head = 4, but this model has 2"));
  const auto heads = run_command(small_gpt(dir.file("tuned"), ZT_TEST_CORPUS,
                                           "--set run.steps=1 --set model.n_head=4 "
                                           "--set model.init_from=" +
                                               out));
  INFO(heads.output);
  CHECK(heads.exit_code == 2);
  CHECK(contains(heads.output, "the file holds a GPT of 2 attention heads (its zt.n_head"));
  CHECK(contains(heads.output, "set model.n_head = 2"));
  std::set<std::string> names;
  for (const auto& e : file.entries()) {
    names.insert(e.name);
    CHECK(e.dtype == "F32");
  }
  CHECK(names.size() == 28);  // 4 outside the blocks + 12 per block; no lm_head
  CHECK(names.count("transformer.wte.weight"));
  CHECK(names.count("transformer.h.1.mlp.c_proj.bias"));
  CHECK_FALSE(names.count("lm_head.weight"));
  CHECK(entry(file, "transformer.wte.weight").shape == std::vector<int64_t>{256, 64});
  CHECK(entry(file, "transformer.h.0.attn.c_attn.weight").shape == std::vector<int64_t>{64, 192});
  CHECK(entry(file, "transformer.h.0.mlp.c_fc.weight").shape == std::vector<int64_t>{64, 256});
  CHECK(entry(file, "transformer.h.1.mlp.c_proj.weight").shape == std::vector<int64_t>{256, 64});
  CHECK(entry(file, "transformer.h.0.attn.c_attn.bias").shape == std::vector<int64_t>{192});

  // Every tensor under its HF name, in HF's layout, equal to the checkpoint's parameter; in the
  // bf16 and fp16 files each value rounded to nearest even.
  const zt::CheckpointReader ckpt(zt::resolve_checkpoint(checkpoints));
  const std::string out_bf16 = dir.file("m-bf16.safetensors");
  r = run_command(
      export_cmd(checkpoints + "/" + std::filesystem::path(ckpt.folder()).filename().string(),
                 out_bf16, "bf16"));
  REQUIRE(r.exit_code == 0);
  r = run_command(export_cmd(checkpoints, dir.file("m-fp16.safetensors"), "fp16"));
  REQUIRE(r.exit_code == 0);
  const zt::SafetensorsReader bf16(out_bf16), fp16(dir.file("m-fp16.safetensors"));
  const std::vector<HfName> mapped = gpt2_names(2);
  REQUIRE(mapped.size() == names.size());
  for (const HfName& n : mapped) {
    CAPTURE(n.hf);
    CHECK(names.count(n.hf) == 1);
    const zt::CheckpointTensor* t = ckpt.find_tensor(n.zt);
    REQUIRE_MESSAGE(t != nullptr, n.zt);
    std::vector<float> want = param_of(ckpt, n.zt);
    if (n.transposed) want = transposed(want, t->shape.at(0), t->shape.at(1));
    std::vector<int64_t> hf_shape = t->shape;
    if (n.transposed) std::swap(hf_shape.at(0), hf_shape.at(1));
    CHECK(entry(file, n.hf).shape == hf_shape);
    CHECK(read_entry<float>(file, n.hf) == want);
    CHECK(entry(bf16, n.hf).dtype == "BF16");
    CHECK(entry(fp16, n.hf).dtype == "F16");
    CHECK(entry(fp16, n.hf).shape == hf_shape);
    const std::vector<uint16_t> got_bf16 = read_entry<uint16_t>(bf16, n.hf),
                                got_fp16 = read_entry<uint16_t>(fp16, n.hf);
    REQUIRE(got_bf16.size() == want.size());
    REQUIRE(got_fp16.size() == want.size());
    size_t bf16_differ = 0, fp16_differ = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      bf16_differ += got_bf16[i] != bf16_bits(want[i]);
      fp16_differ += got_fp16[i] != c10::Half(want[i]).x;
    }
    CHECK(bf16_differ == 0);
    CHECK(fp16_differ == 0);
  }
}

TEST_CASE("export: an MLP keeps zt's names, and a bad --checkpoint or --out gives a clear error") {
  TempDir dir;
  auto r = run_command(trainer() +
                       " --config " ZT_TEST_SOURCE_DIR "/configs/zero3.toml --set model.kind=mlp "
                       "--set model.width=24 --set model.depth=2 "
                       "--set data.kind=synthetic --set run.steps=2 "
                       "--set checkpoint.every_steps=2 --set run.out_dir=" +
                       dir.path().string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_command(export_cmd(dir.file("checkpoints"), dir.file("mlp.safetensors")));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, ": 4 tensors, 1200 parameters, fp32"));
  CHECK(contains(r.output, "the model's own names"));
  zt::SafetensorsReader file(dir.file("mlp.safetensors"));
  const zt::CheckpointReader ckpt(zt::resolve_checkpoint(dir.file("checkpoints")));
  CHECK(entry(file, "layer1.weight").shape == std::vector<int64_t>{24, 24});
  CHECK(read_entry<float>(file, "layer1.weight") == param_of(ckpt, "layer1.weight"));

  r = run_command(export_cmd(ZT_TEST_SOURCE_DIR "/configs", dir.file("x.safetensors")));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "zt: config error: "));
  CHECK(contains(r.output, "not a checkpoint"));
  CHECK_FALSE(std::filesystem::exists(dir.file("x.safetensors")));

  const std::string unwritable = dir.file("no-such-folder/m.safetensors");
  r = run_command(export_cmd(dir.file("checkpoints"), unwritable));
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "zt: io error: trainer export --out " + unwritable));
  CHECK_FALSE(zt::test::file_starting_with(unwritable + ".tmp"));

  // A folder for --out (meant as Hugging Face's folder): refused before anything is written,
  // where the whole export was written and then lost at its rename.
  std::filesystem::create_directories(dir.file("hf"));
  r = run_command(export_cmd(dir.file("checkpoints"), dir.file("hf")));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, dir.file("hf") + " is a folder, and this writes one file"));
  CHECK(std::filesystem::is_empty(dir.file("hf")));
}

TEST_CASE(
    "export round trip: init_from the step-2 export computes the checkpointed step 3's loss") {
  TempDir dir;
  // Exactly seq_len + 1 bytes: one window, so every sample of every step is the same and the
  // two runs below see the same batch at their steps 3 and 1.
  const std::string data = dir.file("one-window.txt");
  zt::test::write_file(data, "zt exports weights to safetensors");
  REQUIRE(std::filesystem::file_size(data) == 33);
  auto r = run_command(
      small_gpt(dir.file("first"), data, "--set run.steps=3 --set checkpoint.every_steps=2"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::vector<double> first = zt::test::losses_of(dir.file("first/metrics.jsonl"));
  REQUIRE(first.size() == 3);

  const std::string weights = dir.file("step2.safetensors");
  r = run_command(export_cmd(dir.file("first/checkpoints/step-00000002"), weights));
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "exported step 2 of "));

  // A manifest from elsewhere whose attention matrix is one row of as many values (its pieces
  // still cover it): the shape was swapped as a matrix's, past the end of its one dimension.
  const std::string damaged = dir.file("damaged/step-00000002");
  std::filesystem::create_directories(dir.file("damaged"));
  std::filesystem::copy(dir.file("first/checkpoints/step-00000002"), damaged);
  r = run_command(
      "python3 -c 'import json, sys, zlib; d = sys.argv[1]; "
      "m = json.load(open(d + \"/manifest.json\")); "
      "t = [t for t in m[\"tensors\"] if t[\"name\"] == \"block0.attn.qkv.weight\"][0]; "
      "t[\"shape\"] = [t[\"shape\"][0] * t[\"shape\"][1]]; text = json.dumps(m); "
      "open(d + \"/manifest.json\", \"w\").write(text); "
      "open(d + \"/manifest.json.crc32\", \"w\").write(\"%08x\\n\" % zlib.crc32(text.encode()))' " +
      damaged);
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  r = run_command(export_cmd(damaged, dir.file("damaged.safetensors")));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "tensor 'block0.attn.qkv.weight' has 1 dimensions; a GPT's "
                           "transformer.h.0.attn.c_attn.weight is a matrix"));
  CHECK_FALSE(std::filesystem::exists(dir.file("damaged.safetensors")));

  r = run_command(
      small_gpt(dir.file("second"), data, "--set run.steps=1 --set model.init_from=" + weights));
  REQUIRE(r.exit_code == 0);
  const std::vector<double> second = zt::test::losses_of(dir.file("second/metrics.jsonl"));
  REQUIRE(second.size() == 1);
  CHECK(second[0] == first[2]);
  // The seeded init alone gives the first run's step-1 loss, not this one.
  CHECK(second[0] != first[0]);

  // Resumed (a requeued fine-tune), the job loads its checkpoint and does not read the
  // init_from file again: moved away since, it fails nothing.
  r = run_command(small_gpt(dir.file("second"), data,
                            "--set run.steps=2 --set checkpoint.every_steps=1 --set "
                            "model.init_from=" +
                                weights));
  REQUIRE(r.exit_code == 0);
  std::filesystem::rename(weights, weights + ".moved");
  r = run_command(
      small_gpt(dir.file("second"), data,
                "--set run.steps=3 --set model.init_from=" + weights + " --resume auto"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "resumed from"));
  std::filesystem::rename(weights + ".moved", weights);

  r = run_command(
      small_gpt(dir.file("third"), data,
                "--set run.steps=1 --set model.n_layer=3 --set model.init_from=" + weights));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "model.init_from = \"" + weights + "\" (--set model.init_from="));
  CHECK(contains(r.output, "the file has no tensor 'transformer.h.2.ln_1.weight'"));
}
