"""The rest of the Python engine's surface on 2 ranks at stage 3: gathered_parameters reads full
values on every rank and, with modifier_rank, writes one rank's edits into every rank's shards
(a body that raises writes nothing, on any rank); full_grad after backward; memory_report and
step_report; clipping (zero.gradient_clipping) as torch.nn.utils.clip_grad_norm_ clips; a
module's floating buffers in the compute dtype with rank 0's values (bf16); a released parameter
empty (shape [0]) outside its unit's call; every rank loads the checkpoint rank 0 loads;
save_checkpoint's metrics ranked by checkpoint.keep_best; step(lr=...); train() and eval();
optimizer_state's moments as torch's AdamW's.
"""

import collections
import contextlib
import io
import os
import pathlib
import shutil
import sys
import tempfile

import torch

import zt

CONFIG = {"zero": {"stage": 3, "gradient_clipping": 0.05, "param_persistence_threshold": 0},
          "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                      "optimizer": "optim_hybrid_adam"},
          "plugin": {"optim_hybrid_adam": {"lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8,
                                           "weight_decay": 0.0, "adamw": True}}}


def model():
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def mapped_containers():
    """Inputs and targets keep their containers' types through the engine's cast: shapes,
    named tuples, torch.return_types and defaultdicts (the last two raised TypeError)."""
    from zt.engine import _map_tensors
    double = lambda t: t * 2
    x = torch.ones(2, 3)
    assert _map_tensors(x.shape, double) == torch.Size([2, 3])
    top = _map_tensors(torch.max(x, 0), double)
    assert type(top).__name__ == "max" and torch.equal(top.values, torch.full((3,), 2.0)), top
    pair = collections.namedtuple("Pair", "a b")
    assert torch.equal(_map_tensors(pair(x, 1), double).a, x * 2)
    counts = _map_tensors(collections.defaultdict(int, {"x": x}), double)
    assert isinstance(counts, collections.defaultdict) and counts["y"] == 0, counts
    assert torch.equal(counts["x"], x * 2)


