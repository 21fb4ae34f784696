// The models: preset resolution, counter-based init (deterministic in seed and name, GPT-2 and
// Linear statistics, a partitioned fill equal to the full build), sources whose declarations
// match what they build, parameter names, weight tying, shapes, causality, units against an
// independent functional forward, and a loss that falls under AdamW.
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "models/model.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "zt/error.h"
#include "zt/model_source.h"
#include "zt/param_init.h"

using zt::models::Model;
using zt::models::ModelShape;

namespace {

// [run] task = "smoke" so no optimizer plugin is needed; comm = "" so no plugin is loaded.
zt::Config config_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  return zt::trainer::load_config_string("[run]\ntask = \"smoke\"\n[plugins]\ncomm = \"\"\n" + toml,
                                         "test.toml", overrides);
}

// The model layer's inputs from a config, as the trainer resolves them at its door.
ModelShape shape_of(const zt::Config& c) {
  return zt::models::resolve_model_shape(zt::trainer::JobSettings::of(c).model, c.catalog());
}
std::unique_ptr<Model> model_of(const zt::Config& c) {
  return zt::models::make_model(zt::trainer::JobSettings::of(c).model, c.catalog());
}

std::string error_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  try {
    model_of(config_of(toml, overrides));
  } catch (const zt::ConfigError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const char* kSmallGpt =
    "[model]\nkind = \"gpt\"\npreset = \"custom\"\nn_layer = 2\nn_head = 4\nd_model = 32\n"
    "seq_len = 16\nvocab = 61\n";

std::map<std::string, at::Tensor> by_name(const Model& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : zt::models::unique_parameters(model)) out[name] = t;
  return out;
}

at::Tensor random_ids(int64_t batch, int64_t t, int64_t vocab, uint64_t seed) {
  return at::randint(vocab, {batch, t}, at::make_generator<at::CPUGeneratorImpl>(seed), at::kLong);
}

// GPT-2 written out with functional ops and a per-head loop, sharing nothing with the units but
// the parameter tensors, so a wrong wiring in either shows up as a mismatch.
at::Tensor reference_gpt(const Model& model, const at::Tensor& ids) {
  const ModelShape& s = model.shape;
  auto p = by_name(model);
  const int64_t t = ids.size(1), c = s.d_model, hd = c / s.n_head;
  auto ln = [&](const at::Tensor& x, const std::string& name) {
    return at::layer_norm(x, {c}, p.at(name + ".weight"), p.at(name + ".bias"), 1e-5);
  };
  auto linear = [&](const at::Tensor& x, const std::string& name) {
    return at::linear(x, p.at(name + ".weight"), p.at(name + ".bias"));
  };
  at::Tensor x = at::embedding(p.at("wte.weight"), ids) +
                 at::embedding(p.at("wpe.weight"), at::arange(t, at::kLong)).unsqueeze(0);
  at::Tensor allowed = at::ones({t, t}, at::kBool).tril();
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "block" + std::to_string(l) + ".";
    at::Tensor qkv = linear(ln(x, b + "ln1"), b + "attn.qkv");
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < s.n_head; ++h) {
      at::Tensor q = qkv.narrow(2, h * hd, hd), k = qkv.narrow(2, c + h * hd, hd),
                 v = qkv.narrow(2, 2 * c + h * hd, hd);
      at::Tensor scores = at::bmm(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(hd));
      scores = at::where(allowed, scores, at::full({}, -std::numeric_limits<float>::infinity()));
      heads.push_back(at::bmm(at::softmax(scores, -1), v));
    }
    x = x + linear(at::cat(heads, -1), b + "attn.proj");
    at::Tensor m = linear(ln(x, b + "ln2"), b + "mlp.fc");
    m = 0.5 * m * (1 + at::tanh(std::sqrt(2.0 / std::acos(-1.0)) * (m + 0.044715 * m * m * m)));
    x = x + linear(m, b + "mlp.proj");
  }
  return at::matmul(ln(x, "ln_f"), p.at("wte.weight").t());
}

}  // namespace

