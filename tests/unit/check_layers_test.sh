#!/usr/bin/env bash
# scripts/check-layers.sh on a small repository of its own: a tree whose includes run downward
# passes; the same tree with one include running up (zero -> engine), one sideways (zero ->
# checkpoint), one bare name, an upward trainer include, a public header including core/src, a
# plugin including core/src, a plugin SDK header including the host API, a plugin including the
# host API and a trainer folder below the door including the config fails, naming each
# file:line; a plugin's test may include the host API.
#   check_layers_test.sh SOURCE_DIR
set -euo pipefail
check="$1/scripts/check-layers.sh"
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
cd "$repo"
git init -q .
mkdir -p core/src/zero core/src/engine core/src/checkpoint core/include/zt/host trainer/data \
  trainer/models plugins/foo/tests
printf '#pragma once\n' >core/include/zt/host/engine_types.h
printf '#pragma once\n' >core/include/zt/unit.h
printf '#pragma once\n#include "zt/host/engine_types.h"\n' >core/src/zero/ledger.h
printf '#pragma once\n#include "zero/ledger.h"\n' >core/src/engine/parts.h
printf '#pragma once\n' >core/src/checkpoint/saver.h
printf '#pragma once\n' >trainer/data/source.h
printf '#pragma once\n#include "data/source.h"\n' >trainer/models/model.h
printf '#pragma once\n' >plugins/foo/foo.h
printf '#include "zt/unit.h"\n#include "foo.h"\n' >plugins/foo/foo.cc
printf '#include "zt/host/engine_types.h"\n#include "../foo.h"\n' >plugins/foo/tests/foo_test.cc
git add -A
"$check" "$repo" >out.txt 2>&1 || { cat out.txt; echo "FAILED: a downward tree was refused"; exit 1; }

printf '#include "engine/parts.h"\n#include "checkpoint/saver.h"\n#include "ledger.h"\n' >>core/src/zero/ledger.h
printf '#include "models/model.h"\n' >>trainer/data/source.h
printf '#include "zero/ledger.h"\n' >>core/include/zt/host/engine_types.h
printf '#include "zero/ledger.h"\n#include "zt/host/engine_types.h"\n' >>plugins/foo/foo.cc
printf '#include "zt/host/engine_types.h"\n' >>core/include/zt/unit.h
printf '#include "zt/host/config.h"\n' >>trainer/models/model.h
if "$check" "$repo" >out.txt 2>&1; then
  cat out.txt
  echo "FAILED: includes running up passed"
  exit 1
fi
cat out.txt
for want in "core/src/zero/ledger.h:3: includes engine/parts.h (engine): runs up from zero" \
  "core/src/zero/ledger.h:4: includes checkpoint/saver.h (checkpoint): runs up from zero" \
  "core/src/zero/ledger.h:5: includes ledger.h: spell it from the root (zero/ledger.h)" \
  "trainer/data/source.h:2: includes models/model.h (models): runs up from data" \
  "core/include/zt/host/engine_types.h:2: includes zero/ledger.h: a public header includes only zt/ headers" \
  "plugins/foo/foo.cc:3: includes zero/ledger.h: a plugin includes only zt/ headers, its own files and tests/ helpers" \
  "plugins/foo/foo.cc:4: includes zt/host/engine_types.h: a plugin includes only the plugin SDK (zt/), not the host API" \
  "core/include/zt/unit.h:2: includes zt/host/engine_types.h: the plugin SDK (core/include/zt/) includes no host API header" \
  "trainer/models/model.h:3: includes zt/host/config.h: below app/ the config is read only at the door (settings/); take JobSettings (settings/job_settings.h)"; do
  grep -qF "$want" out.txt || { echo "FAILED: missing: $want"; exit 1; }
done
echo "check-layers: every planted include refused"
