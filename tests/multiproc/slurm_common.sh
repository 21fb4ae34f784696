# Sourced by the Slurm tests (slurm_test.sh, slurm_preempt_test.sh, slurm_tune_test.sh): a real
# Slurm cluster of two simulated hosts (scripts/slurm_cluster.sh) for the test's lifetime, and
# helpers to submit the example job script and follow its job. Needs $trainer and $src set;
# $slurm_cpus, when set, is each node's CPUs (default 2).

"$src/scripts/two_hosts.sh" require || exit $?
for tool in slurmctld slurmd munged sbatch nsenter; do
  if ! command -v "$tool" >/dev/null; then
    why="$tool is missing: scripts/setup.sh installs slurm-wlm, munge and util-linux"
    [ -n "${CI:-}" ] && { echo "FAILED: $why" >&2; exit 1; }
    echo "zt-skip: $why"
    exit 77
  fi
done

name="zs$$"
tmp=$(mktemp -d)
cluster() { "$src/scripts/slurm_cluster.sh" "$1" "$name" "$tmp/cluster" "${@:2}"; }
on() { cluster on "$@"; }
cleanup() {
  cluster down
  [ -n "${ZT_KEEP_SLURM_TEST:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*" >&2
  exit 1
}
cluster up "${slurm_cpus:-2}" || fail "the Slurm cluster did not start"

# submit DIR [sbatch options] -- [trainer --set ...]: sbatch of the example script, run in DIR
# with its output in DIR/job.out; prints the job id.
submit() {
  local dir=$1 opts=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  mkdir -p "$dir"
  ( cd "$dir" && ZT_TRAINER="$trainer" ZT_CONFIG="$src/configs/zero3.toml" \
    on sbatch --parsable -N 2 --ntasks-per-node=2 -o "$dir/job.out" "${opts[@]}" \
    "$src/examples/slurm/train_cpu.sbatch" "$@" )
}

# "" when scontrol fails for a moment ("Socket timed out"): under set -e and pipefail its failure
# ended the test with no FAILED line; the waits below ask again.
job_state() {
  { on scontrol show job "$1" 2>/dev/null || true; } | { grep -o 'JobState=[A-Z_]*' || true; } |
    cut -d= -f2
}
done_states=(COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY)
job_done() {
  local state
  state=$(job_state "$1")
  for s in "${done_states[@]}"; do [ "$state" = "$s" ] && return 0; done
  return 1
}

# How often the tests ask Slurm: each `scontrol` here costs ~40 ms of CPU (this script, nsenter,
# scontrol and its munge credential). Asked 5 times a second for the whole of a job, it took a
# tenth of this 2-core machine from the ranks, whose steps then took ~20% more time than under
# zt's launcher (measured 2026-12-02), and tune's trials less room in their budget. So a wait
# asks 5 times a second only for its first 5 s (a state that follows an action at once: RUNNING
# after a submit, PENDING after a requeue), then once a second; a wait for a step reads rank 0's
# metrics file 5 times a second and asks Slurm only every 2 s whether the job ended meanwhile.

# wait_state JOB SECONDS STATE...: until the job is in one of the states; fails naming the state
# it is in after SECONDS.
wait_state() {
  local job=$1 seconds=$2 tenths=0 state
  shift 2
  while :; do
    state=$(job_state "$job")
    for s in "$@"; do [ "$state" = "$s" ] && return 0; done
    ((tenths < seconds * 10)) || fail "job $job is ${state:-unknown (scontrol failed)} after ${seconds} s, not $*"
    if ((tenths < 50)); then
      sleep 0.2
      tenths=$((tenths + 2))
    else
      sleep 1
      tenths=$((tenths + 10))
    fi
  done
}

# reached_step METRICS STEP JOB [SECONDS]: 0 once rank 0's metrics.jsonl logs STEP, 1 when the
# job ends without it; fails after SECONDS (default 120).
reached_step() {
  local t
  for ((t = 0; t < ${4:-120} * 5; ++t)); do
    grep -qs "\"step\":$2," "$1" && return 0
    if ((t % 10 == 9)) && job_done "$3"; then
      grep -qs "\"step\":$2," "$1" && return 0  # logged just before the job ended
      return 1
    fi
    sleep 0.2
  done
  fail "step $2 never came in $1 within ${4:-120} s (job $3 is $(job_state "$3"))"
}

# wait_step METRICS STEP JOB: until rank 0's metrics.jsonl logs STEP (120 s at most); fails if
# the job ends first.
wait_step() {
  reached_step "$@" || fail "job $3 ended $(job_state "$3") before step $2 came in $1"
}

# run_to_end JOB DIR STEPS: the job logs its last step and ends COMPLETED (its output printed
# when not).
run_to_end() {
  reached_step "$2/run/metrics.jsonl" "$3" "$1" 300 || true
  wait_state "$1" 60 "${done_states[@]}"
  [ "$(job_state "$1")" = COMPLETED ] || { cat "$2/job.out" >&2; fail "job $1 ended $(job_state "$1")"; }
}
