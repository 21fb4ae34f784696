#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, build, run CTest (unit, plugin
# loading, multi-process, SDK install) and print its summary. Arguments go to ctest, e.g.
# scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
start=$(date +%s)
status=0
ctest --test-dir "${ZT_BUILD_DIR:-build}" --output-on-failure -j 2 "$@" || status=$?
echo "tests took $(( $(date +%s) - start )) s"
exit $status
