"""zt's errors in Python terms: a config zt refuses raises zt.ConfigError (a zt.Error) with the
trainer's message naming the key; an exception inside a unit carries a note naming the unit, and
the engine trains on after it (the failed forward is undone); an inf loss raises zt.NumericError
at the step() that ends its accumulation, nothing of that step applied; a module called outside its engine
says so; a module checkpointed twice with PyTorch's reentrant checkpointing is refused at stage 3;
run.deepspeed's JSON (or a config given as a .json path) is read as the trainer reads it; Python's checkpoints keep torch's generator
and the data position, and refuse a save mid-step or into a folder another job saves into.
Run on 1 rank (run.sh NPROC 1)."""

import fcntl
import json
import os
import pathlib
import random
import shutil
import sys
import tempfile

import torch
import torch.utils.checkpoint

import zt
from failing_backward import Boom

CONFIG = {"zero": {"stage": 3}, "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                                            "optimizer": "optim_hybrid_adam"}}


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        self.fail = False
        self.boom = False

    def forward(self, x):
        if self.fail:
            raise ValueError("the unit's own error")
        # Before the linear: its gradients are taken (and reduced) before the backward fails.
        return self.linear(Boom.apply(x) if self.boom else x)


class Fragile(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = Head()

    def forward(self, x):
        return self.b(self.a(x))


def failed_backward(engine, model):
    """A micro step of `model` (a Fragile) whose backward raises part way through: None, or
    what went wrong."""
    model.b.boom = True
    try:
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        return "a backward that raised did not fail"
    except ValueError as e:  # the model's own exception, its type kept
        assert "boom in backward" in str(e), repr(e)
    finally:
        model.b.boom = False
    return None


def main():
    try:
        zt.initialize(torch.nn.Linear(2, 2), config={"zero": {"stage": 3, "stagee": 1}})
        return "an unknown key was accepted"
    except zt.ConfigError as e:
        assert isinstance(e, zt.Error)
        assert "unknown key 'stagee' in [zero]" in str(e), str(e)
        assert "the config dict given to zt.initialize:" in str(e), str(e)
    # A frozen parameter is refused by name before anything starts.
    frozen = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    frozen[0].weight.requires_grad_(False)
    try:
        zt.initialize(frozen, config=CONFIG)
        return "a frozen parameter was accepted"
    except ValueError as e:
        assert "0.weight do not require grad" in str(e), str(e)
    # A config given as a pathlib.Path is a path (it was taken for none: synthetic data), and
    # overrides given as one string are refused (they were split into characters).
    try:
        zt.data(pathlib.Path("/nonexistent/zt-job.toml")).describe()
        return "a config path given as pathlib.Path was not read"
    except zt.ConfigError as e:
        assert "/nonexistent/zt-job.toml" in str(e), str(e)
    # A config error is a ValueError too, as tiktoken's refusals are.
    assert issubclass(zt.ConfigError, zt.Error) and issubclass(zt.ConfigError, ValueError)
    # A slice the job has not (micro step past data.grad_accum, a rank past the world) is the
    # script's slip, said with the bounds, not an internal error.
    stream = zt.data(dict(CONFIG, data={"grad_accum": 2}))
    for args in ((0, 2, 0, 1), (0, 0, 1, 1), (-1, 0, 0, 1)):
        try:
            stream.get(*args)
            return f"zt.Data.get{args} was accepted"
        except zt.ConfigError as e:
            assert "0 <= micro < 2 (data.grad_accum" in str(e), str(e)
    # zt.data(validation=True): [eval]'s windows, all in the held-out last quarter of the file,
    # the training windows all before it; a file without a held-out share is refused.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "text.bin")
        content = random.Random(3).randbytes(20000)
        with open(path, "wb") as f:
            f.write(content)
        held_out = {"kind": "text", "path": path, "val_fraction": 0.25}
        model = {"kind": "gpt", "preset": "custom", "n_layer": 1, "n_head": 1, "d_model": 16,
                 "seq_len": 16, "vocab": 256}
        config = dict(CONFIG, data=held_out, model=model)
        for validation in (False, True):
            rows = zt.data(config, validation=validation).samples(0, 12)[0].tolist()
            starts = [content.find(bytes(row)) for row in rows]
            if any(s < 0 for s in starts) or any((s >= 15000) != validation for s in starts):
                return f"zt.data(validation={validation}) windows start at {starts}"
        try:
            zt.data(dict(config, data={"kind": "text", "path": path}), validation=True)
            return "zt.data(validation=True) of a file without held-out data was taken"
        except zt.ConfigError as e:
            assert "needs validation data" in str(e), str(e)
    try:
        zt.initialize(torch.nn.Linear(2, 2), config=CONFIG, overrides="zero.stage=1")
        return "overrides given as one string were accepted"
    except TypeError as e:
        assert "list of \"key=value\" strings" in str(e), str(e)
    # is_gradient_accumulation_boundary as DeepSpeed's: True through the last micro step.
    accum = zt.initialize(Fragile(), config=dict(CONFIG, data={"grad_accum": 2}))
    seen = []
    for _ in range(2):
        for _ in range(2):
            out = accum(torch.randn(3, 4))
            seen.append(accum.is_gradient_accumulation_boundary())
            accum.backward(((out - torch.randn(3, 2)) ** 2).mean())
            seen.append(accum.is_gradient_accumulation_boundary())
            accum.step()
    if seen != [False, False, True, True] * 2:
        return f"is_gradient_accumulation_boundary around forward and backward: {seen}"
    # The same with step() called once per accumulation, after its last backward.
    seen = []
    for _ in range(2):
        out = accum(torch.randn(3, 4))
        seen.append(accum.is_gradient_accumulation_boundary())
        accum.backward(((out - torch.randn(3, 2)) ** 2).mean())
    accum.step()
    if seen != [False, True]:
        return f"is_gradient_accumulation_boundary with one step() per accumulation: {seen}"
    # A loss that is not finite (fp32, no loss scaling): backward returns it unread, and the
    # step() that ends the accumulation raises NumericError naming its micro step, with nothing
    # of the step applied; the engine trains on from the next step.
    names = ("a.weight", "b.linear.weight")
    before = {name: accum.full_param(name).clone() for name in names}
    out = accum(torch.randn(3, 4))
    accum.backward(((out - torch.randn(3, 2)) ** 2).mean())
    assert accum.step() is None
    steps = accum.global_steps
    out = accum(torch.randn(3, 4))
    loss = accum.backward(((out - torch.randn(3, 2)) ** 2).mean() * float("inf"))
    if not isinstance(loss, torch.Tensor) or not torch.isinf(loss):
        return f"backward returned {loss!r}, not the inf loss as a tensor"
    try:
        accum.step()
        return "the step of an inf loss was applied"
    except zt.NumericError as e:
        assert "loss is inf" in str(e) and "(micro step 2)" in str(e), str(e)
        assert "nothing of the step was applied" in str(e), str(e)
    # The dropped step took its batch: it counts, so a checkpoint's next sample does not replay it.
    if accum.global_steps != steps + 1:
        return f"global_steps {accum.global_steps} after a dropped step, not {steps + 1}"
    for name in names:
        if not torch.equal(accum.full_param(name), before[name]):
            return f"{name} changed in the step whose loss was inf"
    for _ in range(2):
        out = accum(torch.randn(3, 4))
        accum.backward(((out - torch.randn(3, 2)) ** 2).mean())
        report = accum.step()
    if report is None or report["skipped"]:
        return f"the step after the inf loss did not train: {report}"
    for name in names:
        after = accum.full_param(name)
        if not torch.isfinite(after).all() or torch.equal(after, before[name]):
            return f"{name} after the step that followed the inf loss: {after}"
    accum.close()
    # run.deepspeed is read at zt.initialize's door as at the trainer's: its JSON's settings
    # apply (they were dropped), and its errors name it.
    with tempfile.TemporaryDirectory() as folder:
        ds = pathlib.Path(folder) / "ds.json"
        ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2,
                                  "gradient_accumulation_steps": 3,
                                  "zero_optimization": {"stage": 2}}))
        from_json = zt.initialize(Fragile(), config=dict(CONFIG, zero={},
                                                         run={"deepspeed": str(ds)}))
        if from_json.gradient_accumulation_steps != 3:
            return f"run.deepspeed's accumulation: {from_json.gradient_accumulation_steps}"
        from_json.close()
        # deepspeed.initialize's form: the JSON's path as the config (read as TOML, its brace
        # was a syntax error), and DeepSpeed's method spelling of the accumulation.
        ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 2,
                                  "gradient_accumulation_steps": 3,
                                  "zero_optimization": {"stage": 2},
                                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}))
        from_path = zt.initialize(Fragile(), config=str(ds))
        if from_path.gradient_accumulation_steps() != 3 or from_path._core.stage != 2:
            return (f"config=ds.json: accumulation {from_path.gradient_accumulation_steps()}, "
                    f"stage {from_path._core.stage}")
        if from_path.get_lr() != [from_path._core.scheduled_lr()] or from_path.global_rank != 0:
            return f"get_lr() {from_path.get_lr()}, global_rank {from_path.global_rank}"
        from_path.close()
        ds.write_text(json.dumps({"zero_optimization": {"stage": 7}}))
        try:
            zt.initialize(Fragile(), config=dict(CONFIG, zero={}, run={"deepspeed": str(ds)}))
            return "a DeepSpeed JSON's stage 7 was accepted"
        except zt.ConfigError as e:
            assert "zero_optimization.stage" in str(e), str(e)
    # A dict may nest dotted sections as tomllib reads a TOML file, and paths are strings.
    text = zt.config.to_toml({"zero": {"stage": 3}, "codec": {"weights": {"bits": 8}},
                              "plugin": {"offload_nvme": {"path": pathlib.Path("/tmp/n")}}})
    if text != ("[zero]\nstage = 3\n[codec.weights]\nbits = 8\n[plugin.offload_nvme]\n"
                "path = \"/tmp/n\"\n"):
        return f"to_toml of nested sections: {text!r}"
    model = Fragile()
    engine = zt.initialize(model, config=CONFIG)
    # A module an open engine holds is refused (a second engine's hooks met the first's).
    try:
        zt.initialize(model, config=CONFIG)
        return "a module held by an open engine was taken by a second one"
    except ValueError as e:
        assert "already held by an open engine" in str(e), str(e)
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
    # A backward that fails part way (unit b's gradients already reduced) makes its step skip
    # (its partial gradients were added to the next micro step's), and the next one trains.
    # The failed micro step counts: a forward before step() is one micro step too many, and the
    # step() a caller that catches the error goes on to skips the update.
    failure = failed_backward(engine, model)
    if failure:
        return failure
    try:
        engine(torch.randn(3, 4))
        return "a forward after a failed backward, before step(), was taken"
    except RuntimeError as e:
        assert "1 micro steps without engine.step()" in str(e), str(e)
    report = engine.step()
    assert report is not None and report["skipped"], report
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    report = engine.step()
    assert report is not None and not report["skipped"], report
    # A loss of many values, or a float, is refused saying what to do; the engine trains on.
    out = engine(torch.randn(3, 4))
    try:
        engine.backward((out - torch.randn(3, 2)) ** 2)
        return "a loss of many values was accepted"
    except zt.ConfigError as e:
        assert "reduce it first" in str(e), str(e)
    engine(torch.randn(3, 4))
    try:
        engine.backward(1.5)
        return "a float loss was accepted"
    except TypeError as e:
        assert "not float" in str(e), str(e)
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    assert engine.step() is not None
    # A micro step past the accumulation boundary without step() is refused at its forward,
    # saying what to do.
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    try:
        engine.loss(torch.randn(3, 4), torch.randn(3, 2))
        return "a second micro step without step() was accepted"
    except RuntimeError as e:
        assert "call engine.step() after every backward" in str(e), str(e)
    # An evaluation between a backward and its step() is the caller's order, not a zt bug (the
    # core's InternalError reached the caller before).
    try:
        with torch.no_grad():
            engine(torch.randn(3, 4))
        return "an evaluation between a backward and its step() was accepted"
    except RuntimeError as e:
        assert "evaluate after engine.step()" in str(e), str(e)
    assert engine.step() is not None
    # Python's checkpoints: a save mid-step is refused; a load leaves torch's generator alone
    # unless asked (the state is rank 0's), replaces what a failed backward had poisoned, and a
    # later save continues the loaded data position.
    with tempfile.TemporaryDirectory() as folder:
        saved = pathlib.Path(folder) / "ck"
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        try:
            engine.save_checkpoint(saved)
            return "a save in the middle of a step was accepted"
        except RuntimeError as e:
            assert "middle of a step" in str(e), str(e)
        engine.step()
        # A folder another job saves into (its rank 0 holds the folder's lock) is refused, as
        # the trainer refuses it: the two removed each other's checkpoints in their prunes.
        saved.mkdir()
        other = os.open(saved / ".zt-lock", os.O_RDONLY | os.O_CREAT)
        fcntl.flock(other, fcntl.LOCK_EX)
        try:
            engine.save_checkpoint(saved)
            return "a save into a folder another job holds was accepted"
        except zt.ConfigError as e:
            assert "is in use by another job" in str(e) and "nothing was saved" in str(e), str(e)
        finally:
            os.close(other)
        # Another engine of this process that saves there, still open: close it first.
        second = zt.initialize(torch.nn.Linear(2, 2), config=CONFIG)
        second.save_checkpoint(saved)
        try:
            engine.save_checkpoint(saved)
            return "a save into the folder of another open engine of this process was accepted"
        except zt.ConfigError as e:
            assert "another engine of this process, still open" in str(e), str(e)
        second.close()
        shutil.rmtree(saved)
        # What a save killed or given up left (its temporary folder) goes when an engine first
        # saves there, as at the trainer's start.
        leftover = saved / ".tmp-step-00000009-killed-job"
        leftover.mkdir(parents=True)
        (leftover / "rank-00001-of-00002.safetensors").write_bytes(b"partial")
        engine.save_checkpoint(saved, next_sample=1000)
        if leftover.exists():
            return "a save left the temporary folder of an earlier, killed save"
        # A failed micro step is one of the step: a load waits for its step() (which skips).
        failure = failed_backward(engine, model)
        if failure:
            return failure
        try:
            engine.load_checkpoint(saved)
            return "load_checkpoint after a failed backward, before its step(), was taken"
        except RuntimeError as e:
            assert "in the middle of a step" in str(e), str(e)
        if not engine.step()["skipped"]:
            return "the step of a failed backward was not skipped"
        torch.manual_seed(7)
        expected = torch.rand(3)
        torch.manual_seed(7)
        if engine.load_checkpoint(saved)["next_sample"] != 1000:
            return "load_checkpoint returned another data position than was saved"
        if not torch.equal(torch.rand(3), expected):
            return "load_checkpoint moved torch's generator without restore_rng"
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        if engine.step()["skipped"]:
            return "the step after a load was skipped"
        snapshot = torch.get_rng_state()
        engine.save_checkpoint(saved)
        torch.manual_seed(99)
        state = engine.load_checkpoint(str(saved), restore_rng=True)
        if not torch.equal(torch.get_rng_state(), snapshot):
            return "load_checkpoint(restore_rng=True) did not restore the saved generator"
        # data.micro_batch (4) x 1 rank past the loaded position, not steps x the batch.
        if state["next_sample"] != 1004:
            return f"a save after a load recorded next_sample {state['next_sample']}, not 1004"
        # DeepSpeed's tag: a folder of the directory to load; a save refuses one (a positional
        # second argument was read as next_sample, and at load as restore_rng).
        try:
            engine.save_checkpoint(saved, "global_step3")
            return "save_checkpoint took a DeepSpeed tag"
        except TypeError as e:
            assert "takes no tag" in str(e), str(e)
        newest = (saved / "latest").read_text().strip()
        torch.manual_seed(99)
        drawn = torch.rand(3)
        torch.manual_seed(99)
        if engine.load_checkpoint(saved, newest)["next_sample"] != 1004:
            return f"load_checkpoint(dir, {newest!r}) did not load that folder"
        if not torch.equal(torch.rand(3), drawn):
            return "load_checkpoint(dir, tag) restored the generator"
        try:
            engine.load_checkpoint(saved, "global_step3")
            return "load_checkpoint(dir, tag) took a folder that is not there"
        except zt.Error as e:
            assert "global_step3" in str(e), str(e)
    # Closed with a forward open: a backward through its output says so (its hooks used the
    # freed engine), and the restored module trains as plain PyTorch (the gradient hooks on its
    # parameters went with the engine).
    pending = engine(torch.randn(3, 4))
    engine.close()
    try:
        pending.sum().backward()
        return "a backward through a closed engine's output ran"
    except RuntimeError as e:
        assert "engine that was closed" in str(e), str(e)
    model.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    assert model.a.weight.grad is not None and model.a.weight.grad.abs().sum() > 0
    for call in (lambda: engine.full_param("a.weight"),
                 lambda: engine.save_checkpoint(tempfile.gettempdir())):
        try:
            call()
            return "a closed engine answered"
        except zt.ConfigError as e:
            assert "was closed" in str(e), str(e)

    print("errors: ConfigError, a unit's error named, the engine trains on, outside use refused, "
          "a closed engine says so")
    return (checkpointed_twice() or stray_backward(0) or stray_backward(3)
            or failed_first_micro_step_with_tier() or gradients_not_finite_twice()
            or launcher_flags_refused() or failed_initialize_takes_its_hooks_off()
            or door_guards() or parameters_changed_after_initialize())


