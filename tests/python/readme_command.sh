#!/usr/bin/env bash
# The README's Python command, run as written from the repository root (its build/ replaced by
# the build folder under test, a few steps added), with another python3 first on PATH: a venv of
# Debian's python3 without its site packages, so without torch, as a pyenv, conda or venv user
# has. It must train, evaluate and save (exit 0). That python3 importing the package must fail
# with the error that names the interpreter the package was built for.
#   readme_command.sh PYTHON SOURCE_DIR BUILD_DIR
set -euo pipefail
python=$1 source_dir=$2 build_dir=$3
source "$(dirname "$0")/require_package.sh"
require_package "$python" "$build_dir/python"

mapfile -t commands < <(grep -E '^PYTHONPATH=build/python ' "$source_dir/README.md")
if [ ${#commands[@]} -ne 1 ]; then
  echo "FAILED: README.md should hold one line that starts 'PYTHONPATH=build/python', not ${#commands[@]}"
  exit 1
fi
command=${commands[0]/PYTHONPATH=build\/python/PYTHONPATH=$build_dir/python}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$python" -m venv --without-pip "$scratch/venv"
export PATH="$scratch/venv/bin:$PATH"
if [ "$(command -v python3)" != "$scratch/venv/bin/python3" ] || python3 -c "import torch" 2>/dev/null; then
  echo "FAILED: the python3 first on PATH should be the venv's, without torch: $(command -v python3)"
  exit 1
fi

echo "README: $command"
cd "$source_dir"
out="$scratch/out.txt"
status=0
bash -c "$command --steps 4 --eval-every 2 --save $scratch/checkpoint" >"$out" 2>&1 || status=$?
cat "$out"
failed=0
if [ "$status" -ne 0 ]; then
  echo "FAILED: the README's command exited $status"
  failed=1
fi
if ! grep -Eq "eval after step 4: val loss [0-9.]+" "$out" || ! grep -q "^saved " "$out"; then
  echo "FAILED: the README's command did not evaluate after step 4 and save"
  failed=1
fi

# The shadowing python3 itself: the import names the interpreter to use instead.
status=0
PYTHONPATH="$build_dir/python" python3 -c "import zt" >"$out" 2>&1 || status=$?
cat "$out"
if [ "$status" -eq 0 ] ||
   ! grep -q "zt cannot load in $scratch/venv/bin/python3 .*: it has no torch. This zt was built for $python " "$out"; then
  echo "FAILED: importing zt in a python3 without torch should fail naming $python"
  failed=1
fi
exit $failed
