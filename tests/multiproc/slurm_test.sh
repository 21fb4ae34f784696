#!/usr/bin/env bash
# zt under a real Slurm (scripts/slurm_cluster.sh: munge, slurmctld and a slurmd on each of two
# simulated hosts): `sbatch -N 2 --ntasks-per-node=2` of examples/slurm/train_cpu.sbatch trains
# the small GPT at stage 3 across the two hosts, its ranks placed by srun and meeting where the
# job says (no MASTER_ADDR/PORT: the first node of SLURM_JOB_NODELIST, the port from the job id),
# and its losses equal those of the same 4 ranks started by zt's own launcher on one host: bit
# for bit, or within 1e-6 relative where UCX's ring across hosts sums in another order than the
# shared memory of one host (the test prints which). It also prints the time from sbatch to the
# first step, and the step times of both; `slurm_cluster.sh down` must leave no daemon and no
# namespace. Exit 77 (skipped) where namespaces cannot be made or Slurm is not installed, except
# under CI.
#   slurm_test.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$(realpath "$1")
src=$2
source "$src/tests/multiproc/slurm_common.sh"

sets=(--set "data.path=\"$src/README.md\"" --set run.steps=6 --set launch.timeout_s=60
  --set run.report=false)
start=$(date +%s%N)
job=$(submit "$tmp/job" -- "${sets[@]}" --set "run.out_dir=\"$tmp/job/run\"")
wait_step "$tmp/job/run/metrics.jsonl" 1 "$job"
first_step=$(( ($(date +%s%N) - start) / 1000000 ))
wait_state "$job" 300 COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY
cat "$tmp/job/job.out"
[ "$(job_state "$job")" = COMPLETED ] || fail "the Slurm job ended $(job_state "$job")"
echo "slurm test: sbatch to the first step in $first_step ms"
grep -q "zt: rendezvous at n0:[0-9]* from the slurm job (MASTER_ADDR n0, the first host of SLURM_JOB_NODELIST=n\[0-1\]" \
  "$tmp/job/job.out" || fail "rank 0 did not say it met at the job's first node"
grep -q "4 rank(s), comm_ucx: pipelined ring over UCX" "$tmp/job/job.out" ||
  fail "the 4 ranks did not use UCX's ring between the hosts"

timeout 300 "$trainer" --config "$src/configs/zero3.toml" --nproc 4 "${sets[@]}" \
  --set "run.out_dir=\"$tmp/local/run\"" >"$tmp/local.log" 2>&1 ||
  { cat "$tmp/local.log" >&2; fail "the same job under zt's launcher failed"; }

python3 - "$tmp/job/run/metrics.jsonl" "$tmp/local/run/metrics.jsonl" <<'PY'
import json, sys
def steps(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "event" not in j and "loss" in j:
            out[j["step"]] = j
    return out
slurm, local = steps(sys.argv[1]), steps(sys.argv[2])
if sorted(slurm) != list(range(1, 7)) or sorted(local) != list(range(1, 7)):
    sys.exit(f"FAILED: steps logged: Slurm {sorted(slurm)}, zt's launcher {sorted(local)}")
worst = max(abs(slurm[s]["loss"] - local[s]["loss"]) / abs(local[s]["loss"]) for s in slurm)
if worst > 1e-6:
    sys.exit(f"FAILED: losses differ by {worst:.3g} relative (bound 1e-6): "
             + ", ".join(f"{s}: {slurm[s]['loss']} vs {local[s]['loss']}" for s in sorted(slurm)))
how = "bit for bit" if worst == 0 else f"within {worst:.2g} relative (another summation order)"
median = lambda xs: sorted(xs)[len(xs) // 2]
print(f"slurm test: 6 steps of 4 ranks on 2 hosts under sbatch equal zt's launcher on one host "
      f"{how}; step time (median of steps 2-6) {median([slurm[s]['step_time_s'] for s in range(2, 7)]):.3f} s "
      f"under Slurm, {median([local[s]['step_time_s'] for s in range(2, 7)]):.3f} s under zt's launcher")
PY

# Stopped, the cluster leaves nothing behind: no daemon, no namespace.
cluster down
left=$(pgrep -af "slurmctld -D -i|slurmd -D -N n[01]|munged --foreground --key-file=$tmp/" || true)
[ -z "$left" ] || fail "daemons left after slurm_cluster.sh down: $left"
! ip netns list | grep -q "^$name-h" || fail "namespaces left after slurm_cluster.sh down"
echo "slurm test: slurm_cluster.sh down left no daemon and no namespace"
