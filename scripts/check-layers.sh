#!/usr/bin/env bash
# Checks that includes run downward through zt's layers (docs/architecture.md, "Layers"):
#   core/src: util < sdk < {config launch checkpoint zero observe} < engine < compose
#   trainer:  settings < {data report} < {models ab} < setup < {run tune} < app
# A file may include its own folder and the folders below it; folders of one rank never include
# each other. A public header counts in the core layer that implements it (the table below); the
# trainer may include any of them. Includes in core/src and trainer/ are spelled from their root
# ("zero/memory_ledger.h").
# The public headers are two faces, one folder each: core/include/zt/ is the plugin SDK, what a
# plugin includes; core/include/zt/host/ is the host API, what the trainer and the Python package
# include besides (config, engine, composition, launcher, checkpoints, ...). A public header
# includes only zt/ headers, and an SDK header no host/ one; a plugin includes only the SDK, its
# own files and the tests/ helpers (its tests, which host it, may include the host API too).
# The config is read at the door: in the trainer only settings/ (which resolves it), tune/ (which
# writes overrides) and app/ include zt/host/config.h or the trainer's loader
# (settings/trainer_config.h); the folders below take settings.
# A violation prints "FILE:LINE: includes X (LAYER): runs up from OWN" (or says what else is
# wrong), and the check fails. It reads the files git tracks (tests of the folders are not
# layered).
#   scripts/check-layers.sh [REPO_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-layers: not in a git checkout; nothing checked" >&2
  exit 1
fi

files=$(mktemp)
trap 'rm -f "$files"' EXIT
git ls-files >"$files"
if ! git ls-files -z -- 'core/*.h' 'core/*.cc' 'trainer/*.h' 'trainer/*.cc' 'plugins/*.h' \
  'plugins/*.cc' 'plugins/*.cu' | xargs -0 awk -v files="$files" '
BEGIN {
  while ((getline line < files) > 0) tracked[line] = 1
  split("util:0 sdk:1 config:2 launch:2 checkpoint:2 zero:2 observe:2 engine:3 compose:4", a, " ")
  for (i in a) { split(a[i], kv, ":"); rank["core", kv[1]] = kv[2] }
  split("settings:0 data:1 report:1 models:2 ab:2 setup:3 run:4 tune:4 app:5", a, " ")
  for (i in a) { split(a[i], kv, ":"); rank["trainer", kv[1]] = kv[2] }
  split("api error blas bytes did_you_mean host_memory memory_cgroup child_process process_exit process_cpus " \
        "standard_streams sanitized_build trace json_numbers environment_block utf8 file_lock " \
        "file_io_deadline", a, " ")
  for (i in a) pub[a[i]] = "util"
  split("codec communicator offload optimizer shard_strategy unit store plugin model_plugin " \
        "options work serial_executor tensor_checks comm_split param_init model_source " \
        "plugin_loader rank_agreement",
        a, " ")
  for (i in a) pub[a[i]] = "sdk"
  pub["config"] = "config"; pub["launcher"] = "launch"; pub["rendezvous"] = "launch"; pub["slurm_hostlist"] = "launch"
  pub["flight_diagnosis"] = "launch"
  pub["checkpoint"] = "checkpoint"; pub["safetensors"] = "checkpoint"
  pub["engine_types"] = "zero"; pub["loss_scaler"] = "zero"; pub["engine"] = "engine"
  pub["engine_settings"] = "compose"; pub["compose"] = "compose"
  pub["flight_recorder"] = "observe"
  bad = 0
}
function fail(msg) { print FILENAME ":" FNR ": " msg; bad = 1 }
# "a/b/../c.h" -> "a/c.h"
function normal(path,   n, i, p, out, k) {
  n = split(path, p, "/"); k = 0
  for (i = 1; i <= n; ++i) {
    if (p[i] == "..") { if (k > 0) --k } else if (p[i] != ".") out[++k] = p[i]
  }
  path = out[1]; for (i = 2; i <= k; ++i) path = path "/" out[i]
  return path
}
FNR == 1 {
  tree = ""; own = ""; dir = FILENAME; sub(/\/[^\/]*$/, "", dir)
  n = split(FILENAME, p, "/")
  if (p[1] == "core" && p[2] == "src") { tree = "core"; own = p[3] }
  else if (p[1] == "core" && p[2] == "include") { tree = "public"; sdk = (p[4] != "host") }
  else if (p[1] == "trainer" && p[2] != "tests" && n > 2) { tree = "trainer"; own = p[2] }
  else if (p[1] == "plugins") { tree = "plugin"; root = "plugins/" p[2]; host_ok = (p[3] == "tests") }
  if ((tree == "core" || tree == "trainer") && !((tree, own) in rank))
    fail("a file in " tree " outside the layer folders (" own ")")
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
  inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
  if (tree == "public") {
    if (inc !~ /^zt\//) fail("includes " inc ": a public header includes only zt/ headers")
    else if (sdk && inc ~ /^zt\/host\//)
      fail("includes " inc ": the plugin SDK (core/include/zt/) includes no host API header")
    next
  }
  if (tree == "plugin") {
    if (inc ~ /^zt\/host\// && !host_ok)
      fail("includes " inc ": a plugin includes only the plugin SDK (zt/), not the host API")
    if (inc ~ /^zt\//) next
    path = normal(dir "/" inc)
    if ((index(path, root "/") == 1 || index(path, "tests/") == 1) && (path in tracked)) next
    # a bare name found through the plugin'"'"'s own include folders or the tests helpers
    if (index(inc, "/") == 0) {
      for (f in tracked) if ((index(f, root "/") == 1 || index(f, "tests/") == 1) && f ~ ("/" inc "$")) next
    }
    fail("includes " inc ": a plugin includes only zt/ headers, its own files and tests/ helpers")
    next
  }
  if (tree == "") next
  if (tree == "trainer" && own !~ /^(settings|tune|app)$/ &&
      (inc == "zt/host/config.h" || inc == "settings/trainer_config.h")) {
    fail("includes " inc ": below app/ the config is read only at the door (settings/); take " \
         "JobSettings (settings/job_settings.h)")
    next
  }
  if (inc ~ /^zt\//) {
    if (tree == "trainer") next
    name = inc; sub(/^zt\/(host\/)?/, "", name); sub(/\.h$/, "", name)
    if (!(name in pub)) { fail("includes " inc ": a public header the layer table does not place"); next }
    target = pub[name]
  } else if (index(inc, "/") == 0) {
    fail("includes " inc ": spell it from the root (" own "/" inc ")"); next
  } else {
    target = inc; sub(/\/.*$/, "", target)
  }
  if (!((tree, target) in rank)) { fail("includes " inc ": not a " tree " folder"); next }
  if (rank[tree, target] > rank[tree, own] || (rank[tree, target] == rank[tree, own] && target != own))
    fail("includes " inc " (" target "): runs up from " own)
}
END { exit bad }
'; then
  echo "check-layers: includes that run up or sideways (above); docs/architecture.md, \"Layers\", says where a file goes" >&2
  exit 1
fi
echo "check-layers: includes run downward"
