#!/usr/bin/env bash
# Builds zt on a GPU machine and runs its GPU tests (docs/architecture.md, "GPU builds"): CMake finds the CUDA
# LibTorch inside the installed PyTorch and the CUDA toolkit's nvcc, builds with Ninja into
# build-device/, then runs `ctest -L gpu` and, unless ZT_DEVICE_TESTS=gpu, every other test. Fails
# if the GPU tests were skipped (no device seen) or any test failed.
#
#   scripts/device-build.sh [DEPS_DIR] [extra cmake arguments...]
#
# Needs on the GPU machine: python3 with a CUDA build of PyTorch (torch.version.cuda set), a
# CUDA toolkit with nvcc (CUDACXX, nvcc on PATH, or /usr/local/cuda/bin/nvcc) whose driver
# support matches the GPU's driver, cmake >= 3.20 (cmake_path, ctest --test-dir), ninja and a
# C++17 compiler. ZT_TORCH_PREFIX replaces the PyTorch lookup with another LibTorch's CMake
# prefix (e.g. an unzipped LibTorch).
#
# DEPS_DIR (or ZT_DEVICE_DEPS) carries what the machine lacks and cannot download (it has no
# network), as Debian packages that scripts/device-deps.sh downloads on a Debian 12 machine. They
# are unpacked into ZT_DEVICE_DEPS_ROOT (default /tmp/zt-device-deps; outside the source tree,
# which CMake requires of an installable target's include folders): its usr/include, usr/lib/...
# come first on CMAKE_PREFIX_PATH (before LibTorch's and the system's) and on LD_LIBRARY_PATH.
# CMake and pkg-config files that hard-code /usr (UCX's, liburing's) and absolute symlinks
# (libz.so) are pointed into the unpacked tree.
#
# Environment: ZT_DEVICE_BUILD_DIR (build-device), ZT_JOBS (all cores), ZT_KEEP_GOING (0; 1 builds
# past errors to list them all), ZT_BUILD_TARGETS (only these targets), ZT_DEVICE_TESTS (all,
# gpu, or none: build only), ZT_DEVICE_LOG_DIR (where the ctest logs go; the build folder),
# ZT_BUILD_TYPE
# (RelWithDebInfo), ZT_CUDA_ARCHITECTURES (native with CMake >= 3.24, else zt's default).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "device-build: $*" >&2; exit 1; }

