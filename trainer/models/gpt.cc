// GPT-2 as a ModelSource: token + learned position embedding, n_layer pre-LayerNorm transformer
// blocks (causal multi-head self-attention with a fused qkv projection, then a 4x GELU MLP, each
// with a residual), and a final LayerNorm + LM head whose weight is the token embedding itself.
// Every unit's parameters are declared up front with GPT-2's init; a built unit holds plain
// tensors and runs functional ops on them.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <memory>

#include "models/gelu.h"
#include "models/units.h"
#include "zt/error.h"

namespace zt::models::detail {

namespace {

// GPT-2's init: N(0, 0.02) weights, zero biases, identity LayerNorms.
constexpr double kInitStd = 0.02;
constexpr double kLayerNormEps = 1e-5;
constexpr const char* kWte = "wte.weight";

// LayerNorm over the last dimension. bf16 input is normalized in fp32 and rounded once:
// LibTorch 1.13's bf16 layer_norm on the CPU took ~1.2 ms a call on the bench GPT, 12x the
// fp32 one, and the two conversions cost a fraction of that.
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.scalar_type() != at::kBFloat16) {
    return at::layer_norm(x, {x.size(-1)}, weight, bias, kLayerNormEps);
  }
  return at::layer_norm(x.to(at::kFloat), {x.size(-1)}, weight.to(at::kFloat), bias.to(at::kFloat),
                        kLayerNormEps)
      .to(at::kBFloat16);
}

class EmbeddingUnit final : public Unit {
 public:
  // params: wte [vocab, d_model], wpe [seq_len, d_model].
  EmbeddingUnit(NamedTensors params, int64_t seq_len)
      : params_(std::move(params)), seq_len_(seq_len) {}

  std::string name() const override { return "embedding"; }

  // ids: int64 [batch, T] with T <= seq_len; returns [batch, T, d_model].
  at::Tensor forward(const at::Tensor& ids) override {
    if (ids.dim() != 2 || ids.size(1) > seq_len_) {
      // Past seq_len the position table has no row; say so instead of an index error deep in ATen.
      throw InternalError("gpt embedding expects token ids [batch, T] with T <= seq_len = " +
                          std::to_string(seq_len_) + ", got " + std::to_string(ids.dim()) +
                          "-d input of " + std::to_string(ids.dim() == 2 ? ids.size(1) : 0) +
                          " tokens per row");
    }
    at::Tensor positions = at::arange(ids.size(1), ids.options().dtype(at::kLong));
    return at::embedding(params_[0].second, ids) + at::embedding(params_[1].second, positions);
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }

 private:
  NamedTensors params_;
  int64_t seq_len_;
};

// A block's parameters, in the order declare_block() lists them.
enum BlockParam : size_t {
  kLn1Weight,
  kLn1Bias,
  kQkvWeight,
  kQkvBias,
  kAttnProjWeight,
  kAttnProjBias,
  kLn2Weight,
  kLn2Bias,
  kFcWeight,
  kFcBias,
  kMlpProjWeight,
  kMlpProjBias
};

// The causal attention bias the blocks of one model share: 0 where position i may attend to
// j <= i, -inf above the diagonal, added to the scores inside their GEMM. Made again when the
// length, dtype or device of the input changes (the engine may move units between devices).
class CausalBias {
 public:
  const at::Tensor& get(int64_t t, const at::TensorOptions& options) {
    if (!bias_.defined() || bias_.size(0) != t || bias_.scalar_type() != options.dtype() ||
        bias_.device() != options.device()) {
      bias_ = at::full({t, t}, -std::numeric_limits<double>::infinity(), options).triu(1);
    }
    return bias_;
  }

 private:
  at::Tensor bias_;
};

class BlockUnit final : public Unit {
 public:
  BlockUnit(std::string name, NamedTensors params, int64_t n_head,
            std::shared_ptr<CausalBias> causal)
      : name_(std::move(name)),
        params_(std::move(params)),
        n_head_(n_head),
        causal_(std::move(causal)) {}

  std::string name() const override { return name_; }

  // x: [batch, T, d_model] -> same shape.
  at::Tensor forward(const at::Tensor& x) override {
    const int64_t batch = x.size(0), t = x.size(1), d = x.size(2), head_dim = d / n_head_;
    // [B, T, 3d] -> [3, B*H, T, hd]: every head's q, k and v as contiguous matrices (one copy),
    // so the attention GEMMs below take them as they are.
    const at::Tensor qkv = linear(norm(x, kLn1Weight), kQkvWeight)
                               .view({batch, t, 3, n_head_, head_dim})
                               .permute({2, 0, 3, 1, 4})
                               .reshape({3, batch * n_head_, t, head_dim});
    const at::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
    // bias + q k^T / sqrt(hd) in one GEMM: no separate passes for the scale and the mask.
    const at::Tensor scores = at::baddbmm(causal_->get(t, x.options()), q, k.transpose(1, 2), 1.0,
                                          1.0 / std::sqrt(static_cast<double>(head_dim)));
    const at::Tensor y = at::bmm(at::softmax(scores, -1), v)
                             .view({batch, n_head_, t, head_dim})
                             .transpose(1, 2)
                             .reshape({batch, t, d});
    at::Tensor h = x + linear(y, kAttnProjWeight);
    return h + linear(gelu_tanh(linear(norm(h, kLn2Weight), kFcWeight)), kMlpProjWeight);
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }

