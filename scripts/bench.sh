#!/usr/bin/env bash
# Runs one of zt's benchmarks (docs/architecture.md, "Benchmarks") from the repository root, building it first.
# usage: scripts/bench.sh <bench> [options for the bench]
# Results go to bench-results/<bench>.json under the repository root.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir=${ZT_BUILD_DIR:-build}
benches="adam comm nvme train ckpt scale mics codec trace eval python tune tokenize"

usage() {
  echo "usage: scripts/bench.sh <bench> [options]"
  echo "benches: $benches"
}

# Configures build/ when it has never been (Release), turns the benchmarks on when an existing
# build/ has them off, then builds only the given targets.
# Configured again, too, when Debian's packages changed since (scripts/build.sh does the same):
# what setup.sh installed after the first configure (pybind11 for the python bench) is found.
build() {
  if [[ ! -f "$build_dir/build.ninja" ]]; then
    cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
  elif grep -q '^ZT_BUILD_BENCH:BOOL=OFF' "$build_dir/CMakeCache.txt" ||
       [[ /var/lib/dpkg/status -nt "$build_dir/CMakeCache.txt" ]]; then
    cmake -S . -B "$build_dir" -DZT_BUILD_BENCH=ON
    touch "$build_dir/CMakeCache.txt"  # as build.sh: rewritten only when an entry changed
  fi
  local type
  type="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build_dir/CMakeCache.txt")"
  if [[ "$type" != "Release" ]]; then
    echo "bench.sh: note: $build_dir/ is a ${type:-default} build, not Release; timings are for it" >&2
  fi
  cmake --build "$build_dir" -j2 --target "$@"
}

bench="${1:-}"
# What the bench needs installed first, as every other script of this folder does: the benches
# that run Python, Node, tc, namespace hosts or UCX's own tools need everything (comm compares with
# ucx_perftest, from ucx-utils; train with PyTorch's DDP and a TorchScript GPT, from
# python3-torch), the others a job's packages.
case "$bench" in
  python|tune|tokenize|codec|mics|comm|train) scripts/setup.sh all ;;
  adam|nvme|trace|eval|ckpt|scale) scripts/setup.sh job ;;
esac
case "$bench" in
  adam)
    shift
    build zt_bench_adam zt_optim_hybrid_adam
    "$build_dir/bin/zt_bench_adam" "$@"
    ;;
  comm)
    shift
    build zt_bench_comm zt_comm_ucx
    "$build_dir/bin/zt_bench_comm" "$@"
    ;;
  nvme)
    shift
    build zt_bench_nvme zt_offload_nvme
    "$build_dir/bin/zt_bench_nvme" "$@"
    ;;
  train)
    shift
    build zt_bench_train trainer zt_comm_ucx zt_shard_tensor zt_shard_bucket zt_optim_hybrid_adam
    "$build_dir/bin/zt_bench_train" "$@"
    ;;
  trace)
    shift
    build zt_bench_trace trainer zt_comm_ucx zt_shard_bucket zt_optim_hybrid_adam zt_offload_cpu \
      zt_offload_nvme
    "$build_dir/bin/zt_bench_trace" "$@"
    ;;
  python)
    shift
    build trainer zt_python zt_comm_ucx zt_shard_bucket zt_optim_hybrid_adam
    /usr/bin/python3 bench/python/bench_python.py "$build_dir" "$@"
    ;;
  tune)
    shift
    build trainer zt_comm_ucx zt_shard_tensor zt_shard_bucket zt_optim_hybrid_adam zt_offload_cpu \
      zt_offload_nvme
    /usr/bin/python3 bench/tune/bench_tune.py "$build_dir" "$@"
    ;;
  eval)
    shift
    build zt_bench_eval trainer zt_comm_ucx zt_shard_bucket zt_optim_hybrid_adam zt_offload_cpu
    "$build_dir/bin/zt_bench_eval" "$@"
    ;;
  ckpt)
    shift
    build zt_bench_ckpt trainer zt_comm_ucx zt_shard_tensor zt_shard_bucket zt_optim_hybrid_adam \
      zt_offload_cpu zt_offload_nvme
    "$build_dir/bin/zt_bench_ckpt" "$@"
    ;;
  scale)
    shift
    build zt_bench_scale trainer zt_comm_ucx zt_shard_bucket zt_optim_hybrid_adam zt_offload_nvme
    "$build_dir/bin/zt_bench_scale" "$@"
    ;;
  codec)
    shift
    # ZeRO++ codecs: the loss with and without them on one host, step time and bytes between two
    # simulated hosts (needs root for the second part; --part loss runs the first alone).
    build zt_bench_codec trainer zt_comm_ucx zt_shard_bucket zt_optim_hybrid_adam zt_codec_blockq
    "$build_dir/bin/zt_bench_codec" "$@"
    ;;
  tokenize)
    shift
    # zt's BPE encoder against js-tiktoken and WASM tiktoken, prepare-data on 1 and 2 threads,
    # training on prepared tokens against text.
    build zt_bench_tokenize trainer zt_comm_ucx zt_shard_bucket zt_optim_hybrid_adam
    "$build_dir/bin/zt_bench_tokenize" "$@"
    ;;
  mics)
    shift
    build zt_bench_mics trainer zt_comm_ucx zt_shard_bucket zt_optim_hybrid_adam
    "$build_dir/bin/zt_bench_mics" "$@"
    ;;
  -h|--help)
    usage
    ;;
  "")
    usage >&2
    exit 2
    ;;
  *)
    echo "bench.sh: unknown bench '$bench'; known: $benches" >&2
    exit 2
    ;;
esac
