#!/usr/bin/env bash
# The headline job on a fresh machine: install what is missing, build, run
# `trainer --config configs/zero3.toml` (ZeRO stage 3, 2 local ranks over comm_ucx). Arguments go to
# the trainer, e.g. scripts/run.sh --set launch.nproc=3
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec "${ZT_BUILD_DIR:-build}/bin/trainer" --config configs/zero3.toml "$@"
