#!/usr/bin/env bash
# Configures and builds zt in build/ (ZT_BUILD_DIR) with Ninja: everything, or ZT_TARGET
# (scripts/run.sh: zt_job, what a job needs). Extra arguments are passed to the configure step,
# e.g. -DZT_BUILD_BENCH=OFF. ZT_JOBS compile jobs; by default one per core, as many as the
# available memory holds at 2 GiB each (a LibTorch file takes about 1.5 GiB to compile).
# A build folder is configured again when arguments are given, and when Debian's packages
# changed since it was last configured: scripts/run.sh configures with only a job's packages,
# and what scripts/test.sh installs after it (pybind11 for the Python package, and the rest)
# must be found then, not left as the NOTFOUND the first configure cached.
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  # The comment above, as this script's help (cmake would read --help as its own and build).
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
build_dir=${ZT_BUILD_DIR:-build}
if [ -e "$build_dir" ] && ! [ -w "$build_dir" ]; then
  echo "build: $build_dir is not writable by $(id -un), who runs this: an earlier run as root" \
       "(sudo scripts/run.sh?) made it. Give it back with: sudo chown -R $(id -un) $build_dir" \
       "runs .tools (or set ZT_BUILD_DIR to another folder)" >&2
  exit 1
fi
# A folder another generator configured (cmake by hand, Makefiles): Ninja cannot take it over.
generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
if [ -n "$generator" ] && [ "$generator" != Ninja ]; then
  echo "build: $build_dir was configured with '$generator', and zt builds with Ninja: remove it," \
       "or set ZT_BUILD_DIR to another folder" >&2
  exit 1
fi
if [ -z "${ZT_JOBS:-}" ]; then
  available_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)
  ZT_JOBS=$(( available_kib / (2 * 1024 * 1024) ))
  cores=$(nproc 2>/dev/null || echo 1)
  [ "$ZT_JOBS" -le "$cores" ] || ZT_JOBS=$cores
  [ "$ZT_JOBS" -ge 1 ] || ZT_JOBS=1
fi
# Let ccache reuse objects across checkouts at other paths (CI builds a fresh clone).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
# The precompiled LibTorch headers (cmake/ZtPch.cmake): ccache caches their users only when told
# that the header's macros and __TIME__ need not be re-checked.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros}
# Under CI (the CI variable set, as .ci/run runs) a warning fails the build. Set at every
# configure, so the README's first command (scripts/run.sh) and the test command compile alike
# and the second reuses the first one's objects.
if [ -n "${CI:-}" ] && ! grep -qs '^ZT_WARNINGS_AS_ERRORS:BOOL=ON$' "$build_dir/CMakeCache.txt"; then
  set -- -DZT_WARNINGS_AS_ERRORS=ON "$@"
fi
packages=/var/lib/dpkg/status
# A build type asked for that the folder was not configured with: configured again with it.
if [ -n "${ZT_BUILD_TYPE:-}" ] && [ -f "$build_dir/CMakeCache.txt" ] &&
   ! grep -qx "CMAKE_BUILD_TYPE:STRING=$ZT_BUILD_TYPE" "$build_dir/CMakeCache.txt"; then
  set -- -DCMAKE_BUILD_TYPE="$ZT_BUILD_TYPE" "$@"
fi
# Configured afresh without a cache (deleted, as CMake's advice goes), or without a build.ninja.
if [ ! -f "$build_dir/CMakeCache.txt" ] || [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${ZT_BUILD_TYPE:-RelWithDebInfo} "$@"
elif [ $# -gt 0 ] || [ "$packages" -nt "$build_dir/CMakeCache.txt" ]; then
  [ $# -gt 0 ] || echo "build: packages were installed since $build_dir was configured: configuring again"
  cmake -S . -B "$build_dir" "$@"
  # CMake rewrites its cache only when an entry changed: after an install that changed none, the
  # cache stayed older than dpkg's status, and every later build configured again.
  touch "$build_dir/CMakeCache.txt"
fi
cmake --build "$build_dir" -j "$ZT_JOBS" --target "${ZT_TARGET:-all}"
