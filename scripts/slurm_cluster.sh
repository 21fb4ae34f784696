#!/usr/bin/env bash
# A real Slurm cluster of two simulated hosts on one machine, for tests and for trying zt's job
# scripts (examples/slurm/): munge, slurmctld and one slurmd per host, each host a network
# namespace of scripts/two_hosts.sh (n0 = 10.231.0.1, n1 = 10.231.0.2), with a slurm.conf this
# script writes. Everything lives in WORK; `down` stops every daemon and removes the namespaces.
# Needs root, iproute2, util-linux and Debian's slurm-wlm + munge (scripts/setup.sh installs them).
#
#   slurm_cluster.sh up NAME WORK [CPUS]   start it (CPUS per node, default 2, may exceed the
#                                          machine's: slurmd takes the config's word for it,
#                                          SlurmdParameters=config_overrides); waits until both
#                                          nodes are idle (60 s at most), else prints the daemons'
#                                          logs and fails
#   slurm_cluster.sh down NAME WORK        stop it (also after a failed `up`); WORK stays
#   slurm_cluster.sh on NAME WORK CMD...   run CMD (sbatch, squeue, scontrol, ...) on host n0, as
#                                          a user on the cluster's login node would
#
# Each slurmd runs in its host's network namespace with its own hostname (UTS), its own IPC and
# PID namespaces (so UCX sees two machines, as two_hosts.sh's ranks do) and its own view of
# /etc/hosts (a bind mount in a private mount namespace: n0, n1 and ctl resolve to their
# addresses, which SLURM_JOB_NODELIST's names need). The ranks srun starts inherit all of it.
# slurmctld runs on n0's network as host "ctl". Munge's socket is a file in WORK, which both
# hosts reach.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

ip_of() { echo "10.231.0.$(( $1 + 1 ))"; }

conf() {
  local work=$1 cpus=$2
  cat <<CONF
ClusterName=zt
SlurmctldHost=ctl($(ip_of 0))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# A batch job is scheduled when it is submitted (by default it may wait up to 3 s: 2.2-2.6 s here).
SchedulerParameters=batch_sched_delay=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$work/state
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdSpoolDir=$work/spool/%n
SlurmdPidFile=$work/run/slurmd-%n.pid
SlurmdLogFile=$work/log/slurmd-%n.log
TmpFS=$work/tmp/%n
SlurmctldTimeout=30
SlurmdTimeout=30
KillWait=10
NodeName=n0 NodeAddr=$(ip_of 0) CPUs=$cpus RealMemory=1000
NodeName=n1 NodeAddr=$(ip_of 1) CPUs=$cpus RealMemory=1000
PartitionName=zt Nodes=n0,n1 Default=YES MaxTime=INFINITE State=UP
CONF
}

# Runs "$@" in host H's network namespace with a hostname and /etc/hosts of its own, and a
# /sys of that namespace (UCX finds the host's network devices under /sys/class/net) that keeps
# the machine's cgroup tree (slurmd needs /sys/fs/cgroup).
on_host() {
  local name=$1 work=$2 h=$3 host=$4
  shift 4
  mkdir -p "$work/mnt/$host"
  SLURM_CONF="$work/slurm.conf" nsenter --net="/run/netns/$name-h$h" \
    unshare --uts --mount --ipc --pid --fork --mount-proc --propagation private \
    sh -c 'mount --rbind /sys/fs/cgroup "$3" && mount -t sysfs sysfs /sys &&
           mount --rbind "$3" /sys/fs/cgroup && mount --bind "$1" /etc/hosts &&
           hostname "$2" && shift 3 && exec "$@"' \
    on_host "$work/hosts" "$host" "$work/mnt/$host" "$@"
}

up() {
  local name=$1 work=$2 cpus=${3:-2}
  down "$name" "$work"
  mkdir -p "$work"/{munge,state,run,log,spool,tmp/n0,tmp/n1}
  chmod 755 "$work/munge"
  conf "$work" "$cpus" >"$work/slurm.conf"
  { cat /etc/hosts; printf '%s ctl n0\n%s n1\n' "$(ip_of 0)" "$(ip_of 1)"; } >"$work/hosts"
  "$here/two_hosts.sh" up "$name"
  [ -f "$work/munge/munge.key" ] || mungekey --create --keyfile="$work/munge/munge.key" 2>/dev/null
  munged --foreground --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
    --pid-file="$work/run/munged.pid" --seed-file="$work/munge/seed" \
    --log-file="$work/log/munged.log" --force >/dev/null 2>&1 &
  # -f names the cluster's own config on the command line, where `down` finds its daemons.
  on_host "$name" "$work" 0 ctl slurmctld -D -i -f "$work/slurm.conf" >/dev/null 2>&1 &
  on_host "$name" "$work" 0 n0 slurmd -D -N n0 -f "$work/slurm.conf" >/dev/null 2>&1 &
  on_host "$name" "$work" 1 n1 slurmd -D -N n1 -f "$work/slurm.conf" >/dev/null 2>&1 &
  local t
  for ((t = 0; t < 120; ++t)); do
    if [ "$(on "$name" "$work" sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle')" = 2 ]; then
      return 0
    fi
    sleep 0.5
  done
  echo "slurm_cluster.sh: the two nodes were not idle within 60 s; sinfo says:" >&2
  on "$name" "$work" sinfo -N >&2 || true
  for f in "$work"/log/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
  down "$name" "$work"
  return 1
}

# Stops what `up` started, found by command line (the daemons in PID namespaces write their
# namespace's pids to their pid files, which mean other processes out here): this cluster's
# alone, by its WORK, so another cluster on the machine (a second build tree's tests, the docs'
# "try it" cluster) runs on.
down() {
  local name=$1 work=$2 pattern pids t
  pattern="slurmctld -D -i -f $work/slurm.conf|slurmd -D -N n[01] -f $work/slurm.conf"
  pattern+="|munged --foreground --key-file=$work/"
  pkill -f "$pattern" 2>/dev/null || true
  for ((t = 0; t < 50; ++t)); do
    pids=$(pgrep -f "$pattern" || true)
    [ -z "$pids" ] && break
    if [ "$t" = 30 ]; then kill -9 $pids 2>/dev/null || true; fi
    sleep 0.1
  done
  rm -f "$work"/run/*.pid
  "$here/two_hosts.sh" down "$name"
}

on() {
  local name=$1 work=$2
  shift 2
  SLURM_CONF="$work/slurm.conf" nsenter --net="/run/netns/$name-h0" "$@"
}

case "${1:-}" in
  up) up "${2:?NAME}" "${3:?WORK}" "${4:-2}" ;;
  down) down "${2:?NAME}" "${3:?WORK}" ;;
  on) on "${2:?NAME}" "${3:?WORK}" "${@:4}" ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
