#!/usr/bin/env bash
# Builds zt with AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer in
# build-sanitize/ (a build folder of its own: every object differs) and runs the unit and
# multi-process tests under them; the first report fails its test. Arguments replace the label
# choice and go to ctest, e.g. scripts/test-sanitize.sh -L engine
# A full second build, slower than the plain one (about 20 CPU minutes here, against 16); the
# tests take about 7 minutes on 2 cores (unit + multiproc; engine adds about 4).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ZT_SANITIZE_BUILD_DIR:-build-sanitize}

scripts/setup.sh
start=$(date +%s)
# The benches are not tests, so they are not built here.
ZT_BUILD_DIR=$build_dir scripts/build.sh -DZT_SANITIZE=address,undefined -DZT_BUILD_BENCH=OFF
echo "sanitize build took $(( $(date +%s) - start )) s"

# Children (the trainer's ranks, zt_comm_check) inherit the sanitizers' options.
source scripts/sanitizer-env.sh

if [ $# -eq 0 ]; then
  set -- -L 'unit|multiproc'
fi
start=$(date +%s)
status=0
ctest --test-dir "$build_dir" --output-on-failure -j 2 "$@" || status=$?
echo "sanitized tests took $(( $(date +%s) - start )) s"
exit $status
