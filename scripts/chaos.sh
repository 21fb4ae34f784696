#!/usr/bin/env bash
# Chaos soak (tests/chaos/chaos_soak.py): a small ZeRO-3 job with optimizer states in offload_nvme
# and checkpoints every 2 steps, trained to its end again and again while ranks are SIGKILLed at
# random moments (some during a checkpoint write) and the launcher is stopped with SIGTERM and
# started again with --resume auto, for MINUTES. Every finished run must end on the parameters of
# an uninterrupted run bit for bit, with exactly keep_last checkpoints, no .tmp-step-* folder, no
# offload file and no shared-memory segment left, and no restart that lost more than one
# checkpoint interval past the newest save begun (asynchronous saves still being written are lost
# too; the steps lost per restart are reported). Figures in bench-results/chaos.json; exit 1 names
# what broke.
#   scripts/chaos.sh [MINUTES] [--sync-saves]    (default 2; CI runs 1.5 as the test
#                                                 "multiproc: chaos soak")
# --sync-saves sets checkpoint.async = false, and then every restart must lose at most one
# checkpoint interval, past any save.
set -euo pipefail
cd "$(dirname "$0")/.."
# MINUTES is optional: `chaos.sh --sync-saves` keeps the default and passes the flag on.
minutes=2
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  minutes=$1
  shift
fi
scripts/setup.sh job
ZT_TARGET=zt_job scripts/build.sh
mkdir -p bench-results
exec python3 tests/chaos/chaos_soak.py --trainer "${ZT_BUILD_DIR:-build}/bin/trainer" \
  --minutes "$minutes" --json bench-results/chaos.json "$@"
