#!/usr/bin/env bash
# Preemption and requeue under a real Slurm (scripts/slurm_cluster.sh, two simulated hosts, the
# example job script with --requeue): a job of 4 ranks is stopped twice and comes back where it
# was, and its losses and final checkpoint (every parameter and optimizer state) equal those of
# the same job run without a stop, bit for bit (the same ranks on the same hosts sum in the same
# order):
#   1. Slurm's warning, SIGUSR1 to the batch shell (`scancel -b -s USR1`, what --signal=B:USR1@N
#      sends): the script hands it to the ranks, which finish their step, save and exit 0; the
#      script requeues the job. No step is lost.
#   2. `scontrol requeue`: Slurm stops the ranks with SIGTERM (they save the same way) and queues
#      the job again itself.
# Then the same signal in start-up, before any rank has joined: the job is requeued and trains
# from the start, equal all the same; and during a save (sent as its temporary folder appears):
# the save completes, the job resumes from it. And a planted fault: a rank SIGKILLed under srun fails the
# job, srun naming the task (the rank); `scontrol requeue` then resumes it from its newest periodic checkpoint,
# equal again. The test prints the steps lost at each stop. Exit 77 (skipped) where namespaces
# cannot be made or Slurm is not installed, except under CI.
#   slurm_preempt_test.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$(realpath "$1")
src=$2
source "$src/tests/multiproc/slurm_common.sh"

steps=12
sets=(--set "data.path=\"$src/tests/data/corpus.txt\"" --set run.steps=$steps --set launch.timeout_s=60
  --set run.report=false --set checkpoint.every_steps=4 --set model.n_layer=2)

