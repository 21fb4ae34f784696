// The models zt trains, each an ordered list of zt::Unit objects that the ZeRO engine calls in
// order (unit i's output is unit i+1's input) and gathers/frees per unit:
//   gpt: [embedding (wte + wpe)] [block0] ... [block{n_layer-1}] [final LayerNorm + tied LM head]
//   mlp: [layer0] ... [layer{depth-1}], each Linear(width, width)
//   torchscript: a module saved from PyTorch, its submodules as units (models/torchscript.h)
//   plugin: what a model plugin's factory makes (zt/model_plugin.h)
// Each model is a ModelSource (zt/model_source.h) that declares every unit's parameters before
// building any: an element's initial value depends only on run.seed, the parameter's name and the
// element's index (zt/param_init.h; never on the global torch RNG, the construction order or the
// world size), so a rank filling its shards and a single-process reference building the whole
// model get bit-identical parameters.
// Thread safety: a Model is used from the training thread only; resolve_model_shape and
// make_model are pure functions of the settings (and of the model.init_from file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "settings/job_settings.h"
#include "zt/host/plugin_loader.h"
#include "zt/model_plugin.h"
#include "zt/model_source.h"
#include "zt/unit.h"

namespace zt::models {

// The resolved sizes of a model: preset fields with explicit non-zero [model] values on top.
// Data sources read it too (sequence length, vocabulary, vector width).
struct ModelShape {
  std::string kind;  // "gpt" | "mlp" | "torchscript" | "plugin"
  // gpt
  std::string preset;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t d_model = 0;
  int64_t seq_len = 0;
  int64_t vocab = 0;
  // mlp
  int64_t width = 0;
  int64_t depth = 0;
  std::string activation;  // "none" | "relu" | "gelu"
  // torchscript, plugin: the loaded model, shared by every copy of this shape (its units, loss,
  // inputs and declarations); null for the built-in kinds.
  std::shared_ptr<TrainableModel> custom;
};

// What one sample of the model's input and target is (zt/model_plugin.h): gpt takes tokens
// (seq_len, vocab), mlp vectors [width] -> [width], the others say themselves.
ModelInputs model_inputs(const ModelShape& shape);

// From [model] (byte-level text means vocab 256 unless model.vocab is set). Throws ConfigError
// naming the key when the result is unusable (preset "custom" with a size left at 0, d_model
// not divisible by n_head after the preset is applied). For torchscript and plugin kinds it
// loads the model (the file, or the plugin's factory from `catalog`): what load_torchscript()
// and the plugin throw.
ModelShape resolve_model_shape(const trainer::ModelSettings& model, PluginCatalog& catalog);
// A GPT's attention heads: `n_head` (model.n_head), or `preset`'s when it is 0. The one size its
// tensors' shapes cannot tell (trainer export records it; model.init_from checks it).
int64_t gpt_heads(const std::string& preset, int64_t n_head);
// The heads a job's resolved config (`toml`, as a checkpoint records it) gives its GPT:
// model.n_head, else its preset's. 0 when the config does not say (a Python engine's checkpoint
// saved without one, a config of another zt).
int64_t gpt_heads_of_config(const std::string& toml);
// The parameters a model of this shape has, without building it (a model too large to build must
// fail the memory check before it is built): make_model(shape, seed)->parameter_count().
int64_t parameter_count(const ModelShape& shape);

struct Model {
  ModelShape shape;
  uint64_t seed = 0;
  // In call order. A tensor listed by two units (the tied wte) is the same at::Tensor in both.
  std::vector<std::unique_ptr<Unit>> units;

  // gpt: cross entropy of logits [B,T,V] against next tokens [B,T] (int64);
  // mlp: mean squared error of [B,width] against [B,width]. Computed in fp32 whatever the
  // compute dtype, so low-precision runs compare with the fp32 reference on the same footing.
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) const;
  // Elements of the distinct tensors of all units (the tied embedding counts once); with no
  // units (the engine built and owns them), parameter_count(shape), which is the same number.
  int64_t parameter_count() const;
  // One line: kind, sizes, units, parameters. From the shape alone, so it reads the same with or
  // without units.
  std::string describe() const;
};

// Builds the model in full (sizes from resolve_model_shape, init from run.seed, then
// the weights of model.init_from when set: see models/init_from.h), on the CPU in fp32: every
// unit of make_model_source() through materialize_unit(). Throws ConfigError/IoError as
// load_weights() for a bad init_from file.
std::unique_ptr<Model> make_model(const trainer::ModelSettings& settings, PluginCatalog& catalog);
// The same from an explicit shape and seed (tests, tools).
std::unique_ptr<Model> make_model(const ModelShape& shape, uint64_t seed);

// The model of this shape as a ModelSource: the engine builds it one unit at a time and keeps
// only its shards (zero.Init). The values equal make_model(shape, seed)'s exactly, because both
// come from the same declarations (zt/param_init.h).
std::unique_ptr<ModelSource> make_model_source(const ModelShape& shape, uint64_t seed);
// Units a model of this shape has (gpt: n_layer + 2, mlp: depth), without building it.
int64_t unit_count(const ModelShape& shape);

// Forward through every unit in order, no sharding: the single-process reference.
at::Tensor run_units(Model& model, const at::Tensor& input);

// Every distinct parameter tensor of the model, first listing wins for the name (the tied
// wte appears once, as "wte.weight"), in unit order: what a reference optimizer steps.
std::vector<std::pair<std::string, at::Tensor>> unique_parameters(const Model& model);

}  // namespace zt::models