class Twice(torch.nn.Module):
    """One block run twice under torch.utils.checkpoint: reentrant, its parameters' gradients
    arrive in two nested backward passes."""

    def __init__(self, reentrant):
        super().__init__()
        torch.manual_seed(7)
        self.pre = torch.nn.Linear(4, 4)
        self.block = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 2)
        self.reentrant = reentrant

    def forward(self, x):
        x = self.pre(x)
        for _ in range(2):
            x = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=self.reentrant)
        return self.head(x)


def stray_backward(stage):
    """A plain loss.backward() (the PyTorch and FSDP habit) is not the engine's: the next
    forward says so, and abort() or an engine.backward after it skip the step, on every rank,
    instead of counting its gradients twice (they waited in .grad at stages 0-1, and were partly
    summed into the shards at 2-3). An auxiliary loss's backward with retain_graph before
    engine.backward sums at stages 0-1, as it always did; at stage 2 one after engine.backward is
    refused by name and its gradient dropped."""
    engine = zt.initialize(Fragile(), config=dict(CONFIG, zero={"stage": stage}))
    before = engine.full_param("a.weight").clone()
    x, y = torch.randn(3, 4), torch.randn(3, 2)
    torch.nn.functional.mse_loss(engine(x), y).backward()
    try:
        engine(x)
        return f"stage {stage}: a forward after a plain loss.backward() was taken"
    except RuntimeError as e:
        assert "engine.backward(loss)" in str(e) and "loss.backward()" in str(e), str(e)
    engine.abort()
    engine.backward(engine.loss(x, y))
    report = engine.step()
    if not report["skipped"] or not torch.equal(engine.full_param("a.weight"), before):
        return f"stage {stage}: the step of a plain loss.backward() and abort() applied: {report}"
    # engine.backward after the plain one, without abort(): autograd refuses the freed graph,
    # and the step is skipped as after any failed backward.
    out = engine(x)
    torch.nn.functional.mse_loss(out, y).backward()
    try:
        engine.backward(torch.nn.functional.mse_loss(out, y))
        return f"stage {stage}: engine.backward after a plain loss.backward() was taken"
    except RuntimeError as e:
        assert "backward through the graph a second time" in str(e), str(e)
    report = engine.step()  # the failed micro step counts: its step() skips
    if not report["skipped"] or not torch.equal(engine.full_param("a.weight"), before):
        return f"stage {stage}: the step of two backward passes applied: {report}"
    engine.backward(engine.loss(x, y))
    if engine.step()["skipped"]:
        return f"stage {stage}: the step after the skipped ones did not train"
    out = engine(x)
    out.pow(2).mean().backward(retain_graph=True)  # an auxiliary loss
    if stage < 2:
        engine.backward(torch.nn.functional.mse_loss(out, y))
        if engine.step()["skipped"]:
            return f"stage {stage}: an auxiliary loss's backward before engine.backward skipped"
    else:
        # Its groups were reduced by the first backward: named as the auxiliary backward, with
        # the way out, not as reentrant checkpointing; the step is skipped.
        try:
            engine.backward(torch.nn.functional.mse_loss(out, y))
            return f"stage {stage}: an auxiliary loss's backward before engine.backward was taken"
        except Exception as e:  # noqa: BLE001 - autograd decides the type it arrives as
            assert "a backward before engine.backward" in str(e), repr(e)
            assert "engine.backward(loss + aux_loss)" in str(e), repr(e)
        if not engine.step()["skipped"]:  # the failed micro step counts: its step() skips
            return f"stage {stage}: the step of an auxiliary backward at stage {stage} applied"
    if stage == 2:
        # A regulariser's backward after engine.backward: named as such (it was taken for
        # reentrant checkpointing), its gradient dropped (left in .grad, the next micro step's
        # backward added to it), and the step is engine.backward's own.
        engine.backward(engine.loss(x, y))
        weight = engine.module.a.weight
        try:
            weight.pow(2).sum().backward()
            return f"stage {stage}: a backward after engine.backward was taken"
        except Exception as e:  # noqa: BLE001 - autograd decides the type it arrives as
            assert "a backward after engine.backward" in str(e), repr(e)
            assert "engine.backward(loss + aux_loss)" in str(e), repr(e)
        if weight.grad is not None:
            return f"stage {stage}: the late backward's gradient stayed in .grad"
        if engine.step()["skipped"]:
            return f"stage {stage}: the step of engine.backward was skipped for a late backward"
    engine.close()
    print(f"errors: stage {stage}: a plain loss.backward() skips its step, never counts twice")
    return None


