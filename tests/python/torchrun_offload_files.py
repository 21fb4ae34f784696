"""Under torchrun no launcher removes what a rank that ends without its destructors leaves, and
with offload_nvme that is the whole tier (a 2B-parameter job's ~40 GB). Ranks started as torchrun
starts them (agent_store.py plays the agent) keep their optimizer states in an NVMe tier.
- Rank 1's script raises an exception it does not catch, and rank 0, in its next step's
  collectives, is then stopped by SIGTERM, as torchrun's agent stops the rest of a failed job:
  rank 1 must leave at once with its own folder removed and rank 0's still there (it is still
  training), rank 0 must die of the SIGTERM as before, and then nothing may be left.
- The agent, itself stopped, sends SIGTERM to both ranks in the middle of their steps: each must
  die of it with its files removed, without an I/O error from a step that met them gone. Their
  tier's path is given through a symbolic link.
- Both ranks are killed outright (SIGKILL: the OOM killer, a launcher's last word), which no
  process can clean up after: their folders stay, until the next job on the same path starts,
  whose ranks remove them, say so, and train.
A plain process (run.sh NPROC 0).
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from agent_store import agent_store, free_port, torchrun_env
# Rank 1 raises after a few steps; rank 0 trains on into its next step's collectives.
from interrupt import NVME_ENGINE, RAISING

# Trains until stopped, saying so once it has (its tier holds files by then).
TRAINING = NVME_ENGINE + r'''
for step in range(1000000):
    if step == 2:
        os.write(1, f"rank {e.rank} training\n".encode())
    e.backward(e.loss(torch.randn(4, 8), torch.randn(4, 2)))
    e.step()
'''


def rank_folders(nvme):
    """rank<r> folders under every zt-<job> folder of the tier's path."""
    return sorted(os.path.join(job, r) for job in os.listdir(nvme)
                  for r in os.listdir(os.path.join(nvme, job)))


def wait_for(process, seconds):
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


@contextlib.contextmanager
def torchrun_job(script, nvme):
    """Two ranks of `script` as torchrun starts them, their output piped; killed if still
    running at the end."""
    port = free_port()
    agent = agent_store(port, 2)
    ranks = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT,
                              env=torchrun_env(rank, 2, port, ZT_TEST_NVME=nvme))
             for rank in range(2)]
    try:
        yield ranks
    finally:
        for r in ranks:
            if r.poll() is None:
                r.kill()
                r.wait()
        del agent


def output_of(ranks):
    return "".join(r.stdout.read().decode(errors="replace") for r in ranks)


def check_raising(nvme):
    with torchrun_job(RAISING, nvme) as ranks:
        code = wait_for(ranks[1], 120)
        if code != 1:
            return f"rank 1, whose script raised, exited {code}, not 1 at once"
        # Rank 0 trains on, into its next step's collectives, where it waits for rank 1.
        time.sleep(0.5)
        if ranks[0].poll() is not None:
            return f"rank 0 ended ({ranks[0].returncode}) before the agent stopped it"
        left = rank_folders(nvme)
        if [os.path.basename(f) for f in left] != ["rank0"]:
            return f"after rank 1 left, the tier's path holds {left}, not rank 0's folder alone"
        ranks[0].send_signal(signal.SIGTERM)
        code = wait_for(ranks[0], 60)
        out = output_of(ranks)
        if code != -signal.SIGTERM:
            return f"rank 0 ended with {code} on SIGTERM, not killed by it: {out}"
        if "the script of rank 1 failed" not in out or \
                "leaving on an uncaught exception; removed this rank's offload files" not in out:
            return f"rank 1's exception, or its files' removal, is not in its output: {out}"
        if os.listdir(nvme):
            return f"files left under the tier's path after both ranks ended: {rank_folders(nvme)}"
    return None


def check_stopped_mid_step(nvme):
    # The tier's path through a symbolic link (a scratch disk's, a TMPDIR's): the ranks' open
    # files are named by the real one.
    link = nvme + "-link"
    os.symlink(nvme, link)
    try:
        return stopped_mid_step(nvme, link)
    finally:
        os.unlink(link)


def stopped_mid_step(nvme, given):
    with torchrun_job(TRAINING, given) as ranks:
        if started_training(ranks) is None:
            return f"a rank ended before it trained: {output_of(ranks)}"
        time.sleep(0.3)
        for r in ranks:
            r.send_signal(signal.SIGTERM)
        codes = [wait_for(r, 60) for r in ranks]
        out = output_of(ranks)
        if codes != [-signal.SIGTERM] * 2:
            return f"the ranks stopped mid-step ended with {codes}, not killed by SIGTERM: {out}"
        if "Traceback" in out or out.count("removed this rank's offload files") != 2:
            return f"a rank stopped mid-step did not just remove its files and die: {out}"
        if os.listdir(nvme):
            return f"files left after the ranks stopped mid-step: {rank_folders(nvme)}"
    return None


def started_training(ranks):
    """The output of `ranks` until each said it trains, or None when one ended first."""
    out = ""
    for r in ranks:
        seen = ""  # notes a rank may print first (offload_nvme's on a tmpfs, say)
        while " training\n" not in seen:
            line = r.stdout.readline().decode(errors="replace")
            if not line:
                return None
            seen += line
        out += seen
    return out


def check_killed_then_next_job(nvme):
    with torchrun_job(TRAINING, nvme) as ranks:
        if started_training(ranks) is None:
            return f"a rank of the first job ended before it trained: {output_of(ranks)}"
        for r in ranks:
            r.kill()
            r.wait()
    killed = rank_folders(nvme)
    if len(killed) != 2:
        return f"the killed ranks left {killed}, not their two folders"
    with torchrun_job(TRAINING, nvme) as ranks:
        out = started_training(ranks)
        if out is None:
            return f"a rank of the next job ended before it trained: {output_of(ranks)}"
        left = rank_folders(nvme)
        if any(f in left for f in killed) or len(left) != 2:
            return f"the next job trains beside the killed ranks' folders: {left}"
        for folder in killed:
            said = f"removed {os.path.join(nvme, folder)} ("
            if said not in out or "which ended without removing it (killed)" not in out:
                return f"the next job's ranks did not say they removed {folder}: {out}"
        for r in ranks:
            r.send_signal(signal.SIGTERM)
            wait_for(r, 60)
    if os.listdir(nvme):
        return f"files left after the next job stopped: {rank_folders(nvme)}"
    return None


def main():
    for check in (check_raising, check_stopped_mid_step, check_killed_then_next_job):
        nvme = tempfile.mkdtemp(prefix="zt-torchrun-nvme-")
        try:
            failure = check(nvme)
        finally:
            shutil.rmtree(nvme, ignore_errors=True)
        if failure:
            print(f"torchrun_offload_files: {failure}", file=sys.stderr)
            return 1
    print("torchrun_offload_files: rank 1 removed its offload folder as it left on its exception, "
          "rank 0 its own when the agent's SIGTERM stopped it; ranks stopped mid-step removed "
          "theirs and died of the SIGTERM; the folders of ranks killed outright went when the "
          "next job started; nothing left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
