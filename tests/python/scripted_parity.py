"""One nn.Module, two ways: trained from Python (zt.initialize) and, scripted, by `trainer`
(model.kind = "torchscript"), on the same data (zt.data reads the trainer's) at ZeRO stage 3 on
2 ranks: the losses are identical step for step. And checkpoints cross over: `trainer --resume`
continues from a checkpoint Python saved, Python's load_checkpoint from one the trainer saved,
and both continue exactly as the uninterrupted trainer run does: its losses, and its final
parameters and Adam moments, bit for bit.

Driver (run.sh NPROC 0: a plain process): scripted_parity.py TRAINER [fp32|bf16]
Worker (under python3 -m zt.launch --nproc 2): scripted_parity.py --worker JOB STEPS OUT
    [--save DIR] [--load DIR]
"""

import json
import os
import subprocess
import sys
import tempfile

import torch

import zt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torchscript"))
sys.path.insert(0, os.path.join(HERE, "..", "multiproc"))
import same_checkpoint  # noqa: E402
import torchscript_models as models  # noqa: E402


def module():
    return models.zt_like_gpt(layers=2, heads=2, d=32, seq_len=16, vocab=64, seed=5)


def worker(job, steps, out, save=None, load=None):
    engine = zt.initialize(module(), config=job)
    data = zt.data(job)
    rank, world = engine.rank, engine.world_size
    start = engine.load_checkpoint(load)["step"] if load else 0
    next_sample = start * data.samples_per_step(world)
    losses = {}
    for step in range(start, steps):
        x, y = data.get(next_sample, 0, rank, world)
        loss = torch.tensor([engine.backward(engine.loss(x, y)).item()], dtype=torch.float64)
        assert engine.step() is not None
        next_sample += data.samples_per_step(world)
        engine.all_reduce(loss)
        losses[step + 1] = loss.item() / world
    if save:
        engine.save_checkpoint(save, next_sample=next_sample)
    engine.close()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(losses, f)


def trainer_losses(metrics):
    with open(metrics) as f:
        lines = [json.loads(line) for line in f]
    return {line["step"]: line["loss"] for line in lines if "loss" in line and "event" not in line}


def same_tensors(a, b):
    """The first difference of two checkpoints (their step, every element of the parameters and
    Adam's moments, the engine's counters), or None: the last step's update shows in no loss."""
    return same_checkpoint.first_difference_of(a, b, fields=("counters",))[0]


def driver(trainer, compute):
    # Removed at the end, also when a run fails (sys.exit unwinds through it).
    with tempfile.TemporaryDirectory(prefix="zt-parity.") as tmp:
        return compare_in(trainer, compute, tmp)


def compare_in(trainer, compute, tmp):
    pt = os.path.join(tmp, "gpt.pt")
    torch.jit.script(module()).save(pt)
    job = os.path.join(tmp, "job.toml")
    with open(job, "w") as f:
        f.write(f"""[run]
steps = 6
seed = 1234
[launch]
nproc = 2
[model]
kind = "torchscript"
path = "{pt}"
seq_len = 16
vocab = 64
[data]
kind = "synthetic"
micro_batch = 2
[zero]
stage = 3
[precision]
compute = "{compute}"
[plugins]
comm = "comm_ucx"
shard = "shard_bucket"
optimizer = "optim_hybrid_adam"
[plugin.optim_hybrid_adam]
lr = 1e-2
betas = [0.9, 0.95]
weight_decay = 0.1
adamw = true
""")

    def run(argv):
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.exit(f"scripted_parity: {' '.join(argv)} failed:\n{r.stdout[-3000:]}")

    def python(steps, out, *extra):
        run([sys.executable, "-m", "zt.launch", "--nproc", "2", __file__, "--worker", job,
             str(steps), out] + list(extra))
        with open(out) as f:
            return {int(k): v for k, v in json.load(f).items()}

    def trainer_run(name, steps, *extra):
        out = os.path.join(tmp, name)
        run([trainer, "--config", job, "--set", f"run.out_dir={out}", "--set",
             f"run.steps={steps}", "--set", "run.report=false"] + list(extra))
        return trainer_losses(os.path.join(out, "metrics.jsonl"))

    last_save = ["--set", "checkpoint.every_steps=6"]
    straight = trainer_run("straight", 6, *last_save)
    from_python = python(6, os.path.join(tmp, "py.json"))
    print(f"trainer: {straight}\npython:  {from_python}")
    if from_python != straight:
        return "the losses of Python and trainer differ"
    # Python saves after 4 steps; the trainer resumes from it.
    python(4, os.path.join(tmp, "py4.json"), "--save", os.path.join(tmp, "py-ckpt"))
    resumed = trainer_run("resumed", 6, "--resume", os.path.join(tmp, "py-ckpt"), *last_save)
    if resumed != {5: straight[5], 6: straight[6]}:
        return f"trainer resumed from Python's checkpoint gives {resumed}"
    differ = same_tensors(os.path.join(tmp, "straight", "checkpoints"),
                          os.path.join(tmp, "resumed", "checkpoints"))
    if differ:
        return f"trainer resumed from Python's checkpoint ends elsewhere: {differ}"
    # The trainer saves after 4 steps; Python loads it.
    trainer_run("saved", 4, "--set", "checkpoint.every_steps=4",
                "--set", f"checkpoint.dir={os.path.join(tmp, 'trainer-ckpt')}")
    loaded = python(6, os.path.join(tmp, "py-loaded.json"), "--load",
                    os.path.join(tmp, "trainer-ckpt"), "--save", os.path.join(tmp, "py-loaded"))
    if loaded != {5: straight[5], 6: straight[6]}:
        return f"Python loaded from the trainer's checkpoint gives {loaded}"
    differ = same_tensors(os.path.join(tmp, "straight", "checkpoints"),
                          os.path.join(tmp, "py-loaded"))
    if differ:
        return f"Python loaded from the trainer's checkpoint ends elsewhere: {differ}"
    print(f"scripted_parity ({compute}): identical losses, both checkpoint directions continue "
          "exactly, to the same final parameters and moments")
    return None


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        args = sys.argv[2:]
        extra = dict(zip(args[3::2], args[4::2]))
        worker(args[0], int(args[1]), args[2], extra.get("--save"), extra.get("--load"))
    else:
        failure = driver(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "fp32")
        if failure:
            print(f"scripted_parity: {failure}", file=sys.stderr)
            sys.exit(1)
