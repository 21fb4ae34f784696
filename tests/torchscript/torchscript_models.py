#!/usr/bin/env python3
"""TorchScript models for zt's tests and bench, and PyTorch's own training of them (the reference).

  torchscript_models.py make OUT_DIR
      Writes, each from a fixed seed: gpt.pt (token ids -> logits, a tied LM head, causal-mask
      buffers), masked_gpt.pt (gpt.pt whose logits of ids 48-63 are -inf in eval mode), cnn.pt (images [3, 8, 8] -> [10]), and the bad inputs the tests refuse:
      noparams.pt (no parameters), not_sequential.pt (a forward that is more than its units in
      order), state_dict.pt (torch.save of a state dict), newer.pt (gpt.pt claiming a newer file
      format version), param_loss.pt (a loss method that reads a parameter); and, on vectors [8]
      -> [8], buffered.pt (a float buffer in a unit's forward), dropout.pt (dropout between
      two layers) and parent_dropout.pt (dropout in the parent's forward, between its units).

  torchscript_models.py gpt OUT.pt N_LAYER N_HEAD D_MODEL SEQ_LEN VOCAB
      Writes a GPT computed as zt's built-in one is (a qkv bias, tanh-approximated GELU, a tied
      head, N(0, 0.02) weights), for bench/train's built-in vs TorchScript row.

  torchscript_models.py train MODEL.pt BATCHES.safetensors OUT.safetensors STEPS LR WD EPS LOSS CHUNKS
      Loads MODEL.pt with torch.jit.load and trains it in one process with torch.optim.AdamW
      (betas 0.9/0.95, lr LR, weight decay WD, eps EPS) for STEPS steps, step s on the tensors input.<s> / target.<s> of
      BATCHES (the whole global batch), LOSS one of cross_entropy | mse | method; writes every
      parameter under its own name to OUT. The global batch's gradient is accumulated over CHUNKS
      equal consecutive parts (the mean of the parts' mean losses, as data parallel ranks average
      it): the same gradient as one pass, summed in the order zt's ranks sum it, which keeps
      rounding apart from the comparison where Adam would magnify it.

Both files are read and written as safetensors (Hugging Face's layout), with no package beyond
torch.
"""
import json
import math
import os
import struct
import sys
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "I64": torch.int64, "F64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=DTYPES[entry["dtype"]])
        out[name] = t.reshape(entry["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class Embed(nn.Module):
    def __init__(self, vocab, seq_len, d):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq_len, d)

    def forward(self, idx):
        pos = torch.arange(idx.size(1), device=idx.device)
        return self.wte(idx) + self.wpe(pos)


class Block(nn.Module):
    def __init__(self, seq_len, d, heads, like_zt=False):
        super().__init__()
        self.heads = heads
        self.gelu = "tanh" if like_zt else "none"
        self.ln1 = nn.LayerNorm(d)
        # No bias in the tests: the key bias has an exactly zero gradient (softmax ignores a
        # per-row shift), so Adam would amplify rounding noise there and no two implementations
        # could agree. The bench's copy of zt's GPT has one, as zt's has.
        self.qkv = nn.Linear(d, 3 * d, bias=like_zt)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool)))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.mask[:t, :t].logical_not(), float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate=self.gelu))


class Head(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        return self.lm_head(self.ln_f(x))


class MaskedHead(Head):
    """Head whose logits of ids from `first_masked` on are -inf outside training: how a model
    rules out ids it has no use for (the padding of its vocabulary) when it is evaluated."""

    def __init__(self, vocab, d, first_masked: int):
        super().__init__(vocab, d)
        self.first_masked = first_masked

    def forward(self, x):
        logits = self.lm_head(self.ln_f(x))
        if not self.training:
            logits = torch.cat([logits[..., :self.first_masked],
                                torch.full_like(logits[..., self.first_masked:], -math.inf)], -1)
        return logits


class Gpt(nn.Module):
    def __init__(self, vocab, seq_len, d, heads, layers, like_zt=False, masked_from=0):
        super().__init__()
        self.embed = Embed(vocab, seq_len, d)
        self.blocks = nn.ModuleList([Block(seq_len, d, heads, like_zt) for _ in range(layers)])
        self.head = MaskedHead(vocab, d, masked_from) if masked_from > 0 else Head(vocab, d)
        self.head.lm_head.weight = self.embed.wte.weight  # tied, as GPT-2
        # GPT-2's init for the embeddings (N(0, 1) would start the tied head at a loss of ~20).
        nn.init.normal_(self.embed.wte.weight, std=0.02)
        nn.init.normal_(self.embed.wpe.weight, std=0.02)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()),
            nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8 * 4 * 4, 10))

    def forward(self, x):
        return self.classifier(self.features(x))

    @torch.jit.export
    def loss(self, output, target):
        return F.mse_loss(output, target)


