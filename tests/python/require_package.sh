# Sourced by the Python tests' scripts: require_package PYTHON PACKAGE_DIR returns when the zt
# package was built in PACKAGE_DIR and PYTHON imports torch; otherwise it says why and exits 77
# (CTest's Skipped), or 1 under CI (the CI variable set, as .ci/run runs), where
# scripts/setup.sh has installed what the package needs (as tests/skip.h's ZT_SKIP_UNLESS_CI).
cannot_run() {
  if [ -n "${CI:-}" ]; then
    echo "under CI, where scripts/setup.sh provides it, this is a failure: $*"
    exit 1
  fi
  echo "zt-skip: $*"
  exit 77
}

require_package() {
  local python=$1 package=$2
  if [ ! -f "$package/zt/__init__.py" ]; then
    cannot_run "the zt Python package was not built (it needs python3-dev, pybind11-dev and" \
               "python3-torch: scripts/setup.sh installs them)"
  fi
  if ! "$python" -c "import torch" 2>/dev/null; then
    cannot_run "$python cannot import torch (python3-torch: scripts/setup.sh installs it)"
  fi
}
