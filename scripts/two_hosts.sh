#!/usr/bin/env bash
# Two simulated hosts on one machine: two network namespaces joined by a veth pair, so ranks in
# different namespaces reach each other only over TCP (UCX sees two machines), while ranks in one
# namespace share memory. Used by the two-host test (tests/multiproc/two_hosts_test.sh) and by
# `scripts/bench.sh mics`. Needs root (or CAP_NET_ADMIN) and iproute2.
#
#   two_hosts.sh check              exit 0 if namespaces can be made here; else say why, exit 77
#   two_hosts.sh require            for a test: as check, but says why as a skip ("zt-skip: ...",
#                                   exit 77), and under CI (root) as a failure (exit 1)
#   two_hosts.sh up NAME [RATE]     make NAME-h0 (10.231.0.1) and NAME-h1 (10.231.0.2); RATE
#                                   (tc syntax, e.g. 1gbit) shapes both directions of the link
#   two_hosts.sh down NAME          remove them (also after a failed `up`)
#   two_hosts.sh bytes NAME         bytes sent by NAME-h0 and NAME-h1 over the link so far
#                                   ("TX0 TX1"): the traffic between the hosts
#   two_hosts.sh run NAME PER_HOST LOGDIR CMD...
#                                   starts 2 x PER_HOST ranks of CMD, PER_HOST in each host,
#                                   torchrun-style (RANK, WORLD_SIZE, LOCAL_RANK,
#                                   LOCAL_WORLD_SIZE, MASTER_ADDR = host 0, MASTER_PORT), each
#                                   host's in its own IPC and PID namespaces too; rank r writes
#                                   LOGDIR/rank<r>.log. Waits for all; exits 0, or with the first
#                                   failed rank's code after printing its log's tail
set -euo pipefail

ip_of() { echo "10.231.0.$(( $1 + 1 ))"; }

check() {
  if ! command -v ip >/dev/null; then
    echo "two simulated hosts need iproute2 ('ip'); scripts/setup.sh installs it" >&2
    exit 77
  fi
  local probe="ztprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "network namespaces cannot be made here (needs root or CAP_NET_ADMIN, e.g. a" \
      "privileged container); run as root to simulate two hosts" >&2
    exit 77
  fi
  ip netns del "$probe"
}

require() {
  local why
  if ! why=$(check 2>&1); then
    if [ -n "${CI:-}" ]; then
      echo "FAILED: under CI (root) two hosts must be possible: $why" >&2
      exit 1
    fi
    echo "zt-skip: $why"
    exit 77
  fi
}

down() {
  local name=$1
  for h in 0 1; do ip netns del "$name-h$h" 2>/dev/null || true; done
  ip link del "${name}v0" 2>/dev/null || true
}

up() {
  local name=$1 rate=${2:-}
  down "$name"
  trap 'down "$name"' ERR
  ip netns add "$name-h0"
  ip netns add "$name-h1"
  ip link add "${name}v0" type veth peer name "${name}v1"
  for h in 0 1; do
    ip link set "${name}v$h" netns "$name-h$h"
    ip -n "$name-h$h" addr add "$(ip_of "$h")/24" dev "${name}v$h"
    ip -n "$name-h$h" link set "${name}v$h" up
    ip -n "$name-h$h" link set lo up
    if [ -n "$rate" ]; then
      ip netns exec "$name-h$h" tc qdisc add dev "${name}v$h" root tbf rate "$rate" \
        burst 256kb latency 50ms
    fi
  done
  trap - ERR
}

bytes() {
  local name=$1
  echo "$(ip netns exec "$name-h0" cat "/sys/class/net/${name}v0/statistics/tx_bytes")" \
    "$(ip netns exec "$name-h1" cat "/sys/class/net/${name}v1/statistics/tx_bytes")"
}

# One host's ranks: started inside that host's namespaces, waited for; exits with the first
# failed rank's code. Runs as `two_hosts.sh host-ranks H PER_HOST PORT LOGDIR CMD...`.
host_ranks() {
  local h=$1 per_host=$2 port=$3 logs=$4
  shift 4
  local pids=() j r code=0 c
  for ((j = 0; j < per_host; ++j)); do
    r=$((h * per_host + j))
    env RANK=$r WORLD_SIZE=$((2 * per_host)) LOCAL_RANK=$j LOCAL_WORLD_SIZE=$per_host \
      MASTER_ADDR="$(ip_of 0)" MASTER_PORT=$port "$@" >"$logs/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((j = 0; j < per_host; ++j)); do
    c=0
    wait "${pids[$j]}" || c=$?
    r=$((h * per_host + j))
    if [ "$c" != 0 ] && [ "$code" = 0 ]; then
      code=$c
      echo "two_hosts.sh: rank $r exited with $c; its log ends:" >&2
      tail -n 20 "$logs/rank$r.log" >&2
    fi
  done
  return "$code"
}

# Each host gets its own network, IPC and PID namespaces (and /proc), so UCX finds no shared
# memory or cross-memory attach between the hosts, only TCP, as between two machines.
run() {
  local name=$1 per_host=$2 logs=$3
  shift 3
  local port=$((20000 + $$ % 20000)) pids=() h code=0 c
  for h in 0 1; do
    ip netns exec "$name-h$h" unshare --ipc --pid --fork --mount-proc \
      "$0" host-ranks "$h" "$per_host" "$port" "$logs" "$@" &
    pids+=($!)
  done
  for h in 0 1; do
    c=0
    wait "${pids[$h]}" || c=$?
    if [ "$c" != 0 ] && [ "$code" = 0 ]; then code=$c; fi
  done
  return "$code"
}

case "${1:-}" in
  check) check ;;
  require) require ;;
  up) up "${2:?NAME}" "${3:-}" ;;
  down) down "${2:?NAME}" ;;
  bytes) bytes "${2:?NAME}" ;;
  run) shift; run "$@" ;;
  host-ranks) shift; host_ranks "$@" ;;
  *) sed -n '2,22p' "$0" >&2; exit 2 ;;
esac
