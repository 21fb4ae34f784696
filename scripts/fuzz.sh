#!/usr/bin/env bash
# Fuzzes one of zt's parsers of untrusted files with libFuzzer (tests/fuzz/README.md).
#   scripts/fuzz.sh TARGET [SECONDS]    SECONDS of fuzzing (default 60); TARGET one of:
#   scripts/fuzz.sh list                config_toml deepspeed_json safetensors checkpoint_manifest
#                                       checkpoint_open metrics_jsonl token_file bpe_tokenizer
# Installs clang-14 and its fuzzer and OpenMP runtimes where missing, builds build-fuzz/ (Clang,
# -DZT_FUZZ=ON: every zt target with libFuzzer's coverage, ASan and UBSan), seeds a working corpus
# build-fuzz/corpus/TARGET from tests/fuzz/corpus/TARGET (the working one grows run after run; the
# seeds in git stay small) and runs the target. A finding is an input that crashes, trips a
# sanitizer, lets an exception other than zt's own errors escape, runs over 1 s (-timeout=1), leaks,
# or allocates over 1 GiB at once (-malloc_limit_mb); libFuzzer writes it to
# build-fuzz/findings/TARGET/. Fix it, then copy the file into tests/fuzz/corpus/TARGET/: the
# replay test (ctest -R 'fuzz corpus') keeps it fixed. The last line gives the run's figures, and
# build-fuzz/campaign.tsv gets one line per run (seconds asked and run, executions, edges,
# findings), for a campaign's totals.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(config_toml deepspeed_json safetensors checkpoint_manifest checkpoint_open metrics_jsonl
         token_file bpe_tokenizer)
target=${1:-}
if [ "$target" = list ] || [ -z "$target" ]; then
  printf '%s\n' "${targets[@]}"
  [ -n "$target" ] && exit 0
  echo "usage: scripts/fuzz.sh TARGET [SECONDS]" >&2
  exit 2
fi
if ! printf '%s\n' "${targets[@]}" | grep -qx "$target"; then
  echo "fuzz: no target '$target'; the targets: ${targets[*]}" >&2
  exit 2
fi
seconds=${2:-60}
build_dir=${ZT_FUZZ_BUILD_DIR:-build-fuzz}

scripts/setup.sh job
missing=()
for p in clang-14 libclang-rt-14-dev libomp-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "fuzz: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  echo "fuzz: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros
if [ ! -f "$build_dir/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DZT_FUZZ=ON -DZT_SANITIZE=address,undefined -DZT_BUILD_BENCH=OFF -DZT_WITH_CUDA=OFF
fi
cmake --build "$build_dir" -j "${ZT_JOBS:-2}" --target "zt_fuzz_$target"

corpus="$build_dir/corpus/$target"
findings="$build_dir/findings/$target"
mkdir -p "$corpus" "$findings"
cp -n tests/fuzz/corpus/"$target"/* "$corpus"/ 2>/dev/null || true
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitize.supp:print_suppressions=0}
log="$build_dir/findings/$target.log"
cpu_file="$build_dir/findings/$target.cpu"
set +e
# CPU seconds, not wall: a campaign shares its cores, and its figure is the fuzzer's own CPU.
TIMEFORMAT='%U %S'
{ time "$build_dir/bin/zt_fuzz_$target" "$corpus" -max_total_time="$seconds" -timeout=1 \
  -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$findings/" 2>&1 | tee "$log" |
  grep --line-buffered -E '^(#[0-9]+.*(pulse|DONE)|==[0-9]+==|SUMMARY)'
  status=${PIPESTATUS[0]}; } 2> "$cpu_file"
set -e
# LLVM's OpenMP runtime registers itself in /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid> and the
# fuzzer's exit skips the unregistering: remove the registrations whose process has ended.
for f in /dev/shm/__KMP_REGISTERED_LIB_*; do
  pid=${f#/dev/shm/__KMP_REGISTERED_LIB_}
  pid=${pid%%_*}
  [ -e "$f" ] && [[ "$pid" =~ ^[0-9]+$ ]] && [ ! -e "/proc/$pid" ] && rm -f "$f"
done
cpu=$(awk '{ printf "%.0f", $1 + $2 }' "$cpu_file")
runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+' || echo 0)
found=$(find "$findings" -maxdepth 1 -type f | wc -l)
took=$(grep -oE '^Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' | grep -oE '[0-9]+' || echo 0)
# Every run's figures, one line each, for the campaign's totals (awk over the columns: seconds
# asked, seconds run, executions, edges, findings, exit status, CPU seconds).
printf '%s\t%s\t%s s\t%s\t%s execs\t%s edges\t%s findings\texit %s\t%s cpu s\n' "$(date -u +%FT%TZ)" \
  "$target" "$seconds" "$took" "$runs" "$cov" "$found" "$status" "$cpu" >> "$build_dir/campaign.tsv"
echo "fuzz $target: ${seconds} s ($cpu s of CPU), $runs executions, $cov edges covered, $(ls "$corpus" | wc -l)" \
     "inputs in $corpus, $found findings in $findings (exit $status; log $log)"
exit "$status"
