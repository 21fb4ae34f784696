#!/usr/bin/env bash
# Checks that every tracked C++/CUDA file is formatted by .clang-format; with --fix, formats them
# in place instead. scripts/test.sh runs the check before building. The style is clang-format
# 14's (Debian 12, installed by scripts/setup.sh): other versions may place a few lines otherwise.
#   scripts/check-format.sh          exit 1 and list the files that need formatting
#   scripts/check-format.sh --fix    reformat those files in place
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  *) echo "usage: scripts/check-format.sh [--fix]" >&2; exit 2 ;;
esac

clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found; run scripts/setup.sh (apt-get install clang-format)" >&2
  exit 1
fi
version=$("$clang_format" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$version" != "14" ] && [ "$fix" -eq 0 ]; then
  # Another version places a few lines otherwise: its verdict on a tree formatted by 14 is noise,
  # and "run --fix" would be wrong advice. CI (Debian 12) has 14.
  echo "check-format: $clang_format is version $version; the tree is formatted with 14" \
       "(Debian 12's): install clang-format-14 and give CLANG_FORMAT=clang-format-14" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "check-format: skipped" >&2
  exit 0
fi

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-format: $PWD is not a git checkout; the files to check are git's tracked ones" >&2
  exit 1
fi
# Tracked files that exist (a deletion not yet committed is no format problem).
files=()
while IFS= read -r f; do
  [ -f "$f" ] && files+=("$f")
done < <(git ls-files '*.cc' '*.h' '*.cu')
if [ "$fix" -eq 1 ]; then
  "$clang_format" -i --style=file "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi

# One clang-format for all files; it names each unformatted file in its diagnostics.
status=0
report=$("$clang_format" --dry-run --Werror --style=file "${files[@]}" 2>&1) || status=$?
mapfile -t bad < <(printf '%s\n' "$report" |
  sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ "$status" -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  printf '%s\n' "$report" >&2
  echo "check-format: $clang_format failed (above)" >&2
  exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: ${#bad[@]} of ${#files[@]} files are not formatted as .clang-format says;" \
       "run scripts/check-format.sh --fix (or clang-format -i FILE) and commit the result" >&2
  exit 1
fi
echo "check-format: all ${#files[@]} C++/CUDA files formatted"
