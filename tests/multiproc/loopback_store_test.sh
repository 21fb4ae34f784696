#!/usr/bin/env bash
# A one-host job's rendezvous store is out of other hosts' reach. In one simulated host
# (scripts/two_hosts.sh) a 2-rank job runs with launch.master_addr = 127.0.0.1; from the other
# host a connection to the first host's address on the store's port must be refused, while one
# from inside the host to 127.0.0.1 is accepted and `ss` shows the listener tied to `lo`. A
# control listener on every interface of the same host, reached from the other host, shows that
# the probe does see an open port. Exit 77 (skipped) where namespaces cannot be made, except
# under CI.
#   loopback_store_test.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
hosts="$src/scripts/two_hosts.sh"
"$hosts" require || exit $?

name="ztlb$$"
tmp=$(mktemp -d)
job_pid=""
cleanup() {
  [ -z "$job_pid" ] || kill -TERM "$job_pid" 2>/dev/null || true
  [ -z "$job_pid" ] || wait "$job_pid" 2>/dev/null || true
  "$hosts" down "$name"
  rm -rf "$tmp"
}
trap cleanup EXIT
"$hosts" up "$name"
fail() {
  echo "FAILED: $*" >&2
  [ ! -f "$tmp/job.log" ] || tail -20 "$tmp/job.log" >&2
  exit 1
}
# "open" when a TCP connection from namespace $1 to $2:$3 is accepted within 3 s, else why not.
probe() {
  ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3" 2>&1 && echo open || true
}

store_port=29511
control_port=29512
host0=10.231.0.1

# The control: a listener on every interface of host 0 is reachable from host 1.
ip netns exec "$name-h0" timeout 60 python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', $control_port)); s.listen(4)
while True: s.accept()[0].close()" &
control_pid=$!
for _ in $(seq 50); do [ "$(probe "$name-h1" $host0 $control_port)" = open ] && break; sleep 0.1; done
[ "$(probe "$name-h1" $host0 $control_port)" = open ] ||
  fail "the control listener on 0.0.0.0:$control_port of host 0 is not reachable from host 1"
kill "$control_pid" 2>/dev/null || true

# The job: two ranks on host 0, rendezvous at 127.0.0.1 (launch.master_addr's default).
ip netns exec "$name-h0" timeout 300 "$trainer" --config "$src/configs/zero3.toml" \
  --set "data.path=\"$src/tests/data/corpus.txt\"" --set model.n_layer=2 --set model.d_model=32 \
  --set model.n_head=2 --set model.seq_len=16 --set run.steps=100000 \
  --set launch.timeout_s=60 --set launch.master_port=$store_port \
  --set "run.out_dir=\"$tmp/run\"" >"$tmp/job.log" 2>&1 &
job_pid=$!
for _ in $(seq 300); do
  grep -q "^step " "$tmp/job.log" 2>/dev/null && break
  kill -0 "$job_pid" 2>/dev/null || fail "the job ended before its first step"
  sleep 0.1
done
grep -q "^step " "$tmp/job.log" || fail "the job logged no step within 30 s"

inside=$(probe "$name-h0" 127.0.0.1 $store_port)
[ "$inside" = open ] || fail "the store at 127.0.0.1:$store_port refused a rank's host: $inside"
outside=$(probe "$name-h1" $host0 $store_port)
echo "from host 1 to $host0:$store_port: $outside"
case "$outside" in
  open) fail "another host reached the job's rendezvous store at $host0:$store_port" ;;
  *refused*) ;;
  *) fail "from host 1 expected 'connection refused', got: $outside" ;;
esac
listener=$(ip netns exec "$name-h0" ss -ltnH "sport = :$store_port")
echo "listener: $listener"
grep -q "%lo:$store_port" <<<"$listener" || fail "the store's listener is not tied to lo: $listener"
grep -q "zt: warning" "$tmp/job.log" && fail "the job warned: $(grep 'zt: warning' "$tmp/job.log")"
echo "the job's store accepted 127.0.0.1 from its own host and refused host 1"