# requeued JOB: the job is back in the queue. Slurm holds a requeued job ~2 minutes; the test
# starts it once its nodes are idle again, and a second later: slurmd refuses a credential made in
# the second its previous run's was revoked ("Job credential revoked").
requeued() {
  local t
  wait_state "$1" 120 PENDING
  for ((t = 0; t < 300; ++t)); do
    [ "$(on sinfo -h -N -o '%t' | grep -c '^idle')" = 2 ] && break
    sleep 0.2
  done
  sleep 1
  on scontrol update JobId="$1" StartTime=now
}
# same_losses A B WHAT: rank 0's losses of steps 1..$steps equal bit for bit.
same_losses() {
  python3 - "$1" "$2" "$3" "$steps" <<'PY'
import json, sys
def losses(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "event" not in j and "loss" in j:
            out[j["step"]] = j["loss"]  # a resumed run's lines replace those past its checkpoint
    return out
a, b, what, n = losses(sys.argv[1]), losses(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if sorted(a) != list(range(1, n + 1)) or a != b:
    sys.exit(f"FAILED: {what}: losses differ from the uninterrupted job's: "
             + ", ".join(f"{s}: {a.get(s)} vs {b.get(s)}" for s in range(1, n + 1)
                         if a.get(s) != b.get(s)))
print(f"slurm preempt test: {what}: {n} losses equal the uninterrupted job's bit for bit")
PY
}
# same_state DIR WHAT: DIR's final checkpoint equals the uninterrupted job's bit for bit: every
# parameter and optimizer state, the counters, the trainer's state.
same_state() {
  python3 "$src/tests/multiproc/same_checkpoint.py" "$1/run/checkpoints" \
    "$tmp/ref/run/checkpoints" "slurm preempt test: $2"
}
# lost DIR: the steps each stop lost (the step it stopped or failed after, less the step the next
# run resumed at), from the job's output.
lost() {
  python3 - "$1/job.out" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
stops = [int(s) for s in re.findall(r"zt: stopped by SIG\w+ after step (\d+)", text)]
resumes = [int(s) for s in re.findall(r"resumed from .*/step-\d+ at step (\d+)", text)]
print(" ".join(str(s - r) for s, r in zip(stops, resumes)) or "none")
PY
}

# The uninterrupted job.
ref=$(submit "$tmp/ref" -- "${sets[@]}" --set "run.out_dir=\"$tmp/ref/run\"")
run_to_end "$ref" "$tmp/ref" $steps

# Stopped twice: Slurm's warning, then scontrol requeue.
job=$(submit "$tmp/pre" -- "${sets[@]}" --set "run.out_dir=\"$tmp/pre/run\"")
wait_step "$tmp/pre/run/metrics.jsonl" 3 "$job"
on scancel -b -s USR1 "$job"
requeued "$job"
grep -q "zt: stopped by SIGUSR1 after step" "$tmp/pre/job.out" ||
  { cat "$tmp/pre/job.out" >&2; fail "the ranks did not stop on SIGUSR1"; }
wait_step "$tmp/pre/run/metrics.jsonl" 7 "$job"
on scontrol requeue "$job"
requeued "$job"
grep -q "zt: stopped by SIGTERM after step" "$tmp/pre/job.out" ||
  { cat "$tmp/pre/job.out" >&2; fail "the ranks did not stop on scontrol requeue's SIGTERM"; }
run_to_end "$job" "$tmp/pre" $steps
[ "$(grep -c "resumed from .*/step-" "$tmp/pre/job.out")" = 2 ] ||
  { cat "$tmp/pre/job.out" >&2; fail "the job did not resume twice"; }
same_losses "$tmp/pre/run/metrics.jsonl" "$tmp/ref/run/metrics.jsonl" "stopped by SIGUSR1, then scontrol requeue"
same_state "$tmp/pre" "stopped by SIGUSR1, then scontrol requeue"
# Each stop saved its own step (every_steps = 4 alone would have lost up to 3): the equal losses
# above hold either way, so the stop's save is checked here.
[ "$(lost "$tmp/pre")" = "0 0" ] ||
  { cat "$tmp/pre/job.out" >&2; fail "the stops lost steps: $(lost "$tmp/pre")"; }
echo "slurm preempt test: steps lost at each stop: $(lost "$tmp/pre")"

# Slurm's warning in start-up, before the first step: once the script took the signal (a job
# RUNNING may not have reached its trap yet, and a signal there ended the job as FAILED).
job=$(submit "$tmp/start" -- "${sets[@]}" --set "run.out_dir=\"$tmp/start/run\"")
wait_state "$job" 60 RUNNING
for ((t = 0; t < 600; ++t)); do
  grep -qs "zt job script: job $job " "$tmp/start/job.out" && break
  sleep 0.05
done
grep -qs "zt job script: job $job " "$tmp/start/job.out" ||
  fail "job $job's script did not start within 30 s"
on scancel -b -s USR1 "$job"
requeued "$job"
# The script's trap took it (not a job that ended some other way and was requeued by hand).
grep -q "zt job script: SIGUSR1: the ranks save and stop" "$tmp/start/job.out" ||
  { cat "$tmp/start/job.out" >&2; fail "the script did not take SIGUSR1 in start-up"; }
run_to_end "$job" "$tmp/start" $steps
same_losses "$tmp/start/run/metrics.jsonl" "$tmp/ref/run/metrics.jsonl" "SIGUSR1 in start-up"
same_state "$tmp/start" "SIGUSR1 in start-up"

# Slurm's warning during a save: every step saves (asynchronously, the default), and the signal
# goes out the moment a save's temporary folder appears, so it reaches the ranks while that save
# is being written. They finish it, stop after their step, and the requeued job resumes from a
# complete checkpoint: no step lost, losses equal.
job=$(submit "$tmp/save" -- "${sets[@]}" --set "run.out_dir=\"$tmp/save/run\"" \
  --set checkpoint.every_steps=1)
wait_step "$tmp/save/run/metrics.jsonl" 3 "$job"
saving=""
for ((t = 0; t < 6000; ++t)); do
  saving=$(compgen -G "$tmp/save/run/checkpoints/.tmp-step-*" | head -n 1) && break
  # scontrol is slow next to the 10 ms poll: ask whether the job still runs twice a second.
  ((t % 50)) || [ "$(job_state "$job")" = RUNNING ] || break
  sleep 0.01
done
[ -n "$saving" ] || fail "no save of job $job was seen in progress (it is $(job_state "$job"))"
on scancel -b -s USR1 "$job"
echo "slurm preempt test: SIGUSR1 sent while $(basename "$saving") was being written"
requeued "$job"
run_to_end "$job" "$tmp/save" $steps
grep -q "zt: stopped by SIGUSR1 after step" "$tmp/save/job.out" ||
  { cat "$tmp/save/job.out" >&2; fail "the ranks did not stop on SIGUSR1 during a save"; }
grep -q "resumed from .*/step-" "$tmp/save/job.out" ||
  { cat "$tmp/save/job.out" >&2; fail "the job stopped during a save did not resume"; }
same_losses "$tmp/save/run/metrics.jsonl" "$tmp/ref/run/metrics.jsonl" "SIGUSR1 during a save"
same_state "$tmp/save" "SIGUSR1 during a save"
[ "$(lost "$tmp/save")" = 0 ] ||
  { cat "$tmp/save/job.out" >&2; fail "the stop during a save lost steps: $(lost "$tmp/save")"; }
echo "slurm preempt test: steps lost by the stop during a save: 0"

# Planted: a rank killed under srun fails the job, srun naming its task (the rank: SLURM_PROCID)
# while --kill-on-bad-exit ends the others at once; Slurm's requeue resumes it.
job=$(submit "$tmp/kill" -- "${sets[@]}" --set "run.out_dir=\"$tmp/kill/run\"")
wait_step "$tmp/kill/run/metrics.jsonl" 6 "$job"
victim=$(pgrep -f -n "$trainer --config $src/configs/zero3.toml --resume auto")
kill -KILL "$victim"
wait_state "$job" 120 "${done_states[@]}"
[ "$(job_state "$job")" = FAILED ] || fail "a killed rank left job $job $(job_state "$job"), not FAILED"
grep -Eq "srun: error: n[01]: task [0-3]: Killed" "$tmp/kill/job.out" ||
  { cat "$tmp/kill/job.out" >&2; fail "srun did not name the killed task"; }
on scontrol requeue "$job"
requeued "$job"
run_to_end "$job" "$tmp/kill" $steps
grep -q "resumed from .*/step-00000004 at step 4" "$tmp/kill/job.out" ||
  { cat "$tmp/kill/job.out" >&2; fail "the requeued job did not resume from step 4's checkpoint"; }
same_losses "$tmp/kill/run/metrics.jsonl" "$tmp/ref/run/metrics.jsonl" "a rank killed, then requeued"
same_state "$tmp/kill" "a rank killed, then requeued"
echo "slurm preempt test: the planted kill: $(grep -E -m 1 "srun: error: n[01]: task [0-3]: Killed" "$tmp/kill/job.out")"
