// Models zt did not build in: TorchScript files saved from PyTorch (model.kind = "torchscript")
// and a model plugin (model.kind = "plugin"), end to end through the trainer.
// Parity: Debian's python3-torch (the same LibTorch 1.13) makes a small GPT (tied head, mask
// buffers) and a CNN, and trains each with PyTorch's own torch.optim.AdamW in one process on the
// global batches zt's data source gives; zt trains the same file at stages 0-3 on 1-3 ranks,
// both strategies and offload, and every exported parameter must match PyTorch's within the
// engine oracle's fp32 tolerance. Where python3-torch is missing these cases say so and pass
// without checking (scripts/setup.sh installs it).
// The model plugin (examples/model_plugin, built in) is checked against LibTorch's AdamW on the
// same units in this process.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../skip.h"
#include "../test_util.h"
#include "checkpoint_files.h"
#include "data/data_source.h"
#include "models/model.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "setup/memory_fit.h"
#include "zt/host/config.h"
#include "zt/host/safetensors.h"

using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

constexpr int kSteps = 4;
constexpr int kGlobalBatch = 6;  // divides by 1, 2 and 3 ranks
constexpr double kLr = 1e-3, kWeightDecay = 0.1;
// Ranks sum a gradient in another order than one process does, so a gradient that is a near
// cancellation (|g| far below eps) differs in its last bits, and Adam turns that into an update
// error of about lr * rounding / eps. At eps 1e-8 that exceeds the oracle's 1e-5 on 3 ranks for
// a few such elements (measured: 2.4e-5 on one element of 27,840; 2 ranks, where the mean is an
// exact halving, match); eps 1e-6 bounds the magnification without changing any other term.
constexpr double kEps = 1e-6;

const char* kPython = ZT_TEST_PYTHON;
const std::string kModelsScript = ZT_TEST_SOURCE_DIR "/tests/torchscript/torchscript_models.py";

// Why these tests cannot run here ("" when they can): the Python has no torch.
const std::string& torch_missing() {
  static const std::string why = [] {
    const auto r = run_command(std::string(kPython) + " -c 'import torch'");
    if (r.exit_code == 0) return std::string();
    return "python3-torch (" + std::string(kPython) +
           ") does not import torch, so parity with PyTorch is not checked here "
           "(scripts/setup.sh installs it): " +
           r.output;
  }();
  return why;
}

// Skips the case (fails it under CI) where torch does not import.
#define ZT_SKIP_WITHOUT_TORCH() \
  if (!torch_missing().empty()) ZT_SKIP_UNLESS_CI(torch_missing())

// The models folder, made once per process. Where torch imports, the script failing to make
// them is a failure of the test, not a reason to skip it: throws.
const std::string& models_dir() {
  static TempDir dir;
  static const std::string made = [] {
    const auto r = run_command(std::string(kPython) + " " + kModelsScript + " make " +
                               dir.path().string());
    if (r.exit_code != 0) {
      throw std::runtime_error(kModelsScript + " make failed with torch importable: " + r.output);
    }
    return dir.path().string();
  }();
  return made;
}

struct ScriptModel {
  const char* file;
  const char* model_keys;  // [model] lines besides kind and path
  const char* loss;        // the reference's loss: cross_entropy | mse | method
};

const ScriptModel kGpt{"gpt.pt", "seq_len = 16\nvocab = 64\n", "cross_entropy"};
const ScriptModel kCnn{"cnn.pt", "input_shape = [3, 8, 8]\ntarget_shape = [10]\n", "method"};
// b(a(x)) + x: a residual in the parent, not a chain of its units.
const ScriptModel kNotChain{"not_sequential.pt", "input_shape = [4]\ntarget_shape = [4]\n", "mse"};

