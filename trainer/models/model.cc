// Model shapes from the config (presets, overrides, byte-level vocab), the Model container, and
// the factories: a model is a ModelSource, and the full single-process model is that source's
// units materialized one after another.
#include "models/model.h"

#include <torch/torch.h>

#include <c10/util/accumulate.h>

#include <cstdio>
#include <unordered_set>

#include "models/init_from.h"
#include "models/torchscript.h"
#include "models/units.h"
#include "settings/job_config.h"
#include "settings/job_settings.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"

namespace zt::models {

namespace {

struct Preset {
  const char* name;
  int64_t n_layer, n_head, d_model, seq_len, vocab;
};

// GPT-2 sizes as published (vocab 50257, context 1024); "custom" takes every size from [model].
constexpr Preset kPresets[] = {
    {"tiny", 2, 2, 64, 64, 256},
    {"gpt2-small", 12, 12, 768, 1024, 50257},
    {"gpt2-medium", 24, 16, 1024, 1024, 50257},
    {"gpt2-large", 36, 20, 1280, 1024, 50257},
    {"gpt2-xl", 48, 25, 1600, 1024, 50257},
    {"custom", 0, 0, 0, 0, 0},
};

const Preset& find_preset(const std::string& name) {
  for (const auto& p : kPresets) {
    if (name == p.name) return p;
  }
  // The schema restricts the choices, so only a schema/table mismatch gets here.
  throw InternalError("model.preset = \"" + name + "\" has no size table in trainer/models");
}

std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

int64_t gpt_heads(const std::string& preset, int64_t n_head) {
  return n_head > 0 ? n_head : find_preset(preset).n_head;
}

int64_t gpt_heads_of_config(const std::string& toml) {
  std::string preset = trainer::resolved_config_value(toml, "model", "preset");
  const std::string n_head = trainer::resolved_config_value(toml, "model", "n_head");
  if (n_head.empty()) return 0;
  if (preset.size() >= 2 && preset.front() == '"') preset = preset.substr(1, preset.size() - 2);
  try {
    return gpt_heads(preset.empty() ? "custom" : preset, std::stoll(n_head));
  } catch (const std::exception&) {
    return 0;  // a config of another zt: nothing to compare
  }
}

ModelShape resolve_model_shape(const trainer::ModelSettings& model, PluginCatalog& catalog) {
  ModelShape shape;
  shape.kind = model.kind;
  if (shape.kind == "torchscript") {
    shape.custom = load_torchscript(model);
    return shape;
  }
  if (shape.kind == "plugin") {
    const std::string& id = model.plugin.id;
    const auto& plugin = static_cast<const ModelPlugin&>(
        *catalog.load_kind(id, ZT_KIND_MODEL, model.plugin.key).factory);
    shape.custom = created_by(plugin.create(model.plugin.options, model.seed), id, "model");
    return shape;
  }
  if (shape.kind == "mlp") {
    shape.width = model.width;
    shape.depth = model.depth;
    shape.activation = model.activation;
    return shape;
  }

  const Preset& preset = find_preset(model.preset);
  shape.preset = preset.name;
  auto pick = [](int64_t given, int64_t from_preset) { return given > 0 ? given : from_preset; };
  shape.n_layer = pick(model.n_layer, preset.n_layer);
  shape.n_head = pick(model.n_head, preset.n_head);
  shape.d_model = pick(model.d_model, preset.d_model);
  shape.seq_len = pick(model.seq_len, preset.seq_len);
  // Byte-level text has exactly 256 symbols whatever the preset says, unless vocab is explicit.
  shape.vocab = pick(model.vocab, model.byte_level ? 256 : preset.vocab);

  const std::pair<const char*, int64_t> sizes[] = {{"n_layer", shape.n_layer},
                                                   {"n_head", shape.n_head},
                                                   {"d_model", shape.d_model},
                                                   {"seq_len", shape.seq_len},
                                                   {"vocab", shape.vocab}};
  for (const auto& [key, value] : sizes) {
    if (value <= 0) {
      throw ConfigError(model.places.where("model.preset") + ": model.preset = \"" + shape.preset +
                        "\" takes its sizes from [model], but model." + key +
                        " is 0; set it, or choose a preset (tiny, gpt2-small, gpt2-medium, "
                        "gpt2-large, gpt2-xl)");
    }
  }
  if (shape.d_model % shape.n_head != 0) {
    auto origin = [&](const std::string& key) {
      return model.places.is_set(key) ? model.places.where(key) : "from preset " + shape.preset;
    };
    throw ConfigError("model.d_model = " + std::to_string(shape.d_model) + " (" +
                      origin("model.d_model") +
                      ") must divide by model.n_head = " + std::to_string(shape.n_head) + " (" +
                      origin("model.n_head") + "); change one so every head has the same width");
  }
  return shape;
}

ModelInputs model_inputs(const ModelShape& shape) {
  if (shape.custom) return shape.custom->inputs();
  ModelInputs in;
  if (shape.kind == "mlp") {
    in.tokens = false;
    in.input_shape = {shape.width};
    in.target_shape = {shape.width};
  } else {
    in.seq_len = shape.seq_len;
    in.vocab = shape.vocab;
  }
  return in;
}

at::Tensor Model::loss(const at::Tensor& output, const at::Tensor& target) const {
  if (shape.custom) return shape.custom->loss(output, target);
  at::Tensor out = output.to(at::kFloat);
  if (shape.kind == "gpt") {
    return torch::nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}),
                                                target.to(out.device()).reshape({-1}));
  }
  return torch::nn::functional::mse_loss(out, target.to(out.device(), at::kFloat));
}