def parameters_changed_after_initialize():
    """A parameter frozen after zt.initialize was still moved by the update (Adam's moments, weight
    decay), and one added after it was never trained: step() refuses both by name, applying
    nothing, and applies the step once the model is as it was."""
    engine = zt.initialize(Fragile(), config=CONFIG)
    x, y = torch.randn(3, 4), torch.randn(3, 2)
    for change, said in (("freeze", "a.weight no longer requires grad"),
                         ("add", "extra.weight was added to the model after zt.initialize")):
        engine.backward(engine.loss(x, y))
        if change == "freeze":
            engine.module.a.weight.requires_grad_(False)
        else:
            engine.module.extra = torch.nn.Linear(2, 2)
        before = engine.full_param("a.weight").clone()
        try:
            engine.step()
            return f"a step after a parameter's {change} was taken"
        except ValueError as e:
            assert said in str(e), str(e)
        if not torch.equal(engine.full_param("a.weight"), before):
            return f"the refused step after a parameter's {change} changed a.weight"
        if change == "freeze":
            engine.module.a.weight.requires_grad_(True)
        else:
            del engine.module.extra
        report = engine.step()
        if report is None or report["skipped"] or torch.equal(engine.full_param("a.weight"),
                                                              before):
            return f"the step after undoing the {change} did not train: {report}"
    engine.close()
    print("errors: a parameter frozen or added after zt.initialize is refused at step(), by name")
    return None