std::string job_toml(const std::string& model_lines, const std::string& out_dir, int world,
                     int stage) {
  return "[run]\nsteps = " + std::to_string(kSteps) + "\nseed = 1234\nlog_every = 1\nout_dir = \"" +
         out_dir + "\"\n[launch]\nnproc = " + std::to_string(world) + "\n[model]\n" + model_lines +
         "[data]\nkind = \"synthetic\"\nmicro_batch = " + std::to_string(kGlobalBatch / world) +
         "\n[zero]\nstage = " + std::to_string(stage) +
         "\n[plugins]\nshard = \"shard_bucket\"\noptimizer = \"optim_hybrid_adam\"\n"
         "[plugin.optim_hybrid_adam]\nlr = " +
         std::to_string(kLr) + "\nbetas = [0.9, 0.95]\neps = " + std::to_string(kEps) +
         "\nweight_decay = " + std::to_string(kWeightDecay) +
         "\nadamw = true\n[checkpoint]\nevery_steps = " + std::to_string(kSteps) + "\n";
}

std::string script_lines(const ScriptModel& m) {
  return "kind = \"torchscript\"\npath = \"" + models_dir() + "/" + m.file + "\"\n" + m.model_keys;
}

// The global batch of every step, as zt's data source gives it, in a safetensors file.
void write_batches(const std::string& toml, const std::string& path) {
  const zt::Config config = zt::trainer::load_config_string(toml, "batches.toml");
  const zt::trainer::JobSettings job = zt::trainer::JobSettings::of(config);
  const zt::models::ModelShape shape = zt::models::resolve_model_shape(job.model, config.catalog());
  const auto data = zt::data::make_data(job.data, zt::models::model_inputs(shape), shape.kind);
  std::vector<at::Tensor> tensors;
  zt::SafetensorsWriter writer;
  for (int s = 0; s < kSteps; ++s) {
    const zt::data::Batch b = data->get_samples(int64_t{s} * kGlobalBatch, kGlobalBatch);
    for (const auto& [name, t] : {std::pair{"input.", b.input}, std::pair{"target.", b.target}}) {
      writer.add(name + std::to_string(s), t.scalar_type() == at::kLong ? "I64" : "F32",
                 t.sizes().vec());
      tensors.push_back(t.contiguous());
    }
  }
  writer.open(path, 8);
  for (size_t i = 0; i < tensors.size(); ++i) {
    writer.write(static_cast<int64_t>(i), 0, tensors[i].data_ptr(),
                 static_cast<int64_t>(tensors[i].nbytes()));
  }
  writer.close();
}

std::map<std::string, at::Tensor> read_params(const std::string& path) {
  zt::SafetensorsReader file(path);
  std::map<std::string, at::Tensor> out;
  for (const auto& e : file.entries()) {
    REQUIRE(e.dtype == "F32");
    at::Tensor t = at::empty(e.shape, at::kFloat);
    file.read(e, 0, t.data_ptr(), e.end - e.begin);
    out[e.name] = t;
  }
  return out;
}

// Every parameter of `got` within the engine oracle's fp32 tolerance of `want`, same names.
void check_parameters(const std::map<std::string, at::Tensor>& got,
                      const std::map<std::string, at::Tensor>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  for (const auto& [name, w] : want) {
    INFO("parameter " << name);
    REQUIRE(got.count(name) == 1);
    const at::Tensor& g = got.at(name);
    REQUIRE(g.sizes().vec() == w.sizes().vec());
    const double excess = ((g - w).abs() - (1e-6 + 1e-5 * w.abs())).max().item<double>();
    CHECK(excess <= 0);
  }
}

// Trains `toml` with the trainer, exports the last checkpoint, returns its parameters.
std::map<std::string, at::Tensor> train_with_zt(const std::string& toml, const TempDir& dir,
                                                const std::string& extra = "") {
  const std::string config = dir.file("job.toml");
  zt::test::write_file(config, toml);
  auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config + " " + extra);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string weights = dir.file("final.safetensors");
  r = run_command(std::string(ZT_TEST_TRAINER) + " export --checkpoint " + dir.file("run") +
                  "/checkpoints --out " + weights);
  REQUIRE(r.exit_code == 0);
  return read_params(weights);
}

struct Layout {
  int world;
  int stage;
  const char* extra;  // --set overrides
};

// Stages 0-3 over 1-3 ranks, the other strategy and both offload tiers.
const Layout kLayouts[] = {
    {1, 0, ""},
    {2, 1, ""},
    {3, 2, ""},
    {1, 3, ""},
    {2, 3, ""},
    {3, 3, "--set plugins.shard=shard_tensor"},
    {2, 3, "--set plugins.offload_param=offload_cpu --set plugins.offload_optimizer=offload_nvme"},
};