TEST_CASE("presets resolve, explicit sizes override them, byte-level text means vocab 256") {
  ModelShape tiny = shape_of(config_of(""));
  CHECK(tiny.kind == "gpt");
  CHECK(tiny.n_layer == 2);
  CHECK(tiny.n_head == 2);
  CHECK(tiny.d_model == 64);
  CHECK(tiny.seq_len == 64);
  CHECK(tiny.vocab == 256);

  ModelShape xl = shape_of(config_of("[model]\npreset = \"gpt2-xl\"\n"));
  CHECK(xl.n_layer == 48);
  CHECK(xl.n_head == 25);
  CHECK(xl.d_model == 1600);
  CHECK(xl.seq_len == 1024);
  CHECK(xl.vocab == 50257);

  ModelShape mixed = shape_of(
      config_of("[model]\npreset = \"gpt2-medium\"\nn_layer = 3\nseq_len = 128\n"
                "[data]\nkind = \"text\"\npath = \"x\"\n"));
  CHECK(mixed.n_layer == 3);
  CHECK(mixed.n_head == 16);
  CHECK(mixed.d_model == 1024);
  CHECK(mixed.seq_len == 128);
  CHECK(mixed.vocab == 256);
  ModelShape explicit_vocab = shape_of(
      config_of("[model]\nvocab = 100\n[data]\nkind = \"text\"\npath = \"x\"\n"));
  CHECK(explicit_vocab.vocab == 100);

  ModelShape mlp = shape_of(
      config_of("[model]\nkind = \"mlp\"\nwidth = 24\ndepth = 3\nactivation = \"gelu\"\n"));
  CHECK(mlp.kind == "mlp");
  CHECK(mlp.width == 24);
  CHECK(mlp.depth == 3);
  CHECK(mlp.activation == "gelu");
}

TEST_CASE("unusable sizes are config errors that name the key") {
  std::string e = error_of("[model]\npreset = \"custom\"\nn_layer = 2\nn_head = 2\nd_model = 8\n");
  CHECK(contains(e, "test.toml:6:10: model.preset = \"custom\""));
  CHECK(contains(e, "model.seq_len is 0"));
  e = error_of("[model]\nn_head = 3\n");
  CHECK(contains(e, "model.d_model = 64 (from preset tiny)"));
  CHECK(contains(e, "model.n_head = 3 (test.toml:6:10)"));
}

TEST_CASE("the same seed gives bit-identical parameters, another seed different ones") {
  zt::Config config = config_of(kSmallGpt);
  auto a = model_of(config);
  // The global RNG must not matter: only run.seed and the names do.
  torch::manual_seed(99);
  (void)torch::randn({1000});
  auto b = model_of(config);
  auto c = model_of(config_of(kSmallGpt, {"run.seed=7"}));
  auto pa = by_name(*a), pb = by_name(*b), pc = by_name(*c);
  REQUIRE(pa.size() == pb.size());
  for (const auto& [name, t] : pa) {
    INFO(name);
    CHECK(at::equal(t, pb.at(name)));
  }
  for (const char* random :
       {"wte.weight", "wpe.weight", "block0.attn.qkv.weight", "block1.mlp.proj.weight"}) {
    INFO(random);
    CHECK_FALSE(at::equal(pa.at(random), pc.at(random)));
  }
  // Tensors with equal shapes must not share a stream: each draws from its own (seed, name).
  CHECK_FALSE(at::equal(pa.at("block0.attn.proj.weight"), pa.at("block1.attn.proj.weight")));

  auto m1 = model_of(config_of("[model]\nkind = \"mlp\"\nwidth = 8\ndepth = 3\n"));
  auto m2 = model_of(config_of("[model]\nkind = \"mlp\"\nwidth = 8\ndepth = 3\n"));
  for (const auto& [name, t] : by_name(*m1)) CHECK(at::equal(t, by_name(*m2).at(name)));
}

