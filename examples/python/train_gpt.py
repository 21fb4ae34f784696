"""A nanoGPT-style GPT trained by zt from an ordinary PyTorch loop.

    PYTHONPATH=build/python /usr/bin/python3 -m zt.launch --nproc 2 examples/python/train_gpt.py

The model is plain PyTorch, written as nanoGPT writes it (embeddings summed in the parent, the
residual added in the parent, the LM head tied to the token embedding): zt runs its forward as
written and shards it as examples/python/gpt.toml says (ZeRO stage 3 here). The batches come
from zt.data, the trainer's own data sources: the same windows of the same files on the same
ranks as `trainer --config` reads with these [data] settings.
"""

import argparse
import math
import time
import tomllib

import torch
import torch.nn as nn
import torch.nn.functional as F

import zt


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        y = att.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, d_model, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, n_layer, n_head, d_model):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d_model),
            wpe=nn.Embedding(seq_len, d_model),
            h=nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer)),
            ln_f=nn.LayerNorm(d_model)))
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as GPT-2
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx):
        pos = torch.arange(idx.size(1))
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="examples/python/gpt.toml")
    p.add_argument("--steps", type=int, default=None, help="default: the config's run.steps")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--save", default="", help="a checkpoint.dir to save into at the end")
    p.add_argument("--set", action="append", default=[], help="section.key=value overrides")
    a = p.parse_args()

    # --steps, else the last --set run.steps=N, else the config's: appended after the --set
    # overrides, the config's value would otherwise win over the user's.
    given = [s.split("=", 1)[1] for s in a.set if s.startswith("run.steps=")]
    with open(a.config, "rb") as f:
        config = tomllib.load(f)
    steps = a.steps or (int(given[-1]) if given else config["run"]["steps"])
    # [eval] batches: the held-out batches each rank evaluates (a --set of it wins).
    given = [s.split("=", 1)[1] for s in a.set if s.startswith("eval.batches=")]
    eval_batches = int(given[-1]) if given else config.get("eval", {}).get("batches", 4)
    # The lr schedule ([run] lr_schedule) spans the steps this run takes.
    a.set.append(f"run.steps={steps}")
    torch.manual_seed(1234)  # rank 0's values win either way: zt broadcasts them
    train = zt.data(a.config, a.set)
    val = zt.data(a.config, a.set, validation=True)
    sample, _ = train.samples(0, 1)
    model = GPT(vocab=256, seq_len=sample.size(1), n_layer=a.layers, n_head=a.heads,
                d_model=a.d_model)
    # Counted before initialize: at stage 3 a shard's parameters are empty outside a gather.
    parameters = sum(p.numel() for p in model.parameters())
    engine = zt.initialize(model, config=a.config, overrides=a.set)
    rank, world = engine.rank, engine.world_size
    if rank == 0:
        print(f"train_gpt: {parameters / 1e6:.2f}M parameters, "
              f"{engine.describe()}\n  data: {train.describe()}", flush=True)

    def evaluate(batches=eval_batches):
        # Every rank evaluates its own samples of the held-out data (the same at every
        # evaluation), as many forwards on every rank; stage 3 gathers as in forward, without
        # autograd. The mean over all ranks' samples comes from an all-reduce.
        mb = val.micro_batch
        total = torch.zeros(1, dtype=torch.float64)
        with torch.no_grad():
            for b in range(batches):
                x, y = val.samples((rank * batches + b) * mb, mb)
                total += F.cross_entropy(engine(x).float().flatten(0, 1), y.flatten()).item()
        engine.all_reduce(total)
        return total.item() / (batches * world)

    next_sample, tokens, start = 0, 0, time.time()
    for step in range(steps):
        for micro in range(engine.gradient_accumulation_steps):
            x, y = train.get(next_sample, micro, rank, world)
            loss = engine.backward(engine.loss(x, y)).item()
            report = engine.step()
            tokens += x.numel() * world
        next_sample += train.samples_per_step(world)
        if rank == 0 and (step + 1) % 10 == 0:
            rate = tokens / (time.time() - start)
            print(f"step {step + 1}/{steps}  loss {loss:.4f}  lr {report['lr']:.2e}  "
                  f"grad norm {report['grad_norm']:.3f}  {rate:.0f} tok/s", flush=True)
        if (step + 1) % a.eval_every == 0 or step + 1 == steps:
            val_loss = evaluate()
            if rank == 0:
                print(f"eval after step {step + 1}: val loss {val_loss:.4f}  "
                      f"ppl {math.exp(val_loss):.2f}", flush=True)
    if a.save:
        folder = engine.save_checkpoint(a.save, next_sample=next_sample)
        if rank == 0:
            print(f"saved {folder} (trainer --resume loads it)")
    engine.close()


if __name__ == "__main__":
    main()
