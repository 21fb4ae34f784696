#!/usr/bin/env bash
# The headline job on a fresh machine: install what is missing (only the packages a job needs:
# scripts/setup.sh job), build what the job needs (the trainer, the core and the plugins: not the
# tests or benches), run `trainer --config configs/zero3_offload.toml` (ZeRO stage 3, 2 local
# ranks over comm_ucx, optimizer states on NVMe, parameter shards in host memory). Arguments go to
# the trainer, e.g. scripts/run.sh --set plugin.offload_nvme.path=/mnt/nvme0/zt; a trainer
# command first (scripts/run.sh eval --checkpoint runs/...) or --help/--version goes to the
# trainer as it is, without the headline config, and so does a command line with a --config of
# its own. The trainer runs in the repository's root: relative paths in the arguments are read
# from there.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh job
ZT_TARGET=zt_job scripts/build.sh
trainer="${ZT_BUILD_DIR:-build}/bin/trainer"
case "${1:-}" in
  -h | --help | --version | [!-]*) exec "$trainer" "$@" ;;
esac
# A config of the user's own replaces the headline one (the trainer refuses --config twice).
for arg in "$@"; do
  case "$arg" in
    -c | --config | --config=*) exec "$trainer" "$@" ;;
  esac
done
exec "$trainer" --config configs/zero3_offload.toml "$@"
