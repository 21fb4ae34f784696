"""A model's own backward code that raises, for the tests of what a failed backward leaves."""

import torch


class Boom(torch.autograd.Function):
    """The identity, whose backward fails."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("boom in backward")
