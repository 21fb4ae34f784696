#!/usr/bin/env python3
"""PyTorch DistributedDataParallel on zt's GPT: bench/train's peer row.

  ddp_gpt.py weights OUT.safetensors N_LAYER N_HEAD D_MODEL SEQ_LEN VOCAB SEED
      Writes the initial weights of zt's GPT (tests/torchscript/torchscript_models.py's
      zt_like_gpt: GPT-2's init from SEED) under Hugging Face GPT-2 names in HF's Conv1D layout, as `trainer export`
      writes them and `model.init_from` reads them: both sides then start from the same weights.

  ddp_gpt.py train CONFIG.toml WEIGHTS.safetensors OUT.jsonl
      Trains that GPT from WEIGHTS with torch.nn.parallel.DistributedDataParallel over Gloo, as
      the zt job whose resolved config (`trainer --print-config`) is CONFIG would: launch.nproc
      ranks as processes on this host, one intra-op thread each (what the trainer gives each of 2
      ranks on 2 cores), the same samples in the same order (data/data_source.h: sample i is the
      text window at mix64(mix64(run.seed) ^ i) mod windows; rank r takes samples
      r * micro_batch + [0, micro_batch) of each step's global batch), the same learning-rate
      schedule (trainer/run/schedule.h), torch.optim.AdamW with the config's betas, eps and weight
      decay, and clipping of the global gradient norm. Writes one JSON line per step (step, loss:
      the mean over ranks, step_time_s: from fetching the batch to the loss's all-reduce, as the
      trainer times a step, tokens_per_s). With precision.compute = "bf16" in CONFIG, forward
      and loss run under torch.autocast("cpu", torch.bfloat16): PyTorch's mixed precision, fp32
      weights and AdamW states with bf16 matmuls, the peer of zt's bf16 compute.

Set OPENBLAS_CORETYPE before starting it, as zt's launcher does for its ranks: OpenBLAS reads it
once, when it loads.
"""
import importlib.util
import json
import math
import os
import socket
import sys
import time
import tomllib

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "tests", "torchscript", "torchscript_models.py")
MASK64 = (1 << 64) - 1