TEST_CASE("GPT-2 init statistics: N(0, 0.02), scaled residual projections, identity LayerNorms") {
  auto model = model_of(config_of(
      "[model]\npreset = \"custom\"\nn_layer = 8\nn_head = 4\nd_model = 128\nseq_len = 32\n"
      "vocab = 512\n"));
  auto p = by_name(*model);
  CHECK(p.at("wte.weight").std().item<double>() == doctest::Approx(0.02).epsilon(0.03));
  CHECK(p.at("block3.mlp.fc.weight").std().item<double>() == doctest::Approx(0.02).epsilon(0.03));
  CHECK(p.at("block3.attn.proj.weight").std().item<double>() ==
        doctest::Approx(0.02 / std::sqrt(16.0)).epsilon(0.05));
  CHECK(p.at("block3.mlp.proj.weight").std().item<double>() ==
        doctest::Approx(0.02 / std::sqrt(16.0)).epsilon(0.05));
  CHECK(at::equal(p.at("block3.attn.qkv.bias"), at::zeros({384})));
  CHECK(at::equal(p.at("block3.ln2.weight"), at::ones({128})));
  CHECK(at::equal(p.at("ln_f.bias"), at::zeros({128})));
  CHECK(std::abs(p.at("wpe.weight").mean().item<double>()) < 5 * 0.02 / std::sqrt(32.0 * 128));

  // MLP: torch.nn.Linear's U(-1/sqrt(width), 1/sqrt(width)) for weight and bias alike.
  auto mlp = model_of(config_of("[model]\nkind = \"mlp\"\nwidth = 400\ndepth = 2\n"));
  auto q = by_name(*mlp);
  const double bound = 1.0 / 20;
  for (const char* name : {"layer0.weight", "layer1.weight", "layer1.bias"}) {
    INFO(name);
    CHECK(q.at(name).abs().max().item<double>() <= bound);
    CHECK(q.at(name).abs().max().item<double>() > 0.95 * bound);
  }
  CHECK(q.at("layer0.weight").std().item<double>() ==
        doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.02));
}

TEST_CASE("a partitioned fill of each declaration equals make_model, element for element") {
  // What the engine does per rank: fill only a slice of each owned tensor from its declaration.
  const char* models[] = {kSmallGpt, "[model]\nkind = \"mlp\"\nwidth = 9\ndepth = 3\n"};
  for (const char* toml : models) {
    CAPTURE(toml);
    const ModelShape shape = shape_of(config_of(toml));
    auto model = zt::models::make_model(shape, 5);
    auto params = by_name(*model);
    auto source = zt::models::make_model_source(shape, 5);
    REQUIRE(source->seed() == 5);
    REQUIRE(source->unit_count() == static_cast<int64_t>(model->units.size()));
    std::set<std::string> filled;
    for (int64_t u = 0; u < source->unit_count(); ++u) {
      for (const zt::ParamDecl& decl : source->declare(u)) {
        if (!filled.insert(decl.name).second) continue;  // borrowed: its owner filled it
        INFO(decl.name);
        const at::Tensor built = params.at(decl.name).detach().reshape({-1});
        const int64_t n = built.numel(), cut1 = n / 3, cut2 = n / 3 + n / 2 + 1;
        at::Tensor pieces = at::empty({n});
        for (auto [first, end] :
             {std::pair{cut2, n}, std::pair{int64_t{0}, cut1}, std::pair{cut1, cut2}}) {
          at::Tensor slice = at::empty({end - first});
          zt::fill_param_init(decl.init, 5, decl.name, decl.shape, first, slice);
          pieces.narrow(0, first, end - first).copy_(slice);
        }
        CHECK(at::equal(pieces, built));
      }
    }
    CHECK(filled.size() == params.size());

    // The source built unit by unit, as the single-process reference does, gives the same too.
    auto again = zt::models::make_model_source(shape, 5);
    for (int64_t u = 0; u < again->unit_count(); ++u) {
      auto unit = zt::materialize_unit(*again, u);
      for (const auto& [name, t] : unit->parameters()) {
        INFO(name);
        CHECK(at::equal(t, params.at(name)));
      }
    }
  }
}

