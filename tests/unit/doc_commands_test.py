#!/usr/bin/env python3
"""Every `trainer` command line in the project's Markdown (README.md, docs/, the plugins' and
examples' READMEs), in code blocks, is one the trainer takes: its command and flags parse (the
command line with --help appended: parsed whole, nothing run), and where it names a config file
that exists, the config with its --set overrides resolves (--print-config: every key known, every
value in range). Every TOML block resolves too, set over configs/zero3.toml (a block is a part of
a job's config). A renamed flag or key then fails here, not in a user's shell. A line planted with
a misspelt flag, one with another command's flag, one with a misspelt key and a TOML block with
one must fail, or the check itself is broken.

    doc_commands_test.py TRAINER SOURCE_DIR
"""

import glob
import json
import os
import shlex
import subprocess
import sys
import tomllib

# Flags a training command shares with ab, estimate and tune: what --print-config resolves.
JOB_FLAGS = {"--config": 1, "-c": 1, "--set": 1, "--nproc": 1, "--deepspeed": 1,
             "--deepspeed-lenient": 0, "--plugin-dir": 1, "--resume": 1, "--max-restarts": 1}
# Commands whose --config names a job (the others read a checkpoint or a run folder).
JOB_COMMANDS = {None, "ab", "estimate", "tune"}


SHELL_FENCES = ("sh", "bash", "shell", "console")


def trainer_words(words, named):
    """The words after the trainer in a shell command's `words` (VAR=value before it, a launcher
    such as mpirun or srun, `sbatch --wrap "..."` around it), or None when it runs no trainer.
    `named(word)`: whether a word is the trainer."""
    for i, word in enumerate(words):
        if named(word):
            return words[i + 1:]
        if word.startswith("--wrap=") or (i > 0 and words[i - 1] == "--wrap"):
            wrapped = word.split("=", 1)[1] if word.startswith("--wrap=") else word
            inner = trainer_words(shlex.split(wrapped), named)
            if inner is not None:
                return inner
    return None


def command_lines(path):
    """(line number, words after `trainer`, why it could not be read) of each trainer command in
    `path`'s shell code blocks (```sh, bash, shell, console; untagged ones for a trainer named by
    its path), a `$ ` prompt dropped and continuations joined. A command with a placeholder
    ("...", "<...>") outside its comment is not one to run."""
    found, shell, pending, start = [], None, "", 0
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fence = line.strip()
            if fence.startswith("```"):
                shell = None if shell is not None else fence[3:].strip()
                pending = ""
                continue
            if shell not in SHELL_FENCES + ("",):
                continue
            text = line.strip()
            if not pending and text.startswith("$ "):
                text = text[2:]
            if pending:
                pending += " " + text
            else:
                start, pending = number, text
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            text, pending = pending, ""
            if "trainer" not in text:
                continue
            try:
                words = shlex.split(text, comments=True)
            except ValueError as e:
                if shell:
                    found.append((start, None, f"{text}: {e}"))
                continue
            # Outside a shell block, only a trainer named by its path is a command (a diagram
            # names the trainer's folders).
            args = trainer_words(words, lambda w: w.endswith("/trainer") or (
                bool(shell) and w == "trainer"))
            if args is None:
                continue
            if any("..." in w or "<" in w for w in args):
                continue
            found.append((start, args, ""))
    return found


def arm_overrides(arm):
    """--set arguments of an ab arm ("key=value,key=value"; commas inside [] belong to a value)."""
    out, depth, part = [], 0, ""
    for c in arm + ",":
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            if part:
                out += ["--set", part]
            part = ""
        else:
            part += c
    return out


def job_args(args):
    """The flags of `args` that --print-config resolves (an ab arm's overrides as --set), when
    they name a config that exists."""
    kept, i = [], 0
    while i < len(args):
        if args[i] in ("--a", "--b") and i + 1 < len(args):
            kept += arm_overrides(args[i + 1])
            i += 2
            continue
        width = JOB_FLAGS.get(args[i])
        if width is None:
            i += 1
            continue
        kept += args[i:i + 1 + width]
        i += 1 + width
    if "--resume" in kept:  # a checkpoint to resume from is the run's, not the docs'
        at = kept.index("--resume")
        del kept[at:at + 2]
    config = next((kept[i + 1] for i, a in enumerate(kept[:-1]) if a in ("--config", "-c")), None)
    return kept + ["--print-config"] if config and os.path.isfile(config) else None


