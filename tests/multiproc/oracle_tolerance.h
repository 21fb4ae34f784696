// How close the correctness oracle's workers require zt's parameters to be to the reference's
// (LibTorch's own single-process training), by compute dtype, tensor by tensor.
//  - fp32: every element within 1e-6 + 1e-5 |reference|.
//  - bf16: every element within 2e-2 + 2e-2 |reference|. That is what bf16 cannot avoid: a
//    gradient near zero whose sign bf16 flips moves its element by up to 2 lr the other way. But
//    it is also more than one whole update (the oracles train at lr 1e-2 and 1e-3), so on its
//    own it would pass a bf16 path that lost or doubled an update. Hence a second bound, on the
//    mean |zt - reference| over the tensor's elements: lr / 8, an eighth of what one lost or
//    doubled update adds to every element (Adam's early steps move each element by about lr),
//    plus, for values rounded to bf16 (the weights a bf16 run computes with, not its fp32
//    masters), twice their mean rounding error (a quarter of a bf16 spacing, <= 2^-9 |w|).
//    Measured: correct bf16 runs reach at most about a third of it; a lost update three times it.
// A NaN anywhere fails both bounds.
// Thread safety: pure functions.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace zt::test {

// How far `got` is outside the per-element tolerance of `dt` around `want` at worst: <= 0 when
// every element is within it, NaN when any element of either is NaN (at::max propagates NaN, and
// a NaN fails every `<= 0`).
inline double excess(const at::Tensor& got, const at::Tensor& want, at::ScalarType dt) {
  if (got.sizes() != want.sizes()) return std::numeric_limits<double>::infinity();
  const bool fp32 = dt == at::kFloat;
  const double rtol = fp32 ? 1e-5 : 2e-2, atol = fp32 ? 1e-6 : 2e-2;
  const at::Tensor w = want.detach().to(at::kDouble);
  return ((got.to(at::kDouble) - w).abs() - (atol + rtol * w.abs())).max().item<double>();
}

// The mean |got - want| over a tensor of a bf16 run, and its bound (above).
struct MeanError {
  double mean = 0, bound = 0;
  bool ok() const { return mean <= bound; }  // false for NaN
  std::string describe() const {
    return "mean |zt - torch| " + std::to_string(mean) + " over the bf16 bound " +
           std::to_string(bound);
  }
};

// `rounded`: `got` holds values rounded to bf16 (the parameters a bf16 run computes with), not
// fp32 masters.
inline MeanError mean_error(const at::Tensor& got, const at::Tensor& want, double lr,
                            bool rounded) {
  const at::Tensor w = want.detach().to(at::kDouble);
  MeanError m;
  if (w.numel() == 0) return m;
  m.mean = (got.to(at::kDouble) - w).abs().mean().item<double>();
  m.bound = (rounded ? std::ldexp(w.abs().mean().item<double>(), -8) : 0) + lr / 8;
  return m;
}

// How far `got` is outside the tolerance of an fp32 run whose optimizer keeps its moments in
// bf16 (optim_hybrid_adam's state_dtype = "bf16"), against the reference that rounds its AdamW
// moments to bf16 after every step: both round fp32 moments that may differ by an fp32 ulp (the
// kernel fuses and multiplies by reciprocals where LibTorch divides), so a moment near a bf16
// rounding midpoint lands one bf16 spacing (<= 2^-7 of it) apart, and later steps carry that on
// (the next moment, the parameters, their gradients), a few spacings at most. Per element:
//  - moments (kMoment): 2^-5 (four spacings) of |reference| + of the tensor's mean |reference|
//    (a moment one spacing off carries into the next one, which the gradient may cancel down to
//    near zero) + the fp32 tolerance; moment_mean_error says what a systematic error shows;
//  - parameters: the fp32 tolerance + lr / 16 (a moment one spacing off moves its element's next
//    update by about 2^-8 of it; a lost or doubled update moves every element by about lr);
//  - gradients: 2^-6 |reference| + 1e-5 (they follow the parameters).
enum class Compared { kParameter, kMoment, kGradient };
inline double excess_bf16_moments(const at::Tensor& got, const at::Tensor& want, Compared what,
                                  double lr) {
  if (got.sizes() != want.sizes()) return std::numeric_limits<double>::infinity();
  double rtol = 1e-5, atol = 1e-6;
  const at::Tensor w = want.detach().to(at::kDouble);
  if (what == Compared::kMoment && w.numel() > 0) {
    rtol += std::ldexp(1.0, -5);
    atol += std::ldexp(w.abs().mean().item<double>(), -5);
  }
  if (what == Compared::kParameter) atol += lr / 16;
  if (what == Compared::kGradient) rtol += std::ldexp(1.0, -6), atol += 1e-5;
  return ((got.to(at::kDouble) - w).abs() - (atol + rtol * w.abs())).max().item<double>();
}

// The same with bf16 master weights (optim_hybrid_adam's master_dtype = "bf16", to nearest),
// against the reference that rounds its AdamW weights to bf16 after every step: a weight whose
// fp32 update lands near a bf16 midpoint may round one spacing (<= 2^-7 of it) the other way, and
// the gradients and moments that follow it move a little. Parameters get 2^-6 (two spacings) of
// |reference| on top of excess_bf16_moments' allowance; moments and gradients get that allowance
// (their own rounding, where moments are bf16 too, or the parameters' echo). moment_mean_error
// then bounds the parameters' mean error as it does the moments': most round the same values.
inline double excess_bf16_masters(const at::Tensor& got, const at::Tensor& want, Compared what,
                                  double lr) {
  if (what != Compared::kParameter || got.sizes() != want.sizes())
    return excess_bf16_moments(got, want, what, lr);
  const at::Tensor w = want.detach().to(at::kDouble);
  const double rtol = 1e-5 + std::ldexp(1.0, -6), atol = 1e-6 + lr / 16;
  return ((got.to(at::kDouble) - w).abs() - (atol + rtol * w.abs())).max().item<double>();
}

// The moments' mean |zt - reference| against 2^-10 of their mean magnitude: where the two round
// the same fp32 values, most elements are equal and the few one spacing apart add little; a
// systematic error (rounding toward zero instead of to nearest: half a spacing, 2^-9, on
// average; a moment left in fp32: a quarter spacing on average; a lost update) exceeds it.
inline MeanError moment_mean_error(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor w = want.detach().to(at::kDouble);
  MeanError m;
  if (w.numel() == 0) return m;
  m.mean = (got.to(at::kDouble) - w).abs().mean().item<double>();
  m.bound = std::ldexp(w.abs().mean().item<double>(), -10);
  return m;
}

}  // namespace zt::test
