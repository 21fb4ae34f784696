#!/usr/bin/env bash
# A benchmark stopped by a signal removes what it made: Ctrl-C (SIGINT to its process group, as a
# terminal sends it) stops the NVMe bench between two files, its private folder and GB-sized files
# in --dir removed; SIGTERM to the eval bench alone (kill, a scheduler) is passed on to the
# trainer job it runs, and the bench then ends, its scratch folder under TMPDIR removed. Each
# exits 128 + the signal, says so, and writes no results file.
#   bench_interrupt_test.sh BIN_DIR
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -z "$pid" ] || kill -KILL -- "-$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAILED: $*" >&2
  [ ! -f "$tmp/out.log" ] || tail -20 "$tmp/out.log" >&2
  exit 1
}
# Waits up to $1 seconds for the command "$2..." to succeed.
wait_for() {
  local seconds=$1
  shift
  for _ in $(seq $((seconds * 10))); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
# Whether process $1 has ended (gone, or a zombie this shell has not waited for yet).
ended() { ! kill -0 "$1" 2> /dev/null || ps -o stat= -p "$1" | grep -q '^Z'; }
# Whether folder $1 holds an entry named $2* with a file in it.
holds_files() { compgen -G "$1/$2*/*" > /dev/null; }
# Whether the last line of the log says the bench stopped by signal $1.
said_stop() {
  grep -q "^$1: stopped by $2: the bench stopped while .*; its scratch folders are removed, no results written$" "$tmp/out.log"
}

set -m  # each background job its own process group, as a terminal's foreground job is

# 1. Ctrl-C to the NVMe bench's process group, once it has written its first files.
mkdir -p "$tmp/disk"
"$bin/zt_bench_nvme" --dir "$tmp/disk" --mib 32 --reps 1000 --json "$tmp/nvme.json" \
  > "$tmp/out.log" 2>&1 &
pid=$!
wait_for 60 grep -q "round 1 done" "$tmp/out.log" || fail "the NVMe bench did not start its rounds"
holds_files "$tmp/disk" zt_bench_nvme. || fail "no files in the NVMe bench's folder"
kill -INT -- "-$pid"
wait "$pid"
code=$?
pid=""
[ "$code" = 130 ] || fail "the NVMe bench exited $code after SIGINT, not 130"
said_stop zt_bench_nvme SIGINT || fail "the NVMe bench did not say it stopped"
[ -z "$(ls -A "$tmp/disk")" ] || fail "left in --dir: $(ls -A "$tmp/disk")"
[ ! -e "$tmp/nvme.json" ] || fail "the NVMe bench wrote results after SIGINT"

# 2. SIGTERM to the eval bench alone, while its trainer job trains.
mkdir -p "$tmp/t"
# A job it could not finish in the test's time: only the SIGTERM passed on to it ends it.
TMPDIR="$tmp/t" "$bin/zt_bench_eval" --steps 1000000 --reps 1 --json "$tmp/eval.json" \
  > "$tmp/out.log" 2>&1 &
pid=$!
wait_for 120 holds_files "$tmp/t" zt-bench-eval. || fail "the eval bench made no scratch folder"
# Its job's ranks have started once its metrics file exists.
wait_for 120 compgen -G "$tmp/t/zt-bench-eval.*/*/metrics.jsonl" > /dev/null ||
  fail "the eval bench's job wrote no metrics"
kill -TERM "$pid"
wait_for 60 ended "$pid" ||
  fail "the eval bench still runs 60 s after SIGTERM: the signal did not reach its job"
wait "$pid"
code=$?
pid=""
[ "$code" = 143 ] || fail "the eval bench exited $code after SIGTERM, not 143"
said_stop zt_bench_eval SIGTERM || fail "the eval bench did not say it stopped"
! compgen -G "$tmp/t/zt-bench-eval.*" > /dev/null || fail "left: $(ls -A "$tmp/t")"
[ ! -e "$tmp/eval.json" ] || fail "the eval bench wrote results after SIGTERM"
# Nothing of its job runs on (the bench waited for the trainer, the trainer for its ranks).
pgrep -f "$tmp/t/zt-bench-eval" > /dev/null && fail "the eval bench's job still runs"
echo "bench_interrupt_test: both benches stopped and removed their folders"