def failed_first_micro_step_with_tier():
    """Stage 3, the step's gradients summed in an offload_nvme tier over 2 micro steps: a
    backward that fails in the first micro step of the first step leaves unit a's tile never
    written; the next micro step writes it afresh (read back, it was taken for bytes changed
    under the job), the step skips, and the next one trains."""
    with tempfile.TemporaryDirectory() as nvme:
        config = {"zero": dict(CONFIG["zero"]), "data": {"grad_accum": 2},
                  "plugins": dict(CONFIG["plugins"], offload_optimizer="offload_nvme"),
                  "plugin": {"offload_nvme": {"path": nvme}}}
        model = Fragile()
        engine = zt.initialize(model, config=config)
        failure = failed_backward(engine, model)
        if failure:
            return failure
        if engine.step() is not None:
            return "the step ended after 1 of 2 micro steps"
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        report = engine.step()
        if report is None or not report["skipped"]:
            return f"the step of a failed first micro step was not skipped: {report}"
        for _ in range(2):
            engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
            report = engine.step()
        if report is None or report["skipped"]:
            return f"the step after the skipped one did not train: {report}"
        engine.close()
    return None


def checkpointed_twice():
    """At stage 3 the second arrival came after the group's reduction and was lost (or added to
    the next step): refused, saying what to do; without reentrancy it trains."""
    net = Twice(reentrant=True)
    engine = zt.initialize(net, config=CONFIG)
    try:
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        return "a block checkpointed twice (reentrant) trained at stage 3"
    except Exception as e:  # noqa: BLE001 - autograd decides the type it arrives as
        assert "arrived a second time in one backward" in str(e), repr(e)
        assert "use_reentrant=False" in str(e), repr(e)
    assert engine.step()["skipped"]  # the failed backward's step: it counts, and skips
    net.reentrant = False
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    assert not engine.step()["skipped"]
    engine.close()
    print("errors: a module checkpointed twice reentrantly is refused at stage 3; without "
          "reentrancy it trains")
    return None


