#!/usr/bin/env bash
# Runs a command and passes only when it ends with the exit code expected AND its output (stdout
# and stderr together) matches a regular expression (grep -E, over the whole output), and, with
# --not, does not match another. CTest's PASS_REGULAR_EXPRESSION alone ignores the exit code, and
# WILL_FAIL passes whatever made the command fail; planted-fault tests need both, so that a
# fault is caught for the reason the test names. An exit of 77 (a test that says it cannot run
# here: CTest's SKIP_RETURN_CODE) is passed through when 77 is not the code expected.
#   expect.sh EXIT REGEX [--not REGEX] -- COMMAND [ARGS...]
set -uo pipefail
want_exit=$1 want=$2
shift 2
refuse=""
if [ "${1:-}" = --not ]; then
  refuse=$2
  shift 2
fi
[ "${1:-}" = -- ] || { echo "usage: expect.sh EXIT REGEX [--not REGEX] -- COMMAND [ARGS...]" >&2; exit 2; }
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
code=$?
cat "$out"
if [ "$code" = 77 ] && [ "$want_exit" != 77 ]; then
  exit 77
fi
failed=0
if [ "$code" != "$want_exit" ]; then
  echo "expect.sh: the command exited $code, not $want_exit"
  failed=1
fi
if ! grep -Ezq -- "$want" "$out"; then
  echo "expect.sh: its output does not match: $want"
  failed=1
fi
if [ -n "$refuse" ] && grep -Ezq -- "$refuse" "$out"; then
  echo "expect.sh: its output matches what it must not: $refuse"
  failed=1
fi
exit $failed