// PyTorch's training of `model` on the global batches of `batches`, accumulated over `world`
// parts as `world` ranks average it.
std::map<std::string, at::Tensor> train_with_pytorch(const ScriptModel& model,
                                                     const std::string& batches, int world,
                                                     const TempDir& dir) {
  const std::string out = dir.file("torch-" + std::to_string(world) + ".safetensors");
  const auto r = run_command(std::string(kPython) + " " + kModelsScript + " train " + models_dir() +
                             "/" + model.file + " " + batches + " " + out + " " +
                             std::to_string(kSteps) + " " + std::to_string(kLr) + " " +
                             std::to_string(kWeightDecay) + " " + std::to_string(kEps) + " " +
                             model.loss + " " + std::to_string(world));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return read_params(out);
}

// Stages 0-2, where a module that is not a chain of its units trains with its own forward.
const Layout kWholeLayouts[] = {
    {1, 0, ""},
    {2, 1, ""},
    {3, 2, ""},
    {2, 2, "--set plugins.shard=shard_tensor --set plugins.offload_optimizer=offload_nvme"},
};

template <size_t N>
void check_parity(const ScriptModel& model, const Layout (&layouts)[N]) {
  ZT_SKIP_WITHOUT_TORCH();
  TempDir ref;
  const std::string batches = ref.file("batches.safetensors");
  write_batches(job_toml(script_lines(model), ref.file("run"), 1, 0), batches);
  std::map<int, std::map<std::string, at::Tensor>> want;
  for (const Layout& l : layouts) {
    if (!want.count(l.world)) want[l.world] = train_with_pytorch(model, batches, l.world, ref);
    TempDir dir;
    std::string extra = l.extra;
    if (contains(extra, "offload_nvme")) {
      extra += " --set plugin.offload_nvme.path=" + dir.file("nvme");
    }
    const auto got = train_with_zt(job_toml(script_lines(model), dir.file("run"), l.world, l.stage),
                                   dir, extra);
    check_parameters(got, want[l.world],
                     std::string(model.file) + " on " + std::to_string(l.world) +
                         " ranks at stage " + std::to_string(l.stage) + " " + l.extra);
  }
}

}  // namespace

TEST_CASE("torchscript: a GPT saved from PyTorch trains at stages 0-3 on 1-3 ranks as PyTorch's "
          "AdamW trains it") {
  check_parity(kGpt, kLayouts);
}

TEST_CASE("torchscript: a CNN with its own loss method trains at stages 0-3 on 1-3 ranks as "
          "PyTorch's AdamW trains it") {
  check_parity(kCnn, kLayouts);
}

TEST_CASE("torchscript: a module whose forward is not a chain of its units trains with its own "
          "forward at stages 0-2 as PyTorch's AdamW trains it") {
  check_parity(kNotChain, kWholeLayouts);
}

TEST_CASE("torchscript: units follow the module, tied weights are found, buffers are listed") {
  ZT_SKIP_WITHOUT_TORCH();
  auto shape_of = [](const std::string& lines) {
    const zt::Config config = zt::trainer::load_config_string(job_toml(lines, "unused", 1, 0),
                                                              "t.toml");
    return zt::models::resolve_model_shape(zt::trainer::JobSettings::of(config).model,
                                           config.catalog());
  };
  const zt::models::ModelShape gpt = shape_of(script_lines(kGpt));
  REQUIRE(gpt.custom);
  CHECK(gpt.custom->unit_count() == 4);  // embed, blocks.0, blocks.1, head
  const std::string described = gpt.custom->describe();
  CHECK(contains(described, "units embed, blocks.0, blocks.1, head"));
  CHECK(contains(described, "head.lm_head.weight tied to embed.wte.weight"));
  // The head borrows the embedding's tensor under its owner's name.
  const auto head = gpt.custom->declare(3);
  CHECK(head.back().name == "embed.wte.weight");
  CHECK(gpt.custom->buffers().size() == 2);  // each block's causal mask
  // 64 x 32 wte + 16 x 32 wpe + 2 blocks + ln_f (the tied head counts once).
  const int64_t block = 2 * 64 + 32 * 96 + (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32);
  CHECK(zt::models::parameter_count(gpt) == 64 * 32 + 16 * 32 + 2 * block + 64);

  const auto cnn = shape_of(script_lines(kCnn) + "units = [\"features.*\", \"classifier\"]\n");
  REQUIRE(cnn.custom);
  CHECK(cnn.custom->unit_count() == 3);
  CHECK(!zt::models::model_inputs(cnn).tokens);
  CHECK(contains(cnn.custom->describe(), "loss method"));
}

