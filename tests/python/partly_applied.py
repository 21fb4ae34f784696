"""A step whose update fails part way (a tier read that fails as on EIO, injected by
ZT_TEST_FAULT on the N-th read of this process) leaves no step's state: the IoError says so,
a save_checkpoint from there is refused naming why, and a load of the last checkpoint clears it,
after which the engine saves and trains again. Optimizer states stream from offload_nvme with
clipping on, so the update runs tile by tile inside step(). Run on 1 rank (run.sh NPROC 1);
argv[1] is N."""

import os
import sys
import tempfile

# Before zt reads it: parsed once per process.
os.environ["ZT_TEST_FAULT"] = f"fail_read:0:{sys.argv[1]}"

import torch  # noqa: E402

import zt  # noqa: E402


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
    with tempfile.TemporaryDirectory() as tmp:
        config = {"zero": {"stage": 1, "gradient_clipping": 1.0, "sub_group_size": 1024},
                  "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                              "optimizer": "optim_hybrid_adam",
                              "offload_optimizer": "offload_nvme"},
                  "plugin": {"offload_nvme": {"path": os.path.join(tmp, "nvme")}}}
        engine = zt.initialize(model, config=config)
        saves = os.path.join(tmp, "ckpt")

        def one_step():
            engine.backward(engine.loss(torch.randn(4, 64), torch.randn(4, 8)))
            return engine.step()

        one_step()
        engine.save_checkpoint(saves)
        failure = None
        for _ in range(20):
            try:
                one_step()
            except zt.IoError as e:
                failure = str(e)
                break
        if failure is None:
            return "no step failed: the injected read never came (raise or lower N)"
        if "injected by ZT_TEST_FAULT" not in failure or "was partly applied" not in failure:
            return f"the failed step's error does not say it was partly applied: {failure}"
        try:
            engine.save_checkpoint(saves)
            return "a save of a partly applied step was accepted"
        except zt.ConfigError as e:
            if "holds a step only partly applied" not in str(e):
                return f"the refused save says: {e}"
        engine.load_checkpoint(saves)
        one_step()
        engine.save_checkpoint(saves)
        engine.close()
    print("partly_applied: a step that failed part way is said, not saved; a load clears it")
    return None


if __name__ == "__main__":
    failure = main()
    if failure:
        print(f"partly_applied: {failure}", file=sys.stderr)
        sys.exit(1)