int64_t parameter_count(const ModelShape& s) {
  if (s.custom) {
    int64_t total = 0;
    for (const ParamDecl& d : declared_parameters(*s.custom))
      total += c10::multiply_integers(d.shape);
    return total;
  }
  if (s.kind == "mlp") return s.depth * (s.width * s.width + s.width);
  const int64_t d = s.d_model;
  // Per block: 2 LayerNorms (4d), qkv (3d^2 + 3d), attention out (d^2 + d), MLP (8d^2 + 5d).
  return s.n_layer * (12 * d * d + 13 * d) + s.vocab * d + s.seq_len * d + 2 * d;
}

int64_t unit_count(const ModelShape& s) {
  if (s.custom) return s.custom->unit_count();
  return s.kind == "mlp" ? s.depth : s.n_layer + 2;
}

int64_t Model::parameter_count() const {
  // A Model whose units the engine owns holds none: the shape says what they hold.
  if (units.empty()) return zt::models::parameter_count(shape);
  int64_t total = 0;
  for (const auto& [name, tensor] : unique_parameters(*this)) total += tensor.numel();
  return total;
}

std::string Model::describe() const {
  std::string sizes;
  if (shape.custom) {
    sizes = shape.custom->describe();
  } else if (shape.kind == "gpt") {
    sizes = "gpt (preset " + shape.preset + "): n_layer=" + std::to_string(shape.n_layer) +
            " n_head=" + std::to_string(shape.n_head) +
            " d_model=" + std::to_string(shape.d_model) +
            " seq_len=" + std::to_string(shape.seq_len) + " vocab=" + std::to_string(shape.vocab) +
            ", LM head tied to wte";
  } else {
    sizes = "mlp: width=" + std::to_string(shape.width) + " depth=" + std::to_string(shape.depth) +
            " activation=" + shape.activation;
  }
  return sizes + "; " + std::to_string(unit_count(shape)) + " units, " +
         with_thousands(zt::models::parameter_count(shape)) + " parameters, seed " +
         std::to_string(seed);
}

std::unique_ptr<ModelSource> make_model_source(const ModelShape& shape, uint64_t seed) {
  if (shape.custom) return detail::share_source(shape.custom);
  if (shape.kind == "gpt") return detail::make_gpt_source(shape, seed);
  if (shape.kind == "mlp") return detail::make_mlp_source(shape, seed);
  // The schema restricts the choices, so only a schema/factory mismatch gets here.
  throw InternalError("model.kind = \"" + shape.kind + "\" has no model source in trainer/models");
}

std::unique_ptr<Model> make_model(const ModelShape& shape, uint64_t seed) {
  auto model = std::make_unique<Model>();
  model->shape = shape;
  model->seed = seed;
  // The same declarations a partitioned build fills slice by slice, so the values agree.
  std::unique_ptr<ModelSource> source = make_model_source(shape, seed);
  for (int64_t i = 0; i < source->unit_count(); ++i) {
    model->units.push_back(materialize_unit(*source, i));
  }
  return model;
}

std::unique_ptr<Model> make_model(const trainer::ModelSettings& settings, PluginCatalog& catalog) {
  auto model = make_model(resolve_model_shape(settings, catalog), settings.seed);
  apply_init_from(*model, settings);
  return model;
}

at::Tensor run_units(Model& model, const at::Tensor& input) {
  at::Tensor x = input;
  for (auto& unit : model.units) x = unit->forward(x);
  return x;
}

std::vector<std::pair<std::string, at::Tensor>> unique_parameters(const Model& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::unordered_set<const void*> seen;
  for (const auto& unit : model.units) {
    for (auto& [name, tensor] : unit->parameters()) {
      if (seen.insert(tensor.unsafeGetTensorImpl()).second) out.emplace_back(name, tensor);
    }
  }
  return out;
}

namespace detail {

NamedTensors allocate(const std::vector<ParamDecl>& decls) {
  NamedTensors out;
  out.reserve(decls.size());
  for (const ParamDecl& decl : decls) {
    out.emplace_back(decl.name, at::empty(decl.shape, at::kFloat).requires_grad_());
  }
  return out;
}

namespace {

// The engine owns the source it builds from; a loaded model is shared by every copy of its
// shape, so the engine gets this forwarding handle instead.
class SharedSource final : public ModelSource {
 public:
  explicit SharedSource(std::shared_ptr<TrainableModel> model) : model_(std::move(model)) {}
  int64_t unit_count() const override { return model_->unit_count(); }
  uint64_t seed() const override { return model_->seed(); }
  std::vector<ParamDecl> declare(int64_t unit) const override { return model_->declare(unit); }
  std::unique_ptr<Unit> build(int64_t unit) override { return model_->build(unit); }

 private:
  std::shared_ptr<TrainableModel> model_;
};

}  // namespace

std::unique_ptr<ModelSource> share_source(std::shared_ptr<TrainableModel> model) {
  return std::make_unique<SharedSource>(std::move(model));
}

void check_unit_index(const std::string& kind, int64_t unit, int64_t count) {
  if (unit < 0 || unit >= count) {
    throw InternalError(kind + " model source: unit " + std::to_string(unit) +
                        " is out of range; the model has " + std::to_string(count) + " units (0.." +
                        std::to_string(count - 1) + ")");
  }
}

}  // namespace detail

}  // namespace zt::models