TEST_CASE("torchscript: bad files and modules are refused before step 1, naming the file") {
  ZT_SKIP_WITHOUT_TORCH();
  struct Bad {
    std::string model_lines;
    int exit_code;
    std::vector<std::string> says;
    int stage = 0;
  };
  const std::string dir = models_dir() + "/";
  const std::string gpt_keys = "seq_len = 16\nvocab = 64\n";
  const std::vector<Bad> cases = {
      {"kind = \"torchscript\"\npath = \"" ZT_TEST_SOURCE_DIR "/README.md\"\n" + gpt_keys,
       2,
       {"is not a TorchScript file", "torch.jit.script(model).save(path)"}},
      {"kind = \"torchscript\"\npath = \"" + dir + "state_dict.pt\"\n" + gpt_keys,
       2,
       {"is a torch.save() archive", "not a TorchScript module"}},
      {"kind = \"torchscript\"\npath = \"" + dir + "newer.pt\"\n" + gpt_keys,
       2,
       {"was saved by a newer PyTorch than LibTorch 1.13", "version 99",
        "save it with PyTorch <= 1.13"}},
      {"kind = \"torchscript\"\npath = \"" + dir + "noparams.pt\"\n" + gpt_keys,
       2,
       {"the module has no parameters"}},
      {"kind = \"torchscript\"\npath = \"" + dir + "gpt.pt\"\nunits = [\"embed\", \"layers.*\"]\n" +
           gpt_keys,
       2,
       {"model.units entry \"layers.*\" matches no submodule", "it has: embed, blocks, blocks.0, "
                                                               "blocks.1, head"}},
      // The data is 32 tokens long, the module's position table 16.
      {"kind = \"torchscript\"\npath = \"" + dir + "gpt.pt\"\nseq_len = 32\nvocab = 64\n",
       2,
       {"unit 'embed' (1 of 4) failed on the first batch, input Long [6, 32]",
        "index out of range"}},
      // Not a chain: at stage 3, how far its units' values are from its forward's.
      {"kind = \"torchscript\"\npath = \"" + dir +
           "not_sequential.pt\"\ninput_shape = [4]\ntarget_shape = [4]\n",
       2,
       {"running the units one after another gives Float [6, 4] values up to",
        "away from the module's forward's (element", "train it at zero.stage 0-2", "zt.initialize"},
       3},
      // Dropout in the parent: equal in eval mode, not in training (it trained without it).
      {"kind = \"torchscript\"\npath = \"" + dir +
           "parent_dropout.pt\"\ninput_shape = [8]\ntarget_shape = [8]\n",
       2,
       {"running the units one after another gives Float [6, 8] values up to", "in training mode",
        "dropout or a branch on self.training in the parent"},
       3},
      {"kind = \"torchscript\"\npath = \"" + dir +
           "param_loss.pt\"\ninput_shape = [8]\ntarget_shape = [8]\n",
       2,
       {"the module's loss method reads its parameters", "inside a unit's forward"}},
      {"kind = \"torchscript\"\npath = \"" + dir + "missing.pt\"\n" + gpt_keys,
       5,
       {"cannot read model.path", "missing.pt"}},
      // 2^41 elements a sample: the product wrapped into a LibTorch error naming no key.
      {"kind = \"torchscript\"\npath = \"" + dir +
           "not_sequential.pt\"\ninput_shape = [1048576, 1048576, 2]\ntarget_shape = [4]\n",
       2,
       {"model.input_shape must list whole sizes >= 1", "of at most 2^40 elements in all"}},
  };
  for (const Bad& c : cases) {
    TempDir run;
    const std::string config = run.file("job.toml");
    zt::test::write_file(config, job_toml(c.model_lines, run.file("out"), 1, c.stage));
    const auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config);
    INFO(c.model_lines);
    INFO(r.output);
    CHECK(r.exit_code == c.exit_code);
    for (const auto& s : c.says) CHECK(contains(r.output, s));
    CHECK(contains(r.output, "job.toml"));
    CHECK_FALSE(std::filesystem::exists(run.file("out")));  // nothing written
  }
}

