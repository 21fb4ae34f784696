#!/usr/bin/env bash
# Lists the tests of the last CTest run in BUILD_DIR (default build) that reported Skipped, each
# with the reason it printed after the skip marker "zt-skip: " (tests/skip.h, cmake/ZtTests.cmake),
# from CTest's log of the run (Testing/Temporary/LastTest.log). Prints nothing when none skipped.
#   scripts/skipped-tests.sh [BUILD_DIR]
set -euo pipefail
# The default build folder is the checkout's, wherever this is run from (a folder of the caller's
# without a log printed nothing, as if none had skipped).
log="${1:-$(dirname "$0")/../build}/Testing/Temporary/LastTest.log"
[ -f "$log" ] || exit 0
awk '
  /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); name = $0; next }
  /^zt-skip: / && name != "" && !(name in reason) {
    reason[name] = substr($0, 10); order[++n] = name
  }
  END {
    if (n == 0) exit
    printf "\n%d test(s) skipped:\n", n
    for (i = 1; i <= n; ++i) printf "  %s\n      %s\n", order[i], reason[order[i]]
  }' "$log"