 private:
  // The bias of each layer directly follows its weight.
  at::Tensor linear(const at::Tensor& x, size_t weight) const {
    return at::linear(x, params_[weight].second, params_[weight + 1].second);
  }
  at::Tensor norm(const at::Tensor& x, size_t weight) const {
    return layer_norm(x, params_[weight].second, params_[weight + 1].second);
  }

  std::string name_;
  NamedTensors params_;
  int64_t n_head_;
  std::shared_ptr<CausalBias> causal_;
};

// The final LayerNorm and the LM head. The head has no weight of its own: it borrows the token
// embedding (weight tying, as GPT-2), listed under the same name so the engine treats it as one
// tensor whose gradient sums both uses.
class HeadUnit final : public Unit {
 public:
  // params: ln_f.weight, ln_f.bias, then the embedding unit's very wte tensor.
  explicit HeadUnit(NamedTensors params) : params_(std::move(params)) {}

  std::string name() const override { return "head"; }

  // h: [batch, T, d_model] -> logits [batch, T, vocab] = ln_f(h) @ wte^T.
  at::Tensor forward(const at::Tensor& h) override {
    const at::Tensor x = layer_norm(h, params_[0].second, params_[1].second);
    return at::linear(x, params_[2].second);
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }

 private:
  NamedTensors params_;  // [2] shares its TensorImpl with EmbeddingUnit's wte
};

class GptSource final : public ModelSource {
 public:
  GptSource(ModelShape shape, uint64_t seed) : shape_(std::move(shape)), seed_(seed) {}

  int64_t unit_count() const override { return shape_.n_layer + 2; }
  uint64_t seed() const override { return seed_; }

  std::vector<ParamDecl> declare(int64_t unit) const override {
    check_unit_index("gpt", unit, unit_count());
    const int64_t d = shape_.d_model;
    if (unit == 0) {
      return {{kWte, {shape_.vocab, d}, ParamInit::normal(kInitStd)},
              {"wpe.weight", {shape_.seq_len, d}, ParamInit::normal(kInitStd)}};
    }
    if (unit == unit_count() - 1) {
      return {{"ln_f.weight", {d}, ParamInit::constant(1.0)},
              {"ln_f.bias", {d}, ParamInit::constant(0.0)},
              {kWte, {shape_.vocab, d}, ParamInit::normal(kInitStd)}};  // borrowed from unit 0
    }
    return declare_block(unit - 1);
  }

  std::unique_ptr<Unit> build(int64_t unit) override {
    std::vector<ParamDecl> decls = declare(unit);
    if (unit == 0) {
      NamedTensors params = allocate(decls);
      wte_ = params[0].second;  // the head borrows this very tensor
      return std::make_unique<EmbeddingUnit>(std::move(params), shape_.seq_len);
    }
    if (unit == unit_count() - 1) {
      if (!wte_.defined()) {
        throw InternalError("gpt model source: the head (unit " + std::to_string(unit) +
                            ") borrows wte.weight from the embedding (unit 0); build the units "
                            "in order");
      }
      decls.pop_back();
      NamedTensors params = allocate(decls);
      params.emplace_back(kWte, wte_);
      return std::make_unique<HeadUnit>(std::move(params));
    }
    return std::make_unique<BlockUnit>("block" + std::to_string(unit - 1), allocate(decls),
                                       shape_.n_head, causal_);
  }

 private:
  std::vector<ParamDecl> declare_block(int64_t index) const {
    const int64_t d = shape_.d_model;
    // GPT-2 scales the projections that write into the residual stream by 1/sqrt(2 n_layer): two
    // of them per block add up over depth, and this keeps the stream's variance flat.
    const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(shape_.n_layer));
    const std::string b = "block" + std::to_string(index) + ".";
    const ParamInit one = ParamInit::constant(1.0), zero = ParamInit::constant(0.0);
    return {{b + "ln1.weight", {d}, one},
            {b + "ln1.bias", {d}, zero},
            {b + "attn.qkv.weight", {3 * d, d}, ParamInit::normal(kInitStd)},
            {b + "attn.qkv.bias", {3 * d}, zero},
            {b + "attn.proj.weight", {d, d}, ParamInit::normal(residual_std)},
            {b + "attn.proj.bias", {d}, zero},
            {b + "ln2.weight", {d}, one},
            {b + "ln2.bias", {d}, zero},
            {b + "mlp.fc.weight", {4 * d, d}, ParamInit::normal(kInitStd)},
            {b + "mlp.fc.bias", {4 * d}, zero},
            {b + "mlp.proj.weight", {d, 4 * d}, ParamInit::normal(residual_std)},
            {b + "mlp.proj.bias", {d}, zero}};
  }

  ModelShape shape_;
  uint64_t seed_;
  at::Tensor wte_;  // set by build(0), handed to the head
  std::shared_ptr<CausalBias> causal_ = std::make_shared<CausalBias>();
};

}  // namespace

std::unique_ptr<ModelSource> make_gpt_source(const ModelShape& shape, uint64_t seed) {
  return std::make_unique<GptSource>(shape, seed);
}

}  // namespace zt::models::detail
