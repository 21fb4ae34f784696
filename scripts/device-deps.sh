#!/usr/bin/env bash
# Downloads, on a Debian 12 machine with apt, the packages a GPU machine lacks to build zt (it has
# PyTorch, CUDA, CMake and a compiler, but no network): the folder this writes (default .deps/,
# which git ignores) is what scripts/device-build.sh takes as DEPS_DIR and unpacks there.
#   scripts/device-deps.sh [DIR]
# Header-only: toml++ (and its library, which its CMake files name), doctest, Boost, nlohmann-json.
# Libraries: UCX (comm_ucx) and libnuma, liburing (offload_nvme), zlib, PCRE2 (the BPE tokenizers'
# split patterns; its -dev package depends on all four of its libraries). They are built for Debian
# 12's glibc (2.36), so they run on a GPU machine with that glibc or a newer one.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.deps}
packages=(
  libtomlplusplus-dev libtomlplusplus3 doctest-dev libboost1.74-dev nlohmann-json3-dev
  libucx-dev libucx0 libnuma1 liburing-dev liburing2 zlib1g-dev zlib1g
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
)
mkdir -p "$dir"
# apt-get download writes into the current folder; as root it warns that _apt cannot write there.
(cd "$dir" && apt-get download "${packages[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed") || true
missing=()
for p in "${packages[@]}"; do
  compgen -G "$dir/${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "device-deps: could not download: ${missing[*]} (run apt-get update first?)" >&2
  exit 1
fi
echo "device-deps: ${#packages[@]} packages in $dir ($(du -sh "$dir" | cut -f1)); copy it to the GPU" \
     "machine with the tree and run scripts/device-build.sh $dir there"
