#!/usr/bin/env python3
"""Chaos soak: a small ZeRO-3 job with optimizer states in offload_nvme, checkpoints every 2 steps
and launch.max_restarts, trained to its end again and again while ranks are killed (SIGKILL, at
random moments, some while a checkpoint is being written) and the launcher is stopped (SIGTERM,
then a fresh `--resume auto`). Each finished episode is checked against one uninterrupted run of
the same job: the final parameters bit for bit (`trainer export`), exactly checkpoint.keep_last
complete checkpoints and no .tmp-step-* folder, no offload file and no new shared-memory segment
left behind, and no restart that lost more than one checkpoint interval past the newest save
begun (asynchronous saves still in flight at the kill are lost too; their steps are reported).
Kills stop at the soak's end: the episode then in progress trains to its end and is checked.

  chaos_soak.py --trainer build/bin/trainer --minutes 2 [--work DIR] [--seed N] [--json FILE]
                [--sync-saves] [--no-kills] [--steps N]

With --sync-saves (checkpoint.async = false) every restart must lose at most one interval, past
any save: a synchronous save is published before the next step begins.

A soak in which nothing was killed, or whose restarts the soak could not read from the logs,
checked nothing of what it promises: it fails. --no-kills plants that fault (tested).

Exit 0 when every episode held; 1 with the first broken promise named. scripts/chaos.sh runs it.
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

STEPS = 400         # steps per episode (--steps)
EVERY = 2           # checkpoint.every_steps: the most a kill may lose
KEEP_LAST = 2


def config_text(work, name, async_saves=True):
    return f"""
[run]
name = "chaos"
steps = {STEPS}
seed = 7
out_dir = "{work}/{name}/run"
log_every = 1

[launch]
nproc = 2
timeout_s = 60
max_restarts = 2

[model]
kind = "gpt"
preset = "custom"
n_layer = 2
n_head = 2
d_model = 32
seq_len = 16
vocab = 64

[data]
micro_batch = 2

[zero]
stage = 3
offload_optimizer_fraction = 1.0

[checkpoint]
dir = "{work}/{name}/checkpoints"
every_steps = {EVERY}
keep_last = {KEEP_LAST}
async = {"true" if async_saves else "false"}

[plugins]
comm = "comm_ucx"
shard = "shard_bucket"
optimizer = "optim_hybrid_adam"
offload_optimizer = "offload_nvme"

[plugin.offload_nvme]
path = "{work}/{name}/nvme"
"""


OWNED_SEGMENT = re.compile(r"__KMP_REGISTERED_LIB_(\d+)_")  # LLVM OpenMP's, named by its pid


def shm_entries():
    """The entries of /dev/shm, less those whose owner still runs: the job's processes have all
    ended when an episode is checked, so a live owner is another program (a fuzzer, say)."""
    try:
        names = set(os.listdir("/dev/shm"))
    except OSError:
        return set()
    owners = {n: OWNED_SEGMENT.match(n) for n in names}
    return {n for n, owner in owners.items()
            if not (owner and os.path.exists("/proc/" + owner.group(1)))}


def last_step(metrics):
    """The highest step metrics.jsonl records, 0 when none."""
    step = 0
    try:
        with open(metrics) as f:
            for line in f:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill
                if isinstance(j, dict) and "event" not in j and isinstance(j.get("step"), int):
                    step = max(step, j["step"])
    except OSError:
        pass
    return step


# Lines that announce a restart or a stop: each must match one of the patterns below, or the
# steps it lost would go uncounted.
ANNOUNCED = re.compile(r"zt: restart \d+/|zt: stopped by SIG|failed again after step")
RESTART = re.compile(r"zt: restart \d+/\d+: .* after step (\d+); all ranks start again from "
                     r"(?:checkpoint .*/step-(\d+)|the beginning)")
STOPPED = re.compile(r"zt: stopped by SIG\w+ after step (\d+) of \d+; newest checkpoint: "
                     r"(?:.*/step-(\d+)|none)")
FAILED_AGAIN = re.compile(r"failed again after step (\d+)")
RESUMED = re.compile(r"resumed from .*/step-\d+ at step (\d+)")
FRESH = re.compile(r"no checkpoint under .*: starting fresh")
IN_FLIGHT = re.compile(r"checkpoints: removed .*/\.tmp-step-(\d+)-[0-9a-f-]+, an incomplete save")


class Unparsed(Exception):
    """A line that announces a restart in a form the soak's patterns do not read."""