def main():
    mapped_containers()
    net = model()
    engine = zt.initialize(net, config=CONFIG)
    rank, world = engine.rank, engine.world_size
    assert engine.device == torch.device("cpu"), engine.device  # launch.device's default
    reference = model()
    names = engine.parameter_names()
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"], names

    # Outside its unit's call a released parameter is empty, as DeepSpeed's are (its full shape
    # over a freed buffer crashed the rank when printed or loaded into); inside it, it is whole.
    for (name, p), want in zip(net.named_parameters(), reference.parameters()):
        assert p.shape == (0,) and p.zt_shape == want.shape, (name, p.shape, p.zt_shape)
    # A module that holds the engine's parameters (a wrapper) is refused while the engine is open.
    try:
        zt.initialize(torch.nn.Sequential(net), config=CONFIG)
        return "a wrapper of a module an open engine holds was taken"
    except ValueError as e:
        assert "0.0.weight is already held by an open engine" in str(e), str(e)
    inside = []
    hook = net[2].register_forward_pre_hook(lambda m, args: inside.append(tuple(m.weight.shape)))
    engine.eval()
    with torch.no_grad():
        engine(torch.randn(2, 6))
    engine.train()
    hook.remove()
    assert inside == [(3, 8)], inside
    assert net[2].weight.shape == (0,), net[2].weight.shape
    try:
        net.load_state_dict(reference.state_dict())
        return "load_state_dict into released parameters was taken"
    except RuntimeError as e:
        assert "size mismatch for 0.weight" in str(e), str(e)

    with engine.gathered_parameters(["0.weight", "2.bias"]) as full:
        assert torch.equal(full["0.weight"], reference[0].weight.detach())
        assert torch.equal(full["2.bias"], reference[2].bias.detach())
    # A set (its order differs between ranks: string hashes are salted per process) and the
    # module's own parameters, DeepSpeed's form, name the same values.
    with engine.gathered_parameters({"0.weight", "0.bias", "2.bias"}) as full:
        assert torch.equal(full["0.weight"], reference[0].weight.detach())
        assert torch.equal(full["0.bias"], reference[0].bias.detach())
    with engine.gathered_parameters([net[0].weight, net[2].bias]) as full:
        assert sorted(full) == ["0.weight", "2.bias"], sorted(full)
        assert torch.equal(full["2.bias"], reference[2].bias.detach())
    try:
        with engine.gathered_parameters(torch.zeros(3)):
            pass
        return "a tensor that is no parameter was taken"
    except TypeError as e:
        assert "no parameter of the engine's module" in str(e), str(e)
    # Ranks that list other parameters are refused on every rank, naming the way out.
    try:
        with engine.gathered_parameters(["0.weight", "2.bias"] if rank == 0 else
                                        ["2.bias", "0.weight"]):
            pass
        return "ranks asking for parameters in other orders were not refused"
    except zt.ConfigError as e:
        assert "in the same order" in str(e), str(e)
    # Rank 1's edit counts, on every rank.
    with engine.gathered_parameters("2.bias", modifier_rank=1) as full:
        full["2.bias"].fill_(0.25 if rank == 1 else -7.0)
    assert torch.equal(engine.full_param("2.bias"), torch.full((3,), 0.25))
    # DeepSpeed's form: the module's own parameter holds its full value in the block, and rank
    # 0's edit of it in place counts (at stage 3 it was an empty tensor, the edit lost).
    with engine.gathered_parameters(net[2].bias, modifier_rank=0):
        assert net[2].bias.shape == (3,), net[2].bias.shape
        assert torch.equal(net[2].bias.data, torch.full((3,), 0.25))
        if rank == 0:
            net[2].bias.data.fill_(0.5)
    assert net[2].bias.shape == (0,), net[2].bias.shape  # released again after the block
    assert torch.equal(engine.full_param("2.bias"), torch.full((3,), 0.5))
    with engine.gathered_parameters([net[2].bias], modifier_rank=1):
        if rank == 1:
            net[2].bias.data = torch.full((3,), 0.25)
    assert torch.equal(engine.full_param("2.bias"), torch.full((3,), 0.25))
    # model.parameters(), a generator, is read once and its parameters hold their values too.
    with engine.gathered_parameters(net[2].parameters()) as full:
        assert sorted(full) == ["2.bias", "2.weight"], sorted(full)
        assert net[2].weight.shape == (3, 8) and net[2].bias.shape == (3,)
    with torch.no_grad():
        reference[2].bias.fill_(0.25)
    # A body that raises writes nothing anywhere; its rank gets the body's own exception (not
    # the core's word for it), the others the core's.
    try:
        with engine.gathered_parameters("0.bias", modifier_rank=0) as full:
            full["0.bias"].fill_(99.0)
            if rank == 0:
                raise ValueError("the body's own error")
        return "a raising body did not raise"
    except ValueError as e:
        if rank != 0:
            return f"rank {rank} got the body's error of rank 0: {e}"
        assert "the body's own error" in str(e), str(e)
    except zt.Error:
        if rank == 0:
            return "rank 0 got the core's error instead of its body's ValueError"

    assert torch.equal(engine.full_param("0.bias"), reference[0].bias.detach())

    opt = torch.optim.AdamW(reference.parameters(), lr=1e-2, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0)
    g = torch.Generator().manual_seed(11)
    for _ in range(3):
        x, y = torch.randn(4 * world, 6, generator=g), torch.randn(4 * world, 3, generator=g)
        mine = slice(rank * 4, rank * 4 + 4)
        engine.backward(torch.nn.functional.mse_loss(engine(x[mine]), y[mine]))
        opt.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(reference(x[r * 4:r * 4 + 4]), y[r * 4:r * 4 + 4])
                   for r in range(world)) / world
        loss.backward()
        for name, want in reference.named_parameters():
            full_grad = engine.full_grad(name)
            assert torch.allclose(full_grad, want.grad, rtol=1e-5, atol=1e-7), name
        norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.05)
        report = engine.step()
        assert abs(report["grad_norm"] - norm.item()) <= 1e-5 * norm.item(), (report, norm)
        opt.step()
    for name, want in reference.named_parameters():
        got = engine.full_param(name)
        excess = ((got - want.detach()).abs() - (1e-6 + 1e-5 * want.detach().abs())).max().item()
        assert excess <= 0, (name, excess)
        # optimizer_state: the full moments, as torch's AdamW holds them.
        for state in ("exp_avg", "exp_avg_sq"):
            moment, expected = engine.optimizer_state(name, state), opt.state[want][state]
            assert moment.shape == expected.shape, (name, state, moment.shape)
            assert torch.allclose(moment, expected, rtol=1e-4, atol=1e-9), (name, state)

    memory = engine.memory_report()
    # fp32 stage 3: the master weights are the parameter shard itself (no second copy).
    assert memory["params_shard"] > 0 and memory["optimizer_states"] > 0, memory
    step = engine.step_report()
    assert step["step"] == 3 and step["times"]["forward_backward"] > 0, step
    failure = loads_agree(engine, rank)
    if failure:
        return failure
    engine.close()
    # Closed, the module holds its trained values again, usable without zt.
    for (name, got), want in zip(net.named_parameters(), reference.parameters()):
        assert got.numel() == want.numel() and torch.allclose(got, want, rtol=1e-5, atol=1e-6), name
    assert net(torch.randn(2, 6)).shape == (2, 3)

    # A second engine in the same process, after the first closed; two Parameter objects over
    # one storage are one tied parameter.
    shared = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False))
    shared[1].weight = torch.nn.Parameter(shared[0].weight.data)  # same storage, new object
    engine = zt.initialize(shared, config=dict(CONFIG, launch={"timeout_s": 77}))
    # Its own launch.timeout_s bounds its waits (it kept the first engine's).
    assert engine.describe().endswith("timeout 77 s"), engine.describe()
    assert shared[1].weight is shared[0].weight
    assert engine.parameter_names() == ["0.weight"], engine.parameter_names()
    engine.close()
    # One the other's transpose over the same storage is no tie zt can keep: refused by name
    # (each trained apart, where PyTorch updates the one storage).
    transposed = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False),
                                     torch.nn.Linear(4, 4, bias=False))
    transposed[1].weight = torch.nn.Parameter(transposed[0].weight.data.t())
    try:
        zt.initialize(transposed, config=CONFIG)
        return "a parameter over another's transposed storage was taken as a parameter of its own"
    except ValueError as e:
        assert "0.weight and 1.weight share elements of one storage in different shapes" in \
            str(e), str(e)
    # Column blocks of one fused weight share a storage but no element: each is a parameter of
    # its own, as in PyTorch.
    fused = torch.randn(4, 8)
    blocks = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False),
                                 torch.nn.Linear(4, 4, bias=False))
    blocks[0].weight = torch.nn.Parameter(fused[:, :4])
    blocks[1].weight = torch.nn.Parameter(fused[:, 4:])
    engine = zt.initialize(blocks, config=CONFIG)
    assert engine.parameter_names() == ["0.weight", "1.weight"], engine.parameter_names()
    engine.close()
    # Closed without restoring, a stage-3 module holds no values (its parameters were released):
    # a new engine refuses it by name instead of broadcasting empty storage.
    released = model()
    zt.initialize(released, config=CONFIG).close(restore=False)
    assert released[0].weight.shape == (0,), released[0].weight.shape
    try:
        zt.initialize(released, config=CONFIG)
        return "a module whose values a closed engine released was taken"
    except ValueError as e:
        assert "holds no values" in str(e), str(e)
    if rank == 0:
        print("engine_api: gathered_parameters read and write, full_grad, clipping, reports, "
              "a weight tied by storage")
    return None


