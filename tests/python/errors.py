"""zt's errors in Python terms: a config zt refuses raises zt.ConfigError (a zt.Error) with the
trainer's message naming the key; an exception inside a unit carries a note naming the unit, and
the engine trains on after it (the failed forward is undone); a module called outside its engine
says so. Run on 1 rank (run.sh NPROC 1)."""

import sys

import torch

import zt

CONFIG = {"zero": {"stage": 3}, "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                                            "optimizer": "optim_hybrid_adam"}}


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        self.fail = False

    def forward(self, x):
        if self.fail:
            raise ValueError("the unit's own error")
        return self.linear(x)


class Fragile(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = Head()

    def forward(self, x):
        return self.b(self.a(x))


def main():
    try:
        zt.initialize(torch.nn.Linear(2, 2), config={"zero": {"stage": 3, "stagee": 1}})
        return "an unknown key was accepted"
    except zt.ConfigError as e:
        assert isinstance(e, zt.Error)
        assert "unknown key 'stagee' in [zero]" in str(e), str(e)
        assert "the config dict given to zt.initialize:" in str(e), str(e)
    model = Fragile()
    engine = zt.initialize(model, config=CONFIG)
    model.b.fail = True
    try:
        engine(torch.randn(3, 4))
        return "the unit's error did not come through"
    except ValueError as e:
        notes = " ".join(getattr(e, "__notes__", []))
        assert "unit 1 (b)" in notes, notes
    model.b.fail = False
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    assert engine.step() is not None
    try:
        model(torch.randn(3, 4))
        return "a unit ran outside its engine"
    except RuntimeError as e:
        assert "outside its engine" in str(e), str(e)
    # A loss that fails drops its forward; the next one trains.
    try:
        engine.loss(torch.randn(3, 4), torch.randn(3, 5))
        return "a loss of the wrong shape did not fail"
    except RuntimeError:
        pass
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    assert engine.step() is not None
    # A backward past the accumulation boundary without step() is refused, saying what to do.
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    try:
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        return "a second backward without step() was accepted"
    except RuntimeError as e:
        assert "call engine.step() after every backward" in str(e), str(e)
    assert engine.step() is not None
    engine.close()
    try:
        engine.full_param("a.weight")
        return "a closed engine answered"
    except zt.ConfigError as e:
        assert "was closed" in str(e), str(e)
    print("errors: ConfigError, a unit's error named, the engine trains on, outside use refused, "
          "a closed engine says so")
    return None


if __name__ == "__main__":
    failure = main()
    if failure:
        print(f"errors: {failure}", file=sys.stderr)
        sys.exit(1)
