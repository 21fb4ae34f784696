#!/usr/bin/env bash
# Proves the installed zt SDK works for a third-party plugin author, from the outside:
#   1. `cmake --install` a zt build tree into a temporary prefix;
#   2. configure and build examples/plugin_template against that prefix only
#      (find_package(zt) through CMAKE_PREFIX_PATH, a fresh Ninja build folder);
#   3. run the INSTALLED trainer: `plugins describe comm_local` (found through ZT_PLUGIN_PATH),
#      `plugins list` (comm_ucx from the prefix and comm_local both load), and a one-rank smoke
#      job over comm_local (found through [plugins] dirs) that checks every collective;
#      and a two-rank job, which comm_local must refuse with a comm error;
#   4. build examples/model_plugin (a model plugin) against the prefix the same way and train it
#      with the installed trainer on 2 ranks at stage 3, the plugin taken from its own build;
#      then examples/codec_plugin (a codec plugin), and train that model with the codec on both
#      roles (parameter gather, gradient reduce-scatter) with error feedback.
# Along the way it checks that the template compiled with the installed headers only and that
# the installed trainer runs from the prefix (its RUNPATH finds the installed libzt_core).
#
# usage: sdk_install_test.sh ZT_BUILD_DIR ZT_SOURCE_DIR [CMAKE_COMMAND] [CMAKE_PREFIX_PATH]
#   CMAKE_PREFIX_PATH: extra prefixes the template needs to find LibTorch/Boost, if any
#   (';'-separated, CMake style); the temporary zt prefix is put first.
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 ZT_BUILD_DIR ZT_SOURCE_DIR [CMAKE_COMMAND] [CMAKE_PREFIX_PATH]" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
cmake_cmd=${3:-cmake}
extra_prefix=${4:-}
template_dir="$source_dir/examples/plugin_template"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zt-sdk-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
plugin_build="$tmp/plugin-build"