TEST_CASE("model plugin: model_resmlp is listed and trains at stage 3 on 2 ranks as LibTorch's "
          "AdamW trains its units") {
  auto r = run_command(std::string(ZT_TEST_TRAINER) + " plugins list");
  CHECK(contains(r.output, "model_resmlp"));
  CHECK(contains(r.output, "model"));

  const std::string model_lines = "kind = \"plugin\"\n";
  const std::string plugin_lines =
      "[plugins]\nmodel = \"model_resmlp\"\n[plugin.model_resmlp]\ninput = 12\nwidth = 16\n"
      "depth = 2\noutput = 5\n";
  auto toml_for = [&](const std::string& out_dir, int world, int stage) {
    std::string toml = job_toml(model_lines, out_dir, world, stage);
    // The job's [plugins] table gains the model; [plugin.model_resmlp] follows.
    toml.replace(toml.find("[plugins]\n"), 10, "[plugins]\nmodel = \"model_resmlp\"\n");
    return toml + plugin_lines.substr(plugin_lines.find("[plugin.model_resmlp]"));
  };

  // The reference: the plugin's units built whole in this process, LibTorch's AdamW.
  const zt::Config config = zt::trainer::load_config_string(toml_for("unused", 1, 0), "ref.toml");
  const zt::trainer::JobSettings job = zt::trainer::JobSettings::of(config);
  auto model = zt::models::make_model(job.model, config.catalog());
  const auto data = zt::data::make_data(job.data, zt::models::model_inputs(model->shape),
                                        model->shape.kind);
  std::vector<at::Tensor> params;
  for (auto& [name, t] : zt::models::unique_parameters(*model)) params.push_back(t);
  torch::optim::AdamW adamw(
      params,
      torch::optim::AdamWOptions(kLr).betas({0.9, 0.95}).eps(kEps).weight_decay(kWeightDecay));
  for (int s = 0; s < kSteps; ++s) {
    const zt::data::Batch b = data->get_samples(int64_t{s} * kGlobalBatch, kGlobalBatch);
    adamw.zero_grad();
    model->loss(zt::models::run_units(*model, b.input), b.target).backward();
    adamw.step();
  }
  std::map<std::string, at::Tensor> want;
  for (auto& [name, t] : zt::models::unique_parameters(*model)) want[name] = t.detach();

  TempDir dir;
  check_parameters(train_with_zt(toml_for(dir.file("run"), 2, 3), dir), want,
                   "model_resmlp on 2 ranks at stage 3");
}

TEST_CASE("model plugin: model.kind and plugins.model must agree") {
  TempDir dir;
  const std::string config = dir.file("job.toml");
  zt::test::write_file(config, job_toml("kind = \"plugin\"\n", dir.file("out"), 1, 0));
  auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "model.kind = \"plugin\" needs plugins.model"));
  r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config +
                  " --set model.kind=gpt --set plugins.model=model_resmlp");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "plugins.model = \"model_resmlp\" needs model.kind = \"plugin\""));
  r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config +
                  " --set plugins.model=shard_tensor");
  CHECK(r.exit_code != 0);
  CHECK(contains(r.output, "plugins.model = \"shard_tensor\" names a shard plugin"));
}

TEST_CASE("model plugin: a loss() of one value per sample is refused by name (exit 2)") {
  // It failed in LibTorch's words ("shape '[1]' is invalid"), reported as zt's internal error.
  TempDir dir;
  const std::string config = dir.file("job.toml");
  std::string toml = job_toml("kind = \"plugin\"\n", dir.file("out"), 1, 3);
  toml.replace(toml.find("[plugins]\n"), 10,
               "[plugins]\nmodel = \"per_sample_loss\"\ndirs = [\"" ZT_TEST_FIXTURE_DIR "\"]\n");
  zt::test::write_file(config, toml);
  const auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config);
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "the model's loss has shape [6], not one value"));
  CHECK(contains(r.output, "reduce it first (e.g. .mean())"));
  CHECK_FALSE(contains(r.output, "internal error"));
}