def models_module():
    spec = importlib.util.spec_from_file_location("torchscript_models", MODELS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# zt's module names inside a block -> HF GPT-2's, and whether HF stores the weight as Conv1D
# ([in, out], the transpose of nn.Linear's) (trainer/models/hf_names.cc).
BLOCK_NAMES = {"ln1": ("ln_1", False), "qkv": ("attn.c_attn", True),
               "proj": ("attn.c_proj", True), "ln2": ("ln_2", False),
               "fc": ("mlp.c_fc", True), "out": ("mlp.c_proj", True)}


def hf_state(gpt):
    out = {"wte.weight": gpt.embed.wte.weight, "wpe.weight": gpt.embed.wpe.weight,
           "ln_f.weight": gpt.head.ln_f.weight, "ln_f.bias": gpt.head.ln_f.bias}
    for i, block in enumerate(gpt.blocks):
        for name, (hf, conv1d) in BLOCK_NAMES.items():
            module = getattr(block, name)
            out[f"h.{i}.{hf}.weight"] = module.weight.t() if conv1d else module.weight
            out[f"h.{i}.{hf}.bias"] = module.bias
    return {k: v.detach().contiguous() for k, v in out.items()}


def load_hf_state(gpt, tensors):
    with torch.no_grad():
        gpt.embed.wte.weight.copy_(tensors["wte.weight"])
        gpt.embed.wpe.weight.copy_(tensors["wpe.weight"])
        gpt.head.ln_f.weight.copy_(tensors["ln_f.weight"])
        gpt.head.ln_f.bias.copy_(tensors["ln_f.bias"])
        for i, block in enumerate(gpt.blocks):
            for name, (hf, conv1d) in BLOCK_NAMES.items():
                module = getattr(block, name)
                w = tensors[f"h.{i}.{hf}.weight"]
                module.weight.copy_(w.t() if conv1d else w)
                module.bias.copy_(tensors[f"h.{i}.{hf}.bias"])


def write_weights(out, n_layer, n_head, d_model, seq_len, vocab, seed):
    models = models_module()
    gpt = models.zt_like_gpt(n_layer, n_head, d_model, seq_len, vocab, seed)
    models.write_safetensors(out, hf_state(gpt))


def mix64(x):
    """splitmix64's finaliser, as trainer/data/data_source.cc's."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


class TextSamples:
    """zt's text data source: sample i is the window of seq_len + 1 bytes at a seeded start."""

    def __init__(self, path, seq_len, seed):
        with open(path, "rb") as f:
            self.tokens = torch.tensor(list(f.read()), dtype=torch.long)
        self.seq_len = seq_len
        self.seed_key = mix64(seed & MASK64)
        self.windows = self.tokens.numel() - seq_len

    def get(self, first, count):
        rows = []
        for i in range(first, first + count):
            start = mix64(self.seed_key ^ i) % self.windows
            rows.append(self.tokens[start:start + self.seq_len + 1])
        batch = torch.stack(rows)
        return batch[:, :-1], batch[:, 1:]


def lr_at(step, run, base_lr):
    """trainer/run/schedule.h's Schedule::lr for run.lr_schedule constant | cosine | linear."""
    warmup = run.get("warmup_steps", 0)
    kind = run.get("lr_schedule", "constant")
    if warmup > 0 and step < warmup:
        floor = run.get("warmup_min_ratio", 0.0)
        if run.get("warmup_type", "linear") == "log":
            frac = math.log(step + 2) / math.log(warmup + 1)
        else:
            frac = (step + 1) / warmup
        return base_lr * (floor + (1 - floor) * frac)
    if kind == "constant":
        return base_lr
    total = run.get("decay_steps", 0) or run["steps"]
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    floor = base_lr * run.get("min_lr_ratio", 0.1)
    if kind == "linear":
        return floor + (base_lr - floor) * (1.0 - progress)
    return floor + (base_lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def train_rank(rank, world, port, config, weights, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    models = models_module()
    m, run, data = config["model"], config["run"], config["data"]
    adam = config["plugin"]["optim_hybrid_adam"]
    gpt = models.Gpt(m["vocab"], m["seq_len"], m["d_model"], m["n_head"], m["n_layer"],
                     like_zt=True)
    load_hf_state(gpt, models.read_safetensors(weights))
    # The causal masks are constant buffers, alike on every rank, and Gloo cannot broadcast bool.
    masks = [name for name, _ in gpt.named_buffers() if name.endswith("mask")]
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(gpt, masks)
    model = torch.nn.parallel.DistributedDataParallel(gpt)
    opt = torch.optim.AdamW(model.parameters(), lr=adam["lr"], betas=tuple(adam["betas"]),
                            eps=adam["eps"], weight_decay=adam["weight_decay"])
    samples = TextSamples(data["path"], m["seq_len"], run["seed"])
    micro = data["micro_batch"]
    clip = config["zero"].get("gradient_clipping", 0.0)
    tokens_per_step = micro * world * m["seq_len"]
    compute = config.get("precision", {}).get("compute", "fp32")
    if compute not in ("fp32", "bf16"):
        sys.exit(f"ddp_gpt.py: precision.compute = {compute!r}: the peer row runs fp32 or bf16")
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=compute == "bf16")
    lines = []
    for step in range(run["steps"]):
        t0 = time.perf_counter()
        x, y = samples.get(step * micro * world + rank * micro, micro)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, run, adam["lr"])
        with autocast:
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        mean = loss.detach().double().reshape(1)
        dist.all_reduce(mean)
        seconds = time.perf_counter() - t0
        lines.append({"step": step + 1, "loss": mean.item() / world, "step_time_s": seconds,
                      "tokens_per_s": tokens_per_step / seconds})
    if rank == 0:
        with open(out, "w") as f:
            f.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(config_path, weights, out):
    with open(config_path, "rb") as f:
        config = tomllib.load(f)
    if config["data"].get("kind") != "text" or config["data"].get("grad_accum", 1) != 1:
        sys.exit("ddp_gpt.py: the peer row reproduces text data without accumulation only")
    world = config["launch"]["nproc"]
    mp.spawn(train_rank, args=(world, free_port(), config, weights, out), nprocs=world)


def main(argv):
    if len(argv) == 9 and argv[1] == "weights":
        write_weights(argv[2], *(int(a) for a in argv[3:9]))
    elif len(argv) == 5 and argv[1] == "train":
        train(argv[2], argv[3], argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
