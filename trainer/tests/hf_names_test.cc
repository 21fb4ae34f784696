// Exported weights: zt GPT names <-> Hugging Face GPT-2 names (both ways, the Conv1D transposes,
// no LM head), and model.init_from loading safetensors files exactly (F32, BF16, with or without
// HF's prefix and buffers), with a clear error for a file of another model.
#include <ATen/ATen.h>

#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../../tests/test_util.h"
#include "models/hf_names.h"
#include "models/init_from.h"
#include "models/model.h"
#include "settings/trainer_config.h"
#include "zt/error.h"
#include "zt/host/safetensors.h"

using zt::models::exported_name;
using zt::models::Model;
using zt::models::ModelShape;
using zt::models::zt_name_of;
using zt::test::contains;

namespace {

ModelShape gpt_shape(int64_t n_layer = 2, int64_t d_model = 8) {
  ModelShape s;
  s.kind = "gpt";
  s.preset = "custom";
  s.n_layer = n_layer;
  s.n_head = 2;
  s.d_model = d_model;
  s.seq_len = 4;
  s.vocab = 11;
  return s;
}

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// A GPT's parameters as HF lays them out: HF names (prefix optional), Conv1D weights [in, out].
// The Conv1D modules are spelled out here, independently of hf_names.cc's table.
NamedTensors hf_layout(const Model& model, bool with_prefix) {
  NamedTensors out;
  for (const auto& [name, t] : zt::models::unique_parameters(model)) {
    std::string hf = exported_name("gpt", name).name;
    if (!with_prefix) hf = hf.substr(std::string("transformer.").size());
    const bool conv1d = contains(hf, ".c_attn.weight") || contains(hf, ".c_proj.weight") ||
                        contains(hf, ".c_fc.weight");
    out.emplace_back(hf, conv1d ? t.t() : t);
  }
  return out;
}

// Writes `tensors` converted to `dtype` ("F32", "BF16", "F16") with SafetensorsWriter.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::string& dtype = "F32") {
  const std::map<std::string, at::ScalarType> kScalar = {
      {"F32", at::kFloat}, {"BF16", at::kBFloat16}, {"F16", at::kHalf}, {"I64", at::kLong}};
  zt::SafetensorsWriter writer;
  std::vector<at::Tensor> values;
  for (const auto& [name, t] : tensors) {
    values.push_back(t.to(kScalar.at(dtype)).contiguous());
    writer.add(name, dtype, t.sizes().vec());
  }
  writer.set_metadata("format", "pt");
  writer.open(path);
  for (size_t i = 0; i < values.size(); ++i) {
    writer.write(static_cast<int64_t>(i), 0, values[i].data_ptr(),
                 values[i].numel() * values[i].element_size());
  }
  writer.close();
}

std::map<std::string, at::Tensor> params_of(const Model& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : zt::models::unique_parameters(model)) out[name] = t.clone();
  return out;
}

template <typename E>
std::string load_error(Model& model, const std::string& path) {
  return zt::test::error_of<E>([&] { zt::models::load_weights(model, path, "job.toml:7:1"); });
}

}  // namespace

