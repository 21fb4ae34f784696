// model_resmlp: a residual MLP as a zt model plugin (zt/model_plugin.h), the example to copy for
// shipping a C++ model as a shared object. Units, in call order:
//   in:      Linear(input, width)
//   block<i> for i < depth: x + W2 gelu(W1 LayerNorm(x))   (width -> 4 width -> width)
//   out:     LayerNorm, Linear(width, output)
// It trains on vectors: input [B, input], target [B, output], mean squared error.
// Every parameter is declared before any unit exists, with a seeded initialiser
// (zt/param_init.h), so the engine can build it one unit at a time, keeping only its shards.
#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zt/error.h"
#include "zt/model_plugin.h"

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class ResMlpUnit final : public zt::Unit {
 public:
  enum class Role { kIn, kBlock, kOut };
  ResMlpUnit(std::string name, Role role, NamedTensors params)
      : name_(std::move(name)), role_(role), params_(std::move(params)) {}

  std::string name() const override { return name_; }

  at::Tensor forward(const at::Tensor& x) override {
    auto p = [&](size_t i) -> const at::Tensor& { return params_[i].second; };
    switch (role_) {
      case Role::kIn: return at::linear(x, p(0), p(1));
      case Role::kBlock: {
        at::Tensor h = at::layer_norm(x, {x.size(-1)}, p(0), p(1));
        return x + at::linear(at::gelu(at::linear(h, p(2), p(3))), p(4), p(5));
      }
      case Role::kOut: {
        at::Tensor h = at::layer_norm(x, {x.size(-1)}, p(0), p(1));
        return at::linear(h, p(2), p(3));
      }
    }
    return x;
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }

 private:
  std::string name_;
  Role role_;
  NamedTensors params_;
};

class ResMlp final : public zt::TrainableModel {
 public:
  ResMlp(int64_t input, int64_t width, int64_t depth, int64_t output, uint64_t seed)
      : input_(input), width_(width), depth_(depth), output_(output), seed_(seed) {}

  int64_t unit_count() const override { return depth_ + 2; }
  uint64_t seed() const override { return seed_; }

  std::vector<zt::ParamDecl> declare(int64_t unit) const override {
    if (unit < 0 || unit >= unit_count()) {
      throw zt::InternalError("model_resmlp: unit " + std::to_string(unit) + " out of range");
    }
    // torch.nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); LayerNorm: 1 and 0.
    auto linear = [](const std::string& name, int64_t out, int64_t in) {
      const zt::ParamInit init = zt::ParamInit::uniform(1.0 / std::sqrt(static_cast<double>(in)));
      return std::vector<zt::ParamDecl>{{name + ".weight", {out, in}, init},
                                        {name + ".bias", {out}, init}};
    };
    auto norm = [this](const std::string& name) {
      return std::vector<zt::ParamDecl>{{name + ".weight", {width_}, zt::ParamInit::constant(1)},
                                        {name + ".bias", {width_}, zt::ParamInit::constant(0)}};
    };
    auto concat = [](std::vector<zt::ParamDecl> a, const std::vector<zt::ParamDecl>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    if (unit == 0) return linear("in", width_, input_);
    if (unit == unit_count() - 1)
      return concat(norm("out.norm"), linear("out.proj", output_, width_));
    const std::string block = "block" + std::to_string(unit - 1);
    return concat(concat(norm(block + ".norm"), linear(block + ".up", 4 * width_, width_)),
                  linear(block + ".down", width_, 4 * width_));
  }

  std::unique_ptr<zt::Unit> build(int64_t unit) override {
    NamedTensors params;
    // Never written here: the engine points them into its buffers and fills its slices.
    for (const zt::ParamDecl& d : declare(unit)) {
      params.emplace_back(d.name, at::empty(d.shape, at::kFloat).requires_grad_());
    }
    const auto role = unit == 0                  ? ResMlpUnit::Role::kIn
                      : unit == unit_count() - 1 ? ResMlpUnit::Role::kOut
                                                 : ResMlpUnit::Role::kBlock;
    const std::string name = unit == 0                  ? "in"
                             : unit == unit_count() - 1 ? "out"
                                                        : "block" + std::to_string(unit - 1);
    return std::make_unique<ResMlpUnit>(name, role, std::move(params));
  }

  zt::ModelInputs inputs() const override {
    zt::ModelInputs in;
    in.tokens = false;
    in.input_shape = {input_};
    in.target_shape = {output_};
    return in;
  }

  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return at::mse_loss(output.to(at::kFloat), target.to(output.device(), at::kFloat));
  }

  std::string describe() const override {
    return "model_resmlp: input " + std::to_string(input_) + " -> " + std::to_string(depth_) +
           " residual blocks of width " + std::to_string(width_) + " -> output " +
           std::to_string(output_) + ", mse";
  }

 private:
  int64_t input_, width_, depth_, output_;
  uint64_t seed_;
};

class ResMlpPlugin final : public zt::ModelPlugin {
 public:
  std::vector<zt::OptionSpec> options() const override {
    return {zt::opt_int("input", 32, "features of one input sample", 1),
            zt::opt_int("width", 64, "width of the residual stream", 1),
            zt::opt_int("depth", 4, "residual blocks, each its own unit", 1),
            zt::opt_int("output", 8, "features of one target sample", 1)};
  }

  std::unique_ptr<zt::TrainableModel> create(const zt::Options& options,
                                             uint64_t seed) const override {
    return std::make_unique<ResMlp>(options.get_int("input"), options.get_int("width"),
                                    options.get_int("depth"), options.get_int("output"), seed);
  }
};

}  // namespace

ZT_PLUGIN(ZT_KIND_MODEL, ZT_PLUGIN_ID, "0.1.0", "residual MLP on vectors (example model plugin)",
          ResMlpPlugin)
