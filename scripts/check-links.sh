#!/usr/bin/env bash
# Checks that every relative link in the repository's Markdown resolves: README.md,
# CONTRIBUTING.md, docs/, bench/README.md, the plugins' and examples' READMEs,
# tests/fuzz/README.md (every *.md git tracks or would track: untracked files that are not ignored
# count too; without git, every *.md under ROOT). For each inline link or image [text](path),
# [text](path#anchor), [text](#anchor), reference definition [label]: path, and <a href> or
# <img src>, the file or folder must exist relative to the linking file (a leading / is the
# repository root) and inside the repository. An anchor into a Markdown file must be one of its
# headings as GitHub computes their anchors (lowercase; every character but letters, digits,
# spaces, hyphens and underscores dropped; spaces to hyphens; a repeated heading gets -1, -2, ...)
# or an HTML id/name in it. Links with a scheme (https:, mailto:, ...) and links inside fenced
# code blocks or inline code are not checked. A broken link prints
# "FILE:LINE: text -> target (why)" and the check fails (exit 1); otherwise it prints how many
# links it checked.
#   scripts/check-links.sh [ROOT]        (default: this repository)
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
if [ ! -d "$root" ]; then
  echo "check-links: $root is not a folder" >&2
  exit 2
fi
root=$(cd "$root" && pwd)

list=$(mktemp)
trap 'rm -f "$list"' EXIT
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -C "$root" ls-files -z --cached --others --exclude-standard -- '*.md' >"$list"
else
  (cd "$root" && find . -name '*.md' -type f -not -path './.git/*' -print0 |
    sed -z 's|^\./||') >"$list"
fi

python=/usr/bin/python3
[ -x "$python" ] || python=python3
status=0
"$python" - "$root" "$list" <<'PY' || status=$?
import os
import re
import sys
import unicodedata
from urllib.parse import unquote

root, list_file = sys.argv[1], sys.argv[2]
with open(list_file, "rb") as f:
    files = sorted({p.decode() for p in f.read().split(b"\0") if p})
# A file git still lists but the working tree deleted is not checked (links to it still fail).
files = [p for p in files if os.path.isfile(os.path.join(root, p))]

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def blank_code(lines):
    """The lines with fenced code blocks blanked (line numbers kept)."""
    out, fence = [], None
    for line in lines:
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                out.append("")
                continue
            out.append(line)
        else:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and line.strip() == m.group(1):
                fence = None
            out.append("")
    return out


def blank_inline_code(text):
    """Inline code spans replaced by spaces (newlines kept), as CommonMark pairs backtick runs."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] != "`":
            out.append(text[i])
            i += 1
            continue
        j = i
        while j < n and text[j] == "`":
            j += 1
        run = text[i:j]
        k = j
        close = -1
        while True:
            k = text.find(run, k)
            if k < 0:
                break
            end = k + len(run)
            if (k == 0 or text[k - 1] != "`") and (end >= n or text[end] != "`"):
                close = k
                break
            while k < n and text[k] == "`":
                k += 1
        if close < 0 or "\n\n" in text[j:close]:
            out.append(run)  # an unmatched run is literal text
            i = j
            continue
        span = text[i:close + len(run)]
        out.append(re.sub(r"[^\n]", " ", span))
        i = close + len(run)
    return "".join(out)


def heading_text_to_anchor(text):
    """GitHub's anchor for a heading's source text."""
    parts = re.split(r"(`+)(.+?)\1", text)  # code spans keep their text verbatim
    plain = []
    for i, part in enumerate(parts):
        kind = i % 3
        if kind == 1:
            continue
        if kind == 2:
            plain.append(part)
            continue
        part = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", part)  # images: their alt text
        part = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", part)  # links: their text
        part = re.sub(r"\[([^\]]*)\]\[[^\]]*\]", r"\1", part)
        part = re.sub(r"<[^>]+>", "", part)  # HTML tags
        part = re.sub(r"(?<![\w])(__|_)(?=\S)(.+?)(?<=\S)\1(?![\w])", r"\2", part)  # _emphasis_
        plain.append(part)
    s = "".join(plain).strip().lower()
    s = "".join(c for c in s if c in " -_" or unicodedata.category(c)[0] in "LN"
                or unicodedata.category(c) == "Mn")
    return s.replace(" ", "-")


ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ID = re.compile(r"""<[a-zA-Z][^>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']""")

anchor_cache = {}


def anchors_of(path):
    if path in anchor_cache:
        return anchor_cache[path]
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = blank_code(f.read().split("\n"))
    found, seen = set(), {}

    def add(text):
        base = heading_text_to_anchor(text)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")

    prev = ""
    for line in lines:
        m = ATX.match(line)
        if m and not line.startswith("    "):
            add(m.group(2) or "")
            prev = ""
            continue
        if SETEXT.match(line) and prev.strip() and \
                not prev.lstrip().startswith(("|", ">", "-", "*")):
            add(prev.strip())
            prev = ""
            continue
        for hid in HTML_ID.findall(line):
            found.add(hid)
        prev = line
    anchor_cache[path] = found
    return found


INLINE = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\n(?!\s*\n)|\[[^\[\]\n]*\])*)\]"  # [text], one level of brackets inside
    r"\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"  # (target, balanced parentheses
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"  # optional "title")
)
REFDEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)", re.M)
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\s(?:href|src)\s*=\s*["']([^"']*)["']""", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

broken = []
checked = 0


def check(md, line_no, text, target):
    global checked
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME.match(target) or target.startswith("//"):
        return
    checked += 1
    where = md
    text = " ".join(text.split())
    path, _, anchor = target.partition("#")
    path = unquote(path)
    if path.startswith("/"):
        dest = os.path.normpath(os.path.join(root, path.lstrip("/")))
    elif path:
        dest = os.path.normpath(os.path.join(root, os.path.dirname(md), path))
    else:
        dest = os.path.join(root, md)
    rel = os.path.relpath(dest, root)
    if rel == ".." or rel.startswith(".." + os.sep):
        broken.append(f"{where}:{line_no}: {text} -> {target} (outside the repository)")
        return
    if not os.path.exists(dest):
        broken.append(f"{where}:{line_no}: {text} -> {target} (no such file or folder: {rel})")
        return
    if not anchor:
        return
    anchor = unquote(anchor)
    if os.path.isdir(dest) or not dest.lower().endswith((".md", ".markdown")):
        return  # anchors into source files (#L10) and folders are not checked
    if anchor not in anchors_of(dest):
        what = "this file" if not path else rel
        broken.append(f"{where}:{line_no}: {text} -> {target} (no heading #{anchor} in {what})")


for md in files:
    with open(os.path.join(root, md), encoding="utf-8", errors="replace") as f:
        lines = blank_code(f.read().split("\n"))
    text = blank_inline_code("\n".join(lines))
    for m in INLINE.finditer(text):
        line_no = text.count("\n", 0, m.start()) + 1
        check(md, line_no, m.group(2), m.group(3))
    for m in REFDEF.finditer(text):
        line_no = text.count("\n", 0, m.start()) + 1
        check(md, line_no, f"[{m.group(1)}]", m.group(2))
    for m in HTML_LINK.finditer(text):
        line_no = text.count("\n", 0, m.start()) + 1
        check(md, line_no, m.group(0).split()[0] + ">", m.group(1))

for line in broken:
    print(line)
if broken:
    print(f"check-links: {len(broken)} of {checked} links in {len(files)} Markdown files"
          " do not resolve")
    sys.exit(1)
print(f"check-links: {checked} relative links in {len(files)} Markdown files resolve")
PY
exit $status
