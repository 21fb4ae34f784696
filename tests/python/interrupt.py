"""Ctrl-C stops every rank: a 2-rank job under python3 -m zt.launch training a module in an
endless loop gets SIGINT (what Ctrl-C sends to the foreground job); the launcher stops both
ranks and exits 128 + 2 within seconds, and no rank process is left. And a signal that comes
while the launcher stops a job whose rank failed is not overridden by --max-restarts: the job
ends, it does not start again; a job whose rank fails once does, and ends 0. A plain process
(run.sh NPROC 0)."""

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WORKER = r'''
import sys, torch, zt
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
e = zt.initialize(m, config={"zero": {"stage": 3}, "plugins": {"comm": "comm_ucx",
                  "shard": "shard_bucket", "optimizer": "optim_hybrid_adam"}})
import os
os.write(1, f"rank {e.rank} pid {os.getpid()} training\n".encode())  # one write: lines stay whole
while True:
    e.backward(e.loss(torch.randn(4, 8), torch.randn(4, 2)))
    e.step()
'''

# Rank 1 fails at once; rank 0 outlives it (it ignores the launcher's SIGTERM, so the launcher
# waits its grace before SIGKILL: the window in which the user's signal comes).
FAILING = r'''
import os, signal, sys, time
rank = int(os.environ["RANK"])
if rank == 1:
    time.sleep(0.5)
    os.write(1, f"rank 1 leaving, pid {os.getpid()}\n".encode())
    sys.exit(1)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.write(1, b"rank 0 waiting\n")
time.sleep(60)
'''


# Rank 1's script raises after a few steps; rank 0 goes on to its next step's collectives. The
# communicators wait up to launch.timeout_s (300 s here) for a peer. Optimizer states in
# offload_nvme's files under ZT_TEST_NVME.
NVME_ENGINE = r'''
import os, torch, zt
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
e = zt.initialize(m, config={"zero": {"stage": 3}, "launch": {"timeout_s": 300},
                  "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                              "optimizer": "optim_hybrid_adam",
                              "offload_optimizer": "offload_nvme"},
                  "plugin": {"offload_nvme": {"path": os.environ["ZT_TEST_NVME"]}}})
'''
RAISING = NVME_ENGINE + r'''
for step in range(1000000):
    if step == 3 and e.rank == 1:
        raise ValueError("the script of rank 1 failed")
    e.backward(e.loss(torch.randn(4, 8), torch.randn(4, 2)))
    e.step()
'''


def read_until(job, done, seconds=60):
    """The job's output as it comes, until done(text) or `seconds` (never a blocking read past
    the deadline, nor past the output's end)."""
    seen = ""
    deadline = time.time() + seconds
    while not done(seen) and time.time() < deadline:
        ready, _, _ = select.select([job.stdout], [], [], 1.0)
        if ready:
            chunk = os.read(job.stdout.fileno(), 4096).decode(errors="replace")
            if not chunk:
                break
            seen += chunk
    return seen