def losses_of(log):
    """(steps lost, steps lost past the newest save begun) at each restart, from what the launcher
    and the ranks say (metrics.jsonl cannot tell: a resumed run drops its lines past the
    checkpoint). A launcher restart names the step the job got to and the checkpoint it starts
    from; a stop by signal names the step and the newest checkpoint; a job that gave up ("failed
    again after step S") loses S minus the step the next start resumes at. With asynchronous
    saves (the default) the save begun last may still be in flight when the kill comes: a later
    start removes it ("removed .../.tmp-step-N-...") before it resumes, and the steps from N on
    are what the one checkpoint interval bounds. That start may come several records later (a
    restarted attempt killed before its cleanup, then a give-up): the removal counts for every
    kill since the last start that got as far as resuming."""
    out, waiting = [], []  # waiting: [step reached, step resumed from, newest save in flight]

    def started(at):
        for kill in waiting:
            if kill[1] is None:
                kill[1] = at
        out.extend(waiting)
        waiting.clear()

    try:
        lines = open(log, errors="replace").read().splitlines()
    except OSError:
        return []
    for line in lines:
        if ANNOUNCED.search(line) and not (RESTART.search(line) or STOPPED.search(line)
                                           or FAILED_AGAIN.search(line)):
            raise Unparsed(line)
        m = RESTART.search(line) or STOPPED.search(line)
        if m:
            waiting.append([int(m.group(1)), int(m.group(2) or 0), None])
            continue
        m = FAILED_AGAIN.search(line)
        if m:
            waiting.append([int(m.group(1)), None, None])  # resumed-from comes with a start
            continue
        m = IN_FLIGHT.search(line)
        if m:
            step = int(m.group(1))
            for kill in waiting:
                if step <= kill[0] and (kill[1] is None or kill[1] < step):
                    kill[2] = max(kill[2] or 0, step)
            continue
        m = RESUMED.search(line)
        if m:
            started(int(m.group(1)))
        elif FRESH.search(line):
            started(0)
    out.extend(kill for kill in waiting if kill[1] is not None)
    return [(reached - at, reached - max(at, newest or 0)) for reached, at, newest in out]


def rank_pids(launcher):
    pids = []
    for children in glob.glob(f"/proc/{launcher}/task/*/children"):
        try:
            with open(children) as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return pids