TEST_CASE("a source's build() lists what declare() says, and the head borrows the very wte") {
  const char* models[] = {kSmallGpt, "[model]\nkind = \"mlp\"\nwidth = 9\ndepth = 3\n"};
  for (const char* toml : models) {
    CAPTURE(toml);
    const ModelShape shape = shape_of(config_of(toml));
    auto source = zt::models::make_model_source(shape, 1);
    CHECK(source->unit_count() == zt::models::unit_count(shape));
    std::map<std::string, const at::TensorImpl*> owner;
    int64_t declared_elements = 0;
    for (int64_t u = 0; u < source->unit_count(); ++u) {
      const std::vector<zt::ParamDecl> decls = source->declare(u);
      auto unit = source->build(u);
      const auto params = unit->parameters();
      REQUIRE(params.size() == decls.size());
      for (size_t i = 0; i < decls.size(); ++i) {
        INFO(decls[i].name);
        CHECK(params[i].first == decls[i].name);
        CHECK(params[i].second.sizes() == at::IntArrayRef(decls[i].shape));
        CHECK(params[i].second.requires_grad());
        CHECK((params[i].second.scalar_type() == at::kFloat));
        auto [it, first] = owner.emplace(decls[i].name, params[i].second.unsafeGetTensorImpl());
        if (first) {
          declared_elements += params[i].second.numel();
        } else {
          CHECK(it->second == params[i].second.unsafeGetTensorImpl());  // borrowed: the same tensor
        }
      }
    }
    CHECK(declared_elements == zt::models::parameter_count(shape));
    CHECK_THROWS_AS(source->declare(source->unit_count()), zt::InternalError);
  }
  // The head cannot be built before the embedding it borrows from.
  const ModelShape gpt = shape_of(config_of(kSmallGpt));
  auto source = zt::models::make_model_source(gpt, 1);
  CHECK_THROWS_WITH_AS(source->build(3), doctest::Contains("build the units in order"),
                       zt::InternalError);
}

TEST_CASE("describe() and parameter_count() read the same from the shape alone") {
  for (const char* toml : {kSmallGpt, "[model]\nkind = \"mlp\"\nwidth = 9\ndepth = 3\n"}) {
    CAPTURE(toml);
    auto built = model_of(config_of(toml));
    Model shape_only;  // what the trainer holds when the engine owns the units
    shape_only.shape = built->shape;
    shape_only.seed = built->seed;
    CHECK(shape_only.describe() == built->describe());
    CHECK(shape_only.parameter_count() == built->parameter_count());
    CHECK(contains(built->describe(), std::to_string(built->units.size()) + " units"));
  }
}

TEST_CASE("units list stably named parameters, each requiring grad") {
  auto model = model_of(config_of(kSmallGpt));
  REQUIRE(model->units.size() == 4);
  CHECK(model->units[0]->name() == "embedding");
  CHECK(model->units[1]->name() == "block0");
  CHECK(model->units[3]->name() == "head");
  std::vector<std::string> names;
  for (auto& [name, t] : model->units[2]->parameters()) {
    names.push_back(name);
    CHECK(t.requires_grad());
  }
  CHECK(names == std::vector<std::string>{
                     "block1.ln1.weight", "block1.ln1.bias", "block1.attn.qkv.weight",
                     "block1.attn.qkv.bias", "block1.attn.proj.weight", "block1.attn.proj.bias",
                     "block1.ln2.weight", "block1.ln2.bias", "block1.mlp.fc.weight",
                     "block1.mlp.fc.bias", "block1.mlp.proj.weight", "block1.mlp.proj.bias"});
  names.clear();
  for (auto& [name, t] : model->units[0]->parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"wte.weight", "wpe.weight"});
  names.clear();
  for (auto& [name, t] : model->units[3]->parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"ln_f.weight", "ln_f.bias", "wte.weight"});

  auto mlp = model_of(config_of("[model]\nkind = \"mlp\"\nwidth = 8\ndepth = 3\n"));
  REQUIRE(mlp->units.size() == 3);
  names.clear();
  for (auto& [name, t] : mlp->units[2]->parameters()) names.push_back(name);
  CHECK(names == std::vector<std::string>{"layer2.weight", "layer2.bias"});
  CHECK(mlp->parameter_count() == 3 * (8 * 8 + 8));
}

