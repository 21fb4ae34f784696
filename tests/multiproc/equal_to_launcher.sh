#!/usr/bin/env bash
# The check the cluster tests (slurm_test.sh, mpirun_test.sh) end with: a job that another
# launcher ran as 4 ranks equals the same job started by zt's own launcher as 4 ranks on one
# host. Runs the local job (once per WORK and mode: a second call reuses it), then compares rank
# 0's losses step by step and the final checkpoints (every parameter and optimizer state, the
# counters, the trainer's state: tests/multiproc/same_checkpoint.py), with the median step time
# of both:
#   --exact  the reference is zt's launcher as it runs by default (one host's shared memory):
#            the other job summed in the same order, so all of it equals bit for bit;
#   --ring   the other job's ranks span hosts, where comm_ucx runs its ring: the reference runs
#            the ring too (plugin.comm_ucx.shared_memory = false), the same sums in the same
#            order, so all of it equals bit for bit; against the default reference (shared
#            memory sums in another order) the losses are compared within 1e-6 relative and
#            the test says how close they came.
#   equal_to_launcher.sh TRAINER SOURCE_DIR WORK WHAT RUN_DIR --exact|--ring [--set ...]
# WHAT names the other launcher ("sbatch -N 2", "mpirun"); RUN_DIR is its run.out_dir (its
# metrics.jsonl and checkpoints); the --set arguments are the job's (run.steps among them, and a
# checkpoint.every_steps that saves the last step). Exit 1 naming the difference.
set -euo pipefail
trainer=$1 src=$2 work=$3 what=$4 run=$5 mode=$6
shift 6
case "$mode" in
  --exact | --ring) ;;
  *) echo "equal_to_launcher.sh: the mode is --exact or --ring, not '$mode'" >&2; exit 2 ;;
esac

# reference NAME [--set ...]: zt's launcher runs the job as 4 local ranks in WORK/NAME/run.
reference() {
  local name=$1
  shift
  [ -f "$work/$name/run/metrics.jsonl" ] && return 0
  timeout 300 "$trainer" --config "$src/configs/zero3.toml" --nproc 4 "$@" \
    --set "run.out_dir=\"$work/$name/run\"" >"$work/$name.log" 2>&1 || {
    cat "$work/$name.log" >&2
    echo "FAILED: the same job under zt's launcher ($name) failed" >&2
    exit 1
  }
}
# same_losses REFERENCE BOUND: rank 0's losses of every step, within BOUND relative (0: bit for
# bit).
same_losses() {
  python3 - "$what" "$run/metrics.jsonl" "$work/$1/run/metrics.jsonl" "$2" "$1" <<'PY'
import json, sys
what, bound, name = sys.argv[1], float(sys.argv[4]), sys.argv[5]
def steps(path):
    return {j["step"]: j for j in map(json.loads, open(path)) if "event" not in j and "loss" in j}
other, local = steps(sys.argv[2]), steps(sys.argv[3])
if not other or sorted(other) != sorted(local) or sorted(local) != list(range(1, len(local) + 1)):
    sys.exit(f"FAILED: steps logged: {what} {sorted(other)}, zt's launcher {sorted(local)}")
worst = max(abs(other[s]["loss"] - local[s]["loss"]) / abs(local[s]["loss"]) for s in local)
if worst > bound:
    sys.exit(f"FAILED: losses differ from zt's launcher's ({name}) by {worst:.3g} relative "
             f"(bound {bound:g}): "
             + ", ".join(f"{s}: {other[s]['loss']} vs {local[s]['loss']}" for s in sorted(local)))
how = "bit for bit" if worst == 0 else f"within {worst:.2g} relative (another summation order)"
median = lambda run: sorted(run[s]["step_time_s"] for s in run if s > 1)[(len(run) - 1) // 2]
print(f"{what}: {len(local)} losses of 4 ranks equal zt's launcher's 4 on one host ({name}) "
      f"{how}; step time (median past step 1) {median(other):.3f} s under {what}, "
      f"{median(local):.3f} s under zt's launcher")
PY
}

exact=local
if [ "$mode" = --ring ]; then
  exact=local-ring
  reference local-ring "$@" --set plugin.comm_ucx.shared_memory=false
  reference local "$@"
  same_losses local 1e-6
else
  reference local "$@"
fi
same_losses "$exact" 0
python3 "$src/tests/multiproc/same_checkpoint.py" "$run/checkpoints" \
  "$work/$exact/run/checkpoints" "$what against zt's launcher ($exact)"
