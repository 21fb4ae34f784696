#!/usr/bin/env bash
# Runs a test script of tests/python on NPROC ranks under zt's launcher (python3 -m zt.launch),
# with the zt package of the build tree, or says why it cannot (exit 77: CTest's Skipped). Under
# CI (the CI variable set, as .ci/run runs) scripts/setup.sh has installed what the package
# needs, so a package that is missing is a failure there, not a skip (as tests/skip.h's
# ZT_SKIP_UNLESS_CI).
# NPROC 0: the script is a driver that starts its own ranks, run as a plain process (under a
# launcher the ranks it starts would inherit its RANK and WORLD_SIZE).
#   run.sh PYTHON PACKAGE_DIR NPROC SCRIPT [ARGS...]
set -euo pipefail
python=$1 package=$2 nproc=$3 script=$4
shift 4
source "$(dirname "$0")/require_package.sh"
require_package "$python" "$package"
export PYTHONPATH="$package${PYTHONPATH:+:$PYTHONPATH}"
# The scripts check with `assert`, which -O (PYTHONOPTIMIZE) strips: they would pass unchecked.
unset PYTHONOPTIMIZE
if [ "$nproc" = 0 ]; then
  exec "$python" "$(dirname "$0")/$script" "$@"
fi
exec "$python" -m zt.launch --nproc "$nproc" "$(dirname "$0")/$script" "$@"
