// GPT-2 as zt units: token + learned position embedding, n_layer pre-LayerNorm transformer blocks
// (causal multi-head self-attention with a fused qkv projection, then a 4x GELU MLP, each with a
// residual), and a final LayerNorm + LM head whose weight is the token embedding itself.
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "models/units.h"
#include "zt/error.h"

namespace zt::models::detail {

namespace {

// GPT-2's init: N(0, 0.02) weights, zero biases, identity LayerNorms.
constexpr double kInitStd = 0.02;

torch::nn::LayerNorm layer_norm(int64_t d) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(1e-5));
}

// Initialises a Linear the GPT-2 way; `std` differs for the residual output projections.
void init_linear(torch::nn::Linear& linear, const std::string& prefix, uint64_t seed, double std) {
  init_normal(linear->weight, prefix + ".weight", seed, std);
  init_constant(linear->bias, 0.0);
}

void init_layer_norm(torch::nn::LayerNorm& norm) {
  init_constant(norm->weight, 1.0);
  init_constant(norm->bias, 0.0);
}

class EmbeddingUnit final : public Unit {
 public:
  EmbeddingUnit(const ModelShape& shape, uint64_t seed)
      : wte_(torch::nn::EmbeddingOptions(shape.vocab, shape.d_model)),
        wpe_(torch::nn::EmbeddingOptions(shape.seq_len, shape.d_model)),
        seq_len_(shape.seq_len) {
    init_normal(wte_->weight, "wte.weight", seed, kInitStd);
    init_normal(wpe_->weight, "wpe.weight", seed, kInitStd);
  }

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
    at::Tensor positions = torch::arange(ids.size(1), ids.options().dtype(at::kLong));
    return wte_(ids) + wpe_(positions);
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override {
    return {{"wte.weight", wte_->weight}, {"wpe.weight", wpe_->weight}};
  }

  const at::Tensor& wte() const { return wte_->weight; }

 private:
  torch::nn::Embedding wte_;
  torch::nn::Embedding wpe_;
  int64_t seq_len_;
};

class BlockUnit final : public Unit {
 public:
  BlockUnit(const ModelShape& shape, int64_t index, uint64_t seed)
      : name_("block" + std::to_string(index)),
        n_head_(shape.n_head),
        ln1_(layer_norm(shape.d_model)),
        qkv_(torch::nn::LinearOptions(shape.d_model, 3 * shape.d_model)),
        attn_proj_(torch::nn::LinearOptions(shape.d_model, shape.d_model)),
        ln2_(layer_norm(shape.d_model)),
        fc_(torch::nn::LinearOptions(shape.d_model, 4 * shape.d_model)),
        mlp_proj_(torch::nn::LinearOptions(4 * shape.d_model, shape.d_model)) {
    // GPT-2 scales the projections that write into the residual stream by 1/sqrt(2 n_layer):
    // two of them per block add up over depth, and this keeps the stream's variance flat.
    const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(shape.n_layer));
    init_layer_norm(ln1_);
    init_linear(qkv_, name_ + ".attn.qkv", seed, kInitStd);
    init_linear(attn_proj_, name_ + ".attn.proj", seed, residual_std);
    init_layer_norm(ln2_);
    init_linear(fc_, name_ + ".mlp.fc", seed, kInitStd);
    init_linear(mlp_proj_, name_ + ".mlp.proj", seed, residual_std);
  }

  std::string name() const override { return name_; }

  // x: [batch, T, d_model] -> same shape.
  at::Tensor forward(const at::Tensor& x) override {
    const int64_t batch = x.size(0), t = x.size(1), d = x.size(2), head_dim = d / n_head_;
    std::vector<at::Tensor> qkv = qkv_(ln1_(x)).split(d, -1);
    auto heads = [&](const at::Tensor& m) {
      return m.reshape({batch, t, n_head_, head_dim}).transpose(1, 2);  // [B, H, T, hd]
    };
    at::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) /
                        std::sqrt(static_cast<double>(head_dim));
    // Position i may attend to j <= i only: the mask is built per call on the input's device,
    // because the engine may move units between devices.
    at::Tensor future = at::ones({t, t}, x.options().dtype(at::kBool)).triu(1);
    at::Tensor attn = at::softmax(
        scores.masked_fill(future, -std::numeric_limits<double>::infinity()), -1);
    at::Tensor y = at::matmul(attn, v).transpose(1, 2).reshape({batch, t, d});
    at::Tensor h = x + attn_proj_(y);
    return h + mlp_proj_(at::gelu(fc_(ln2_(h)), "tanh"));
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override {
    NamedTensors out;
    append_parameters(out, name_ + ".ln1", *ln1_);
    append_parameters(out, name_ + ".attn.qkv", *qkv_);
    append_parameters(out, name_ + ".attn.proj", *attn_proj_);
    append_parameters(out, name_ + ".ln2", *ln2_);
    append_parameters(out, name_ + ".mlp.fc", *fc_);
    append_parameters(out, name_ + ".mlp.proj", *mlp_proj_);
    return out;
  }

 private:
  std::string name_;
  int64_t n_head_;
  torch::nn::LayerNorm ln1_;
  torch::nn::Linear qkv_;
  torch::nn::Linear attn_proj_;
  torch::nn::LayerNorm ln2_;
  torch::nn::Linear fc_;
  torch::nn::Linear mlp_proj_;
};

// The final LayerNorm and the LM head. The head has no weight of its own: it borrows the token
// embedding (weight tying, as GPT-2), listed under the same name so the engine treats it as one
// tensor whose gradient sums both uses.
class HeadUnit final : public Unit {
 public:
  HeadUnit(const ModelShape& shape, at::Tensor wte)
      : ln_f_(layer_norm(shape.d_model)), wte_(std::move(wte)) {
    init_layer_norm(ln_f_);
  }

  std::string name() const override { return "head"; }

  // h: [batch, T, d_model] -> logits [batch, T, vocab] = ln_f(h) @ wte^T.
  at::Tensor forward(const at::Tensor& h) override { return at::linear(ln_f_(h), wte_); }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override {
    NamedTensors out;
    append_parameters(out, "ln_f", *ln_f_);
    out.emplace_back("wte.weight", wte_);
    return out;
  }

 private:
  torch::nn::LayerNorm ln_f_;
  at::Tensor wte_;  // shares its TensorImpl with EmbeddingUnit's wte: storage changes reach both
};

}  // namespace

std::vector<std::unique_ptr<Unit>> make_gpt_units(const ModelShape& shape, uint64_t seed) {
  std::vector<std::unique_ptr<Unit>> units;
  auto embedding = std::make_unique<EmbeddingUnit>(shape, seed);
  at::Tensor wte = embedding->wte();
  units.push_back(std::move(embedding));
  for (int64_t i = 0; i < shape.n_layer; ++i) {
    units.push_back(std::make_unique<BlockUnit>(shape, i, seed));
  }
  units.push_back(std::make_unique<HeadUnit>(shape, wte));
  return units;
}

}  // namespace zt::models::detail
