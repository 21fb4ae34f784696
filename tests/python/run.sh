#!/usr/bin/env bash
# Runs a test script of tests/python on NPROC ranks under zt's launcher (python3 -m zt.launch),
# with the zt package of the build tree, or says why it cannot (exit 77: CTest's Skipped).
# NPROC 0: the script is a driver that starts its own ranks, run as a plain process (under a
# launcher the ranks it starts would inherit its RANK and WORLD_SIZE).
#   run.sh PYTHON PACKAGE_DIR NPROC SCRIPT [ARGS...]
set -euo pipefail
python=$1 package=$2 nproc=$3 script=$4
shift 4
if [ ! -f "$package/zt/__init__.py" ]; then
  echo "zt-skip: the zt Python package was not built (it needs python3-dev, pybind11-dev and" \
       "python3-torch: scripts/setup.sh installs them)"
  exit 77
fi
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "zt-skip: $python cannot import torch (python3-torch: scripts/setup.sh installs it)"
  exit 77
fi
export PYTHONPATH="$package${PYTHONPATH:+:$PYTHONPATH}"
if [ "$nproc" = 0 ]; then
  exec "$python" "$(dirname "$0")/$script" "$@"
fi
exec "$python" -m zt.launch --nproc "$nproc" "$(dirname "$0")/$script" "$@"
