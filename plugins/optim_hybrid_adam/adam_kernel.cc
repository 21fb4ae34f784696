// The portable scalar Adam/AdamW kernel: a plain loop the compiler may vectorise, written to do
// LibTorch 1.13's fp32 operations in LibTorch's order (see adam_kernel.h for why).
#include "adam_kernel.h"

#include <cmath>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace zt::hybrid_adam {

AdamConstants make_adam_constants(double lr, double beta1, double beta2, double eps,
                                  double weight_decay, bool adamw, int64_t step,
                                  double grad_divisor) {
  // Mirrors torch/csrc/api/src/optim/adam{,w}.cpp: scalars are formed in double and each is
  // rounded to float as the tensor op that uses it does (mul_(beta1), add_(g, 1 - beta1), ...).
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
  AdamConstants c;
  c.beta1 = static_cast<float>(beta1);
  c.one_minus_beta1 = static_cast<float>(1 - beta1);
  c.beta2 = static_cast<float>(beta2);
  c.one_minus_beta2 = static_cast<float>(1 - beta2);
  c.sqrt_bias_correction2 = static_cast<float>(std::sqrt(bias_correction2));
  c.eps = static_cast<float>(eps);
  c.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  c.grad_divisor = static_cast<float>(grad_divisor);
  if (weight_decay == 0) {
    c.decay = DecayMode::kNone;
  } else if (adamw) {
    c.decay = DecayMode::kDecoupled;
    c.decay_factor = static_cast<float>(1 - lr * weight_decay);
  } else {
    c.decay = DecayMode::kL2;
    c.weight_decay = static_cast<float>(weight_decay);
  }
  return c;
}

namespace {

// Marks "no copy-out buffer" for the loop below.
struct NoCopy {};

template <typename C>
inline void store_copy(C* out, int64_t i, float p) {
  out[i] = static_cast<C>(p);  // c10's round-to-nearest-even, as Tensor::to() rounds
}
template <>
inline void store_copy<NoCopy>(NoCopy*, int64_t, float) {}

template <typename G, typename C>
void update(const AdamBuffers& b, const AdamConstants& c) {
  float* __restrict__ param = b.param;
  const G* __restrict__ grad = static_cast<const G*>(b.grad);
  float* __restrict__ exp_avg = b.exp_avg;
  float* __restrict__ exp_avg_sq = b.exp_avg_sq;
  C* __restrict__ copy_out = static_cast<C*>(b.copy_out);
  for (int64_t i = 0; i < b.numel; ++i) {
    // Each line is one LibTorch tensor op, with its operand order, so the fp32 roundings match.
    float g = static_cast<float>(grad[i]) / c.grad_divisor;  // grad.div(divisor)
    float p = param[i];
    if (c.decay == DecayMode::kDecoupled) {
      p = p * c.decay_factor;  // p.mul_(1 - lr * wd)
    } else if (c.decay == DecayMode::kL2) {
      g = g + c.weight_decay * p;  // grad.add(p, wd)
    }
    const float m = exp_avg[i] * c.beta1 + c.one_minus_beta1 * g;  // mul_(b1).add_(g, 1 - b1)
    const float v = exp_avg_sq[i] * c.beta2 + c.one_minus_beta2 * g * g;  // .addcmul_(g, g, 1 - b2)
    const float denom = std::sqrt(v) / c.sqrt_bias_correction2 + c.eps;
    p = p + c.neg_step_size * m / denom;  // p.addcdiv_(m, denom, -step_size)
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p;
    store_copy(copy_out, i, p);
  }
}

template <typename G>
void update_with_grad(const AdamBuffers& b, const AdamConstants& c) {
  if (b.copy_out == nullptr) return update<G, NoCopy>(b, c);
  switch (b.copy_type) {
    case ElemType::kFloat32: return update<G, float>(b, c);
    case ElemType::kBFloat16: return update<G, c10::BFloat16>(b, c);
    case ElemType::kFloat16: return update<G, c10::Half>(b, c);
  }
}

}  // namespace

void adam_update_cpu(const AdamBuffers& b, const AdamConstants& c) {
  switch (b.grad_type) {
    case ElemType::kFloat32: return update_with_grad<float>(b, c);
    case ElemType::kBFloat16: return update_with_grad<c10::BFloat16>(b, c);
    case ElemType::kFloat16: return update_with_grad<c10::Half>(b, c);
  }
}

}  // namespace zt::hybrid_adam