def loads_agree(engine, rank):
    """Every rank loads the checkpoint rank 0 loads: rank 0 resolves the folder's `latest`, the
    others open the folder it names (one that resolved it itself, in a node-local folder, loaded
    other states); a checkpoint rank 0 cannot open fails the load on every rank, none loads."""
    base = pathlib.Path(tempfile.gettempdir()) / f"zt-engine-api-{os.environ['MASTER_PORT']}"
    if rank == 0:
        shutil.rmtree(base, ignore_errors=True)  # a failed run's, on a port drawn again
    engine.all_reduce(torch.zeros(1))
    try:
        engine.save_checkpoint(base / "a")  # step 3
        if rank == 0:
            shutil.copytree(base / "a", base / "b")
        x = torch.randn(4, 6)
        engine.backward(torch.nn.functional.mse_loss(engine(x), torch.zeros(4, 3)))
        engine.step()
        engine.save_checkpoint(base / "a")  # step 4; b's latest is still step 3
        # Rank 1 names b: it loads rank 0's step 4 all the same.
        engine.load_checkpoint(base / ("a" if rank == 0 else "b"))
        if engine.global_steps != 4:
            return f"rank {rank} loaded step {engine.global_steps}, rank 0 step 4"
        try:
            engine.load_checkpoint(base / ("missing" if rank == 0 else "a"))
            return f"rank {rank} loaded a checkpoint rank 0 could not open"
        except zt.ConfigError as e:
            want = "missing" if rank == 0 else "rank 0 could not open the checkpoint"
            if want not in str(e):
                return f"rank {rank}: {e}"
        # missing_ok: rank 0 finds nothing there, so no rank loads, though rank 1's own path
        # holds a checkpoint (as DeepSpeed's (None, None); a first run resumes with it). An
        # empty folder is nothing too.
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            state = engine.load_checkpoint(base / ("missing" if rank == 0 else "a"),
                                           missing_ok=True)
        if state is not None or engine.global_steps != 4:
            return f"rank {rank}: missing_ok loaded {state}, at step {engine.global_steps}"
        said = f"zt: load_checkpoint: no checkpoint at {base / 'missing'}: nothing loaded"
        if (said in printed.getvalue()) != (rank == 0):
            return f"rank {rank}: missing_ok printed {printed.getvalue()!r}"
        if rank == 0:
            (base / "empty").mkdir()
        if engine.load_checkpoint(base / "empty", missing_ok=True) is not None:
            return f"rank {rank}: missing_ok found a checkpoint in an empty folder"
        if engine.load_checkpoint(base / "a", missing_ok=True)["step"] != 4:
            return f"rank {rank}: missing_ok did not load a checkpoint that is there"
        # A step folder named on purpose without its manifest (a copy cut short) is no first
        # run: refused on every rank, none loading.
        if rank == 0:
            (base / "cut" / "step-00000007").mkdir(parents=True)
        try:
            engine.load_checkpoint(base / "cut" / "step-00000007", missing_ok=True)
            return f"rank {rank}: missing_ok took a step folder without its manifest for none"
        except zt.ConfigError:
            pass
        # No rank loaded, so the next load meets on every rank. Back at step 3, which the caller
        # compares with its reference.
        engine.load_checkpoint(base / "a", "step-00000003")
    finally:
        engine.all_reduce(torch.zeros(1))  # no rank removes the folders while another reads them
        if rank == 0:
            shutil.rmtree(base, ignore_errors=True)
    return None


