#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, check the formatting, that includes
# run down the layers and that the docs' links resolve, build, run CTest (labels unit, multiproc,
# engine, sdk, gpu) and print its summary. Arguments go to ctest, e.g.
# scripts/test.sh -L unit
# Skipped tests are listed at the end with the reason each gave (scripts/skipped-tests.sh).
# Without arguments (the whole suite) the fuzz corpora are then replayed again under ASan and
# UBSan in a build of their own (scripts/fuzz-replay.sh).
# Under CI (CI set, as .ci/run is run) a warning fails the build (scripts/build.sh).
# The last lines say how each part ended: the suite's failures are listed far above a replay that
# passed.
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  # This comment, before anything is installed or built (ctest --help tells its own arguments).
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
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
# --no-tests=error: a mistyped -R or -L selected nothing and passed.
ctest --test-dir "${ZT_BUILD_DIR:-build}" --output-on-failure --no-tests=error -j 2 "$@" ||
  status=$?
suite=$status
echo "tests took $(( $(date +%s) - start )) s"
replay="not run (arguments given)"
if [ $# -eq 0 ]; then
  if scripts/fuzz-replay.sh; then
    replay="passed"
  else
    status=$?
    replay="FAILED (exit $status, above)"
  fi
fi
scripts/skipped-tests.sh "${ZT_BUILD_DIR:-build}"
if [ "$suite" -eq 0 ]; then
  echo "test: the suite passed"
else
  echo "test: the suite FAILED (ctest exit $suite): ${ZT_BUILD_DIR:-build}/Testing/Temporary/LastTestsFailed.log lists the tests"
fi
echo "test: the fuzz corpora's sanitized replay: $replay"
exit $status