class NoParams(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(x)


class NotSequential(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x)) + x  # a residual the units cannot express


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return self.lin(x) * self.scale


class Buffered(nn.Module):
    def __init__(self):
        super().__init__()
        self.scaled = Scaled()
        self.out = nn.Linear(8, 8)

    def forward(self, x):
        return self.out(self.scaled(x))


class WithDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.drop = nn.Dropout(0.5)
        self.b = nn.Linear(16, 8)

    def forward(self, x):
        return self.b(self.drop(self.a(x)))


class ParentDropout(nn.Module):
    """Dropout in the parent's forward, between its two units: equal to the units' chain in eval
    mode only."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 8)

    def forward(self, x):
        return self.b(F.dropout(self.a(x), 0.5, self.training))


class ParamLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        return self.a(x)

    @torch.jit.export
    def loss(self, output, target):
        return F.mse_loss(output, target) + 0.01 * (self.a.weight ** 2).sum()


def save(module, path):
    torch.jit.script(module).save(path)


def make(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(1)
    save(Gpt(vocab=64, seq_len=16, d=32, heads=2, layers=2), os.path.join(out_dir, "gpt.pt"))
    torch.manual_seed(1)
    save(Gpt(vocab=64, seq_len=16, d=32, heads=2, layers=2, masked_from=48),
         os.path.join(out_dir, "masked_gpt.pt"))
    torch.manual_seed(2)
    save(Cnn(), os.path.join(out_dir, "cnn.pt"))
    save(NoParams(), os.path.join(out_dir, "noparams.pt"))
    torch.manual_seed(3)
    save(NotSequential(), os.path.join(out_dir, "not_sequential.pt"))
    torch.save(Cnn().state_dict(), os.path.join(out_dir, "state_dict.pt"))
    save(Buffered(), os.path.join(out_dir, "buffered.pt"))
    save(WithDropout(), os.path.join(out_dir, "dropout.pt"))
    save(ParentDropout(), os.path.join(out_dir, "parent_dropout.pt"))
    save(ParamLoss(), os.path.join(out_dir, "param_loss.pt"))
    # A newer PyTorch writes a higher format version into the archive's "version" record.
    with zipfile.ZipFile(os.path.join(out_dir, "gpt.pt")) as src, \
            zipfile.ZipFile(os.path.join(out_dir, "newer.pt"), "w", zipfile.ZIP_STORED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith("/version"):
                data = b"99\n"
            dst.writestr(item, data)


def zt_like_gpt(layers, heads, d, seq_len, vocab, seed=5):
    """zt's GPT with GPT-2's init, as the built-in one starts: N(0, 0.02) weights, zero biases,
    identity LayerNorms."""
    torch.manual_seed(seed)
    model = Gpt(vocab=vocab, seq_len=seq_len, d=d, heads=heads, layers=layers, like_zt=True)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif ".ln" not in name:
            nn.init.normal_(p, std=0.02)
    return model


def make_zt_like_gpt(path, layers, heads, d, seq_len, vocab):
    save(zt_like_gpt(layers, heads, d, seq_len, vocab), path)


def train(model_path, batches_path, out_path, steps, lr, wd, eps, loss_kind, chunks):
    model = torch.jit.load(model_path)
    model.train()
    batches = read_safetensors(batches_path)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=eps,
                            weight_decay=wd)
    for s in range(steps):
        opt.zero_grad()
        total = 0.0
        for inputs, target in zip(batches["input.%d" % s].chunk(chunks),
                                  batches["target.%d" % s].chunk(chunks)):
            out = model(inputs)
            if loss_kind == "cross_entropy":
                loss = F.cross_entropy(out.reshape(-1, out.size(-1)), target.reshape(-1))
            elif loss_kind == "mse":
                loss = F.mse_loss(out, target)
            else:
                loss = model.loss(out, target)
            (loss / chunks).backward()
            total += loss.item() / chunks
        opt.step()
        print("step %d loss %.6f" % (s + 1, total))
    write_safetensors(out_path, dict(model.named_parameters()))


def main(argv):
    if len(argv) == 3 and argv[1] == "make":
        make(argv[2])
    elif len(argv) == 8 and argv[1] == "gpt":
        make_zt_like_gpt(argv[2], *(int(a) for a in argv[3:8]))
    elif len(argv) == 11 and argv[1] == "train":
        train(argv[2], argv[3], argv[4], int(argv[5]), float(argv[6]), float(argv[7]),
              float(argv[8]), argv[9], int(argv[10]))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
