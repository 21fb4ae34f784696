"""zt's own kernels as PyTorch building blocks, for models trained from Python.

layer_norm normalizes bf16 input in fp32 and rounds once, as the built-in GPT does: LibTorch
1.13's bf16 layer_norm on the CPU took ~1.2 ms a call on the bench GPT, 12x the fp32 one.

gelu_tanh is GPT-2's GELU (the tanh approximation) on the kernel zt's built-in GPT uses:
LibTorch 1.13's F.gelu(x, approximate="tanh") evaluates tanh twice through SLEEF and took 17%
of a training step of the bench GPT; this one is within a few float ulps of the formula itself
(about 2 float epsilons of |x| from F.gelu, whose 1 + tanh loses digits in the negative tail),
and its backward is the exact derivative of the same formula (trainer/models/gelu.h). fp32 and
bf16 on the CPU take the fast path (bf16: the fp32 kernel, rounded once); anything else falls
back to PyTorch's.
"""

import torch
import torch.nn.functional as F

from . import _zt


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """F.layer_norm, with bf16 input normalized in fp32 and the result rounded to bf16 once."""
    if x.dtype != torch.bfloat16:
        return F.layer_norm(x, normalized_shape, weight, bias, eps)
    return F.layer_norm(x.float(), normalized_shape,
                        None if weight is None else weight.float(),
                        None if bias is None else bias.float(), eps).to(torch.bfloat16)


class LayerNorm(torch.nn.LayerNorm):
    """torch.nn.LayerNorm with zt's bf16 path (layer_norm above); the same parameters."""

    def forward(self, x):
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


def gelu_tanh(x):
    """GELU(x) with the tanh approximation, differentiable."""
    return _zt.gelu_tanh(x)


class GELU(torch.nn.Module):
    """torch.nn.GELU(approximate="tanh") on zt's kernel."""

    def forward(self, x):
        return _zt.gelu_tanh(x)