step() { echo "== $*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# Runs a command with its output in a log file; on failure shows the log's end and stops.
logged() {
  local log="$tmp/$1.log"
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "command failed: $*"
  fi
}
expect_in() {  # expect_in FILE REGEX WHAT
  grep -Eq -- "$2" "$1" || { cat "$1" >&2; fail "$3 (no line matching /$2/ in the output above)"; }
}

# The trainer must find everything from the prefix itself: no loader or plugin path from the
# caller's environment may help it.
unset LD_LIBRARY_PATH ZT_PLUGIN_PATH

command -v ninja >/dev/null || fail "ninja not found on PATH; install it (Debian: ninja-build)"
[[ -f "$build_dir/CMakeCache.txt" ]] || fail "$build_dir is not a configured zt build tree"
[[ -f "$template_dir/CMakeLists.txt" ]] || fail "no plugin template at $template_dir"

step "install $build_dir into $prefix"
logged install "$cmake_cmd" --install "$build_dir" --prefix "$prefix"
trainer="$prefix/bin/trainer"
config_file=$(find "$prefix" -path '*/cmake/zt/ztConfig.cmake' | head -n 1)
[[ -n "$config_file" ]] || fail "no <libdir>/cmake/zt/ztConfig.cmake under $prefix"
libdir=$(dirname "$(dirname "$(dirname "$config_file")")")
for f in "$trainer" "$libdir/libzt_core.so" "$libdir/zt/plugins/libzt_comm_ucx.so" \
    "$libdir/cmake/zt/ZtPlugin.cmake" "$prefix/include/zt/plugin.h" \
    "$prefix/include/zt/communicator.h" "$prefix/share/zt/examples/plugin_template/CMakeLists.txt" \
    "$prefix/share/zt/examples/plugin_template/comm_local.cc"; do
  [[ -e "$f" ]] || fail "the install lacks $f"
done

step "installed trainer loads its libzt_core from the prefix"
core_line=$(ldd "$trainer" | grep 'libzt_core' || true)
[[ "$core_line" == *"=> $prefix/"* ]] ||
  fail "installed trainer resolves libzt_core as '$core_line', not from $prefix (RUNPATH?)"

# The zt build's compiler launcher (ccache, where the build found one) compiles the plugins too:
# their LibTorch translation units are most of this test's time, and their objects are the same
# from one run to the next. Paths under $tmp, which differ each run, are hashed relative to it.
launcher=$(sed -n 's/^CMAKE_CXX_COMPILER_LAUNCHER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
[[ -n "$launcher" ]] || launcher=$(sed -n 's/^ZT_CCACHE:[A-Z]*=\(.*ccache\)$/\1/p' "$build_dir/CMakeCache.txt")
plugin_flags=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefix${extra_prefix:+;$extra_prefix}")
if [[ -n "$launcher" ]]; then
  plugin_flags+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
  export CCACHE_BASEDIR="$tmp" CCACHE_NOHASHDIR=1
fi

step "configure and build examples/plugin_template against $prefix"
logged configure "$cmake_cmd" -S "$template_dir" -B "$plugin_build" -G Ninja "${plugin_flags[@]}" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
logged build "$cmake_cmd" --build "$plugin_build"
plugin_so="$plugin_build/libzt_comm_local.so"
[[ -f "$plugin_so" ]] || fail "the template build did not produce $plugin_so"
expect_in "$plugin_build/CMakeCache.txt" "^zt_DIR:PATH=$libdir/cmake/zt\$" \
  "find_package(zt) did not pick the installed SDK in $libdir/cmake/zt"
# Headers must come from the prefix: the zt source and build trees are not on the include path.
if grep -Eq -- "-I *($source_dir|$build_dir)|-isystem *($source_dir|$build_dir)" \
    "$plugin_build/compile_commands.json"; then
  fail "the template compiled with headers from the zt source/build tree, not only the install"
fi

step "another compiler is refused when the plugin is configured, naming zt's"
# Family (clang or not) and major version, as the fingerprint has them: --version's first line
# names the program as it was called, so it cannot tell g++-12 from c++ (GCC 12).
compiler_of() {
  local family=gnu
  "$1" --version | head -n 1 | grep -qi clang && family=clang
  echo "$family-$("$1" -dumpversion | cut -d. -f1)"
}
ours_cxx=$(compiler_of "$(grep -E '^CMAKE_CXX_COMPILER:' "$build_dir/CMakeCache.txt" | cut -d= -f2)")
other_cxx=""
for c in clang++-16 clang++-15 clang++-14 clang++ g++-14 g++-13 g++-12 g++-11; do
  if command -v "$c" >/dev/null && [[ $(compiler_of "$c") != "$ours_cxx" ]]; then
    other_cxx=$(command -v "$c")
    break
  fi
done
if [[ -n "$other_cxx" ]]; then
  rc=0
  "$cmake_cmd" -S "$template_dir" -B "$tmp/other-compiler" -G Ninja \
    "-DCMAKE_CXX_COMPILER=$other_cxx" \
    "-DCMAKE_PREFIX_PATH=$prefix${extra_prefix:+;$extra_prefix}" \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON >"$tmp/other.log" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || { cat "$tmp/other.log" >&2; fail "a plugin of $other_cxx was configured"; }
  tr -s ' \n' ' ' <"$tmp/other.log" >"$tmp/other.flat"  # CMake wraps its messages
  expect_in "$tmp/other.flat" "zt loads only plugins of its compiler's family and major version" \
    "configuring with $other_cxx did not say why it is refused"
  expect_in "$tmp/other.flat" \
    "-DCMAKE_CXX_COMPILER=$(grep -E '^CMAKE_CXX_COMPILER:' "$build_dir/CMakeCache.txt" | cut -d= -f2)" \
    "the refusal does not name zt's compiler"
else
  echo "   (no second C++ compiler on this machine: not tried)"
fi

step "trainer plugins describe comm_local (ZT_PLUGIN_PATH)"
ZT_PLUGIN_PATH="$plugin_build" "$trainer" plugins describe comm_local >"$tmp/describe.out" 2>&1 ||
  { cat "$tmp/describe.out" >&2; fail "'trainer plugins describe comm_local' exited non-zero"; }
expect_in "$tmp/describe.out" '^comm_local .*comm' "describe does not name comm_local as a comm plugin"
expect_in "$tmp/describe.out" "$plugin_so" "describe does not show the template's build output"
expect_in "$tmp/describe.out" '^ +validate .*bool.*true' "describe does not show option 'validate'"

step "trainer plugins list: comm_ucx (installed) and comm_local both load"
ZT_PLUGIN_PATH="$plugin_build" "$trainer" plugins list >"$tmp/list.out" 2>&1 ||
  { cat "$tmp/list.out" >&2; fail "'trainer plugins list' exited non-zero (a plugin is broken?)"; }
if grep -q BROKEN "$tmp/list.out"; then cat "$tmp/list.out" >&2; fail "a plugin failed to load"; fi
expect_in "$tmp/list.out" '^comm_local +comm ' "comm_local is not listed as a loaded comm plugin"
expect_in "$tmp/list.out" '^comm_ucx +comm ' "comm_ucx is not listed as a loaded comm plugin"
# The core names its folder from its own location (e.g. prefix/bin/../lib): compare real paths.
ucx_listed=$(grep -Eo '/[^ ]*/libzt_comm_ucx\.so' "$tmp/list.out" | head -n 1 || true)
[[ -n "$ucx_listed" && $(realpath -m "$ucx_listed") == $(realpath "$libdir/zt/plugins/libzt_comm_ucx.so") ]] ||
  { cat "$tmp/list.out" >&2; fail "comm_ucx was not loaded from the installed $libdir/zt/plugins"; }

step "one-rank smoke job over comm_local ([plugins] dirs)"
cat >"$tmp/job.toml" <<EOF
# Every collective of comm_local, checked by the trainer's smoke task in one process.
[run]
name = "sdk-comm-local"
task = "smoke"
steps = 2
out_dir = "$tmp/runs"

[launch]
nproc = 1
timeout_s = 60

[plugins]
dirs = ["$plugin_build"]
comm = "comm_local"

[plugin.comm_local]
validate = true
EOF
(cd "$tmp" && "$trainer" --config "$tmp/job.toml") >"$tmp/job.out" 2>&1 ||
  { cat "$tmp/job.out" >&2; fail "the one-rank job over comm_local failed"; }

step "two-rank job: comm_local refuses with a comm error naming the world size"
rc=0
(cd "$tmp" && "$trainer" --config "$tmp/job.toml" --nproc 2) >"$tmp/job2.out" 2>&1 || rc=$?
[[ $rc -eq 4 ]] || { cat "$tmp/job2.out" >&2; fail "expected exit code 4 (comm error), got $rc"; }
expect_in "$tmp/job2.out" 'comm_local .*exactly 1 rank.*2 ranks.*comm_ucx' \
  "the refusal does not name the world size and comm_ucx"

# Builds the installed examples/<folder> (plugin <id>) against the prefix alone, as a third party
# would, into $tmp/<folder>-build.
build_example() {  # build_example FOLDER ID
  local dir="$prefix/share/zt/examples/$1" out="$tmp/$1-build"
  [[ -f "$dir/$2.cc" ]] || fail "the install lacks $dir/$2.cc"
  logged "configure-$1" "$cmake_cmd" -S "$dir" -B "$out" -G Ninja "${plugin_flags[@]}" \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
  logged "build-$1" "$cmake_cmd" --build "$out"
  [[ -f "$out/libzt_$2.so" ]] || fail "no libzt_$2.so in $out"
}

step "configure and build examples/model_plugin against $prefix"
build_example model_plugin model_resmlp
model_build="$tmp/model_plugin-build"

step "describe model_resmlp: the out-of-tree build is found first (ZT_PLUGIN_PATH)"
ZT_PLUGIN_PATH="$model_build" "$trainer" plugins describe model_resmlp >"$tmp/model-describe.out" 2>&1 ||
  { cat "$tmp/model-describe.out" >&2; fail "'trainer plugins describe model_resmlp' failed"; }
expect_in "$tmp/model-describe.out" '^model_resmlp .*model plugin' "describe does not name a model plugin"
expect_in "$tmp/model-describe.out" "$model_build/libzt_model_resmlp.so" \
  "the out-of-tree model plugin is not the one found first"

step "two-rank stage-3 job on the out-of-tree model plugin ([plugins] dirs)"
cat >"$tmp/model.toml" <<EOF
[run]
steps = 3
out_dir = "$tmp/model-runs"
[launch]
nproc = 2
timeout_s = 60
[model]
kind = "plugin"
[data]
kind = "synthetic"
micro_batch = 2
[zero]
stage = 3
[plugins]
dirs = ["$model_build"]
model = "model_resmlp"
shard = "shard_bucket"
optimizer = "optim_hybrid_adam"
[plugin.model_resmlp]
width = 32
depth = 2
EOF
(cd "$tmp" && "$trainer" --config "$tmp/model.toml") >"$tmp/model.out" 2>&1 ||
  { cat "$tmp/model.out" >&2; fail "the job on the out-of-tree model plugin failed"; }
expect_in "$tmp/model.out" '^zt train: model_resmlp: input 32 -> 2 residual blocks of width 32' \
  "the run header does not describe the plugin's model"
expect_in "$tmp/model.out" '^step 3/3 ' "the job did not train 3 steps"

step "configure and build examples/codec_plugin against $prefix"
build_example codec_plugin codec_bf16
codec_build="$tmp/codec_plugin-build"

step "two-rank stage-3 job with the out-of-tree codec on both roles ([plugins] dirs)"
cat >"$tmp/codec.toml" <<EOF
[run]
steps = 3
out_dir = "$tmp/codec-runs"
[launch]
nproc = 2
timeout_s = 60
[model]
kind = "plugin"
[data]
kind = "synthetic"
micro_batch = 2
[zero]
stage = 3
codec_error_feedback = true
[plugins]
dirs = ["$codec_build", "$model_build"]
model = "model_resmlp"
shard = "shard_bucket"
optimizer = "optim_hybrid_adam"
codec_weights = "codec_bf16"
codec_gradients = "codec_bf16"
[codec.gradients]
rounding = "toward_zero"
[plugin.model_resmlp]
width = 32
depth = 2
EOF
(cd "$tmp" && "$trainer" --config "$tmp/codec.toml") >"$tmp/codec.out" 2>&1 ||
  { cat "$tmp/codec.out" >&2; fail "the job with the out-of-tree codec failed"; }
expect_in "$tmp/codec.out" \
  'codecs: parameter all-gather: codec_bf16: bfloat16 payloads, rounded to nearest even .*gradient reduce-scatter \(all-to-all\): codec_bf16: bfloat16 payloads, rounded toward zero \(0\.5x fp32\), error feedback' \
  "the run header does not name the out-of-tree codec for both roles"
expect_in "$tmp/codec.out" '^step 3/3 ' "the job with the codec did not train 3 steps"
expect_in "$tmp/codec.out" 'all_to_all [1-9]' "the gradient codec's all-to-all did not run"

# 5. The Python package, where the build has one: installed under the prefix's
#    lib/python3.X/dist-packages, it imports from there and trains a module on 2 ranks with the
#    installed core and plugins.
python_part="and its Python package trains"
if [[ ! -f "$build_dir/python/zt/__init__.py" ]]; then
  # CI builds it (scripts/check-optional-parts.sh fails a build without it); elsewhere it is said.
  [[ -z "${CI:-}" ]] || fail "the build has no Python package ($build_dir/python/zt) under CI"
  python_part="(this build has no Python package: not checked)"
else
  step "the installed Python package trains a module on 2 ranks (python3 -m zt.launch)"
  package=$(find "$prefix" -path '*/dist-packages/zt/__init__.py' | head -n 1)
  [[ -n "$package" ]] || fail "the install lacks the zt Python package (lib/python3.X/dist-packages/zt)"
  site=$(dirname "$(dirname "$package")")
  module=$(find "$site/zt" -name '_zt*.so' | head -n 1)
  core_line=$(ldd "$module" | grep 'libzt_core' || true)
  [[ "$core_line" == *"=> $prefix/"* ]] ||
    fail "the installed zt._zt resolves libzt_core as '$core_line', not from $prefix (RUNPATH?)"
  cat >"$tmp/train.py" <<EOF
import torch, zt
assert zt.__file__.startswith("$site"), zt.__file__
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
e = zt.initialize(m, config={"zero": {"stage": 3}, "plugins": {"comm": "comm_ucx",
                  "shard": "shard_bucket", "optimizer": "optim_hybrid_adam"}})
for _ in range(2):
    e.backward(e.loss(torch.randn(4, 8), torch.randn(4, 2)))
    assert e.step() is not None
print(f"rank {e.rank}: trained from {zt.__file__}", flush=True)
EOF
  (cd "$tmp" && PYTHONPATH="$site" /usr/bin/python3 -m zt.launch --nproc 2 "$tmp/train.py") \
    >"$tmp/python.out" 2>&1 || { cat "$tmp/python.out" >&2; fail "the installed package failed"; }
  expect_in "$tmp/python.out" "rank 0: trained from $site/zt/__init__.py" \
    "the job did not train with the installed package"
fi

echo "PASS: installed zt SDK builds and loads the out-of-tree plugins comm_local and model_resmlp, $python_part"
