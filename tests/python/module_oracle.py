"""A Python model that TorchScript cannot script, trained by zt from Python, against
torch.optim.AdamW in one process on the same global batch: every parameter compared.

Run on every rank of a job (python3 -m zt.launch --nproc N module_oracle.py --stage S ...);
--stage 0,1,2,3 trains and compares at each stage in turn, an engine each.
The model is nanoGPT-like where the TorchScript kind refuses: token and position embeddings
summed in the parent, the residual added in the parent, a head tied to the token embedding, a
parameter held by the root module, a Python-side branch on a config object, and a custom loss
with Python control flow. Each rank initialises its module from its own seed: zt broadcasts rank
0's values, so the reference uses rank 0's. Exit 0 when every element is within the oracle's
fp32 tolerance (1e-6 + 1e-5 |reference|), 1 with the worst tensor named otherwise.
"""

import argparse
import math
import os
import sys
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

import zt

VOCAB, SEQ, D, HEADS, LAYERS = 32, 8, 16, 2, 2
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.95), 1e-8, 0.1


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.ln = nn.LayerNorm(cfg.d)
        # No bias: the key's would get only rounding noise as its gradient (softmax ignores it),
        # which Adam scales up to whole steps in either direction.
        self.qkv = nn.Linear(cfg.d, 3 * cfg.d, bias=False)
        self.proj = nn.Linear(cfg.d, cfg.d)
        self.mlp = nn.Sequential(nn.Linear(cfg.d, 2 * cfg.d), nn.GELU(), nn.Linear(2 * cfg.d, cfg.d))
        self.use_mlp = True

    def forward(self, x):
        h = self.ln(x)
        b, t, d = h.shape
        q, k, v = self.qkv(h).split(d, dim=2)
        q, k, v = (z.view(b, t, self.cfg.heads, d // self.cfg.heads).transpose(1, 2)
                   for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.cfg.heads) ** 0.5
        att = att.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf")).softmax(-1)
        y = self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        # A branch on a plain Python object: TorchScript cannot compile this class.
        if not self.use_mlp:
            return y
        if self.cfg.parallel:
            return y + self.mlp(h)
        return y + self.mlp(self.ln(x + y))


class TinyGpt(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d)
        self.wpe = nn.Embedding(cfg.seq, cfg.d)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d)
        self.head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        self.head.weight = self.wte.weight          # tied
        self.temperature = nn.Parameter(torch.ones(1))  # held by the root module itself
        if cfg.skip == "unused":
            self.spare = nn.Linear(cfg.d, cfg.d)    # a head no forward uses, on any rank
        self.chunk = 0  # the global batch's chunk the next forward runs (--skip)

    def forward(self, idx):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)           # summed in the parent: not a chain
        for i, block in enumerate(self.blocks):
            # A block (or its MLP) left out by the chunk's parity: its parameters get no gradient
            # on the ranks whose chunk skips it, and do on the others (chunk = micro step x
            # world + rank: ranks next to each other leave out different blocks).
            skipped = self.cfg.skip in ("blocks", "mlp") and (self.chunk + i) % 2 == 0
            if skipped and self.cfg.skip == "blocks":
                continue
            block.use_mlp = not skipped
            if self.cfg.checkpoint:                 # recomputed in backward, hooks and all
                x = x + torch.utils.checkpoint.checkpoint(
                    block, x, use_reentrant=self.cfg.checkpoint == "reentrant")
            else:
                x = x + block(x)                    # residual in the parent
        return self.head(self.ln_f(x)) / self.temperature


def custom_loss(logits, targets, smoothing={"on": True, "eps": 0.1}):
    logp = F.log_softmax(logits.float(), dim=-1)
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if smoothing["on"]:
        return ((1 - smoothing["eps"]) * nll - smoothing["eps"] * logp.mean(-1)).mean()
    return nll.mean()


def worst_excess(got, want):
    """The largest amount by which an element of `got` is off `want` beyond the fp32 tolerance
    (1e-6 + 1e-5 |want|), and its tensor's name. A NaN anywhere is the worst there is and stays
    so: a later finite excess never replaces it."""
    worst, worst_name = -math.inf, ""
    for name, w in want.items():
        w = w.detach().double()
        excess = ((got[name].double() - w).abs() - (1e-6 + 1e-5 * w.abs())).max().item()
        if math.isnan(excess):
            return excess, name
        if excess > worst:
            worst, worst_name = excess, name
    return worst, worst_name


