#include "codec_reference.h"

#include <c10/core/GradMode.h>
#include <vector>

namespace zt::test {

namespace {

at::Tensor roundtrip(const Codec& codec, const at::Tensor& chunk) {
  const at::Tensor in = chunk.contiguous();
  std::vector<uint8_t> bytes(static_cast<size_t>(codec.encoded_bytes(in.numel())));
  codec.encode(in.data_ptr<float>(), in.numel(), bytes.data());
  at::Tensor out = at::empty({in.numel()}, at::kFloat);
  codec.decode(bytes.data(), in.numel(), out.data_ptr<float>());
  return out;
}

}  // namespace

CodecReference::CodecReference(const Codec* weights, const Codec* gradients, const Codec* across,
                               bool error_feedback, int world, int shard_size)
    : weights_(weights),
      gradients_(gradients),
      across_(across),
      error_feedback_(error_feedback),
      world_(world),
      k_(shard_size) {}

at::Tensor CodecReference::coded_weight(const at::Tensor& w) const {
  if (!weights_ || k_ == 1) return w.clone();  // a group of one gathers nothing
  const int64_t n = w.numel(), c = padded(n) / k_;
  at::Tensor flat = at::zeros({padded(n)}, at::kFloat);
  flat.narrow(0, 0, n).copy_(w.reshape({-1}));
  for (int r = 0; r < k_; ++r)
    flat.narrow(0, r * c, c).copy_(roundtrip(*weights_, flat.narrow(0, r * c, c)));
  return flat.narrow(0, 0, n).view(w.sizes()).clone();
}

at::Tensor CodecReference::coded_average(const std::string& name,
                                         const std::vector<at::Tensor>& grads) {
  const int64_t n = grads[0].numel(), c = padded(n) / k_;
  std::vector<at::Tensor>& residual = residuals_[name];
  // One tensor per rank (assign() would copy one handle, so every rank would share a residual).
  for (int q = static_cast<int>(residual.size()); q < world_; ++q)
    residual.push_back(at::zeros({padded(n)}, at::kFloat));
  at::Tensor total = at::zeros({padded(n)}, at::kFloat);
  std::vector<at::Tensor> sums;
  for (int group = 0; group < world_ / k_; ++group) {
    at::Tensor sum = at::zeros({padded(n)}, at::kFloat);
    for (int m = 0; m < k_; ++m) {
      const int q = group * k_ + m;
      at::Tensor x = at::zeros({padded(n)}, at::kFloat);
      x.narrow(0, 0, n).copy_(grads[q].reshape({-1}));
      if (error_feedback_) x.add_(residual[q]);
      for (int d = 0; d < k_; ++d) {
        const at::Tensor chunk = x.narrow(0, d * c, c);
        const at::Tensor sent = (m == d || !gradients_) ? chunk : roundtrip(*gradients_, chunk);
        sum.narrow(0, d * c, c).add_(sent);
        if (error_feedback_) residual[q].narrow(0, d * c, c).copy_(chunk - sent);
      }
    }
    sums.push_back(sum);
    if (!across_) total.add_(sum);
  }
  if (across_) {
    for (int m = 0; m < k_; ++m) {
      std::vector<at::Tensor> mine;
      for (const at::Tensor& s : sums) mine.push_back(s.narrow(0, m * c, c));
      total.narrow(0, m * c, c).copy_(coded_across(name, m, mine, c));
    }
  }
  return total.narrow(0, 0, n).div(world_).view(grads[0].sizes());
}

at::Tensor CodecReference::coded_across(const std::string& name, int m,
                                        const std::vector<at::Tensor>& sums, int64_t c) {
  const int groups = static_cast<int>(sums.size());
  const int64_t cr = (c + groups - 1) / groups;
  std::vector<at::Tensor>& residual = across_residuals_[name];
  for (int q = static_cast<int>(residual.size()); q < world_; ++q)
    residual.push_back(at::zeros({cr * groups}, at::kFloat));
  // Hop 1: group g's shard, chunk e to group e, summed in group order.
  at::Tensor reduced = at::zeros({cr * groups}, at::kFloat);
  for (int g = 0; g < groups; ++g) {
    at::Tensor& res = residual[g * k_ + m];
    at::Tensor x = at::zeros({cr * groups}, at::kFloat);
    x.narrow(0, 0, c).copy_(sums[g]);
    if (error_feedback_) x.add_(res);
    for (int e = 0; e < groups; ++e) {
      const at::Tensor chunk = x.narrow(0, e * cr, cr);
      const at::Tensor sent = g == e ? chunk : roundtrip(*across_, chunk);
      reduced.narrow(0, e * cr, cr).add_(sent);
      if (error_feedback_) res.narrow(0, e * cr, cr).copy_(chunk - sent);
    }
  }
  // Hop 2: every chunk's sum, decoded alike by every group.
  for (int e = 0; e < groups; ++e)
    reduced.narrow(0, e * cr, cr).copy_(roundtrip(*across_, reduced.narrow(0, e * cr, cr)));
  return reduced.narrow(0, 0, c);
}

void CodecReference::gradients(const NamedTensors& params, const NamedTensors& exact,
                               const std::function<at::Tensor(int q)>& rank_loss) {
  {
    const c10::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i)
      params[i].second.copy_(coded_weight(exact[i].second));
  }
  std::vector<std::vector<at::Tensor>> grads(params.size());
  for (int q = 0; q < world_; ++q) {
    for (const auto& [name, p] : params) p.mutable_grad().reset();
    rank_loss(q).backward();
    for (size_t i = 0; i < params.size(); ++i) grads[i].push_back(params[i].second.grad().clone());
  }
  const c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor average = coded_average(params[i].first, grads[i]);
    params[i].second.copy_(exact[i].second.view(params[i].second.sizes()));
    params[i].second.mutable_grad() = average;
  }
}

void CodecReference::forget_residuals() {
  residuals_.clear();
  across_residuals_.clear();
}

}  // namespace zt::test