TEST_CASE("torchscript: a checkpoint resumes bit for bit, under the module's own names") {
  ZT_SKIP_WITHOUT_TORCH();
  TempDir dir;
  const std::string config = dir.file("job.toml");
  zt::test::write_file(config, job_toml(script_lines(kGpt), dir.file("run"), 2, 3));
  const std::string trainer = std::string(ZT_TEST_TRAINER) + " --config " + config;
  auto r = run_command(trainer + " --set run.out_dir=" + dir.file("straight"));
  REQUIRE(r.exit_code == 0);
  r = run_command(trainer + " --set run.steps=2 --set checkpoint.every_steps=2");
  REQUIRE(r.exit_code == 0);
  r = run_command(trainer + " --set checkpoint.every_steps=2 --resume auto");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "resumed from "));
  CHECK(!contains(r.output, "floating buffer"));  // its causal mask is bool, fixed
  const auto straight = zt::test::losses_of(dir.file("straight") + "/metrics.jsonl");
  const auto resumed = zt::test::losses_of(dir.file("run") + "/metrics.jsonl");
  REQUIRE(straight.size() == static_cast<size_t>(kSteps));
  CHECK(resumed == straight);
  // The last step's update shows in no loss: both runs' step-4 saves, every tensor (parameters
  // and Adam's moments), bit for bit.
  zt::test::check_same_state(dir.file("straight") + "/checkpoints/step-00000004",
                             dir.file("run") + "/checkpoints/step-00000004");

  const std::string weights = dir.file("w.safetensors");
  r = run_command(std::string(ZT_TEST_TRAINER) + " export --checkpoint " + dir.file("run") +
                  "/checkpoints --out " + weights);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "the model's own names"));
  const auto params = read_params(weights);
  CHECK(params.count("embed.wte.weight") == 1);
  CHECK(params.count("blocks.1.qkv.weight") == 1);
  CHECK(params.count("head.lm_head.weight") == 0);  // tied: saved once, under its owner's name
}

TEST_CASE("torchscript: a live A/B switch away from a stage-3 arm trains on the module's tensors") {
  // The new arm's engine takes the module's own tensors, which the old one left released (empty):
  // they were refused as built with the wrong shape.
  ZT_SKIP_WITHOUT_TORCH();
  TempDir dir;
  const std::string config = dir.file("job.toml");
  zt::test::write_file(config, job_toml(script_lines(kGpt), dir.file("live"), 2, 3));
  const std::string trainer = std::string(ZT_TEST_TRAINER) + " --config " + config +
                              " --set checkpoint.every_steps=1000";
  auto r = run_command(trainer + " --set run.out_dir=" + dir.file("straight"));
  REQUIRE(r.exit_code == 0);
  r = run_command(
      trainer + " --set 'ab.arms=[\"plugins.shard=shard_bucket\", \"plugins.shard=shard_tensor\"]'"
                " --set ab.switch_every=2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "ab: arm B (shard_tensor) takes over after step 2"));
  // The same math in either arm, up to the order of a sum.
  const auto straight = zt::test::losses_of(dir.file("straight") + "/metrics.jsonl");
  const auto live = zt::test::losses_of(dir.file("live") + "/metrics.jsonl");
  REQUIRE(straight.size() == static_cast<size_t>(kSteps));
  REQUIRE(live.size() == straight.size());
  for (size_t i = 0; i < live.size(); ++i) {
    CHECK(live[i] == doctest::Approx(straight[i]).epsilon(1e-5));
  }
  // Arm B's last update shows in no loss: the final states, within fp32's tolerance.
  zt::test::check_close_state(zt::test::step_folder(dir.file("straight") + "/checkpoints", kSteps),
                              zt::test::step_folder(dir.file("live") + "/checkpoints", kSteps));
}

TEST_CASE("torchscript: bf16 compute casts float buffers, and dropout draws the same masks in "
          "every run and after a resume") {
  ZT_SKIP_WITHOUT_TORCH();
  TempDir dir;
  const std::string vectors = "input_shape = [8]\ntarget_shape = [8]\n";
  auto run_job = [&](const std::string& file, const std::string& out, const std::string& extra) {
    const std::string config = dir.file(out + ".toml");
    zt::test::write_file(config, job_toml("kind = \"torchscript\"\npath = \"" + models_dir() + "/" +
                                              file + "\"\n" + vectors,
                                          dir.file(out), 2, 3));
    const auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config + " " + extra);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    return zt::test::losses_of(dir.file(out) + "/metrics.jsonl");
  };
  // A unit multiplying by an fp32 buffer would meet bf16 activations without the cast.
  const auto bf16 = run_job("buffered.pt", "bf16", "--set precision.compute=bf16");
  CHECK(bf16.size() == static_cast<size_t>(kSteps));
  // Checkpoints do not hold floating buffers yet: a resume says so, naming them.
  run_job("buffered.pt", "buffered", "--set run.steps=2 --set checkpoint.every_steps=2");
  const auto noted = run_command(std::string(ZT_TEST_TRAINER) + " --config " +
                                 dir.file("buffered.toml") + " --resume auto");
  INFO(noted.output);
  CHECK(noted.exit_code == 0);
  CHECK(contains(noted.output,
                 "note: checkpoints do not hold the model's 1 floating buffer(s) (scaled.scale)"));

  const auto first = run_job("dropout.pt", "first", "");
  const auto second = run_job("dropout.pt", "second", "");
  REQUIRE(first.size() == static_cast<size_t>(kSteps));
  CHECK(second == first);
  run_job("dropout.pt", "resumed", "--set run.steps=2 --set checkpoint.every_steps=2");
  const auto resumed = run_job("dropout.pt", "resumed",
                               "--set checkpoint.every_steps=2 --resume auto");
  CHECK(resumed == first);
  // The masks come from run.seed (the data's seed too, so compare a whole run).
  const auto other_seed = run_job("dropout.pt", "other", "--set run.seed=99");
  CHECK(other_seed != first);
}