TEST_CASE("the LM head borrows the very wte tensor, counted once") {
  auto model = model_of(config_of(kSmallGpt));
  at::Tensor wte0 = model->units.front()->parameters()[0].second;
  at::Tensor wte_head = model->units.back()->parameters().back().second;
  CHECK(wte0.is_same(wte_head));
  CHECK(wte0.unsafeGetTensorImpl() == wte_head.unsafeGetTensorImpl());

  const int64_t d = 32, v = 61, t = 16, layers = 2;
  const int64_t expected = v * d + t * d + layers * (12 * d * d + 13 * d) + 2 * d;
  CHECK(model->parameter_count() == expected);
  CHECK(zt::models::unique_parameters(*model).size() == 2 + 12 * 2 + 2);
  CHECK(contains(model->describe(), std::to_string(model->units.size()) + " units"));

  // Both uses feed one gradient: it differs from what the embedding alone would give.
  at::Tensor ids = random_ids(2, 8, v, 1);
  model->loss(zt::models::run_units(*model, ids), random_ids(2, 8, v, 2)).backward();
  REQUIRE(wte0.grad().defined());
  at::Tensor unused_rows = at::ones({v}, at::kBool);
  unused_rows.index_put_({ids.flatten()}, at::zeros({}, at::kBool));
  // Rows of tokens never looked up still get gradient, through the head alone.
  CHECK(wte0.grad().index({unused_rows}).abs().sum().item<double>() > 0);
}

TEST_CASE("gpt2-small has GPT-2's 124,439,808 parameters") {
  auto model = model_of(config_of("[model]\npreset = \"gpt2-small\"\n"));
  CHECK(model->units.size() == 14);
  CHECK(model->parameter_count() == 124439808);
}

TEST_CASE("parameter_count(shape) counts what the built model has, without building it") {
  // The memory check relies on it before any rank builds the model.
  const char* models[] = {"", "n_layer = 3\nd_model = 48\nn_head = 4\nseq_len = 20\nvocab = 37\n",
                          "kind = \"mlp\"\nwidth = 24\ndepth = 3\n"};
  for (const char* model : models) {
    CAPTURE(model);
    const zt::Config config = config_of(std::string("[model]\n") + model);
    const ModelShape shape = shape_of(config);
    CHECK(zt::models::parameter_count(shape) == model_of(config)->parameter_count());
  }
  const ModelShape small = shape_of(config_of("[model]\npreset = \"gpt2-small\"\n"));
  CHECK(zt::models::parameter_count(small) == 124439808);
}

TEST_CASE("forward shapes through every unit") {
  auto model = model_of(config_of(kSmallGpt));
  at::Tensor x = random_ids(3, 10, 61, 5);
  x = model->units[0]->forward(x);
  CHECK(x.sizes() == at::IntArrayRef({3, 10, 32}));
  x = model->units[1]->forward(x);
  x = model->units[2]->forward(x);
  CHECK(x.sizes() == at::IntArrayRef({3, 10, 32}));
  x = model->units[3]->forward(x);
  CHECK(x.sizes() == at::IntArrayRef({3, 10, 61}));
  CHECK(model->loss(x, random_ids(3, 10, 61, 6)).dim() == 0);
  CHECK_THROWS_AS(model->units[0]->forward(random_ids(1, 17, 61, 7)), zt::InternalError);

  auto mlp = model_of(config_of("[model]\nkind = \"mlp\"\nwidth = 12\ndepth = 4\n"));
  at::Tensor y = zt::models::run_units(*mlp, at::randn({5, 12}));
  CHECK(y.sizes() == at::IntArrayRef({5, 12}));
  CHECK(mlp->loss(y, at::randn({5, 12})).dim() == 0);
}

TEST_CASE("attention is causal: a later token never changes earlier logits") {
  auto model = model_of(config_of(kSmallGpt));
  torch::NoGradGuard no_grad;
  at::Tensor ids = random_ids(2, 16, 61, 11);
  at::Tensor changed = ids.clone();
  changed.index_put_({torch::indexing::Slice(), 10},
                     (ids.index({torch::indexing::Slice(), 10}) + 1) % 61);
  at::Tensor a = zt::models::run_units(*model, ids), b = zt::models::run_units(*model, changed);
  CHECK(at::allclose(a.narrow(1, 0, 10), b.narrow(1, 0, 10), 0, 1e-6));
  for (int64_t pos = 10; pos < 16; ++pos) {
    INFO(pos);
    CHECK_FALSE(at::allclose(a.narrow(1, pos, 1), b.narrow(1, pos, 1), 0, 1e-6));
  }
}

