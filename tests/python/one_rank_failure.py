"""A backward that raises on one rank only, at stage 0 and with MiCS groups of one rank (stage 1),
where reductions run at step() so no rank waits on the failing one, and at stage 2, where they
run in backward and the failing rank sends the rest in the order the others do: every rank
skips that step (the failing rank alone used to, and the ranks' parameters parted for good),
then all train on with equal parameters. Run on 2 ranks (run.sh NPROC 2)."""

import os
import sys
import tempfile
import time

import torch

import zt
from failing_backward import Boom


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)
        self.boom = False

    def forward(self, x):
        h = self.a(x)
        return self.b(Boom.apply(h) if self.boom else h)


def config(stage, mics, shard):
    c = {"zero": {"stage": stage},
         "plugins": {"comm": "comm_ucx", "shard": shard, "optimizer": "optim_hybrid_adam"},
         "plugin": {"optim_hybrid_adam": {"lr": 1e-2}}}
    if mics:
        c["zero"]["mics_shard_size"] = 1
    return c


def check(stage, mics, shard):
    net = Net()
    engine = zt.initialize(net, config=config(stage, mics, shard))
    rank = engine.rank
    torch.manual_seed(100 + rank)
    batch = lambda: (torch.randn(3, 4), torch.randn(3, 2))  # noqa: E731 - each rank its own data
    engine.backward(engine.loss(*batch()))
    assert not engine.step()["skipped"]
    net.boom = rank == 1
    try:
        engine.backward(engine.loss(*batch()))
        assert rank != 1, "rank 1's backward did not raise"
    except ValueError as e:  # the model's own exception, its type kept
        assert rank == 1 and "boom in backward" in str(e), repr(e)
    net.boom = False
    # As a caller that catches the error goes on: the failed micro step counts, so every rank's
    # step() meets in the core, where all of them skip.
    report = engine.step()
    where = f"stage {stage}{' MiCS' if mics else ''} {shard}, rank {rank}"
    assert report["skipped"], f"{where}: the step a backward failed in was not skipped: {report}"
    engine.backward(engine.loss(*batch()))
    assert not engine.step()["skipped"]
    names = engine.parameter_names()
    with engine.gathered_parameters(names) as full:
        values = torch.cat([full[n].flatten() for n in names])
    # Rank 1's parameters reach rank 0 through a file (renamed into place whole; the launcher's
    # job id keeps runs apart). Gathers are no barrier at stage 0: each rank holds the whole.
    stem = (f"{tempfile.gettempdir()}/zt-one-rank-failure-{os.environ['ZT_JOB_ID']}-{stage}-"
            f"{shard}")
    if rank == 1:
        torch.save(values, f"{stem}.tmp")
        os.rename(f"{stem}.tmp", f"{stem}.pt")
    else:
        deadline = time.time() + 60
        while not os.path.exists(f"{stem}.pt"):
            assert time.time() < deadline, f"{where}: rank 1's parameters never came"
            time.sleep(0.05)
        other = torch.load(f"{stem}.pt")
        os.unlink(f"{stem}.pt")
        assert torch.equal(values, other), f"{where}: the ranks' parameters differ after the step"
    engine.close()
    print(f"one_rank_failure: {where}: the step skipped, the ranks' parameters equal", flush=True)


def main():
    for stage, mics, shard in [(0, False, "shard_bucket"), (1, True, "shard_bucket"),
                               (2, False, "shard_bucket"), (2, False, "shard_tensor")]:
        check(stage, mics, shard)
    return None


if __name__ == "__main__":
    sys.exit(main())