def tensors(path):
    """name -> bytes of every tensor of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    return {k: data[base + v["data_offsets"][0]:base + v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}


def export(trainer, checkpoint, out):
    r = subprocess.run([trainer, "export", "--checkpoint", checkpoint, "--out", out],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"trainer export {checkpoint} failed: {r.stderr.strip()}")
    return tensors(out)


class Soak:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.trainer = os.path.abspath(args.trainer)
        self.rng = random.Random(args.seed)
        self.kills = {"rank": 0, "rank_in_save": 0, "launcher": 0}
        self.restarts = 0        # by the launcher (max_restarts) and by the soak (fresh starts)
        self.lost = []           # steps lost per restart
        self.past_newest = []    # of those, steps past the newest save begun (<= EVERY)
        self.episodes = 0
        self.failures = []

    def start(self, name, resume):
        cmd = [self.trainer, "--config", os.path.join(self.work, name + ".toml")]
        if resume:
            cmd += ["--resume", "auto"]
        os.makedirs(os.path.join(self.work, name), exist_ok=True)
        out = open(os.path.join(self.work, name, "launcher.log"), "a")
        try:
            return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        finally:
            out.close()

    def reference(self):
        name = "reference"
        with open(os.path.join(self.work, name + ".toml"), "w") as f:
            f.write(config_text(self.work, name, not self.args.sync_saves))
        p = self.start(name, False)
        if p.wait(timeout=600) != 0:
            raise RuntimeError("the uninterrupted reference run failed; see " +
                               os.path.join(self.work, name, "launcher.log"))
        final = os.path.join(self.work, name, "checkpoints", f"step-{STEPS:08d}")
        return export(self.trainer, final, os.path.join(self.work, "reference.safetensors"))

    def fail(self, what):
        self.failures.append(f"episode {self.episodes}: {what}")

    def episode(self, deadline, want):
        self.episodes += 1
        name = f"episode{self.episodes}"
        shutil.rmtree(os.path.join(self.work, name), ignore_errors=True)
        with open(os.path.join(self.work, name + ".toml"), "w") as f:
            f.write(config_text(self.work, name, not self.args.sync_saves))
        metrics = os.path.join(self.work, name, "run", "metrics.jsonl")
        ckpt = os.path.join(self.work, name, "checkpoints")
        shm_before = shm_entries()
        p = self.start(name, False)
        mark = 0  # the step metrics.jsonl had reached at the last kill
        while True:
            code = p.poll()
            if code is not None:
                if code == 0 and last_step(metrics) >= STEPS:
                    break
                # The launcher stopped (its SIGTERM, or restarts spent): a fresh --resume auto.
                self.restarts += 1
                p = self.start(name, True)
                continue
            if time.time() > deadline + 600:
                os.killpg(p.pid, signal.SIGKILL)
                self.fail("did not finish within 10 minutes of the soak's end")
                return
            time.sleep(self.rng.uniform(0.2, 1.5))
            # Past the soak's end the episode trains to its end unharmed: kills at a fixed rate
            # on a loaded machine, where a restart can take longer than the gap between kills,
            # would keep it from ever finishing.
            if p.poll() is not None or self.args.no_kills or time.time() > deadline:
                continue
            # Most kills wait for a step past the previous kill, so that the episode advances
            # however slowly the ranks start here; the others land wherever they fall, start-up
            # included.
            if self.rng.random() < 0.75 and not self.progressed(p, metrics, mark, deadline):
                continue
            kind = self.rng.choice(["rank", "rank", "rank_in_save", "launcher"])
            if kind == "rank_in_save":
                # Wait (briefly) for a save in flight: a .tmp-step-* folder.
                t_end = time.time() + 2
                while time.time() < t_end and not glob.glob(os.path.join(ckpt, ".tmp-step-*")):
                    time.sleep(0.002)
                if not glob.glob(os.path.join(ckpt, ".tmp-step-*")):
                    kind = "rank"
            if kind == "launcher":
                os.kill(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    self.fail("the launcher did not stop within 120 s of SIGTERM")
                    return
            else:
                pids = rank_pids(p.pid)
                if not pids:
                    continue
                try:
                    os.kill(self.rng.choice(pids), signal.SIGKILL)
                except ProcessLookupError:
                    continue
            self.kills[kind] += 1
            mark = last_step(metrics)
            if kind != "launcher":
                self.restarts += 1  # the launcher restarts the ranks (launch.max_restarts)
        try:
            restarts = losses_of(os.path.join(self.work, name, "launcher.log"))
        except Unparsed as e:
            self.fail(f"a restart the soak cannot read, so its lost steps go unchecked: {e}")
            return
        self.lost += [lost for lost, _ in restarts]
        self.past_newest += [past for _, past in restarts]
        # Synchronous saves are published before the next step: a kill loses at most one
        # interval. Asynchronous ones may still be in flight: one interval past the newest begun.
        bounded = [lost if self.args.sync_saves else past for lost, past in restarts]
        if bounded and max(bounded) > EVERY:
            self.fail(f"a restart lost more than checkpoint.every_steps = {EVERY} steps "
                      + ("" if self.args.sync_saves else "past the newest save begun ")
                      + f"((lost, past the newest save begun) at each restart: {restarts})")
        self.check(name, want, shm_before)

    @staticmethod
    def progressed(p, metrics, mark, deadline):
        """Wait until metrics.jsonl records a step past mark: False when the job ended, or the
        soak did, first."""
        while last_step(metrics) <= mark:
            if p.poll() is not None or time.time() > deadline:
                return False
            time.sleep(0.05)
        return True

    def check(self, name, want, shm_before):
        ckpt = os.path.join(self.work, name, "checkpoints")
        if glob.glob(os.path.join(ckpt, ".tmp-step-*")):
            self.fail("a .tmp-step-* folder was left: " + ", ".join(glob.glob(ckpt + "/.tmp-*")))
        complete = [d for d in glob.glob(os.path.join(ckpt, "step-*"))
                    if os.path.exists(os.path.join(d, "manifest.json.crc32"))]
        if len(complete) != KEEP_LAST:
            self.fail(f"{len(complete)} complete checkpoints, keep_last is {KEEP_LAST}: "
                      + ", ".join(sorted(os.path.basename(d) for d in complete)))
        nvme = os.path.join(self.work, name, "nvme")
        left = [f for f in glob.glob(nvme + "/**", recursive=True) if os.path.isfile(f)]
        if left:
            self.fail("offload files left: " + ", ".join(left[:5]))
        new_shm = sorted(shm_entries() - shm_before)
        # Another test running beside the soak (ctest -j) may hold a segment for a moment
        # (offload_nvme's /dev/shm cases): what the job left stays, theirs goes.
        for _ in range(50):
            if not new_shm:
                break
            time.sleep(0.1)
            new_shm = sorted(shm_entries() - shm_before)
        if new_shm:
            self.fail("shared-memory segments left in /dev/shm: " + ", ".join(new_shm[:5]))
        got = export(self.trainer, os.path.join(ckpt, f"step-{STEPS:08d}"),
                     os.path.join(self.work, name + ".safetensors"))
        if got.keys() != want.keys():
            self.fail("the final checkpoint holds other tensors than the reference's")
        else:
            differ = [k for k in want if want[k] != got[k]]
            if differ:
                self.fail(f"{len(differ)} tensors differ from the uninterrupted run's, e.g. "
                          + differ[0])
        if not self.failures:
            shutil.rmtree(os.path.join(self.work, name), ignore_errors=True)

    def run(self):
        want = self.reference()
        deadline = time.time() + 60 * self.args.minutes
        while time.time() < deadline and not self.failures:
            self.episode(deadline, want)
        kills = sum(self.kills.values())
        if not self.failures and kills == 0:
            self.failures.append(f"no kill in {self.episodes} episodes: the soak checked no "
                                 "restart and no steps lost")
        elif not self.failures and not self.lost:
            self.failures.append(f"{kills} kills, but no restart read from the launchers' logs: "
                                 "the steps lost went unchecked")
        return self.summary()

    def summary(self):
        lost = self.lost or [0]
        s = {"minutes": self.args.minutes, "seed": self.args.seed,
             "checkpoint_async": not self.args.sync_saves, "episodes": self.episodes,
             "kills": self.kills,
             "kills_total": sum(self.kills.values()), "restarts": self.restarts,
             "steps_lost_max": max(lost), "steps_lost_mean": sum(lost) / len(lost),
             "steps_past_newest_save_max": max(self.past_newest or [0]),
             "restarts_measured": len(self.lost), "failures": self.failures,
             "equal": not self.failures}
        print(f"chaos soak: {s['episodes']} episodes of {STEPS} steps in {self.args.minutes} min; "
              f"kills {s['kills_total']} (rank {self.kills['rank']}, rank during a save "
              f"{self.kills['rank_in_save']}, launcher SIGTERM {self.kills['launcher']}); "
              f"restarts {self.restarts}; steps lost per restart max {s['steps_lost_max']}, "
              f"mean {s['steps_lost_mean']:.2f} over {len(self.lost)} restarts "
              + (f"(bound {EVERY}, synchronous saves), " if self.args.sync_saves else "")
              + f"past the newest save begun max {s['steps_past_newest_save_max']}"
              + ("" if self.args.sync_saves else f" (bound {EVERY})") + "; "
              + ("every episode equal to the uninterrupted run, nothing left behind"
                 if s["equal"] else "FAILED: " + "; ".join(self.failures)))
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(s, f, indent=1)
        return 0 if s["equal"] else 1


def main():
    global STEPS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--work", default=None, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--sync-saves", action="store_true",
                    help="checkpoint.async = false: every kill must lose at most one interval")
    ap.add_argument("--no-kills", action="store_true",
                    help="a planted fault: kill nothing, which the soak must report as a failure")
    ap.add_argument("--steps", type=int, default=STEPS,
                    help=f"steps per episode (default {STEPS})")
    args = ap.parse_args()
    STEPS = args.steps
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 30)
    made = args.work is None
    if made:
        args.work = tempfile.mkdtemp(prefix="zt-chaos-")
    os.makedirs(args.work, exist_ok=True)
    print(f"chaos soak: seed {args.seed}, work in {args.work}", flush=True)
    try:
        code = Soak(args).run()
    except RuntimeError as e:
        print(f"chaos soak: {e}", file=sys.stderr)
        code = 1
    # A failed soak keeps its work for a look; a planted one (--no-kills) fails by design.
    if made and (code == 0 or args.no_kills):
        shutil.rmtree(args.work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
