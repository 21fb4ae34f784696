#!/usr/bin/env bash
# scripts/check-links.sh on a small repository of its own: a tree whose links and anchors resolve
# passes (links in fenced code and inline code, and links with a scheme, are not checked); then
# each planted fault fails on its own, named FILE:LINE: a link to a missing file, a link to a
# missing anchor in another file, a missing anchor in the same file, and a link out of the
# repository.
#   check_links_test.sh SOURCE_DIR
set -euo pipefail
check="$1/scripts/check-links.sh"
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
cd "$repo"
git init -q .
mkdir -p docs bench plugins/foo
cat >README.md <<'EOF'
# Front page

See [the guide](docs/guide.md), its [setup](docs/guide.md#setup-on-debian-12), the
[second Notes](docs/guide.md#notes-1),
[a heading with code](docs/guide.md#the-zt_core-library-libzt_coreso),
[MiCS](docs/guide.md#shard-groups-across-hosts-mics--hpz) and [below](#status-and-limits).
<img src="docs/chart.png" alt="an HTML image">
A folder: [docs/](docs/), an image: ![chart](docs/chart.png), [bench](bench/README.md),
[the plugin](plugins/foo/README.md#options), [from the root](/docs/guide.md#notes).
Not checked: [a site](https://example.com/missing.md), [mail](mailto:someone@example.com),
`[inline code](missing-inline.md)`.

```sh
echo "[in a code block](missing-in-block.md)"
```

~~~
[in a tilde block](missing-in-tilde-block.md#nowhere)
~~~

A reference: [the guide][guide].

[guide]: docs/guide.md#notes

## Status and limits

Short.
EOF
cat >docs/guide.md <<'EOF'
# Guide

## Setup on Debian 12

Back to [the front page](../README.md#front-page) and [notes](#notes).

## Notes

## Notes

## The `zt_core` library (`libzt_core.so`)

## Shard groups across hosts (MiCS / hpZ)
EOF
printf 'not an image, but a file\n' >docs/chart.png
printf '# Benchmarks\n\n[Guide](../docs/guide.md)\n' >bench/README.md
printf '# foo\n\n## Options\n\n[up](../../README.md)\n' >plugins/foo/README.md
git add -A
# Without git, every *.md under the folder is read: the same tree passes the same way.
plain=$(mktemp -d)
cp -r README.md docs bench plugins "$plain"
status=0
"$check" "$plain" >"$plain/out.txt" 2>&1 || status=$?
cat "$plain/out.txt"
rm -rf "$plain"
[ $status -eq 0 ] || { echo "FAILED: the tree outside git was refused"; exit 1; }
if ! "$check" "$repo" >out.txt 2>&1; then
  cat out.txt
  echo "FAILED: a tree whose links resolve was refused"
  exit 1
fi
cat out.txt
grep -qE "^check-links: 17 relative links in 4 Markdown files resolve$" out.txt ||
  { echo "FAILED: expected 17 links in 4 files to be checked"; exit 1; }

# Each fault on its own, on the good tree: it must fail, and name the file, the line and why.
plant() {  # plant NAME FILE LINE_TEXT WANT
  local name=$1 file=$2 text=$3 want=$4
  git checkout -q -- .
  printf '%s\n' "$text" >>"$file"
  if "$check" "$repo" >out.txt 2>&1; then
    cat out.txt
    echo "FAILED: $name passed"
    exit 1
  fi
  cat out.txt
  grep -qF "$want" out.txt || { echo "FAILED: $name: missing: $want"; exit 1; }
  if [ "$(grep -c ' -> ' out.txt)" -ne 1 ]; then
    echo "FAILED: $name: expected exactly one broken link"
    exit 1
  fi
}
lines=$(wc -l <README.md)
plant "a link to a missing file" README.md "See [gone](docs/gone.md)." \
  "README.md:$((lines + 1)): gone -> docs/gone.md (no such file or folder: docs/gone.md)"
plant "a link to a missing anchor in another file" README.md "See [setup](docs/guide.md#set-up)." \
  "README.md:$((lines + 1)): setup -> docs/guide.md#set-up (no heading #set-up in docs/guide.md)"
guide_lines=$(wc -l <docs/guide.md)
plant "a missing same-file anchor" docs/guide.md "Back to [the top](#guides)." \
  "docs/guide.md:$((guide_lines + 1)): the top -> #guides (no heading #guides in this file)"
plant "a third heading's anchor that does not exist" docs/guide.md "[third](#notes-2)" \
  "docs/guide.md:$((guide_lines + 1)): third -> #notes-2 (no heading #notes-2 in this file)"
plant "a link out of the repository" bench/README.md "[outside](../../elsewhere/x.md)" \
  "bench/README.md:4: outside -> ../../elsewhere/x.md (outside the repository)"
plant "a broken reference definition" README.md "[old]: docs/old.md" \
  "README.md:$((lines + 1)): [old] -> docs/old.md (no such file or folder: docs/old.md)"
git checkout -q -- .
echo "check-links: a resolving tree passes, links in code are ignored, every planted fault fails"
