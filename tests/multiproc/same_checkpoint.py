#!/usr/bin/env python3
"""Two zt checkpoints hold the same training state, bit for bit: every element of every tensor of
every kind (parameters, optimizer states, codec residuals), the engine's counters and the
trainer's state (step, data position, schedule, RNG). The cluster tests call it on the final
checkpoints of a job and of its reference run, whatever launched each (per-rank kinds, codec
residuals, need the same world size). Every tensor of the parameters and optimizer states must be
covered whole by pieces that do not overlap. Standard library only (the format:
docs/checkpoints.md).

  same_checkpoint.py A B WHAT

A and B: a checkpoint folder (holding manifest.json), or a checkpoint.dir whose `latest` names
one. Exit 0 printing what was compared; 1 naming the first difference."""
import json
import os
import sys
import zlib


def folder_of(path):
    if os.path.exists(os.path.join(path, "manifest.json")):
        return path
    latest = os.path.join(path, "latest")
    if os.path.exists(latest):
        return os.path.join(path, open(latest).read().strip())
    sys.exit(f"FAILED: {path} is not a checkpoint (no manifest.json, no latest)")


def read_checkpoint(path):
    folder = folder_of(path)
    text = open(os.path.join(folder, "manifest.json"), "rb").read()
    if f"{zlib.crc32(text):08x}" != open(os.path.join(folder, "manifest.json.crc32")).read().strip():
        sys.exit(f"FAILED: {folder}/manifest.json does not match its crc32")
    manifest = json.loads(text)
    shapes = {t["name"]: t["shape"] for t in manifest["tensors"]}
    values = {}  # (kind, tensor) -> the whole tensor's bytes, as saved (fp32 little-endian)
    covered = {}
    ranges = {}
    files = {}
    for p in manifest["pieces"]:
        f = files.get(p["file"])
        if f is None:
            f = files[p["file"]] = open(os.path.join(folder, p["file"]), "rb")
        f.seek(p["offset"])
        raw = f.read(4 * (p["end"] - p["begin"]))
        if zlib.crc32(raw) != p["crc32"]:
            sys.exit(f"FAILED: {folder}: {p['kind']} of {p['tensor']} [{p['begin']}, {p['end']}) "
                     f"does not match its crc32")
        key = (p["kind"], p["tensor"])
        if key not in values:
            n = 1
            for d in shapes[p["tensor"]]:
                n *= d
            values[key] = bytearray(4 * n)
            covered[key] = 0
        values[key][4 * p["begin"]:4 * p["end"]] = raw
        covered[key] += p["end"] - p["begin"]
        ranges.setdefault(key, []).append((p["begin"], p["end"]))
    for f in files.values():
        f.close()
    for key, pieces in ranges.items():
        pieces.sort()
        for (_, end), (begin, _) in zip(pieces, pieces[1:]):
            if begin < end:
                sys.exit(f"FAILED: {folder}: pieces of {key[0]} of {key[1]} overlap at {begin}")
        # A codec residual covers one rank's shard; parameters and optimizer states all of it.
        if not key[0].startswith("codec_residual") and covered[key] != len(values[key]) // 4:
            sys.exit(f"FAILED: {folder}: {key[0]} of {key[1]} covers {covered[key]} of "
                     f"{len(values[key]) // 4} elements")
    return folder, manifest, shapes, values, covered


def first_difference(a, b):
    for i in range(0, len(a), 4):
        if a[i:i + 4] != b[i:i + 4]:
            return i // 4
    return -1


def first_difference_of(a, b, fields=("counters", "trainer_state")):
    """How checkpoints A and B differ first, or None, and what was compared: the step, every
    element of every tensor and kind, and the manifests' `fields` (the trainer's state is left
    out where one side is not the trainer's: Python's engine writes its own)."""
    fa, ma, sa, va, ca = read_checkpoint(a)
    fb, mb, sb, vb, cb = read_checkpoint(b)
    if ma["step"] != mb["step"]:
        return f"step {ma['step']} ({fa}) against step {mb['step']} ({fb})", None
    if sa != sb:
        return f"the tensors or their shapes differ ({fa} against {fb})", None
    if sorted(va) != sorted(vb):
        only = sorted(set(va) ^ set(vb))
        return f"kinds saved in one checkpoint only: {only[:4]}", None
    kinds = sorted({kind for kind, _ in va})
    for required in ("param", "exp_avg", "exp_avg_sq"):
        if required not in kinds:
            return f"no {required} in {fa}", None
    differ = []
    for key in sorted(va):
        if ca[key] != cb[key]:
            return (f"{key[0]} of {key[1]} covers {ca[key]} elements in {fa}, {cb[key]} in {fb}",
                    None)
        if va[key] != vb[key]:
            differ.append(key)
    if differ:
        kind, name = differ[0]
        i = first_difference(va[differ[0]], vb[differ[0]])
        return (f"{len(differ)} of {len(va)} tensors differ, the first {kind} of {name} at "
                f"element {i} ({fa} against {fb})", None)
    for field in fields:
        if ma.get(field) != mb.get(field):
            return (f"the manifests' {field} differ: {ma.get(field)} against {mb.get(field)}",
                    None)
    elements = sum(len(v) // 4 for v in va.values())
    return None, (f"step {ma['step']}: every element of {len(va)} tensors ({', '.join(kinds)}; "
                  f"{elements} values)")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    what = sys.argv[3]
    difference, compared = first_difference_of(sys.argv[1], sys.argv[2])
    if difference:
        sys.exit(f"FAILED: {what}: {difference}")
    print(f"{what}: {compared}, the counters and the trainer's state equal bit for bit")


if __name__ == "__main__":
    main()
