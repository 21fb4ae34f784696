"""What a config has to say reaches the user once under python3 -m zt.launch, a launcher that
reads no config (the trainer's own launcher says it for its ranks, which keep quiet; zt.launch's
ranks kept quiet too, so nobody said it): a [plugin.X] table no role selects, a launch.nproc the
started ranks do not match, and a DeepSpeed JSON whose "auto" keys take zt's defaults with its
decay over run.steps' default. A plain process (run.sh NPROC 0) that starts 2 ranks of WORKER
and checks their output: every warning once, and the job trains.
"""

import json
import os
import subprocess
import sys
import tempfile

WORKER = r'''
import sys, torch, zt
torch.manual_seed(0)
plugins = {"comm": "comm_ucx", "shard": "shard_bucket", "optimizer": "optim_hybrid_adam"}
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
e = zt.initialize(m, config={"launch": {"nproc": 3}, "plugins": plugins,
                             "plugin": {"offload_nvme": {"path": sys.argv[2]}}})
e.backward(e.loss(torch.randn(2, 4), torch.randn(2, 2)))
assert e.step() is not None
e.close()
e = zt.initialize(torch.nn.Linear(4, 2), config=sys.argv[1])
e.backward(e.loss(torch.randn(1, 4), torch.randn(1, 2)))
assert e.step() is not None
print(f"rank {e.rank}: trained", flush=True)
'''

# Hugging Face's ZeRO template, as its Trainer would fill it in.
DEEPSPEED = {
    "train_micro_batch_size_per_gpu": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupDecayLR",
                  "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                             "warmup_num_steps": "auto", "total_num_steps": "auto"}},
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 2},
}

EXPECTED = [
    "which no role of [plugins] selects",
    "launch.nproc = 3, but this job has 2 rank(s)",
    'leaves optimizer.params.lr, optimizer.params.weight_decay, scheduler.params.warmup_min_lr, '
    'scheduler.params.warmup_max_lr, scheduler.params.warmup_num_steps, '
    'scheduler.params.total_num_steps, bf16.enabled to "auto"',
    'run.lr_schedule = "linear" decays over run.steps = 10',
]


def main():
    with tempfile.TemporaryDirectory() as d:
        worker = os.path.join(d, "worker.py")
        with open(worker, "w") as f:
            f.write(WORKER)
        ds = os.path.join(d, "ds_config.json")
        with open(ds, "w") as f:
            json.dump(DEEPSPEED, f)
        run = subprocess.run([sys.executable, "-m", "zt.launch", "--nproc", "2", worker, ds, d],
                             capture_output=True, text=True, timeout=240)
    out = run.stdout + run.stderr
    print(out)
    failed = []
    if run.returncode != 0:
        failed.append(f"the job exited {run.returncode}")
    for rank in (0, 1):
        if f"rank {rank}: trained" not in out:
            failed.append(f"rank {rank} did not train")
    for warning in EXPECTED:
        if out.count(warning) != 1:
            failed.append(f"{out.count(warning)} times, not once: {warning}")
    for f in failed:
        print(f"config_warnings: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
