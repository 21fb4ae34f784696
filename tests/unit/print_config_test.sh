#!/usr/bin/env bash
# `trainer --print-config` of every config in configs/ equals its recorded output in
# tests/fixtures/print_config/ byte for byte: how a config resolves (every key, every default,
# where each came from) changes only on purpose. A config with no recording fails too. After a
# deliberate change (a new key, a new default), record the new output with --update and say why
# in the commit.
#   print_config_test.sh TRAINER SOURCE_DIR [--update]
set -euo pipefail
trainer=$1 source_dir=$2
recorded="$source_dir/tests/fixtures/print_config"
cd "$source_dir"
failed=0
checked=0
for config in configs/*.toml; do
  name=$(basename "$config")
  out=$("$trainer" --config "$config" --print-config)
  if [ "${3:-}" = --update ]; then
    printf '%s\n' "$out" >"$recorded/$name"
    continue
  fi
  checked=$((checked + 1))
  if [ ! -f "$recorded/$name" ]; then
    echo "FAILED: $config has no recorded --print-config in $recorded (record it with --update)"
    failed=1
  elif ! diff -u "$recorded/$name" <(printf '%s\n' "$out"); then
    echo "FAILED: trainer --config $config --print-config differs from $recorded/$name (above)"
    failed=1
  fi
done
# Printed where nothing fits (a full disk, /dev/full): an I/O error, not a success with half a
# config.
status=0
message=$("$trainer" --config configs/smoke.toml --print-config 2>&1 >/dev/full) || status=$?
if [ $status -ne 5 ] || [[ $message != *"io error: cannot write standard output ("* ]]; then
  echo "FAILED: --print-config >/dev/full exited $status (expected 5, the I/O error): $message"
  failed=1
fi
# A training job's standard output is its log, not its result: one that cannot be written does
# not fail a job that trained (a restart would repeat the whole run for a log).
status=0
"$trainer" --config configs/smoke.toml >/dev/full 2>/dev/null || status=$?
if [ $status -ne 0 ]; then
  echo "FAILED: the smoke job with its log on /dev/full exited $status (expected 0)"
  failed=1
fi
[ $failed -eq 0 ] && echo "print-config: $checked configs resolve byte for byte as recorded, and a full disk is an error"
exit $failed