def gradients_not_finite_twice():
    """fp32 without loss scaling: a step whose gradients are NaN (its loss finite) is skipped;
    a second in a row raises zt.NumericError; a checkpoint loaded between two goes on with the
    count it saved (0 after a clean step, 1 right after a skipped one)."""
    net = Fragile()
    engine = zt.initialize(net, config=CONFIG)

    def nan_step():
        out = engine(torch.randn(3, 4))
        out.register_hook(lambda g: g * float("nan"))
        engine.backward(((out - torch.randn(3, 2)) ** 2).mean())
        return engine.step()

    with tempfile.TemporaryDirectory() as folder:
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        assert not engine.step()["skipped"]
        engine.save_checkpoint(folder)
        if not nan_step()["skipped"]:
            return "a step with NaN gradients was not skipped"
        engine.load_checkpoint(folder)  # the skipped step's state is gone: no row after it
        if not nan_step()["skipped"]:
            return "the first step with NaN gradients after a load was not skipped"
        try:
            nan_step()
            return "a second step with NaN gradients in a row was skipped, not refused"
        except zt.NumericError as e:
            assert "gradients are not finite in two steps in a row" in str(e), str(e)
            assert "without loss scaling" in str(e), str(e)
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        if engine.step()["skipped"]:  # a caught one: the next clean step trains
            return "the step after the refused one did not train"
        # Saved right after a skipped one, the count goes with the checkpoint: the next such
        # step after a load is the second in a row, as in the run that saved (a clean step
        # between the save and the load set the live count back to 0).
        if not nan_step()["skipped"]:
            return "a step with NaN gradients was not skipped"
        engine.save_checkpoint(folder)
        engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
        if engine.step()["skipped"]:
            return "a clean step after a skipped one did not train"
        engine.load_checkpoint(folder)
        try:
            nan_step()
            return "after a load of a checkpoint saved right after a skipped step, another one " \
                   "was skipped, not refused"
        except zt.NumericError as e:
            assert "two steps in a row" in str(e), str(e)
    engine.close()
    print("errors: NaN gradients skip one step, and stop at a second in a row (a load goes on "
          "with the count it saved)")
    return None