deps_dir=${ZT_DEVICE_DEPS:-}
if [ $# -gt 0 ] && [ -d "$1" ]; then
  deps_dir=$1
  shift
fi
build_dir=${ZT_DEVICE_BUILD_DIR:-build-device}

# LibTorch: the one inside PyTorch unless given.
torch_prefix=${ZT_TORCH_PREFIX:-}
if [ -z "$torch_prefix" ]; then
  command -v python3 >/dev/null || die "python3 not found; install PyTorch or set ZT_TORCH_PREFIX"
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') ||
    die "python3 cannot import torch; install a CUDA build of PyTorch or set ZT_TORCH_PREFIX"
  torch_cuda=$(python3 -c 'import torch; print(torch.version.cuda or "")')
  [ -n "$torch_cuda" ] || die "the PyTorch in $torch_prefix is a CPU-only build; zt's CUDA " \
    "parts need a CUDA build of PyTorch"
  echo "device-build: LibTorch from PyTorch $(python3 -c 'import torch; print(torch.__version__)')" \
       "(CUDA $torch_cuda): $torch_prefix"
fi
cmake_args=(-DCMAKE_PREFIX_PATH="$torch_prefix")
# The python3 that holds this PyTorch (a venv's, say) makes the TorchScript test models, not
# the system's.
[ -z "${ZT_TORCH_PREFIX:-}" ] && cmake_args+=(-DPython3_EXECUTABLE="$(command -v python3)")

# A header of one of PyTorch's nvidia-* wheels: the folder holding include/<header>, found under
# site-packages/nvidia (the wheels' layout differs between CUDA 12's and 13's), or nothing.
wheel_root() {
  python3 - "$1" <<'PY' 2>/dev/null || true
import glob, os, sys, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
hits = sorted(glob.glob(os.path.join(site, "nvidia", "**", "include", sys.argv[1]), recursive=True))
print(os.path.dirname(os.path.dirname(hits[0])) if hits else "")
PY
}

# cuDNN from the PyTorch wheel (nvidia-cudnn-*): LibTorch's CMake files insist on finding the
# cuDNN PyTorch was built with, and the wheel's copy is in no standard place.
if [ -z "${ZT_TORCH_PREFIX:-}" ]; then
  cudnn_dir=$(wheel_root cudnn.h)
  if [ -n "$cudnn_dir" ]; then
    cudnn_lib=
    for f in "$cudnn_dir"/lib/libcudnn.so*; do [ -f "$f" ] && cudnn_lib=$f && break; done
    if [ -n "$cudnn_lib" ]; then
      cmake_args+=(-DCUDNN_INCLUDE_PATH="$cudnn_dir/include" -DCUDNN_LIBRARY_PATH="$cudnn_lib")
    fi
  fi
fi

# NCCL for comm_nccl: the nvidia-nccl wheel PyTorch loads its libnccl.so.2 from, so the plugin
# and LibTorch share one NCCL (ZT_NCCL_ROOT names another; else CMake looks in the CUDA toolkit).
nccl_root=${ZT_NCCL_ROOT:-}
if [ -z "$nccl_root" ] && [ -z "${ZT_TORCH_PREFIX:-}" ]; then
  nccl_root=$(wheel_root nccl.h)
fi
if [ -n "$nccl_root" ] && [ -f "$nccl_root/include/nccl.h" ]; then
  cmake_args+=(-DZT_NCCL_ROOT="$nccl_root")
  echo "device-build: NCCL from $nccl_root"
fi

# nvcc: the CUDA kernels are compiled here, so a toolkit is required.
nvcc=${CUDACXX:-$(command -v nvcc || true)}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
[ -n "$nvcc" ] || die "no nvcc: install a CUDA toolkit or point CUDACXX at its nvcc"
echo "device-build: $("$nvcc" --version | tail -n 1)"
cmake_args+=(-DCMAKE_CUDA_COMPILER="$nvcc" -DZT_WITH_CUDA=ON)

# The carried Debian packages.
if [ -n "$deps_dir" ]; then
  # Unpacked outside the source and build trees: CMake refuses an installable target whose include
  # folders lie inside either.
  root=${ZT_DEVICE_DEPS_ROOT:-${TMPDIR:-/tmp}/zt-device-deps}
  shopt -s nullglob
  debs=("$deps_dir"/*.deb)
  shopt -u nullglob
  # A stamp names the packages an unpack finished with: an unpack cut short, or packages added
  # to DEPS_DIR since, unpack again (the folder was taken as done whenever it existed).
  stamp="$root/.zt-unpacked"
  want=$(for deb in "${debs[@]}"; do basename "$deb"; done | sort)
  if [ ${#debs[@]} -gt 0 ] && [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    if [ -d "$root" ] && [ ! -f "$stamp" ] && [ -n "${ZT_DEVICE_DEPS_ROOT:-}" ]; then
      echo "device-build: $root exists and is not an unpack of this script's; remove it or set" \
           "ZT_DEVICE_DEPS_ROOT to an empty folder" >&2
      exit 2
    fi
    rm -rf "$root"
    mkdir -p "$root"
    for deb in "${debs[@]}"; do
      echo "device-build: unpacking $(basename "$deb")"
      if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$deb" "$root"
      else
        deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
        (tmp=$(mktemp -d) && cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$root" &&
           rm -rf "$tmp")
      fi
    done
    { grep -rl --include='*.cmake' 'set(prefix "/usr")' "$root" 2>/dev/null || true; } |
      while read -r f; do sed -i "s#set(prefix \"/usr\")#set(prefix \"$root/usr\")#" "$f"; done
    # pkg-config files name /usr too (liburing's is how offload_nvme finds it).
    { grep -rlE '^[a-z_]+=/usr' "$root" --include='*.pc' 2>/dev/null || true; } |
      while read -r f; do sed -i -E "s#^([a-z_]+)=/usr#\1=$root/usr#" "$f"; done
    # Development symlinks that point at an absolute path (libz.so -> /lib/...) point into the
    # unpacked tree instead.
    find "$root" -type l | while read -r link; do
      target=$(readlink "$link")
      case $target in /*) [ -e "$root$target" ] && ln -sfn "$root$target" "$link" ;; esac
    done
    printf '%s\n' "$want" >"$stamp"
  fi
  [ -d "$root/usr" ] || die "$deps_dir holds no .deb files and $root was not unpacked before"
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  cmake_args[0]="-DCMAKE_PREFIX_PATH=$root/usr;$root/usr/lib/$multiarch/cmake;$torch_prefix"
  export LD_LIBRARY_PATH="$root/usr/lib/$multiarch:$root/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$root/usr/lib/$multiarch/pkgconfig:$root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  # UCX loads its transports (cma, ib, ...) as modules from the folder it was built for (/usr).
  [ -d "$root/usr/lib/$multiarch/ucx" ] && export UCX_MODULE_DIR="$root/usr/lib/$multiarch/ucx"
fi

# Kernels for the GPUs present where CMake can ask for them (3.24+), else zt's default list.
archs=${ZT_CUDA_ARCHITECTURES:-}
if [ -z "$archs" ]; then
  cmake_minor=$(cmake --version | head -n 1 | sed -E 's/[^0-9]*([0-9]+)\.([0-9]+).*/\1 \2/')
  read -r major minor <<<"$cmake_minor"
  if [ "$major" -gt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -ge 24 ]; }; then archs=native; fi
fi
[ -n "$archs" ] && cmake_args+=(-DZT_CUDA_ARCHITECTURES="$archs")

command -v nvidia-smi >/dev/null && nvidia-smi -L || echo "device-build: no nvidia-smi"

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${ZT_BUILD_TYPE:-RelWithDebInfo}" \
  -DZT_BUILD_BENCH=OFF "${cmake_args[@]}" "$@"
jobs=${ZT_JOBS:-$(nproc)}
# ZT_KEEP_GOING=1 compiles every target it can after an error, so one build lists every error.
keep_going=()
[ "${ZT_KEEP_GOING:-0}" = 1 ] && keep_going=(-- -k 0)
# ZT_BUILD_TARGETS (space-separated) builds only those targets and what they need.
targets=()
for t in ${ZT_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$jobs" "${targets[@]}" "${keep_going[@]}"
[ "${ZT_DEVICE_TESTS:-all}" = none ] && exit 0

# The logs go to the build folder, or to ZT_DEVICE_LOG_DIR.
log_dir=${ZT_DEVICE_LOG_DIR:-$build_dir}
mkdir -p "$log_dir"
log="$log_dir/device-ctest.log"
status=0
ctest --test-dir "$build_dir" -L gpu --output-on-failure --no-tests=error 2>&1 | tee "$log" ||
  status=$?
if grep -q '\*\*\*Skipped' "$log"; then
  die "the GPU tests were skipped (see $log): this machine shows no CUDA device to them"
fi

# Then every other test (ZT_DEVICE_TESTS=gpu stops after the GPU ones), whether or not a GPU test
# failed: the CPU suite must pass against this LibTorch too, and one run should show every
# failure. The exit status is the first failure's.
if [ "${ZT_DEVICE_TESTS:-all}" = all ]; then
  all_log="$log_dir/device-ctest-all.log"
  all_status=0
  ctest --test-dir "$build_dir" -LE gpu -j "$jobs" --output-on-failure 2>&1 | tee "$all_log" ||
    all_status=$?
  [ "$status" -ne 0 ] || status=$all_status
fi
exit "$status"