def batches(steps, global_batch):
    g = torch.Generator().manual_seed(7)
    for _ in range(steps):
        tokens = torch.randint(0, VOCAB, (global_batch, SEQ + 1), generator=g)
        yield tokens[:, :-1], tokens[:, 1:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stage", required=True,
                   help="a ZeRO stage, or several (0,1,2,3): one engine after another, in one "
                        "launch (each python3 rank costs seconds to import torch)")
    p.add_argument("--shard", default="shard_bucket")
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--micro", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--offload", default="")
    p.add_argument("--nvme", default="")
    p.add_argument("--checkpoint", choices=["reentrant", "non-reentrant"],
                   help="torch.utils.checkpoint around every block, in this mode (non-reentrant "
                        "recomputes a block's forward inside the loss's backward, its saved "
                        "tensors views of the gathered parameters)")
    p.add_argument("--skip", choices=["blocks", "mlp", "unused"],
                   help="blocks, mlp: each block (or only its MLP, the block still run) is left "
                        "out of the forward by its chunk's parity, so ranks differ in the "
                        "parameters that get a gradient; unused: a head no forward uses"),
    p.add_argument("--check-collectives", action="store_true",
                   help="launch.check_collectives: the ranks compare every collective's op, "
                        "size, dtype and issuing phase before it runs")
    p.add_argument("--plant-nan", choices=["first", "middle", "last"],
                   help="a planted fault: one element of zt's result in the first, a middle or "
                        "the last tensor compared made NaN (the oracle must fail)")
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    failed = 0
    for stage in [int(s) for s in a.stage.split(",")]:
        failed += train_and_compare(a, stage, world, rank)
    return 1 if failed else 0


def train_and_compare(a, stage, world, rank):
    """Trains at `stage` and compares every parameter: 0 when all are within the tolerance, 1
    (the worst tensor named) otherwise."""
    cfg = types.SimpleNamespace(vocab=VOCAB, seq=SEQ, d=D, heads=HEADS, layers=LAYERS,
                                parallel=True, checkpoint=a.checkpoint,
                                skip=a.skip)
    torch.manual_seed(1234 + rank)
    model = TinyGpt(cfg)
    torch.manual_seed(1234)
    reference = TinyGpt(cfg)
    config = {
        "data": {"micro_batch": a.micro, "grad_accum": a.accum},
        "zero": {"stage": stage, "prefetch_units": 1, "param_persistence_threshold": 0},
        "plugins": {"comm": "comm_ucx", "shard": a.shard, "optimizer": "optim_hybrid_adam"},
        "plugin": {"optim_hybrid_adam": {"lr": LR, "betas": list(BETAS), "eps": EPS,
                                         "weight_decay": WD, "adamw": True}},
    }
    if a.check_collectives:
        config["launch"] = {"check_collectives": True}
    if a.offload:
        config["plugins"]["offload_optimizer"] = a.offload
        if a.offload == "offload_nvme":
            config["plugin"]["offload_nvme"] = {"path": a.nvme}
            config["zero"]["sub_group_size"] = 512
    engine = zt.initialize(model, config=config)
    assert engine.world_size == world and engine.rank == rank
    opt = torch.optim.AdamW(reference.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    if a.skip:
        # zt updates a parameter no micro batch of a step used as one whose gradient is 0
        # (weight decay, moments); AdamW skips one whose .grad is None, as before its first use.
        for param in reference.parameters():
            param.grad = torch.zeros_like(param)
    global_batch = a.micro * a.accum * world
    for x, y in batches(a.steps, global_batch):
        # This rank's micro batches: the trainer's order (micro step, then rank).
        for m in range(a.accum):
            at = (m * world + rank) * a.micro
            model.chunk = m * world + rank
            out = engine(x[at:at + a.micro])
            engine.backward(custom_loss(out, y[at:at + a.micro]))
            report = engine.step()
            assert (report is not None) == (m == a.accum - 1)
        opt.zero_grad(set_to_none=False)
        total = 0
        for chunk in range(a.accum * world):
            s = slice(chunk * a.micro, (chunk + 1) * a.micro)
            reference.chunk = chunk
            total = total + custom_loss(reference(x[s]), y[s])
        (total / (a.accum * world)).backward()
        opt.step()
    names = [n for n, _ in reference.named_parameters()]
    got = {name: engine.full_param(name) for name in names}
    if a.plant_nan:
        # The planted fault: one element of zt's result made NaN, which the oracle must report.
        planted = names[{"first": 0, "middle": len(names) // 2, "last": -1}[a.plant_nan]]
        got[planted] = got[planted].clone()
        got[planted].view(-1)[got[planted].numel() // 2] = float("nan")
        if rank == 0:
            print(f"module_oracle: planted a NaN in {planted}", flush=True)
    worst, worst_name = worst_excess(got, dict(reference.named_parameters()))
    assert sorted(engine.parameter_names()) == sorted(names), engine.parameter_names()
    engine.close()
    if rank == 0:
        print(f"module_oracle: stage {stage} {a.shard} world {world} accum {a.accum} "
              f"{a.offload or 'no offload'}: {len(names)} tensors, worst excess {worst:.3g} "
              f"({worst_name})")
    if not worst <= 0:
        print(f"module_oracle: stage {stage}: {worst_name} is {worst:.3g} outside the tolerance",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
