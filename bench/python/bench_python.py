"""scripts/bench.sh python: zt trained from Python (zt.initialize on a plain nn.Module) against
the same job run by `trainer` and by PyTorch DDP, interleaved.

The bench GPT (~10.8M parameters, bench/train's) at ZeRO stage 3 on 2 ranks (configs/zero3.toml),
fp32, all three from the same weights (ddp_gpt.py weights) on the same data (README.md, the
trainer's sample order): `trainer` with model.init_from, the zt-like GPT of
tests/torchscript/torchscript_models.py through zt.initialize (bench/python/zt_gpt.py), and that
GPT under torch DistributedDataParallel (bench/train/ddp_gpt.py). Prints the median step time
after the warm-up, tokens/s and the ratios (targets: Python >= 0.95x the trainer, >= 1.3x DDP),
the largest loss difference against the trainer, and writes bench-results/python.json.
    bench_python.py BUILD_DIR [--steps N] [--warmup W] [--reps R] [--json PATH]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GPT = ["model.n_layer=6", "model.d_model=384", "model.n_head=6", "model.seq_len=128",
       "model.vocab=256"]


def run(argv, log, env=None):
    with open(log, "w") as f:
        code = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT, env=env)
    if code != 0:
        with open(log) as f:
            tail = "".join(f.readlines()[-8:])
        sys.exit(f"bench python: {argv[0]} failed ({code}); {log} ends:\n{tail}")


def steps_of(path, warmup):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.startswith('{"step"')]
    return [line for line in lines if "step_time_s" in line and line["step"] > warmup]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--bf16", action="store_true",
                   help="precision.compute = bf16 for zt; DDP under bf16 autocast")
    p.add_argument("--json", default=None, help="default bench-results/python[-bf16].json")
    a = p.parse_args()
    if a.json is None:
        a.json = os.path.join(ROOT, "bench-results", "python-bf16.json" if a.bf16 else "python.json")
    trainer = os.path.join(a.build, "bin", "trainer")
    python = "/usr/bin/python3"
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"))
    scratch = tempfile.mkdtemp(prefix="zt-bench-python.")
    weights = os.path.join(scratch, "init.safetensors")
    run([python, os.path.join(ROOT, "bench/train/ddp_gpt.py"), "weights", weights, "6", "6",
         "384", "128", "256", "1234"], weights + ".log")
    sets = GPT + [f"data.path={ROOT}/README.md", f"run.steps={a.steps}", "run.report=false",
                  f"model.init_from={weights}"] + (["precision.compute=bf16"] if a.bf16 else [])
    base = [trainer, "--config", os.path.join(ROOT, "configs/zero3.toml")]
    for kv in sets:
        base += ["--set", kv]
    config = os.path.join(scratch, "job.toml")
    with open(config, "w") as f:
        f.write(subprocess.check_output(base + ["--print-config"], text=True))
    arms = {"trainer": [], "python": [], "ddp": []}
    losses = {}
    for rep in range(a.reps):
        order = ["trainer", "python", "ddp"] if rep % 2 == 0 else ["ddp", "python", "trainer"]
        for arm in order:
            out = os.path.join(scratch, f"{arm}-{rep}")
            if arm == "trainer":
                run(base + ["--set", f"run.out_dir={out}"], out + ".log")
                metrics = os.path.join(out, "metrics.jsonl")
            elif arm == "python":
                metrics = out + ".jsonl"
                run([python, "-m", "zt.launch", "--nproc", "2",
                     os.path.join(ROOT, "bench/python/zt_gpt.py"), config, weights, metrics],
                    out + ".log", env)
            else:
                metrics = out + ".jsonl"
                run([python, os.path.join(ROOT, "bench/train/ddp_gpt.py"), "train", config,
                     weights, metrics], out + ".log", env)
            lines = steps_of(metrics, a.warmup)
            arms[arm].append(statistics.median(line["step_time_s"] for line in lines))
            losses[arm] = [line["loss"] for line in lines]
            print(f"  {arm} {rep + 1}: median step {arms[arm][-1]:.4f} s", flush=True)
    tokens = 2 * 4 * 128  # global batch x seq_len (configs/zero3.toml: micro_batch 4, 2 ranks)
    med = {arm: statistics.median(times) for arm, times in arms.items()}
    diff = max(abs(x - y) for x, y in zip(losses["python"], losses["trainer"]))
    print("\n| run | median s/step | tokens/s | Python over it |\n|---|---:|---:|---:|")
    for arm, label in (("python", "zt from Python (zt.initialize)"), ("trainer", "zt trainer"),
                       ("ddp", "PyTorch DDP")):
        print(f"| {label} | {med[arm]:.4f} | {tokens / med[arm]:.0f} | "
              f"{med[arm] / med['python']:.3f} |")
    print(f"\nPython / trainer {med['trainer'] / med['python']:.3f} (target >= 0.95), "
          f"Python / DDP {med['ddp'] / med['python']:.3f} (target >= 1.3); largest loss "
          f"difference against the trainer over the timed steps {diff:.2e}")
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    # Written whole, then renamed: a bench stopped mid-write leaves the earlier results.
    with open(a.json + ".tmp", "w") as f:
        json.dump({"bench": "python", "compute": "bf16" if a.bf16 else "fp32", "steps": a.steps, "warmup": a.warmup, "reps": a.reps,
                   "median_step_s": med, "step_times": arms,
                   "python_over_trainer": med["trainer"] / med["python"],
                   "python_over_ddp": med["ddp"] / med["python"],
                   "max_loss_diff_vs_trainer": diff}, f)
    os.replace(a.json + ".tmp", a.json)
    print(f"results: {a.json}")


if __name__ == "__main__":
    main()