TEST_CASE(
    "torchscript: the memory fit counts the file every rank holds while the engine is built") {
  ZT_SKIP_WITHOUT_TORCH();
  const zt::Config config = zt::trainer::load_config_string(
      job_toml(script_lines(kGpt), "unused", 2, 3), "t.toml");
  const zt::trainer::JobSettings job = zt::trainer::JobSettings::of(config);
  const zt::trainer::FitInputs in = zt::trainer::fit_inputs(job, config.catalog(), 2);
  REQUIRE(in.parameters > 0);
  CHECK(in.loaded_model_bytes == 4 * in.parameters);
  zt::trainer::FitInputs without = in;
  without.loaded_model_bytes = 0;
  CHECK(zt::trainer::estimate_fit(in, job.engine).host.construction -
            zt::trainer::estimate_fit(without, job.engine).host.construction ==
        4 * in.parameters);
}

TEST_CASE("torchscript: evaluation runs without dropout, so it is the same at world 1 and 2") {
  ZT_SKIP_WITHOUT_TORCH();
  TempDir dir;
  const std::string config = dir.file("job.toml");
  zt::test::write_file(config, job_toml("kind = \"torchscript\"\npath = \"" + models_dir() +
                                            "/dropout.pt\"\ninput_shape = [8]\n"
                                            "target_shape = [8]\n",
                                        dir.file("run"), 2, 3));
  auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // With dropout on, each rank drew its own masks over its own share of the samples, so the
  // loss changed with the world size.
  std::vector<double> losses;
  for (const char* nproc : {"1", "2"}) {
    std::filesystem::remove(dir.file("eval.json"));  // each run's own file, not the last one's
    r = run_command(std::string(ZT_TEST_TRAINER) + " eval --checkpoint " + dir.file("run") +
                    "/checkpoints --out " + dir.file("eval.json") + " --nproc " + nproc);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    losses.push_back(nlohmann::json::parse(zt::test::read_file(dir.file("eval.json")))["val_loss"]);
  }
  CHECK(std::abs(losses[1] - losses[0]) <= 1e-6 * losses[0]);
}

