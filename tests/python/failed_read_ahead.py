"""A stage-3 parameter shard read from offload_nvme that fails once (as on EIO, injected by
ZT_TEST_FAULT on the N-th read of this process) fails that forward or backward with a zt.IoError,
and the engine trains on after it: the failed read is not kept (it was rethrown by every later
forward until a checkpoint load). Run on 1 rank (run.sh NPROC 1); argv[1] is N."""

import os
import sys
import tempfile

# Before zt reads it: parsed once per process.
os.environ["ZT_TEST_FAULT"] = f"fail_read:0:{sys.argv[1]}"

import torch  # noqa: E402

import zt  # noqa: E402


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64),
                                torch.nn.Linear(64, 8))
    with tempfile.TemporaryDirectory() as tmp:
        config = {"zero": {"stage": 3, "param_persistence_threshold": 0},
                  "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                              "optimizer": "optim_hybrid_adam", "offload_param": "offload_nvme"},
                  "plugin": {"offload_nvme": {"path": os.path.join(tmp, "nvme")}}}
        engine = zt.initialize(model, config=config)

        def one_step():
            loss = engine.loss(torch.randn(4, 64), torch.randn(4, 8))
            try:
                engine.backward(loss)
            except zt.Error:
                # A backward that failed counts as a micro step: its step() skips the update.
                if not engine.step()["skipped"]:
                    raise AssertionError("the step of a failed backward was not skipped")
                raise
            engine.step()
            return float(loss)

        failure = None
        for _ in range(20):
            try:
                one_step()
            except zt.IoError as e:
                failure = str(e)
                break
        if failure is None:
            return "no step failed: the injected read never came (raise or lower N)"
        if "injected by ZT_TEST_FAULT" not in failure:
            return f"the failed read's error does not say it was injected: {failure}"
        for n in range(3):
            try:
                loss = one_step()
            except zt.Error as e:
                return f"step {n + 1} after the failed read failed too: {e}"
            if not loss == loss:
                return f"step {n + 1} after the failed read has a NaN loss"
        engine.close()
    print("failed_read_ahead: a failed parameter read fails its pass, and training goes on")
    return None


if __name__ == "__main__":
    failure = main()
    if failure:
        print(f"failed_read_ahead: {failure}", file=sys.stderr)
        sys.exit(1)
