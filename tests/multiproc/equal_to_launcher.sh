#!/usr/bin/env bash
# The check the cluster tests (slurm_test.sh, mpirun_test.sh) end with: a job that another
# launcher ran as 4 ranks equals the same job started by zt's own launcher as 4 ranks on one
# host. Runs the local job (once per WORK: a second call reuses it), then compares rank 0's
# losses step by step: bit for bit with --exact (the same transport sums in the same order),
# else bit for bit or within 1e-6 relative (UCX's ring across hosts may sum in another order than
# one host's shared memory), and says which, with the median step time of both.
#   equal_to_launcher.sh TRAINER SOURCE_DIR WORK WHAT METRICS [--exact] [--set ...]
# WHAT names the other launcher ("sbatch -N 2", "mpirun"); METRICS is its rank 0's metrics.jsonl;
# the --set arguments are the job's (run.steps among them). Exit 1 naming the difference.
set -euo pipefail
trainer=$1 src=$2 work=$3 what=$4 metrics=$5
shift 5
bound=1e-6
if [ "${1:-}" = --exact ]; then
  bound=0
  shift
fi
if [ ! -f "$work/local/run/metrics.jsonl" ]; then
  timeout 300 "$trainer" --config "$src/configs/zero3.toml" --nproc 4 "$@" \
    --set "run.out_dir=\"$work/local/run\"" >"$work/local.log" 2>&1 ||
    { cat "$work/local.log" >&2; echo "FAILED: the same job under zt's launcher failed" >&2; exit 1; }
fi
python3 - "$what" "$metrics" "$work/local/run/metrics.jsonl" "$bound" <<'PY'
import json, sys
what, bound = sys.argv[1], float(sys.argv[4])
def steps(path):
    return {j["step"]: j for j in map(json.loads, open(path)) if "event" not in j and "loss" in j}
other, local = steps(sys.argv[2]), steps(sys.argv[3])
if not other or sorted(other) != sorted(local) or sorted(local) != list(range(1, len(local) + 1)):
    sys.exit(f"FAILED: steps logged: {what} {sorted(other)}, zt's launcher {sorted(local)}")
worst = max(abs(other[s]["loss"] - local[s]["loss"]) / abs(local[s]["loss"]) for s in local)
if worst > bound:
    sys.exit(f"FAILED: losses differ by {worst:.3g} relative (bound {bound:g}): "
             + ", ".join(f"{s}: {other[s]['loss']} vs {local[s]['loss']}" for s in sorted(local)))
how = "bit for bit" if worst == 0 else f"within {worst:.2g} relative (another summation order)"
median = lambda run: sorted(run[s]["step_time_s"] for s in run if s > 1)[(len(run) - 1) // 2]
print(f"{what}: {len(local)} steps of 4 ranks equal zt's launcher's 4 on one host {how}; "
      f"step time (median past step 1) {median(other):.3f} s under {what}, "
      f"{median(local):.3f} s under zt's launcher")
PY