TEST_CASE("torchscript: sample draws past a model's -inf logits, which rule ids out, and never "
          "draws them") {
  // masked_gpt.pt's logits of ids 48-63 are -inf in eval mode, as a model hiding the padding of
  // its vocabulary gives them: sample refused such logits as weights that are not finite (and
  // before that its check of the model, on synthetic ids over the whole vocab, found the loss
  // infinite).
  ZT_SKIP_WITHOUT_TORCH();
  TempDir dir;
  // Its data holds only ids it does not rule out (a model's own vocabulary, its padding never a
  // target): a token file of ids below 48.
  std::string ids;
  std::mt19937 draw(5);
  for (int i = 0; i < 4096; ++i) {
    const auto id = static_cast<uint16_t>(draw() % 48);
    ids.append(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  zt::test::write_file(dir.file("ids.bin"), ids);
  const std::string config = dir.file("job.toml");
  const ScriptModel masked{"masked_gpt.pt", kGpt.model_keys, kGpt.loss};
  std::string toml = job_toml(script_lines(masked), dir.file("run"), 1, 0);
  const std::string synthetic = "kind = \"synthetic\"";
  REQUIRE(toml.find(synthetic) != std::string::npos);
  toml.replace(toml.find(synthetic), synthetic.size(),
               "kind = \"tokens\"\npath = \"" + dir.file("ids.bin") + "\"");
  zt::test::write_file(config, toml);
  auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = run_command(std::string(ZT_TEST_TRAINER) + " sample --checkpoint " + dir.file("run") +
                  "/checkpoints --tokens 1,2,3 --samples 4 --max-new-tokens 20 --temperature 2 "
                  "--out " +
                  dir.file("sample.json"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(zt::test::read_file(dir.file("sample.json")));
  REQUIRE(j["samples"].size() == 4);
  for (const auto& sample : j["samples"]) {
    const std::vector<int64_t> tokens = sample["tokens"];
    CHECK(tokens.size() == 20);
    for (int64_t t : tokens) CHECK(t < 48);
  }
}

TEST_CASE("torchscript: a GPT's checkpoint evaluates and samples alike at world 1 and 2") {
  ZT_SKIP_WITHOUT_TORCH();
  TempDir dir;
  const std::string config = dir.file("job.toml");
  zt::test::write_file(config, job_toml(script_lines(kGpt), dir.file("run"), 2, 3));
  auto r = run_command(std::string(ZT_TEST_TRAINER) + " --config " + config);
  REQUIRE(r.exit_code == 0);
  const std::string ckpt = dir.file("run") + "/checkpoints";
  std::vector<nlohmann::json> evals, samples;
  for (const std::string& args :
       {std::string("--nproc 1 --set zero.stage=0"), std::string("--nproc 2 --set zero.stage=3")}) {
    CAPTURE(args);
    // Synthetic data validates on a stream of its own: no held-out keys needed.
    std::filesystem::remove(dir.file("eval.json"));  // each run's own files, not the last one's
    std::filesystem::remove(dir.file("sample.json"));
    r = run_command(std::string(ZT_TEST_TRAINER) + " eval --checkpoint " + ckpt + " --out " +
                    dir.file("eval.json") + " " + args);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    evals.push_back(nlohmann::json::parse(zt::test::read_file(dir.file("eval.json"))));
    // 20 new tokens after 3: past seq_len = 16, so the context window slides.
    r = run_command(std::string(ZT_TEST_TRAINER) + " sample --checkpoint " + ckpt +
                    " --tokens 1,2,3 --samples 3 --max-new-tokens 20 --out " +
                    dir.file("sample.json") + " " + args);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    samples.push_back(nlohmann::json::parse(zt::test::read_file(dir.file("sample.json"))));
  }
  const double loss = evals[0]["val_loss"];
  CHECK(std::abs(evals[1]["val_loss"].get<double>() - loss) <= 1e-6 * loss);
  REQUIRE(samples[0]["samples"].size() == 3);
  for (size_t s = 0; s < 3; ++s) {
    const std::vector<int64_t> tokens = samples[0]["samples"][s]["tokens"];
    CHECK(tokens.size() == 20);
    for (int64_t t : tokens) CHECK(t < 64);
    CHECK(samples[1]["samples"][s]["tokens"].get<std::vector<int64_t>>() == tokens);
  }
}
