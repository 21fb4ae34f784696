// The portable Adam/AdamW kernel: a plain loop the compiler may vectorise for the baseline ISA,
// doing adam_kernel.h's operations in their order, its fused multiply-adds as std::fma (exact,
// so this kernel gives the SIMD kernels' bits). Used where the CPU has neither AVX2 nor
// AVX-512, and as the reference the SIMD kernels are tested beside. Master parameters and
// moments share one storage vocabulary (fp32, bf16 to nearest, bf16 stochastic), so a bf16
// master is widened and rounded by the same functions as a bf16 moment.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "adam_isa.h"

namespace zt::hybrid_adam {

namespace {

// Marks "no copy-out buffer" for the loop below.
struct NoCopy {};

// Moment and master storage: fp32, or bf16 rounded to nearest even (c10::BFloat16), or bf16
// rounded stochastically (these raw bits).
struct StochasticBf16 {
  uint16_t bits;
};

inline float widen(float x) { return x; }
inline float widen(c10::BFloat16 x) { return static_cast<float>(x); }
inline float widen(StochasticBf16 x) {
  const uint32_t u = static_cast<uint32_t>(x.bits) << 16;  // exact
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// `random` is 16 random bits (StochasticBf16 only): a moment's half of stochastic_bits, or a
// master's param_stochastic_bits. Adding them below the
// kept 16 bits carries into the kept part with probability (dropped fraction); NaN becomes
// 0x7FC0 as in c10. Magnitudes round, signs are untouched: unbiased for either sign.
inline void store_rounded(float* out, float x, uint32_t) { *out = x; }
inline void store_rounded(c10::BFloat16* out, float x, uint32_t) { *out = c10::BFloat16(x); }
inline void store_rounded(StochasticBf16* out, float x, uint32_t random) {
  if (std::isnan(x)) {
    out->bits = 0x7FC0;
    return;
  }
  uint32_t u;
  std::memcpy(&u, &x, 4);
  out->bits = static_cast<uint16_t>((u + random) >> 16);
}

template <typename C>
inline void store_copy(C* out, int64_t i, float p) {
  out[i] = static_cast<C>(p);  // c10's round-to-nearest-even, as Tensor::to() rounds
}
template <>
inline void store_copy<NoCopy>(NoCopy*, int64_t, float) {}

template <typename T>
constexpr bool kStochastic = std::is_same_v<T, StochasticBf16>;

// G: gradient, C: copy-out, S: moments, P: master parameters (each a storage type above).
template <typename G, typename C, typename S, typename P>
void update(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  P* __restrict__ param = static_cast<P*>(b.param);
  const G* __restrict__ grad = static_cast<const G*>(b.grad);
  S* __restrict__ exp_avg = static_cast<S*>(b.exp_avg);
  S* __restrict__ exp_avg_sq = static_cast<S*>(b.exp_avg_sq);
  C* __restrict__ copy_out = static_cast<C*>(b.copy_out);
  const uint32_t mix = stochastic_mix(b.seed, c.step);
  for (int64_t i = begin; i < end; ++i) {
    float g = static_cast<float>(grad[i]);
    if (c.scale_grad) g = g * c.inv_grad_divisor;
    float p = widen(param[i]);
    if (c.decay == DecayMode::kDecoupled) {
      p = p * c.decay_factor;
    } else if (c.decay == DecayMode::kL2) {
      g = std::fma(p, c.weight_decay, g);
    }
    const float m = std::fma(g, c.one_minus_beta1, widen(exp_avg[i]) * c.beta1);
    const float v = std::fma(c.one_minus_beta2 * g, g, widen(exp_avg_sq[i]) * c.beta2);
    const float denom = std::fma(std::sqrt(v), c.inv_sqrt_bias_correction2, c.eps);
    p = p + (c.neg_step_size * m) / denom;
    uint32_t random = 0;
    if constexpr (kStochastic<S> || kStochastic<P>) random = stochastic_bits(b.seed, mix, i);
    store_rounded(exp_avg + i, m, random & 0xFFFFu);
    store_rounded(exp_avg_sq + i, v, random >> 16);
    uint32_t param_random = 0;
    if constexpr (kStochastic<P>) param_random = param_stochastic_bits(random);
    store_rounded(param + i, p, param_random);
    store_copy(copy_out, i, p);
  }
}

// bf16 masters are their own 16-bit copy: they are instantiated without a copy-out only, so
// the instances grow by 2 per (gradient, moments) pair rather than by 8.
template <typename G, typename S>
void update_with_state(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  if (b.param_type == ElemType::kBFloat16) {
    if (b.param_rounding == StateRounding::kNearest) {
      return update<G, NoCopy, S, c10::BFloat16>(b, c, begin, end);
    }
    return update<G, NoCopy, S, StochasticBf16>(b, c, begin, end);
  }
  if (b.copy_out == nullptr) return update<G, NoCopy, S, float>(b, c, begin, end);
  switch (b.copy_type) {
    case ElemType::kFloat32: return update<G, float, S, float>(b, c, begin, end);
    case ElemType::kBFloat16: return update<G, c10::BFloat16, S, float>(b, c, begin, end);
    case ElemType::kFloat16: return update<G, c10::Half, S, float>(b, c, begin, end);
  }
}

template <typename G>
void update_with_grad(const AdamBuffers& b, const AdamConstants& c, int64_t begin, int64_t end) {
  if (b.state_type == ElemType::kFloat32) return update_with_state<G, float>(b, c, begin, end);
  if (b.state_rounding == StateRounding::kNearest) {
    return update_with_state<G, c10::BFloat16>(b, c, begin, end);
  }
  update_with_state<G, StochasticBf16>(b, c, begin, end);
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
