"""scripts/bench.sh tune: `trainer tune` against an exhaustive grid over the same space.

Three jobs on 2 ranks: the bench GPT (~10.8M parameters, bench/train's, configs/zero3.toml), an
MLP (8 Linear layers of 1024, synthetic data) and the headline job with offload to NVMe
(configs/zero3_offload.toml). For each:
  1. the grid: every composition `trainer estimate` lets start (stage 0-3 x offload placement x
     micro batch with the global batch kept, the placements the estimate would prune included),
     each run once as a plain job of --steps steps; its median step time after --warmup;
  2. `trainer tune --budget <the grid's time / 4>`, which searches that space and more (shard
     strategy, buckets, prefetch, persistence, offload fractions, tiles, queue depth);
  3. the tuned composition against the grid's best in one `trainer ab` (A B B A, --reps runs
     each), so the two are timed side by side.
Targets: the tuned composition's step within 5% of the grid's best (the A/B ratio), tune's time
<= 1/4 of the grid's. Prints a table and writes bench-results/tune.json.
    bench_tune.py BUILD_DIR [--jobs gpt,mlp,nvme] [--steps N] [--warmup W] [--reps R] [--json P]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
README = os.path.join(ROOT, "README.md")
TRIAL = ["checkpoint.every_steps=0", 'checkpoint.keep_best=""', "checkpoint.save_on_stop=false",
         "eval.every_steps=0",
         "run.report=false", "run.log_every=1"]
JOBS = {
    "gpt": ("configs/zero3.toml",
            ["model.n_layer=6", "model.d_model=384", "model.n_head=6", "model.seq_len=128",
             "model.vocab=256", "data.path=" + README]),
    "mlp": ("configs/zero3.toml",
            ['model.kind="mlp"', "model.width=1024", "model.depth=8", 'model.activation="relu"',
             'data.kind="synthetic"']),
    "nvme": ("configs/zero3_offload.toml", ["data.path=" + README]),
}


def sets(overrides):
    out = []
    for kv in overrides:
        out += ["--set", kv]
    return out


def run(argv, log):
    with open(log, "w") as f:
        code = subprocess.call(argv, stdout=f, stderr=subprocess.STDOUT)
    if code != 0:
        with open(log) as f:
            tail = "".join(f.readlines()[-8:])
        sys.exit(f"bench tune: {' '.join(argv[:3])} ... failed ({code}); {log} ends:\n{tail}")


def median_step(run_dir, warmup):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        steps = [json.loads(line) for line in f if '"step_time_s"' in line]
    return statistics.median(s["step_time_s"] for s in steps if s["step"] > warmup)


def bench_job(name, trainer, scratch, a):
    config, base = JOBS[name]
    config = os.path.join(ROOT, config)
    job = [trainer, "--config", config] + sets(base)
    nvme = os.path.join(scratch, name + "-nvme")
    job += sets(["plugin.offload_nvme.path=" + nvme])
    est = subprocess.run([trainer, "estimate"] + job[1:] + ["--json"], capture_output=True,
                         text=True)
    if est.returncode != 0:  # the trainer's own line says which key or file and what to do
        sys.exit(f"bench tune: trainer estimate of {name} failed ({est.returncode}):\n{est.stderr}")
    estimates = json.loads(est.stdout)
    grid, seen = [], set()
    for e in estimates[1:]:
        if "refused" in e or not e["fits"] or e["composition"] in seen:
            continue
        seen.add(e["composition"])
        grid.append(e)
    print(f"{name}: grid of {len(grid)} compositions that fit, {a.steps} steps each", flush=True)
    t0 = time.time()
    for i, e in enumerate(grid):
        out = os.path.join(scratch, f"{name}-grid-{i}")
        run(job + sets(e["overrides"] + TRIAL + [f"run.steps={a.steps}", "run.out_dir=" + out]),
            out + ".log")
        e["median_step_s"] = median_step(out, a.warmup)
        print(f"  [{i + 1}/{len(grid)}] {e['median_step_s'] * 1000:8.1f} ms  {e['composition']}",
              flush=True)
    grid_s = time.time() - t0
    best = min(grid, key=lambda e: e["median_step_s"])
    # A second under a quarter: tune itself takes a moment to start and to write its files.
    budget = max(10, int(grid_s / 4) - 1)
    tune_dir = os.path.join(scratch, name + "-tune")
    t0 = time.time()
    run([trainer, "tune"] + job[1:] + ["--budget", f"{budget:.0f}s", "--out", tune_dir],
        tune_dir + ".log")
    tune_s = time.time() - t0
    with open(os.path.join(tune_dir, "tune.json")) as f:
        tuned = json.load(f)
    winner = tuned["candidates"][tuned["winner"]]
    # The tuned composition (A) against the grid's best (B), side by side.
    ab_dir = os.path.join(scratch, name + "-ab")
    run([trainer, "ab"] + job[1:] + sets(TRIAL) +
        ["--a", ",".join(winner["overrides"]),
         "--b", ",".join(best["overrides"]), "--steps", str(a.steps), "--warmup", str(a.warmup),
         "--reps", str(a.reps), "--allow-different-math", "--out", ab_dir], ab_dir + ".log")
    with open(os.path.join(ab_dir, "ab.json")) as f:
        ab = json.load(f)
    # ab's speedup is A's median over B's: the tuned step time over the grid best's.
    speed = ab["speedup_b_over_a"]
    ratio = speed["ratio"]
    return {
        "job": name, "config": os.path.relpath(config, ROOT), "overrides": base,
        "grid": [{"composition": e["composition"], "overrides": e["overrides"],
                  "median_step_s": e["median_step_s"]} for e in grid],
        "grid_runs": len(grid), "grid_s": grid_s,
        "grid_best": {"composition": best["composition"], "median_step_s": best["median_step_s"]},
        "tune_budget_s": budget, "tune_s": tune_s, "tune_elapsed_s": tuned["elapsed_s"],
        "tune_candidates": len(tuned["candidates"]),
        "tune_trial_jobs": sum(len(r["jobs"]) for r in tuned["rounds"]),
        "tuned": {"composition": winner["composition"], "overrides": winner["overrides"]},
        "tune_verdict": tuned["verdict"],
        "tuned_over_grid_best": {"ratio": ratio, "low": speed["ci95_low"],
                                 "high": speed["ci95_high"],
                                 "tuned_median_s": ab["a"]["median_step_s"],
                                 "grid_best_median_s": ab["b"]["median_step_s"]},
        "within_5_percent": ratio <= 1.05,
        "time_share": tune_s / grid_s,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--jobs", default="gpt,mlp,nvme")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--json", default=os.path.join(ROOT, "bench-results", "tune.json"))
    a = p.parse_args()
    trainer = os.path.join(a.build, "bin", "trainer")
    scratch = tempfile.mkdtemp(prefix="zt-bench-tune.")
    results = [bench_job(name, trainer, scratch, a) for name in a.jobs.split(",")]
    print("\n| job | grid: runs, time | grid's best | tune: time (budget) | tuned | tuned / grid "
          "best step (95% CI) | targets |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        t = r["tuned_over_grid_best"]
        ok = ("within 5%" if r["within_5_percent"] else "MISSED 5%") + ", " + \
             ("<= 1/4 time" if r["time_share"] <= 0.25 else "MISSED 1/4 time")
        print(f"| {r['job']} | {r['grid_runs']}, {r['grid_s']:.0f} s | "
              f"{r['grid_best']['composition']} ({r['grid_best']['median_step_s'] * 1000:.0f} ms) | "
              f"{r['tune_s']:.0f} s ({r['tune_budget_s']:.0f} s) | {r['tuned']['composition']} | "
              f"{t['ratio']:.3f} ({t['low']:.3f}-{t['high']:.3f}) | {ok} |")
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    # Written whole, then renamed: a bench stopped mid-write leaves the earlier results.
    with open(a.json + ".tmp", "w") as f:
        json.dump({"bench": "tune", "steps": a.steps, "warmup": a.warmup, "reps": a.reps,
                   "jobs": results}, f, indent=1)
    os.replace(a.json + ".tmp", a.json)
    print(f"\nbench tune: every number in {a.json}; runs under {scratch}")


if __name__ == "__main__":
    main()