def failed_initialize_takes_its_hooks_off():
    """A zt.initialize that fails once its core exists (here a unit refuses its hook) takes the
    hooks it had set off and closes its core then, not when the garbage collector gets to it:
    the module then trains under a new engine."""
    class Refusing(torch.nn.Linear):
        refuse = True

        def register_forward_hook(self, *args, **kwargs):
            if Refusing.refuse:
                raise RuntimeError("planted: no hooks here")
            return super().register_forward_hook(*args, **kwargs)

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), Refusing(4, 2))
    config = {"zero": {"stage": 0}, "plugins": {"comm": "comm_ucx",
                                                "optimizer": "optim_hybrid_adam"}}
    try:
        zt.initialize(model, config=config)
        return "an initialize whose hook was refused succeeded"
    except RuntimeError as e:
        if "planted" not in str(e):
            raise
    hooks = [len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model]
    if any(hooks):
        return f"a failed initialize left hooks on the units: {hooks}"
    Refusing.refuse = False
    engine = zt.initialize(model, config=config)
    engine.backward(engine.loss(torch.randn(3, 4), torch.randn(3, 2)))
    if engine.step()["skipped"]:
        return "the engine after a failed initialize did not train"
    engine.close()
    print("errors: a failed zt.initialize takes its hooks off; the module trains under the next")
    return None


