// GELU with the tanh approximation (GPT-2's "gelu_new"), x * 0.5 * (1 + tanh(z)) with
// z = sqrt(2/pi) * (x + 0.044715 x^3), as an autograd function for the built-in GPT.
// LibTorch 1.13's at::gelu(x, "tanh") evaluates tanh with SLEEF's 1-ulp tanhf on AVX2, forward
// and again backward: measured on the bench GPT, 17% of a training step's CPU time. Here
// 0.5 * (1 + tanh(z)) is computed as the logistic sigmoid of 2z, with an exp of a few multiply-
// adds, vectorized for AVX-512, AVX2 or SSE2 (whichever the CPU runs); the result is within a few
// float ulps of the formula evaluated in long double (tested, values and gradients), and its
// backward is the exact derivative of the same formula. Against at::gelu(x, "tanh") the gap is
// about 2 float epsilons of |x|: in the negative tail at::gelu's own 1 + tanh(z) loses digits.
// Thread safety: pure functions; each call may use LibTorch's intra-op threads.
#pragma once

#include <ATen/core/Tensor.h>

namespace zt::models {

// GELU(x) with the tanh approximation, differentiable. fp32 and bf16 tensors on the CPU take the
// fast path (a non-contiguous one is made contiguous first). bf16 is computed in float and
// rounded once: LibTorch 1.13's bf16 GELU took 4-6 ms a call on the bench GPT and rounds its
// intermediates, so 1 in 7 of its results on [-12, 12] is more than a bf16 step off. Any other
// dtype or device falls back to at::gelu(x, "tanh").
at::Tensor gelu_tanh(const at::Tensor& x);

}  // namespace zt::models