def problems_of(trainer, args):
    """What is wrong with `trainer args`, or "" when it parses and its config resolves."""
    run = subprocess.run([trainer] + args + ["--help"], capture_output=True, text=True,
                         timeout=60)
    if run.returncode != 0:
        return f"does not parse (exit {run.returncode}): {run.stderr.strip() or run.stdout.strip()}"
    command = args[0] if args and not args[0].startswith("-") else None
    if command in JOB_COMMANDS:
        resolved = job_args(args)
        if resolved:
            run = subprocess.run([trainer] + resolved, capture_output=True, text=True, timeout=60)
            if run.returncode != 0:
                return (f"its config does not resolve (exit {run.returncode}): "
                        f"{run.stderr.strip() or run.stdout.strip()}")
    return ""


# TOML blocks of a plugin the reader builds from a template (no such plugin here).
TOML_NOT_HERE = {"examples/plugin_template/README.md"}


def toml_blocks(path):
    """(line number, text) of each ```toml block in `path`."""
    blocks, start, body = [], None, []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fence = line.strip()
            if start is None and fence == "```toml":
                start, body = number, []
            elif start is not None and fence == "```":
                blocks.append((start, "".join(body)))
                start = None
            elif start is not None:
                body.append(line)
    return blocks


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is a JSON string
    return "[" + ", ".join(toml_value(v) for v in value) + "]"


def as_overrides(table, prefix=""):
    """--set arguments of a TOML table, section.key=value each."""
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += as_overrides(value, prefix + key + ".")
        else:
            out += ["--set", f"{prefix}{key}={toml_value(value)}"]
    return out


def toml_problem(trainer, text):
    """What is wrong with the TOML block `text` set over configs/zero3.toml, or ""."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return f"is no TOML: {e}"
    base = ["--config", "configs/zero3.toml"]
    if "paths" in table.get("data", {}):
        base += ["--set", 'data.path=""']  # the block's blend replaces the base's one file
    run = subprocess.run([trainer] + base + as_overrides(table) + ["--print-config"],
                         capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        return f"does not resolve (exit {run.returncode}): {run.stderr.strip()}"
    return ""


def main():
    trainer, source = sys.argv[1], sys.argv[2]
    os.chdir(source)
    files = (["README.md"] + sorted(glob.glob("docs/*.md")) + sorted(glob.glob("plugins/*/README.md"))
             + sorted(glob.glob("examples/**/*.md", recursive=True)))
    failed, checked = 0, 0
    for path in files:
        for number, args, unsplit in command_lines(path):
            checked += 1
            problem = f"is no shell line: {unsplit}" if args is None else problems_of(trainer, args)
            if problem:
                failed += 1
                print(f"FAILED: {path}:{number}: trainer {shlex.join(args or [])}\n  {problem}")
        if path in TOML_NOT_HERE:
            continue
        for number, text in toml_blocks(path):
            checked += 1
            problem = toml_problem(trainer, text)
            if problem:
                failed += 1
                print(f"FAILED: {path}:{number}: the TOML block {problem}")
    if not toml_problem(trainer, "[zero]\nstgae = 1\n"):
        failed += 1
        print("FAILED: the planted TOML block with zero.stgae passed the check")
    # The check fails where it should: a misspelt flag, and a misspelt key.
    for planted in (["ab", "--config", "configs/zero3.toml", "--arm", "zero.stage=1"],
                    ["--config", "configs/zero3.toml", "--set", "zero.stgae=1"],
                    ["ab", "--config", "configs/zero3.toml", "--b", "plugins.shrad=shard_tensor"],
                    # A flag of another command: refused with --help too.
                    ["report", "runs/gpt-zero3", "--nproc", "2"]):
        if not problems_of(trainer, planted):
            failed += 1
            print(f"FAILED: the planted command trainer {shlex.join(planted)} passed the check")
    if checked < 20:
        failed += 1
        print(f"FAILED: only {checked} trainer commands found in the Markdown: the extraction broke")
    if failed:
        sys.exit(1)
    print(f"doc commands: {checked} trainer command lines and TOML blocks in {len(files)} "
          "Markdown files parse and resolve")


if __name__ == "__main__":
    main()