class Scaled(torch.nn.Module):
    """A unit that multiplies by a floating buffer (as torchscript_models.Buffered)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return self.lin(x) * self.scale


def buffers_in_bf16():
    """In bf16, an fp32 buffer promoted the unit's output and the next unit's bf16 weights
    refused it; and a buffer each rank drew itself differed between ranks."""
    torch.manual_seed(4)
    net = torch.nn.Sequential(Scaled(), torch.nn.Linear(8, 2))
    expected = net[0].scale.clone()
    net[0].scale += 10 * int(os.environ.get("RANK", "0"))  # each rank's own value
    config = dict(CONFIG, precision={"compute": "bf16"})
    engine = zt.initialize(net, config=config)
    scale = net[0].scale
    if scale.dtype != torch.bfloat16 or not torch.equal(scale, expected.to(torch.bfloat16)):
        return f"rank {engine.rank}: the buffer is {scale} ({scale.dtype}), not rank 0's in bf16"
    engine.backward(engine.loss(torch.randn(4, 8), torch.randn(4, 2)))
    if engine.step() is None:
        return "the bf16 step with a buffer did not run"
    engine.close()
    # Closed, the module works without zt: fp32 parameters beside a bf16 buffer made its
    # forward raise on fp32 inputs.
    if scale.dtype != torch.float32:
        return f"after close the buffer is {scale.dtype}, not its own float32"
    out = net(torch.randn(4, 8))
    if out.dtype != torch.float32:
        return f"the closed module's forward gave {out.dtype}"
    return None


class WeightedLoss(torch.nn.Module):
    """A module with its own loss over targets that are not one tensor."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.lin(x)

    def loss(self, out, targets):
        return targets["weight"] * torch.nn.functional.mse_loss(out, targets["y"])


def own_loss_with_structured_targets():
    """engine.loss hands the module's own loss its targets as given, tensors on the engine's
    device: a dict with a float in it too."""
    torch.manual_seed(5)
    engine = zt.initialize(torch.nn.Sequential(WeightedLoss()), config=CONFIG)
    # Sequential has no loss of its own: the unit's is the one asked for.
    engine.module.loss = engine.module[0].loss
    y = torch.randn(4, 2)
    loss = engine.loss(torch.randn(4, 8), {"weight": 0.5, "y": y})
    if not (loss.dim() == 0 and torch.isfinite(loss)):
        return f"the weighted loss is {loss}"
    engine.backward(loss)
    if engine.step() is None:
        return "the step after a weighted loss did not run"
    engine.close()
    return None