TEST_CASE("hf names: every GPT parameter maps to GPT-2's name and back") {
  auto model = zt::models::make_model(gpt_shape(), 1);
  std::set<std::string> names, transposed;
  std::vector<std::string> zt_names;
  for (const auto& [name, t] : zt::models::unique_parameters(*model)) {
    zt_names.push_back(name);
    const auto e = exported_name("gpt", name);
    names.insert(e.name);
    if (e.transpose) transposed.insert(e.name);
    const auto back = zt_name_of("gpt", e.name);
    REQUIRE(back.has_value());
    CHECK(back->name == name);
    CHECK(back->transpose == e.transpose);
    // HF writes GPT-2 files without the prefix too.
    const auto bare = zt_name_of("gpt", e.name.substr(std::string("transformer.").size()));
    REQUIRE(bare.has_value());
    CHECK(bare->name == name);
  }
  CHECK(zt::models::model_kind_of(zt_names) == "gpt");
  std::set<std::string> expected = {"transformer.wte.weight", "transformer.wpe.weight",
                                    "transformer.ln_f.weight", "transformer.ln_f.bias"};
  std::set<std::string> expected_transposed;
  for (int i = 0; i < 2; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    for (const char* m : {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"}) {
      expected.insert(h + m + ".weight");
      expected.insert(h + m + ".bias");
    }
    for (const char* m : {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}) {
      expected_transposed.insert(h + m + ".weight");
    }
  }
  CHECK(names == expected);  // the tied LM head is the wte: no lm_head.weight
  CHECK(transposed == expected_transposed);
  CHECK(zt_names.size() == expected.size());
}

TEST_CASE("hf names: HF's buffers and LM head are skipped, other names are no parameter") {
  CHECK(zt::models::is_ignored_hf_tensor("lm_head.weight"));
  CHECK(zt::models::is_ignored_hf_tensor("transformer.h.0.attn.bias"));
  CHECK(zt::models::is_ignored_hf_tensor("h.11.attn.masked_bias"));
  CHECK_FALSE(zt::models::is_ignored_hf_tensor("transformer.h.0.attn.c_attn.bias"));
  CHECK_FALSE(zt::models::is_ignored_hf_tensor("transformer.wte.weight"));
  CHECK_FALSE(zt_name_of("gpt", "lm_head.weight").has_value());
  CHECK_FALSE(zt_name_of("gpt", "transformer.h.0.attn.bias").has_value());
  CHECK_FALSE(zt_name_of("gpt", "transformer.h.x.ln_1.weight").has_value());
  CHECK_FALSE(zt_name_of("gpt", "transformer.h.0.ln_3.weight").has_value());
  CHECK(zt_name_of("gpt", "h.10.mlp.c_proj.bias")->name == "block10.mlp.proj.bias");
  CHECK_THROWS_AS(exported_name("gpt", "block0.attn.rotary.weight"), zt::InternalError);
}

TEST_CASE("hf names: an MLP keeps its own names, untransposed") {
  ModelShape s;
  s.kind = "mlp";
  s.width = 5;
  s.depth = 2;
  s.activation = "relu";
  auto model = zt::models::make_model(s, 1);
  std::vector<std::string> names;
  for (const auto& [name, t] : zt::models::unique_parameters(*model)) {
    names.push_back(name);
    CHECK(exported_name("mlp", name).name == name);
    CHECK_FALSE(exported_name("mlp", name).transpose);
    CHECK(zt_name_of("mlp", name)->name == name);
  }
  CHECK(zt::models::model_kind_of(names) == "mlp");
}

TEST_CASE("init_from: a GPT-2 layout file loads every parameter exactly, transposes included") {
  zt::test::TempDir dir;
  auto source = zt::models::make_model(gpt_shape(), 1);
  for (bool with_prefix : {true, false}) {
    NamedTensors tensors = hf_layout(*source, with_prefix);
    // What HF's GPT2LMHeadModel files may hold besides the parameters: the tied head again.
    at::Tensor wte;
    for (const auto& [name, t] : tensors) {
      if (name == (with_prefix ? "transformer.wte.weight" : "wte.weight")) wte = t;
    }
    REQUIRE(wte.defined());
    tensors.emplace_back("lm_head.weight", wte.clone());
    tensors.emplace_back(with_prefix ? "transformer.h.0.attn.bias" : "h.0.attn.bias",
                         at::ones({1, 1, 4, 4}));
    const std::string path = dir.file(with_prefix ? "a.safetensors" : "b.safetensors");
    write_safetensors(path, tensors);
    auto target = zt::models::make_model(gpt_shape(), 2);
    auto before = params_of(*target);
    zt::models::load_weights(*target, path, "test");
    auto expected = params_of(*source);
    for (const auto& [name, t] : zt::models::unique_parameters(*target)) {
      INFO(name);
      CHECK(at::equal(t, expected.at(name)));
      if (name.find("ln") == std::string::npos && name.find("bias") == std::string::npos) {
        CHECK_FALSE(at::equal(t, before.at(name)));  // the seeds differ: something was loaded
      }
    }
    // The LM head reads the same (tied) tensor as the embedding.
    at::Tensor head_wte;
    for (const auto& [name, t] : target->units.back()->parameters()) {
      if (name == "wte.weight") head_wte = t;
    }
    CHECK(at::equal(head_wte, expected.at("wte.weight")));
  }
  // An untied head (tie_word_embeddings = False) is refused: it used to be dropped silently.
  NamedTensors untied = hf_layout(*source, true);
  untied.emplace_back("lm_head.weight", at::zeros({11, 8}));
  write_safetensors(dir.file("untied.safetensors"), untied);
  auto target = zt::models::make_model(gpt_shape(), 2);
  CHECK_THROWS_WITH_AS(zt::models::load_weights(*target, dir.file("untied.safetensors"), "test"),
                       doctest::Contains("lm_head.weight differs from its transformer.wte.weight"),
                       zt::ConfigError);
}

TEST_CASE("init_from: a BF16 file converts to fp32, and model.init_from in a config applies it") {
  zt::test::TempDir dir;
  auto source = zt::models::make_model(gpt_shape(), 1);
  const std::string path = dir.file("m.safetensors");
  write_safetensors(path, hf_layout(*source, true), "BF16");
  const std::string toml =
      "[run]\ntask = \"smoke\"\nseed = 5\n[plugins]\ncomm = \"\"\n[model]\nkind = \"gpt\"\n"
      "preset = \"custom\"\nn_layer = 2\nn_head = 2\nd_model = 8\nseq_len = 4\nvocab = 11\n";
  auto config = zt::trainer::load_config_string(toml + "init_from = \"" + path + "\"\n",
                                                "test.toml");
  auto target = zt::models::make_model(zt::trainer::JobSettings::of(config).model,
                                       config.catalog());
  auto expected = params_of(*source);
  for (const auto& [name, t] : zt::models::unique_parameters(*target)) {
    INFO(name);
    CHECK((t.scalar_type() == at::kFloat));
    CHECK(at::equal(t, expected.at(name).to(at::kBFloat16).to(at::kFloat)));
  }
}

TEST_CASE("init_from: an MLP file loads under zt's own names") {
  zt::test::TempDir dir;
  ModelShape s;
  s.kind = "mlp";
  s.width = 6;
  s.depth = 3;
  s.activation = "gelu";
  auto source = zt::models::make_model(s, 1);
  write_safetensors(dir.file("m.safetensors"), zt::models::unique_parameters(*source), "F16");
  auto target = zt::models::make_model(s, 2);
  zt::models::load_weights(*target, dir.file("m.safetensors"), "test");
  auto expected = params_of(*source);
  for (const auto& [name, t] : zt::models::unique_parameters(*target)) {
    CHECK(at::equal(t, expected.at(name).to(at::kHalf).to(at::kFloat)));
  }
}

TEST_CASE("init_from: a file of another model is refused, naming the tensor, before any load") {
  zt::test::TempDir dir;
  auto model = zt::models::make_model(gpt_shape(), 2);
  const auto before = params_of(*model);

  const std::string wide = dir.file("wide.safetensors");
  write_safetensors(wide, hf_layout(*zt::models::make_model(gpt_shape(2, 12), 1), true));
  std::string e = load_error<zt::ConfigError>(*model, wide);
  CHECK(contains(e, "model.init_from = \"" + wide + "\" (job.toml:7:1)"));
  CHECK(contains(e, "tensor 'transformer.wte.weight' is [11, 12] in the file"));
  CHECK(contains(e, "needs [11, 8]"));
  CHECK(contains(e, "the file is of another model size: check [model], model.d_model differs "
                    "from the file's"));
  // Another vocabulary (GPT-2's 50257 against byte-level text's 256): the key named.
  ModelShape words = gpt_shape();
  words.vocab = 13;
  const std::string vocab = dir.file("vocab.safetensors");
  write_safetensors(vocab, hf_layout(*zt::models::make_model(words, 1), true));
  e = load_error<zt::ConfigError>(*model, vocab);
  CHECK(contains(e, "is [13, 8] in the file"));
  CHECK(contains(e, "model.vocab (byte-level text, data.kind = \"text\", makes it 256 unless set) "
                    "differs from the file's"));

  NamedTensors tensors = hf_layout(*zt::models::make_model(gpt_shape(), 1), true);
  tensors.pop_back();  // the last parameter (ln_f.bias)
  const std::string missing = dir.file("missing.safetensors");
  write_safetensors(missing, tensors);
  e = load_error<zt::ConfigError>(*model, missing);
  CHECK(contains(e, "the file has no tensor 'transformer.ln_f.bias' (model parameter ln_f.bias)"));
  CHECK(contains(e, "it holds 27 tensors: transformer.wte.weight, transformer.wpe.weight"));

  const std::string deeper = dir.file("deeper.safetensors");
  write_safetensors(deeper, hf_layout(*zt::models::make_model(gpt_shape(3), 1), true));
  e = load_error<zt::ConfigError>(*model, deeper);
  CHECK(contains(e, "the file's tensor 'transformer.h.2."));
  CHECK(contains(e, "is no parameter of the model"));

  tensors = hf_layout(*zt::models::make_model(gpt_shape(), 1), true);
  const std::string ints = dir.file("ints.safetensors");
  write_safetensors(ints, tensors, "I64");
  e = load_error<zt::ConfigError>(*model, ints);
  CHECK(contains(e, "is I64; zt loads weights of dtype F32, BF16 or F16"));

  e = load_error<zt::IoError>(*model, dir.file("nothing.safetensors"));
  CHECK(contains(e, "model.init_from = \"" + dir.file("nothing.safetensors") + "\""));

  for (const auto& [name, t] : zt::models::unique_parameters(*model)) {
    CHECK(at::equal(t, before.at(name)));  // every file was refused before a tensor changed
  }
}