class StderrOfThisProcess:
    """What this process writes to file descriptor 2 inside the block: the core's warnings, which
    contextlib.redirect_stderr (sys.stderr only) does not see."""

    def __enter__(self):
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        return False


def door_guards():
    """What a script would otherwise get wrong without a word: a decaying lr schedule whose end
    nobody set (run.steps' default, 10) is warned of; mean squared error of shapes that would
    broadcast is refused; a DeepSpeed dict is refused with advice that works; a DeepSpeed JSON
    without an "optimizer" section is warned of."""
    import warnings
    cosine = dict(CONFIG, run={"lr_schedule": "cosine"})
    for run, warned in ((cosine["run"], True), ({"lr_schedule": "cosine", "steps": 500}, False),
                        ({"lr_schedule": "linear", "decay_steps": 300}, False)):
        with StderrOfThisProcess() as err:
            engine = zt.initialize(torch.nn.Linear(3, 1), config=dict(CONFIG, run=run))
        engine.close()
        said = "run.lr_schedule = \"" + run["lr_schedule"] + "\" decays over run.steps = 10"
        if (said in err.text) != warned:
            return f"run {run}: warned {not warned}, said {err.text!r}"
    engine = zt.initialize(torch.nn.Linear(3, 1), config=CONFIG)
    try:
        engine.loss(torch.randn(4, 3), torch.randn(4))
        return "mean squared error of a [4, 1] output against [4] targets was broadcast"
    except RuntimeError as e:
        assert "the output's shape (4, 1) is not the targets' (4,)" in str(e), str(e)
    engine.abort()
    engine.backward(engine.loss(torch.randn(4, 3), torch.randn(4, 1)))
    engine.step()
    engine.close()
    try:
        zt.initialize(torch.nn.Linear(3, 1), config={"zero_optimization": {"stage": 2}})
        return "a DeepSpeed dict was accepted"
    except TypeError as e:
        assert "zt.initialize(model, config='ds_config.json')" in str(e), str(e)
    with tempfile.TemporaryDirectory() as folder:
        ds = pathlib.Path(folder) / "ds.json"
        for with_optimizer in (False, True):
            body = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}}
            if with_optimizer:
                body["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-3}}
            ds.write_text(json.dumps(body))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                engine = zt.initialize(torch.nn.Linear(3, 1), config=str(ds))
            engine.close()
            said = [str(w.message) for w in caught if "no \"optimizer\" section" in str(w.message)]
            if bool(said) == with_optimizer:
                return f"a DeepSpeed JSON with optimizer={with_optimizer}: warnings {said}"
    print("errors: an unset schedule length warned, broadcasting MSE refused, a DeepSpeed dict "
          "refused with working advice, a JSON without an optimizer warned")
    return None


def launcher_flags_refused():
    """python3 -m zt.launch refuses what the trainer's launcher flags refuse, before any rank: a
    negative or NaN --timeout meant no limit, a port past 65535 failed in the ranks."""
    import contextlib
    import io

    from zt import launch
    for argv, said in ((["--timeout", "-5", "x.py"], "--timeout -5.0: expected seconds"),
                       (["--timeout", "nan", "x.py"], "--timeout nan"),
                       (["--master-port", "70000", "x.py"], "--master-port 70000: expected a port"),
                       (["--nproc", "3000000000", "x.py"], "--nproc 3000000000: expected")):
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                launch.main(argv)
            return f"zt.launch {argv} was accepted"
        except SystemExit as e:
            if e.code != 2 or said not in err.getvalue():
                return f"zt.launch {argv}: exit {e.code}, said {err.getvalue()!r}"
    print("errors: zt.launch refuses a bad --timeout, --master-port and --nproc")
    return None


if __name__ == "__main__":
    failure = main()
    if failure:
        print(f"errors: {failure}", file=sys.stderr)
        sys.exit(1)