TEST_CASE("the units run in order equal a monolithic forward") {
  auto model = model_of(config_of(kSmallGpt));
  torch::NoGradGuard no_grad;
  at::Tensor ids = random_ids(3, 13, 61, 21);
  at::Tensor units = zt::models::run_units(*model, ids);
  at::Tensor whole = reference_gpt(*model, ids);
  CHECK(at::allclose(units, whole, 1e-5, 1e-6));

  // model.activation between the MLP's layers (none after the last); the three differ on x.
  const at::Tensor x = at::randn({4, 12});
  std::vector<at::Tensor> outputs;
  for (const std::string activation : {"relu", "gelu", "none"}) {
    CAPTURE(activation);
    auto mlp = model_of(config_of(
        "[model]\nkind = \"mlp\"\nwidth = 12\ndepth = 3\nactivation = \"" + activation + "\"\n"));
    auto p = by_name(*mlp);
    auto act = [&](const at::Tensor& y) {
      return activation == "relu" ? at::relu(y) : activation == "gelu" ? at::gelu(y) : y;
    };
    at::Tensor ref = act(at::linear(x, p.at("layer0.weight"), p.at("layer0.bias")));
    ref = act(at::linear(ref, p.at("layer1.weight"), p.at("layer1.bias")));
    ref = at::linear(ref, p.at("layer2.weight"), p.at("layer2.bias"));
    outputs.push_back(zt::models::run_units(*mlp, x));
    CHECK(at::allclose(outputs.back(), ref, 1e-5, 1e-6));
  }
  CHECK_FALSE(at::allclose(outputs[0], outputs[1], 1e-3, 1e-4));
  CHECK_FALSE(at::allclose(outputs[1], outputs[2], 1e-3, 1e-4));
}

TEST_CASE("a tiny GPT learns a fixed batch under AdamW, every parameter getting a gradient") {
  auto model = model_of(config_of(kSmallGpt));
  std::vector<at::Tensor> params;
  for (auto& [name, t] : zt::models::unique_parameters(*model)) params.push_back(t);
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(3e-3).weight_decay(0.01));
  at::Tensor tokens = random_ids(4, 17, 61, 31);
  at::Tensor input = tokens.narrow(1, 0, 16), target = tokens.narrow(1, 1, 16);
  std::vector<double> losses;
  // A gradient that is all zeros is no gradient: each parameter must get a nonzero one in some
  // step (one initialised to zero may hold the gradients of the layers before it at zero in the
  // first).
  std::set<std::string> moved;
  for (int step = 0; step < 30; ++step) {
    adamw.zero_grad();
    at::Tensor loss = model->loss(zt::models::run_units(*model, input), target);
    loss.backward();
    for (auto& [name, t] : zt::models::unique_parameters(*model)) {
      INFO(name);
      REQUIRE(t.grad().defined());
      if (t.grad().ne(0).any().item<bool>()) moved.insert(name);
    }
    adamw.step();
    losses.push_back(loss.item<double>());
  }
  for (auto& [name, t] : zt::models::unique_parameters(*model)) {
    INFO(name);
    CHECK(moved.count(name) == 1);
  }
  // Small init makes the first prediction near uniform.
  CHECK(losses.front() == doctest::Approx(std::log(61.0)).epsilon(0.05));
  CHECK(losses.back() < 0.7 * losses.front());

  auto mlp = model_of(
      config_of("[model]\nkind = \"mlp\"\nwidth = 16\ndepth = 3\nactivation = \"gelu\"\n"));
  std::vector<at::Tensor> mlp_params;
  for (auto& [name, t] : zt::models::unique_parameters(*mlp)) mlp_params.push_back(t);
  torch::optim::AdamW mlp_adamw(mlp_params, torch::optim::AdamWOptions(1e-2));
  at::Tensor x = at::randn({8, 16}), y = at::randn({8, 16});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    mlp_adamw.zero_grad();
    at::Tensor loss = mlp->loss(zt::models::run_units(*mlp, x), y);
    loss.backward();
    mlp_adamw.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  CHECK(last < 0.7 * first);
}