class HeadInLoss(torch.nn.Module):
    """A model whose loss runs a module of its own (as AdaptiveLogSoftmaxWithLoss does), and a
    parameter of the root itself."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.body = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 2)
        self.temperature = torch.nn.Parameter(torch.ones(2))

    def forward(self, x):
        return self.body(x)

    def loss(self, out, y):
        return torch.nn.functional.mse_loss(self.head(out) * self.temperature, y)


def loss_runs_inside_the_forward():
    """engine.loss runs the module's loss inside the forward: under torch.no_grad() its head was
    "called outside its engine", and at stage 3 the root's parameter was empty there."""
    engine = zt.initialize(HeadInLoss(), config=CONFIG)
    x, y = torch.randn(4, 8), torch.randn(4, 2)
    with torch.no_grad():
        before = engine.loss(x, y)
    engine.backward(engine.loss(x, y))
    engine.step()
    with torch.no_grad():
        after = engine.loss(x, y)
    engine.close()
    if not (torch.isfinite(before) and torch.isfinite(after)):
        return f"evaluated losses {before}, {after}"
    return None


def best_saves_rate_and_mode():
    """save_checkpoint's metrics rank the saves checkpoint.keep_best keeps: dir/best names the
    lowest, and a save without the metric is refused on every rank, nothing saved. step(lr=0)
    applies a rate of 0 (weight decay 0: nothing moves). train()/eval() set the module's mode."""
    rank = int(os.environ["RANK"])
    # keep_best's rule for a trainer job: a validation loss at every save.
    config = dict(CONFIG, checkpoint={"keep_best": "val_loss", "keep_last": 1, "every_steps": 1},
                  eval={"every_steps": 1})
    engine = zt.initialize(model(), config=config)
    engine.eval()
    if engine.module.training:
        return "engine.eval() left the module in training mode"
    engine.train()
    if not engine.module.training:
        return "engine.train() left the module in eval mode"
    base = pathlib.Path(tempfile.gettempdir()) / f"zt-engine-best-{os.environ['MASTER_PORT']}"
    if rank == 0:
        shutil.rmtree(base, ignore_errors=True)
    engine.all_reduce(torch.zeros(1))
    try:
        saved = {}
        for val_loss in (3.0, 1.0, 2.0):
            engine.backward(torch.nn.functional.mse_loss(engine(torch.randn(4, 6)),
                                                         torch.zeros(4, 3)))
            engine.step()
            saved[val_loss] = engine.save_checkpoint(base, metrics={"val_loss": val_loss})
        best = (base / "best").read_text().strip() if (base / "best").exists() else None
        if best is None or os.path.basename(saved[1.0]) not in best:
            return f"dir/best is {best!r}, not the save of val_loss 1.0 ({saved[1.0]})"
        before = {name: engine.full_param(name).clone() for name in engine.parameter_names()}
        engine.backward(torch.nn.functional.mse_loss(engine(torch.randn(4, 6)), torch.zeros(4, 3)))
        engine.step(lr=0.0)
        for name, value in before.items():
            if not torch.equal(engine.full_param(name), value):
                return f"{name} moved in a step at lr 0"
        try:
            engine.save_checkpoint(base)
            return "a save without the val_loss keep_best ranks by was taken"
        except zt.ConfigError as e:
            if "checkpoint.keep_best" not in str(e) or "nothing was saved" not in str(e):
                return f"the refused save said: {e}"
        # One rank's metric that is no number refuses the save on every rank, none left waiting.
        try:
            engine.save_checkpoint(base, metrics={"val_loss": None if rank == 1 else 1.0})
            return f"rank {rank} saved with rank 1's val_loss None"
        except zt.ConfigError as e:
            want = "is None, not a number" if rank == 1 else "rank 1's metrics were refused"
            if want not in str(e):
                return f"rank {rank}'s refused save said: {e}"
        engine.load_checkpoint(base / "best")
        if engine.global_steps != 2:
            return f"dir/best loaded step {engine.global_steps}, not 2"
    finally:
        engine.all_reduce(torch.zeros(1))
        engine.close()
        if rank == 0:
            shutil.rmtree(base, ignore_errors=True)
    return None


if __name__ == "__main__":
    failure = (main() or buffers_in_bf16() or own_loss_with_structured_targets()
               or loss_runs_inside_the_forward() or best_saves_rate_and_mode())
    if failure:
        print(f"engine_api: {failure}", file=sys.stderr)
        sys.exit(1)
