// The built-in GPT's GELU (models/gelu.h) against the formula evaluated in long double, element
// by element: values, gradients, the vector tail, non-contiguous input, NaN, bf16 (the fp32 kernel
// rounded once), and the fallback for other dtypes. The element check reports a planted NaN.
#include <torch/torch.h>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "models/gelu.h"

using zt::models::gelu_tanh;

namespace {

// GELU with the tanh approximation in long double, through the identity
// 0.5 * (1 + tanh(z)) = 1 / (1 + exp(-2z)): in the negative tail 1 + tanh(z) cancels to nothing
// in any precision, the logistic form does not.
struct Reference {
  long double y;      // x * s
  long double dy;     // s + x * s (1 - s) * d(2z)/dx
  long double two_z;  // 2z, whose rounding exp() magnifies |2z|-fold
  long double s;
};

Reference reference(float xf) {
  const long double x = xf, k = std::sqrt(2.0L / M_PIl), c = 0.044715L;
  const long double two_z = 2 * k * (x + c * x * x * x);
  const long double e = std::exp(-two_z), s = 1 / (1 + e);
  return {x * s, s + x * s * (e * s) * 2 * k * (1 + 3 * c * x * x), two_z, s};
}

// Inputs where GELU bends (|x| < 4), its tails, and the length 100003 (no multiple of 16).
at::Tensor inputs() {
  at::Tensor x = at::linspace(-12.0, 12.0, 100003, at::kFloat);
  x.narrow(0, 0, 7).copy_(at::tensor({0.0f, 1e-30f, -1e-30f, 1e-6f, -1e-6f, 40.0f, -40.0f}));
  return x;
}

constexpr long double kEps = std::numeric_limits<float>::epsilon();

// How many times its bound the worst element of `got` is off the reference: a value may be off
// by 4 ulps of itself, plus 2 |2z| (1 - s) ulps where exp() magnifies the rounding of its float
// argument (2z takes three roundings, ~1.5 ulps; it matters in the negative tail), plus 1e-36
// where the result is near float's smallest normal (the kernel clamps exp's argument at 87, so
// below x = -9.9 it gives |x| e^-87 instead of less); a gradient by 8 float epsilons of
// max(|dy|, 1), the size of its terms. NaN when an element is NaN.
double worst_against_bound(const at::Tensor& x, const at::Tensor& got, bool gradient,
                           const at::Tensor& weight = at::Tensor()) {
  const float* xp = x.data_ptr<float>();
  const at::Tensor g = got.contiguous();
  const float* gp = g.data_ptr<float>();
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const Reference r = reference(xp[i]);
    const long double w = weight.defined() ? weight[i].item<float>() : 1.0f;
    const long double want = (gradient ? r.dy : r.y) * w;
    const long double bound =
        gradient ? 8 * kEps * std::max(std::abs(want), w)
                 : kEps * std::abs(want) * (4 + 2 * std::abs(r.two_z) * (1 - r.s)) + 1e-36L;
    const double off = static_cast<double>(std::abs(gp[i] - want) / bound);
    if (std::isnan(off)) return off;  // no later finite element may hide it
    worst = std::max(worst, off);
  }
  return worst;
}

}  // namespace

TEST_CASE("gelu_tanh: values and gradients within float rounding of the formula, every element") {
  const at::Tensor x = inputs().requires_grad_(true);
  const at::Tensor y = gelu_tanh(x);
  const double ours = worst_against_bound(x.detach(), y, false);
  const double libtorch = worst_against_bound(x.detach(), at::gelu(x.detach(), "tanh"), false);
  MESSAGE("largest error over its bound: gelu_tanh " << ours << ", at::gelu(x, \"tanh\") "
                                                     << libtorch);
  CHECK(ours <= 1);
  // A weight per element, so each gradient is checked on its own.
  const at::Tensor w = at::linspace(0.5, 1.5, x.numel(), at::kFloat);
  (y * w).sum().backward();
  CHECK(worst_against_bound(x.detach(), x.grad(), true, w) <= 1);
}

TEST_CASE("gelu_tanh: the check reports a NaN in the first, a middle or the last element") {
  // A planted fault: the exact result with one element made NaN must fail the bound.
  const at::Tensor x = inputs();
  const at::Tensor exact = gelu_tanh(x);
  REQUIRE(worst_against_bound(x, exact, false) <= 1);
  for (int64_t i : {int64_t{0}, x.numel() / 2, x.numel() - 1}) {
    CAPTURE(i);
    at::Tensor planted = exact.clone();
    planted[i].fill_(std::nanf(""));
    CHECK(std::isnan(worst_against_bound(x, planted, false)));
  }
}

TEST_CASE("gelu_tanh: non-contiguous input and short tails equal the contiguous result") {
  const at::Tensor m = at::randn({37, 53}, at::kFloat);
  const at::Tensor t = m.t();  // non-contiguous
  CHECK(at::equal(gelu_tanh(t), gelu_tanh(t.contiguous())));
  for (int64_t n : {1, 15, 16, 17, 33}) {
    const at::Tensor part = m.flatten().narrow(0, 0, n);
    CHECK(at::equal(gelu_tanh(part), gelu_tanh(m.flatten()).narrow(0, 0, n)));
  }
}

TEST_CASE("gelu_tanh: NaN stays NaN, forward and backward") {
  const at::Tensor x = at::tensor({1.0f, std::nanf(""), -2.0f}).requires_grad_(true);
  const at::Tensor y = gelu_tanh(x);
  CHECK(std::isnan(y[1].item<float>()));
  CHECK(std::isfinite(y[0].item<float>()));
  y.sum().backward();
  CHECK(std::isnan(x.grad()[1].item<float>()));
  CHECK(std::isfinite(x.grad()[2].item<float>()));
}

TEST_CASE("gelu_tanh: bf16 is the fp32 kernel on the widened input, rounded once") {
  // Every bf16 whose float is finite and where GELU bends or saturates, plus NaN and the tail.
  const at::Tensor x =
      at::linspace(-12.0, 12.0, 70001, at::kFloat).to(at::kBFloat16).requires_grad_(true);
  const at::Tensor y = gelu_tanh(x);
  CHECK((y.scalar_type() == at::kBFloat16));
  const at::Tensor wide = x.detach().to(at::kFloat).requires_grad_(true);
  const at::Tensor y_wide = gelu_tanh(wide);
  CHECK(at::equal(y, y_wide.to(at::kBFloat16)));
  const at::Tensor g = at::linspace(0.5, 1.5, x.numel(), at::kFloat).to(at::kBFloat16);
  y.backward(g);
  y_wide.backward(g.to(at::kFloat));
  CHECK(at::equal(x.grad(), wide.grad().to(at::kBFloat16)));
  const at::Tensor nan = at::tensor({std::nanf(""), 1.0f}).to(at::kBFloat16);
  CHECK(std::isnan(gelu_tanh(nan)[0].item<float>()));
  for (int64_t n : {1, 15, 17}) {
    CHECK(at::equal(gelu_tanh(x.detach().narrow(0, 0, n)), y.detach().narrow(0, 0, n)));
  }
}

TEST_CASE("gelu_tanh: other dtypes are LibTorch's own gelu") {
  const at::Tensor x = at::randn({1000}, at::kDouble);
  CHECK(at::equal(gelu_tanh(x), at::gelu(x, "tanh")));
}
