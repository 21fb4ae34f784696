"""python3 -m zt.launch --nproc N [--master-port P] [--timeout S] [--max-restarts K] script.py ...

Runs `script.py` on N local ranks with the environment torchrun gives (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), under zt's launcher, the trainer's: a
rank that fails stops the others and the last line names it; Ctrl-C stops every rank. With
--max-restarts K a failed job starts again, all ranks, at most K times (the script resumes from
its own checkpoint).
"""

import argparse
import math
import signal
import sys

from . import _zt


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m zt.launch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nproc", type=int, default=1, help="local ranks (default 1)")
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=0, help="0: a free port")
    parser.add_argument("--timeout", type=float, default=0,
                        help="seconds each start of the job may take (0: no limit)")
    parser.add_argument("--max-restarts", type=int, default=0)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)
    # As the trainer's own checks: a negative or NaN timeout meant no limit, a port past 65535
    # failed only in the ranks, and a huge --nproc in the binding's conversion.
    if not 1 <= a.nproc <= 1024:
        parser.error(f"--nproc {a.nproc}: expected a number of ranks from 1 to 1024")
    if not 0 <= a.master_port <= 65535:
        parser.error(f"--master-port {a.master_port}: expected a port from 0 (a free one) to 65535")
    if not (math.isfinite(a.timeout) and a.timeout >= 0):
        parser.error(f"--timeout {a.timeout}: expected seconds, 0 or more (0: no limit)")
    if a.max_restarts < 0:
        parser.error("--max-restarts must be 0 or more")
    command = [sys.executable, a.script] + a.args
    # While no ranks run (before the first start, between restarts), a stop signal is noted and
    # stops the job at the next start: by Python's defaults SIGTERM and SIGUSR1 ended the
    # launcher without a word, and Ctrl-C with a traceback. While ranks run, the launcher's own
    # handlers take them (and put these back).
    stop = []

    def note(signum, _frame):
        if not stop:
            stop.append(signum)

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
    previous = {s: signal.signal(s, note) for s in stops}
    try:
        return _attempts(a, command, stop)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _attempts(a, command, stop):
    """Starts the job, and again after a failure, at most a.max_restarts times."""
    code = 0
    for attempt in range(a.max_restarts + 1):
        if stop:
            when = "before the ranks started" if attempt == 0 else (
                "while the launcher was restarting the ranks")
            print(f"zt: {signal.Signals(stop[0]).name} came {when}: the job stops",
                  file=sys.stderr)
            return 128 + stop[0]
        code, failed_rank, message, line, stopped_by = _zt.launch(
            a.nproc, command, a.master_addr, a.master_port, a.timeout)
        if code == 0:
            return 0
        cause = f"; rank {failed_rank} reported: {line}" if line else ""
        print(f"zt: error: {message}{cause}", file=sys.stderr)
        # A signal to the launcher (Ctrl-C, a scheduler's SIGTERM) asked the job to stop: a rank
        # that failed meanwhile is no reason to start them all again.
        if failed_rank < 0 or stopped_by != 0 or attempt == a.max_restarts:
            return code
        if not stop:
            print(f"zt: restart {attempt + 1}/{a.max_restarts}: all ranks start again",
                  file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
