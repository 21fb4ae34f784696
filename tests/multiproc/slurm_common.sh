# Sourced by the Slurm tests (slurm_test.sh, slurm_preempt_test.sh): a real Slurm cluster of two
# simulated hosts (scripts/slurm_cluster.sh) for the test's lifetime, and helpers to submit the
# example job script and follow its job. Needs $trainer and $src set.

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

job_state() { on scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }

# wait_state JOB SECONDS STATE...: until the job is in one of the states; fails naming the state
# it is in after SECONDS.
wait_state() {
  local job=$1 seconds=$2 t state
  shift 2
  for ((t = 0; t < seconds * 5; ++t)); do
    state=$(job_state "$job")
    for s in "$@"; do [ "$state" = "$s" ] && return 0; done
    sleep 0.2
  done
  fail "job $job is $state after ${seconds} s, not $*"
}

# wait_step METRICS STEP JOB: until rank 0's metrics.jsonl logs STEP (120 s at most), while the
# job runs.
wait_step() {
  local t
  for ((t = 0; t < 600; ++t)); do
    grep -qs "\"step\":$2," "$1" && return 0
    sleep 0.2
  done
  fail "step $2 never came in $1 (job $3 is $(job_state "$3"))"
}
