// The portable Adam/AdamW kernel: a plain loop the compiler may vectorise for the baseline ISA,
// doing adam_kernel.h's operations in their order, its fused multiply-adds as std::fma (exact,
// so this kernel gives the SIMD kernels' bits). Used where the CPU has neither AVX2 nor
// AVX-512, and as the reference the SIMD kernels are tested beside.
#include <cmath>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "adam_isa.h"

namespace zt::hybrid_adam {

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
void update(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  float* __restrict__ param = b.param;
  const G* __restrict__ grad = static_cast<const G*>(b.grad);
  float* __restrict__ exp_avg = b.exp_avg;
  float* __restrict__ exp_avg_sq = b.exp_avg_sq;
  C* __restrict__ copy_out = static_cast<C*>(b.copy_out);
  for (int64_t i = begin; i < end; ++i) {
    float g = static_cast<float>(grad[i]);
    if (c.scale_grad) g = g * c.inv_grad_divisor;
    float p = param[i];
    if (c.decay == DecayMode::kDecoupled) {
      p = p * c.decay_factor;
    } else if (c.decay == DecayMode::kL2) {
      g = std::fma(p, c.weight_decay, g);
    }
    const float m = std::fma(g, c.one_minus_beta1, exp_avg[i] * c.beta1);
    const float v = std::fma(c.one_minus_beta2 * g, g, exp_avg_sq[i] * c.beta2);
    const float denom = std::fma(std::sqrt(v), c.inv_sqrt_bias_correction2, c.eps);
    p = p + (c.neg_step_size * m) / denom;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p;
    store_copy(copy_out, i, p);
  }
}

template <typename G>
void update_with_grad(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  if (b.copy_out == nullptr) return update<G, NoCopy>(b, c, begin, end);
  switch (b.copy_type) {
    case ElemType::kFloat32: return update<G, float>(b, c, begin, end);
    case ElemType::kBFloat16: return update<G, c10::BFloat16>(b, c, begin, end);
    case ElemType::kFloat16: return update<G, c10::Half>(b, c, begin, end);
  }
}

}  // namespace

void adam_range_portable(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  switch (b.grad_type) {
    case ElemType::kFloat32: return update_with_grad<float>(b, c, begin, end);
    case ElemType::kBFloat16: return update_with_grad<c10::BFloat16>(b, c, begin, end);
    case ElemType::kFloat16: return update_with_grad<c10::Half>(b, c, begin, end);
  }
}

}  // namespace zt::hybrid_adam
