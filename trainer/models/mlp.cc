// The MLP model as zt units: depth Linear(width, width) layers, each its own unit, with the
// chosen activation after every layer but the last (so the output can take any real value for
// the MSE target).
#include <torch/torch.h>

#include <cmath>

#include "models/units.h"

namespace zt::models::detail {

namespace {

class LinearUnit final : public Unit {
 public:
  // activation: "none" | "relu" | "gelu"; the builder passes "none" for the last layer.
  LinearUnit(int64_t width, int64_t index, std::string activation, uint64_t seed)
      : name_("layer" + std::to_string(index)),
        activation_(std::move(activation)),
        linear_(torch::nn::LinearOptions(width, width)) {
    // The distribution of torch.nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
    // drawn from our seeded generators instead of the global RNG.
    const double bound = 1.0 / std::sqrt(static_cast<double>(width));
    init_uniform(linear_->weight, name_ + ".weight", seed, bound);
    init_uniform(linear_->bias, name_ + ".bias", seed, bound);
  }

  std::string name() const override { return name_; }

  // x: [batch, width] -> [batch, width].
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor y = linear_(x);
    if (activation_ == "relu") return at::relu(y);
    if (activation_ == "gelu") return at::gelu(y);
    return y;
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override {
    NamedTensors out;
    append_parameters(out, name_, *linear_);
    return out;
  }

 private:
  std::string name_;
  std::string activation_;
  torch::nn::Linear linear_;
};

}  // namespace

std::vector<std::unique_ptr<Unit>> make_mlp_units(const ModelShape& shape, uint64_t seed) {
  std::vector<std::unique_ptr<Unit>> units;
  for (int64_t i = 0; i < shape.depth; ++i) {
    bool last = i + 1 == shape.depth;
    units.push_back(
        std::make_unique<LinearUnit>(shape.width, i, last ? "none" : shape.activation, seed));
  }
  return units;
}

}  // namespace zt::models::detail
