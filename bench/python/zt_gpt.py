"""One rank of zt from Python on the bench GPT (bench/python/bench_python.py runs it under
python3 -m zt.launch): tests/torchscript/torchscript_models.py's zt-like GPT, a plain nn.Module
computed as the built-in GPT is (zt.nn.gelu_tanh, zt's GELU kernel; zt.nn.LayerNorm, bf16
normalized in fp32; the causal mask as an additive bias in one baddbmm), from the weights ddp_gpt.py
wrote, trained through zt.initialize under the trainer's resolved
config on the trainer's own data (zt.data), each step timed as the trainer times one (from
fetching the batch to the loss's all-reduce). Rank 0 writes one JSON line per step.

  zt_gpt.py CONFIG.toml WEIGHTS.safetensors OUT.jsonl
"""

import json
import math
import os
import sys
import time
import tomllib
import types

import torch

import zt

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import ddp_gpt  # noqa: E402  (the same model and weight loading as the DDP row)


def block_forward(self, x):
    """The zt-like GPT's block (torchscript_models.Block.forward) computed as the built-in GPT
    computes it: GELU on zt's kernel, the causal mask as an additive bias in one baddbmm."""
    b, t, c = x.shape
    h = self.heads
    q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
    q, k, v = (z.view(b, t, h, c // h).transpose(1, 2).reshape(b * h, t, c // h)
               for z in (q, k, v))
    bias = self.causal_bias[:t, :t].to(x.dtype)
    att = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0,
                        alpha=1.0 / math.sqrt(c // h)).softmax(dim=-1)
    y = (att @ v).view(b, h, t, c // h).transpose(1, 2).contiguous().view(b, t, c)
    x = x + self.proj(y)
    return x + self.out(zt.nn.gelu_tanh(self.fc(self.ln2(x))))


def main(config_path, weights, out):
    with open(config_path, "rb") as f:
        config = tomllib.load(f)
    m, run = config["model"], config["run"]
    models = ddp_gpt.models_module()
    gpt = models.Gpt(m["vocab"], m["seq_len"], m["d_model"], m["n_head"], m["n_layer"],
                     like_zt=True)
    ddp_gpt.load_hf_state(gpt, models.read_safetensors(weights))
    for block in gpt.blocks:
        block.causal_bias = torch.zeros(block.mask.shape).masked_fill(~block.mask, float("-inf"))
        block.forward = types.MethodType(block_forward, block)
    for module in gpt.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.__class__ = zt.nn.LayerNorm  # same parameters; bf16 normalized in fp32
    engine = zt.initialize(gpt, config=config_path)
    data = zt.data(config_path)
    rank, world = engine.rank, engine.world_size
    tokens_per_step = data.samples_per_step(world) * m["seq_len"]
    next_sample, lines = 0, []
    for step in range(run["steps"]):
        t0 = time.perf_counter()
        total = 0.0
        for micro in range(engine.gradient_accumulation_steps):
            x, y = data.get(next_sample, micro, rank, world)
            total += engine.backward(engine.loss(x, y)).item()
            engine.step()
        next_sample += data.samples_per_step(world)
        mean = torch.tensor([total / engine.gradient_accumulation_steps], dtype=torch.float64)
        engine.all_reduce(mean)
        seconds = time.perf_counter() - t0
        lines.append({"step": step + 1, "loss": mean.item() / world, "step_time_s": seconds,
                      "tokens_per_s": tokens_per_step / seconds})
    engine.close()
    if rank == 0:
        with open(out, "w") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)


if __name__ == "__main__":
    main(*sys.argv[1:4])