def training_pids(text):
    return [int(p) for p in re.findall(r"rank \d+ pid (\d+) training", text)]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def main():
    worker = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"zt-interrupt-{os.getpid()}.py")
    with open(worker, "w") as f:
        f.write(WORKER)
    job = subprocess.Popen([sys.executable, "-m", "zt.launch", "--nproc", "2", worker],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = read_until(job, lambda text: len(training_pids(text)) >= 2)
    pids = training_pids(seen)
    if len(pids) < 2:
        job.kill()
        return f"the ranks did not start; they printed: {seen[-1000:]!r}"
    time.sleep(1)  # both in the training loop
    start = time.time()
    job.send_signal(signal.SIGINT)
    try:
        code = job.wait(timeout=30)
    except subprocess.TimeoutExpired:
        job.kill()
        return "the launcher did not stop within 30 s of SIGINT"
    rest = job.stdout.read().decode(errors="replace")
    os.unlink(worker)
    if code != 128 + signal.SIGINT:
        return f"the launcher exited {code}, not {128 + signal.SIGINT}: {rest[-500:]}"
    time.sleep(0.5)
    left = [pid for pid in pids if alive(pid)]
    if left:
        return f"ranks still running after the launcher stopped: {left}"
    print(f"interrupt: SIGINT stopped both ranks and the launcher in {time.time() - start:.2f} s")
    return None


def signal_during_restartable_failure():
    worker = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"zt-failing-{os.getpid()}.py")
    with open(worker, "w") as f:
        f.write(FAILING)
    job = subprocess.Popen([sys.executable, "-m", "zt.launch", "--nproc", "2", "--max-restarts",
                            "2", worker], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen = read_until(job, lambda text: "rank 0 waiting" in text and "rank 1 leaving" in text)
    leaving = re.search(r"rank 1 leaving, pid (\d+)", seen)
    if "rank 0 waiting" not in seen or not leaving:
        job.kill()
        return f"the ranks did not start and fail; the job printed: {seen[-1000:]!r}"
    # Rank 1 has failed once its process is gone; the launcher then waits out rank 0's grace
    # (it ignores SIGTERM), and that is when the signal must come.
    deadline = time.time() + 10
    while alive(int(leaving.group(1))) and time.time() < deadline:
        time.sleep(0.05)
    if alive(int(leaving.group(1))):
        job.kill()
        return "rank 1 did not exit within 10 s of saying it leaves"
    if job.poll() is not None:
        return f"the launcher ended ({job.returncode}) before the signal: it did not stop rank 0"
    job.send_signal(signal.SIGTERM)
    try:
        code = job.wait(timeout=30)
    except subprocess.TimeoutExpired:
        job.kill()
        return "the launcher did not stop within 30 s of SIGTERM"
    rest = seen + job.stdout.read().decode(errors="replace")
    os.unlink(worker)
    if "restart 1/2" in rest:
        return f"the launcher started the ranks again after SIGTERM: {rest[-1000:]}"
    # The job had failed before the signal: its exit is the failure's (rank 1's code), not a
    # stop's, and not 0.
    if code != 1:
        return f"the launcher exited {code}, not rank 1's 1: {rest[-1000:]}"
    print("interrupt: SIGTERM while a failed job stopped ended it without a restart")
    return None


def uncaught_exception_on_one_rank():
    """A rank whose script raises leaves at once: its exit's collective shutdown waited for a
    rank that was in its next step, until launch.timeout_s, and the launcher with it. Its
    offload files go as it leaves, the other rank's as the launcher's SIGTERM stops it (and the
    launcher removes any a rank could not: a SIGKILL's): none may be left."""
    worker = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"zt-raising-{os.getpid()}.py")
    with open(worker, "w") as f:
        f.write(RAISING)
    nvme = tempfile.mkdtemp(prefix="zt-raising-nvme-")
    job = subprocess.Popen([sys.executable, "-m", "zt.launch", "--nproc", "2", worker],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=dict(os.environ, ZT_TEST_NVME=nvme))
    try:
        code = job.wait(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait()
        return "a job whose rank 1 raised was still running after 60 s (launch.timeout_s 300)"
    finally:
        os.unlink(worker)
    out = job.stdout.read().decode(errors="replace")
    if code == 0 or "ValueError: the script of rank 1 failed" not in out or "rank 1" not in \
            out.splitlines()[-1]:
        return f"the launcher exited {code} without naming rank 1's failure: {out[-1500:]}"
    left = os.listdir(nvme)
    shutil.rmtree(nvme)
    if left:
        return f"offload files the stopped ranks left were not removed: {left}: {out[-1500:]}"
    print("interrupt: a rank's uncaught exception ended the job at once, rank 1 named, and no "
          "offload file was left")
    return None


# Rank 1 fails in the first start only (a file marks that it did), once rank 0 has recorded its
# start (the launcher stops rank 0 when rank 1 fails); both ranks record each start.
ONCE_FAILING = r'''
import os, sys, time
marker, log = sys.argv[1], sys.argv[2]
with open(log, "a") as f:
    f.write(f"start rank {os.environ['RANK']}\n")
if os.environ["RANK"] == "1" and not os.path.exists(marker):
    for _ in range(200):
        with open(log) as f:
            if f.read().count("start rank 0") >= 1:
                break
        time.sleep(0.05)
    open(marker, "w").close()
    sys.exit(3)
'''


def restarts_after_a_failure():
    """--max-restarts K starts every rank again after a failure, at most K times: with 1, a job
    whose rank fails once ends 0 after a second start of both ranks; with 0 it ends with the
    failure's code, started once."""
    folder = tempfile.mkdtemp(prefix="zt-restart-")
    worker = os.path.join(folder, "worker.py")
    with open(worker, "w") as f:
        f.write(ONCE_FAILING)
    try:
        for restarts, want_code, want_starts in (("1", 0, 4), ("0", 3, 2)):
            marker, log = os.path.join(folder, "failed"), os.path.join(folder, "starts")
            for path in (marker, log):
                if os.path.exists(path):
                    os.unlink(path)
            run = subprocess.run([sys.executable, "-m", "zt.launch", "--nproc", "2",
                                  "--max-restarts", restarts, worker, marker, log],
                                 capture_output=True, text=True, timeout=120)
            with open(log) as f:
                starts = f.read().count("start rank")
            if run.returncode != want_code or starts != want_starts:
                return (f"--max-restarts {restarts}: exit {run.returncode} after {starts} rank "
                        f"starts, not {want_code} after {want_starts}: {run.stderr[-1000:]}")
            if (restarts == "1") != ("restart 1/1: all ranks start again" in run.stderr):
                return f"--max-restarts {restarts} said: {run.stderr[-1000:]}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("interrupt: --max-restarts 1 started a job whose rank failed once again, and it ended 0")
    return None


if __name__ == "__main__":
    failure = (main() or signal_during_restartable_failure() or
               uncaught_exception_on_one_rank() or restarts_after_a_failure())
    if failure:
        print(f"interrupt: {failure}", file=sys.stderr)
        sys.exit(1)
