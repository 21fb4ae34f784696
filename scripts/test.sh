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
# The tests start with glibc's huge-page tunable, as every rank that zt's launcher starts does
# (trainer/app/huge_page_restart.cc says why): a single-process trainer then need not start
# itself again for it (0.7 s a run), and test programs that train in their own process allocate
# as the ranks do. A value given stays; the tests of the restart itself unset it.
tunables=${GLIBC_TUNABLES:-}
case ":$tunables:" in
  *:glibc.malloc.hugetlb=*) ;;
  *) tunables="${tunables:+$tunables:}glibc.malloc.hugetlb=1" ;;
esac
GLIBC_TUNABLES=$tunables ctest --test-dir "${ZT_BUILD_DIR:-build}" --output-on-failure -j 2 "$@" ||
  status=$?
echo "tests took $(( $(date +%s) - start )) s"
if [ $# -eq 0 ]; then
  scripts/fuzz-replay.sh || status=$?
fi
scripts/skipped-tests.sh "${ZT_BUILD_DIR:-build}"
exit $status
