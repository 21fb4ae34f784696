#!/usr/bin/env bash
# Replays every fuzz corpus (tests/fuzz/corpus: the seeds and the reproducer of every fixed
# finding) through its target built with AddressSanitizer and UndefinedBehaviorSanitizer, in a
# build folder of its own (build-replay/: only the core, the trainer folders the targets parse
# with and the plugins a config loads). The plain build's replay (ctest -R 'fuzz corpus') runs
# the same inputs unsanitized, where a read past a buffer or an overflowing integer may go
# unseen; here it fails. Planted faults (a read one byte past an input, a signed overflow) must
# fail too, so a replay that has lost its sanitizers cannot pass. scripts/test.sh runs this after
# the suite; arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${ZT_REPLAY_BUILD_DIR:-build-replay}
start=$(date +%s)
# Debug (-O0): these binaries only parse a few hundred small files, and unoptimised objects build
# faster. No benches, no CUDA: nothing here uses them.
ZT_BUILD_DIR=$build_dir ZT_BUILD_TYPE=Debug ZT_TARGET=zt_fuzz_replays scripts/build.sh \
  -DZT_SANITIZE=address,undefined -DZT_BUILD_BENCH=OFF -DZT_WITH_CUDA=OFF
echo "sanitized replay build took $(( $(date +%s) - start )) s"
source scripts/sanitizer-env.sh
start=$(date +%s)
status=0
ctest --test-dir "$build_dir" --output-on-failure -j 2 -L fuzz "$@" || status=$?
echo "sanitized replay took $(( $(date +%s) - start )) s"
exit $status
