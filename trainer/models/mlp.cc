// The MLP model as a ModelSource: depth Linear(width, width) layers, each its own unit, with the
// chosen activation after every layer but the last (so the output can take any real value for
// the MSE target).
#include <ATen/ATen.h>

#include <cmath>

#include "models/units.h"

namespace zt::models::detail {

namespace {

class LinearUnit final : public Unit {
 public:
  // activation: "none" | "relu" | "gelu"; params: weight [width, width], bias [width].
  LinearUnit(std::string name, std::string activation, NamedTensors params)
      : name_(std::move(name)), activation_(std::move(activation)), params_(std::move(params)) {}

  std::string name() const override { return name_; }

  // x: [batch, width] -> [batch, width].
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor y = at::linear(x, params_[0].second, params_[1].second);
    if (activation_ == "relu") return at::relu(y);
    if (activation_ == "gelu") return at::gelu(y);
    return y;
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }

 private:
  std::string name_;
  std::string activation_;
  NamedTensors params_;
};

class MlpSource final : public ModelSource {
 public:
  MlpSource(ModelShape shape, uint64_t seed) : shape_(std::move(shape)), seed_(seed) {}

  int64_t unit_count() const override { return shape_.depth; }
  uint64_t seed() const override { return seed_; }

  std::vector<ParamDecl> declare(int64_t unit) const override {
    check_unit_index("mlp", unit, unit_count());
    // The distribution of torch.nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    // from the counter-based generator instead of the global RNG.
    const ParamInit init = ParamInit::uniform(1.0 / std::sqrt(static_cast<double>(shape_.width)));
    const std::string name = "layer" + std::to_string(unit);
    return {{name + ".weight", {shape_.width, shape_.width}, init},
            {name + ".bias", {shape_.width}, init}};
  }

  std::unique_ptr<Unit> build(int64_t unit) override {
    NamedTensors params = allocate(declare(unit));
    const bool last = unit + 1 == unit_count();
    return std::make_unique<LinearUnit>("layer" + std::to_string(unit),
                                        last ? "none" : shape_.activation, std::move(params));
  }

 private:
  ModelShape shape_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<ModelSource> make_mlp_source(const ModelShape& shape, uint64_t seed) {
  return std::make_unique<MlpSource>(shape, seed);
}

}  // namespace zt::models::detail
