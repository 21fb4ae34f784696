#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, check the formatting, that includes
# run down the layers and that the docs' links resolve, build, run CTest (labels unit, multiproc,
# engine, sdk, gpu) and print its summary. Arguments go to ctest, e.g.
# scripts/test.sh -L unit
# Skipped tests are listed at the end with the reason each gave (scripts/skipped-tests.sh).
# Without arguments (the whole suite) the fuzz corpora are then replayed again under ASan and
# UBSan in a build of their own (scripts/fuzz-replay.sh).
# Under CI (CI set, as .ci/run is run) a warning fails the build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/check-format.sh
scripts/check-layers.sh
scripts/check-links.sh
build_start=$(date +%s)
scripts/build.sh
echo "build took $(( $(date +%s) - build_start )) s"
start=$(date +%s)
status=0
ctest --test-dir "${ZT_BUILD_DIR:-build}" --output-on-failure -j 2 "$@" || status=$?
echo "tests took $(( $(date +%s) - start )) s"
if [ $# -eq 0 ]; then
  scripts/fuzz-replay.sh || status=$?
fi
scripts/skipped-tests.sh "${ZT_BUILD_DIR:-build}"
exit $status
