"""zt's engine for a plain torch.nn.Module whose own forward runs as written.

Units are the modules the forward calls: the top-level children in order, with ModuleList and
ModuleDict containers (which are never called themselves) opened up, and modules without
parameters left out; or the list the caller gives. Parameters the root module holds directly,
and those of modules the caller's list leaves out, form a unit of their own, gathered for the
whole forward. Module hooks tell the engine when a unit is entered and left
(docs/architecture.md, "From Python"): at ZeRO stage 3 its parameters are gathered on entry (the
next units prefetched) and released on exit; its outputs carry a hook that gathers them again
before its backward, and backward releases each group once its gradients are taken.
"""

import atexit
import contextlib
import copy
import dataclasses
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

from . import _zt
from .config import config_source

# Held, not weakly: an engine nobody closed was destroyed by the garbage collector (a cycle
# through the module's hooks) at a different moment on each rank, and its shutdown is
# collective. An engine lives until close() or the process's exit.
# A dict (insertion-ordered): at exit the engines close, collectively, in the same order on
# every rank; a set's order followed object addresses, which differ between ranks.
_open_engines = {}


def _dying_of_uncaught_exception():
    # Python records an exception nothing caught before it prints it (sys.last_value; 3.12 adds
    # sys.last_exc); an interactive session records every one it prints, so it does not count.
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return None
    return getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)


@atexit.register
def _close_all():
    died = _dying_of_uncaught_exception()
    if died is not None and any(e._core.world > 1 for e in _open_engines if not e._closed):
        # This rank's script raised where the others go on to their next collective: a
        # collective shutdown here waited for them until launch.timeout_s, holding the launcher
        # back from stopping the job. Leave at once instead; the launcher names this rank and
        # stops the others. (What registered at exit before zt, and open files Python would
        # flush, are skipped with it; alone in its job a rank closes as usual.) Its offload
        # files go first: under torchrun no launcher removes them.
        removed = _zt.remove_own_offload_files()
        if removed:
            print(f"zt: leaving on an uncaught exception; removed this rank's offload files: "
                  f"{' '.join(removed)}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130 if isinstance(died, KeyboardInterrupt) else 1)
    # The communicators' shutdown is collective: leave the job before the interpreter goes.
    for engine in reversed(list(_open_engines)):
        engine.close(restore=False)
    _zt.leave_job()


class _CallableCount(int):
    """An int that returns itself when called: DeepSpeed's engine has methods where zt's has
    properties (gradient_accumulation_steps()), and a script written for either runs."""

    def __call__(self):
        return int(self)


def _tensors(value):
    """Every tensor in a unit's output (a tensor, or tuples, lists, dicts and dataclasses of
    them). A unit whose output the walk missed got no hook on it, and at stage 3 the unit
    before it trained to other weights than the same model returning its tensor, silently (a
    test saw every element of that unit's weight differ)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [t for f in dataclasses.fields(value) for t in _tensors(getattr(value, f.name))]
    return []


def _tie_shared_storage(model):
    """Two Parameter objects over the same storage (a tied weight rebuilt from a state dict, say)
    become one: the later module is pointed at the first's Parameter, as DeepSpeed does for
    shared parameters, since the engine re-points the parameters it holds into its buffers."""
    first = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            # An empty storage (a parameter an engine released) ties nothing.
            if p is None or p.storage().size() == 0:
                continue
            key = (p.storage().data_ptr(), p.dtype, tuple(p.shape), p.stride(),
                   p.storage_offset())
            owner = first.setdefault(key, p)
            if owner is not p:
                module._parameters[name] = owner


def _refuse_partly_shared_storage(model):
    """Two parameters over common elements of one storage with different layouts (one the other's
    transpose, or a slice of it) cannot be tied as one: the engine gives each a buffer of its
    own, and from the first step they train apart, where PyTorch updates the one storage.
    Refused by name. Parameters over disjoint parts of one buffer (the column blocks of a fused
    weight, views into one flat buffer) share no element and are fine."""
    layouts = {}  # (storage, dtype, shape, stride, offset) -> the first (name, parameter)
    for name, p in model.named_parameters():
        if p.storage().size() > 0 and p.numel() > 0:
            key = (p.storage().data_ptr(), p.dtype, tuple(p.shape), p.stride(),
                   p.storage_offset())
            layouts.setdefault(key, (name, p))
    by_storage = {}
    for key, (name, p) in layouts.items():
        # The bytes each spans, a quick bound: only parameters whose spans meet are compared
        # element by element.
        extent = 1 + sum((n - 1) * s for n, s in zip(p.shape, p.stride()))
        begin = p.storage_offset() * p.element_size()
        by_storage.setdefault(key[0], []).append((begin, begin + extent * p.element_size(), name, p))
    starts = {}  # name -> _element_starts, made once for a parameter compared more than once

    def starts_of(name, p):
        if name not in starts:
            starts[name] = _element_starts(p)
        return starts[name]

    for spans in by_storage.values():
        spans.sort(key=lambda span: span[:3])
        for i, (_, end, first, a) in enumerate(spans):
            for begin, _, second, b in spans[i + 1:]:
                if begin >= end:
                    break
                if _share_bytes(a, b, starts_of(first, a), starts_of(second, b)):
                    raise ValueError(
                        f"zt.initialize: {first} and {second} share elements of one storage in "
                        "different shapes or strides (a view, a slice or a transpose of one "
                        "another), which zt cannot keep as one parameter: they would train "
                        "apart; tie them as one Parameter object (or give each its own storage "
                        "with .clone())")


def _element_starts(p):
    """The byte offset in its storage of each element `p` uses, as many as its elements (not
    its storage's); an expanded, zero-stride dimension adds none."""
    index = torch.tensor([p.storage_offset()])
    for n, s in zip(p.shape, p.stride()):
        if n > 1 and s != 0:
            index = (index.unsqueeze(-1) + torch.arange(n) * s).flatten()
    return index * p.element_size()


def _share_bytes(a, b, a_starts, b_starts):
    """Whether `a` and `b` use a byte in common: elements of one size meet where they start at
    the same byte; of two sizes (one storage viewed as fp32 and as bf16), byte by byte."""
    if a.element_size() != b.element_size():
        a_starts = (a_starts.unsqueeze(-1) + torch.arange(a.element_size())).flatten()
        b_starts = (b_starts.unsqueeze(-1) + torch.arange(b.element_size())).flatten()
    return bool(torch.isin(a_starts, b_starts).any())


def _check_given_units(units, label):
    """Refuses a units= list that cannot be, naming the entry by its place: what is no module (a
    name, "blocks.0", failed later with an AttributeError about str), and a module listed twice or
    with one of its own submodules, whose parameters two units gathered and released (a forward
    that failed far from the cause). Two units that share a parameter, as tied weights do, are
    fine; and only a list the caller gave is judged, so the default split of a model whose
    children share a whole module (T5's encoder and decoder share its embedding) is taken."""
    listed = {}  # id(module) -> its index in units
    for i, m in enumerate(units):
        if not isinstance(m, torch.nn.Module):
            raise TypeError(f"zt.initialize: units[{i}] is a {type(m).__name__}, not a module: "
                            "give the model's modules themselves (e.g. "
                            "units=[model.embed, *model.blocks, model.head])")
        listed.setdefault(id(m), i)
    for i, m in enumerate(units):
        inner = next((listed[id(c)] for c in m.modules()
                      if id(c) in listed and (c is not m or listed[id(c)] != i)), None)
        if inner is not None:
            how = ("is listed twice" if units[inner] is m
                   else f"holds units[{inner}] ({label(units[inner])})")
            raise ValueError(f"zt.initialize: units[{i}] ({label(m)}) {how}: list a module or "
                             "its children, not both, and each once")


def _unit_modules(model):
    units = []

    def expand(module):
        for child in module.children():
            if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)):
                expand(child)
            elif any(True for _ in child.parameters()):
                units.append(child)

    expand(model)
    return units


class Engine:
    """What zt.initialize returns: call it as the model, then backward(loss) and step()."""

    def __init__(self, model, config=None, overrides=(), units=None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError("zt.initialize: model must be a torch.nn.Module")
        if isinstance(model, torch.jit.ScriptModule):
            raise TypeError("zt.initialize takes a plain nn.Module; a TorchScript file trains "
                            "with trainer --config (model.kind = \"torchscript\")")
        frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
        if frozen:
            # Every parameter the engine shards is trained (its gradient is reduced into the
            # shard); a frozen one failed deep in the engine, after the rendezvous.
            shown = ", ".join(frozen[:3]) + (f" and {len(frozen) - 3} more" if len(frozen) > 3
                                               else "")
            raise ValueError(f"zt.initialize: {shown} do not require grad, and zt trains every "
                             "parameter of the model it is given: pass only the trained part "
                             "(keep a frozen part outside it, or as buffers), or set "
                             "requires_grad=True")
        for engine in list(_open_engines):
            if engine._closed:
                continue
            held = [n for n, p in model.named_parameters() if id(p) in engine._param_ids]
            if engine.module is model or held:
                shown = "this module is" if engine.module is model else f"{held[0]} is"
                raise ValueError(f"zt.initialize: {shown} already held by an open engine "
                                 "(its hooks are on it, its parameters point into that engine's "
                                 "buffers); close that engine first (engine.close())")
        released = [n for n, p in model.named_parameters()
                    if p.numel() == 0 and math.prod(getattr(p, "zt_shape", (0,))) > 0]
        if released:
            raise ValueError(f"zt.initialize: {released[0]} holds no values: an engine closed "
                             "without restoring them (restore=False, or a close that failed) "
                             "left it released; close with restore=True, or give the parameters "
                             "values again (p.data = tensor, or build the module again)")
        _refuse_partly_shared_storage(model)
        self._closed = False
        self.module = model
        _tie_shared_storage(model)
        # At stage 3 a parameter is empty outside its unit's call: its shape stays readable here,
        # as DeepSpeed's ds_shape.
        for p in model.parameters():
            p.zt_shape = p.shape
        self._param_ids = {id(p) for p in model.parameters()}
        modules = list(units) if units is not None else _unit_modules(model)
        names = {}
        for name, p in model.named_parameters():
            names.setdefault(id(p), name)
        module_names = {id(m): n for n, m in model.named_modules()}

        def label(m):  # for messages: the root module's name is ""
            return module_names.get(id(m)) or type(m).__name__

        if units is not None:
            _check_given_units(modules, label)
        covered = set()
        unit_params = []
        self._unit_names = []
        for i, m in enumerate(modules):
            name = module_names.get(id(m), type(m).__name__)
            params = []
            for p in m.parameters():
                if id(p) not in names:
                    raise ValueError(f"zt.initialize: units[{i}] ({label(m)}) holds a parameter "
                                     "that is not the model's: give modules of the model "
                                     "passed to zt.initialize")
                params.append((names[id(p)], p))
                covered.add(id(p))
            unit_params.append((name, params))
            self._unit_names.append(name)
        root = [(n, p) for n, p in model.named_parameters() if id(p) not in covered]
        self._root = None
        if root:
            unit_params.insert(0, ("<root>", root))
            self._unit_names.insert(0, "<root>")
            self._root = 0
        path, text, overrides = config_source(config, overrides, "zt.initialize")
        # Before the core: it moves every parameter into its own buffers on its device, and
        # close(restore=True) puts each back where it was.
        self._param_devices = {n: p.device for n, p in model.named_parameters()}
        self._core = _zt.ModuleEngine(path, text, overrides, unit_params)
        self._hooks = []
        # From here the core exists: a failure (a collective that raised, a Ctrl-C that came
        # while the core was built) takes the hooks off and closes it now, on every rank at the
        # same point, not when the garbage collector gets to it (a collective shutdown at a
        # different moment on each rank, after the job had left). The parameters are not put
        # back (that is a collective at stage 3, which a failure on one rank would leave
        # waiting): at stages 0-2 they hold their values, at stage 3 the next initialize says
        # they hold none.
        try:
            self._dtype = {"fp32": torch.float32, "bf16": torch.bfloat16,
                           "fp16": torch.float16}[self._core.compute]
            # Where the engine computes (launch.device): inputs go there, as the parameters did.
            self.device = torch.device(self._core.device)
            self._stage = self._core.stage
            # As the trainer does for a TorchScript model: floating buffers in the compute dtype (an
            # fp32 one met bf16 activations and promoted the unit's output, which the next unit's
            # bf16 weights refused), and rank 0's values on every rank (one drawn from each rank's
            # own seed differed).
            # close(restore=True) gives them their own dtype and device back, as it gives the
            # parameters fp32 on their own device.
            self._buffer_dtypes = [(b, b.dtype, b.device) for b in model.buffers()]
            self._core.share_buffers(list(model.buffers()))
            first = 1 if self._root is not None else 0
            for i, m in enumerate(modules):
                u = i + first
                self._hooks.append(m.register_forward_pre_hook(self._entering(u)))
                self._hooks.append(m.register_forward_hook(self._leaving(u)))
            self._open = False
            self._in_backward = False  # torch.utils.checkpoint recomputes units in backward
            self._stack = []
            self._micro = 0
            self._awaiting_step = False  # a backward ran and its step() call has not yet
            self._last_step = None
        except BaseException:
            for h in self._hooks:
                h.remove()
            self._hooks = []
            self._closed = True
            self._core.close()
            raise
        _open_engines[self] = None
        if units is None:
            self._note_large_unit(unit_params, modules, 1 if self._root is not None else 0)

    def _note_large_unit(self, unit_params, modules, first):
        """Rank 0, at stage 3: the default split opens only ModuleList and ModuleDict, so a
        model whose layers sit in an nn.Sequential (or a wrapper such as GPT2LMHeadModel's
        transformer) is a unit or two, each gathered whole: no memory saved. Said once, with the
        way to split it."""
        if self.rank != 0 or self._stage != 3 or not modules:
            return
        # zt_shape: at stage 3 the core has released the parameters by now.
        sizes = [sum(math.prod(p.zt_shape) for _, p in params) for _, params in unit_params]
        total = sum(sizes)
        u = max(range(first, len(sizes)), key=lambda i: sizes[i])
        module = modules[u - first]
        parts = [c for c in module.children() if any(True for _ in c.parameters())]
        if total == 0 or 2 * sizes[u] <= total or len(parts) < 2:
            return
        print(f"zt: note: unit {u} ({self._unit_names[u]}) holds {100 * sizes[u] // total}% of "
              "the parameters, and stage 3 gathers a unit whole: pass units=[...] listing its "
              f"parts (its {len(parts)} children, or the blocks inside them) to gather them one "
              "at a time", flush=True)

    # The hooks: a unit entered and left inside the engine's forward.
    def _entering(self, u):
        def hook(module, inputs):
            if not self._open and not self._in_backward:
                raise RuntimeError(f"zt: unit {self._unit_names[u]} was called outside its "
                                   "engine; run the model as engine(...)")
            self._stack.append(u)
            self._core.enter_unit(u)
        return hook

    def _leaving(self, u):
        def hook(module, inputs, output):
            self._core.leave_unit(u, self._tensors_left(u, output))
            self._stack.pop()
        return hook

    def _tensors_left(self, u, output):
        """The tensors unit `u` returned, for the core's hooks on them. At stage 3 an output with
        none is refused where it happens, naming the unit: its backward would go unseen (the core
        hooks a unit's outputs only there), its parameters released and never gathered again,
        and the units before it trained on wrong gradients."""
        tensors = _tensors(output)
        if (not tensors and self._stage == 3 and torch.is_grad_enabled()
                and not self._in_backward):
            raise TypeError(f"zt: unit {u} ({self._unit_names[u]}) returned "
                            f"{type(output).__name__}, in which zt finds no tensor (it looks "
                            "into tensors, tuples, lists, dicts and dataclasses); return its "
                            "tensors in one of those, or list units=[...] whose outputs are")
        return tensors

    @property
    def rank(self):
        return self._core.rank

    @property
    def world_size(self):
        return self._core.world

    @property
    def global_rank(self):
        """DeepSpeed's name for rank."""
        return self._core.rank

    @property
    def gradient_accumulation_steps(self):
        """An int that may also be called, as DeepSpeed's method is:
        range(engine.gradient_accumulation_steps()) and range(engine.gradient_accumulation_steps)
        both count the micro steps of a step."""
        return _CallableCount(self._core.grad_accum)

    def get_lr(self):
        """As DeepSpeed's: the learning rate of each parameter group, here one, the rate the
        next step() takes from the config's schedule (run.lr_schedule) when given none."""
        return [self._core.scheduled_lr()]

    @property
    def global_steps(self):
        """Optimizer steps taken (skipped ones included), as the trainer counts them."""
        return self._core.steps

    def is_gradient_accumulation_boundary(self):
        """As DeepSpeed's: True through the whole last micro step of an accumulation (its
        forward, backward and step() call), so code that runs before backward can ask."""
        current = self._micro + (0 if self._awaiting_step else 1)
        return current >= self._core.grad_accum

    def describe(self):
        return self._core.describe()

    def __call__(self, *args, **kwargs):
        """The model's forward, as written. With autograd on, a training micro step follows
        (backward(loss)); under torch.no_grad() it is an evaluation. Floating inputs are cast
        to the compute dtype ([precision] compute), and every tensor goes to the engine's device."""
        return self._forward(args, kwargs, None)

    forward = __call__

    def _forward(self, args, kwargs, then):
        """The forward of __call__; `then(out)`, where given, runs inside it (the loss: modules
        and root parameters it uses are still the forward's), and its result is returned."""
        if self._open:
            raise RuntimeError("zt: the previous forward has no engine.backward(loss) yet (a "
                               "plain loss.backward() is not the engine's: call "
                               "engine.backward(loss)); call engine.abort() to drop it. An "
                               "evaluation runs under torch.no_grad() (engine.eval() only sets "
                               "the module's mode, as in PyTorch)")
        args = [self._cast(a) for a in args]
        kwargs = {k: self._cast(v) for k, v in kwargs.items()}
        training = torch.is_grad_enabled()
        if not training and self._micro != 0:
            raise RuntimeError(f"zt: an evaluation (a forward under torch.no_grad()) after "
                               f"{self._micro} micro steps without engine.step(): the step's "
                               "gradients are taken unit by unit; evaluate after engine.step()")
        if training and self._micro >= self._core.grad_accum:
            raise RuntimeError(f"zt: {self._micro} micro steps without engine.step(); call "
                               "engine.step() after every backward (it updates at the end of "
                               "data.grad_accum micro steps)")
        self._core.begin_forward(training)
        if training:
            self._awaiting_step = False  # a step() called once per accumulation, not per backward
        self._open = True
        self._stack = []
        try:
            if self._root is not None:
                self._core.enter_unit(self._root)
            out = self.module(*args, **kwargs)
            if then is not None:
                out = then(out)
            if self._root is not None:
                self._core.leave_unit(self._root, self._tensors_left(self._root, out))
        except BaseException as e:
            unit = self._stack[-1] if self._stack else None
            self._open = False
            self._core.abort_forward()
            if unit is not None and isinstance(e, Exception) and hasattr(e, "add_note"):
                e.add_note(f"zt: raised in unit {unit} ({self._unit_names[unit]}) of the "
                           "model's forward")
            raise
        if not training:
            self._core.end_forward()
            self._open = False
        return out

    def loss(self, inputs, targets):
        """The model's forward on `inputs` and its loss against `targets`: the module's own
        loss(output, targets) when it has one, else cross entropy for integer targets (logits
        [..., vocab]) and mean squared error for floating ones, computed in fp32. The loss runs
        inside the forward: a module it calls, and the root's parameters, are the forward's."""
        def loss_of(out):
            y = self._place(targets)
            if hasattr(self.module, "loss"):
                return self.module.loss(out, y)
            if not y.is_floating_point():
                return F.cross_entropy(out.float().reshape(-1, out.size(-1)), y.reshape(-1))
            if out.shape != y.shape:
                # F.mse_loss broadcasts [B, 1] against [B] to [B, B] with only a warning
                # (and raises RuntimeError for shapes that do not broadcast, as this does).
                raise RuntimeError(f"engine.loss: the output's shape {tuple(out.shape)} is not the "
                                 f"targets' {tuple(y.shape)}: mean squared error compares them "
                                 "element by element; reshape one, or give the module a "
                                 "loss(output, targets) of its own")
            return F.mse_loss(out.float(), y.float())
        return self._forward([inputs], {}, loss_of)

    def abort(self):
        """Drops a forward that will get no backward (its loss failed, say): every gathered
        parameter is released and the next forward starts afresh."""
        if self._open:
            self._open = False
            self._core.abort_forward()

    def backward(self, loss):
        """Backward of this rank's micro-batch loss (a mean): gradients are reduced into the
        shards as their units finish. Returns the loss, detached, as DeepSpeed's backward does:
        the engine does not read it, so reading it (.item()) is the one wait for its device."""
        if not self._open:
            raise RuntimeError("zt: backward(loss) needs a forward through the engine first")
        if not isinstance(loss, torch.Tensor):
            # Refused before the core sees it: a float has no graph, and the open forward is
            # closed on both sides (the core's own check does the same for a loss of many values).
            self.abort()
            raise TypeError(f"zt: backward(loss) takes the loss tensor the model returned, not "
                            f"{type(loss).__name__}")
        self._in_backward = True
        try:
            value = self._core.backward(loss)
        except BaseException:
            # A backward that failed inside the core counts as a micro step, whose step() skips
            # the update on every rank: a rank that did not count it stepped one call apart from
            # its peers (its step() did nothing while theirs waited for it).
            if self._core.micro_steps > self._micro:
                self._micro = self._core.micro_steps
                self._awaiting_step = True
            raise
        finally:
            self._open = False
            self._in_backward = False
        self._micro += 1
        self._awaiting_step = True
        return value

    def step(self, lr=None):
        """Call after every backward, as DeepSpeed's engine.step(): at the end of
        data.grad_accum micro steps it updates the shards at `lr` (default: the config's
        schedule, [run] lr_schedule) and returns the step's report; otherwise None."""
        self._awaiting_step = False
        if self._micro < self._core.grad_accum:
            return None
        self._check_parameters_unchanged()
        rate = self._core.scheduled_lr() if lr is None else float(lr)
        # The core starts the next step whether this one updates, skips or raises (a loss that
        # was not finite without loss scaling, or gradients that overflow a second step in a row
        # where nothing can rescale them, raise NumericError here, the step dropped).
        self._micro = 0
        report = self._core.step(rate)
        report["lr"] = rate
        self._last_step = report
        return report

    def _check_parameters_unchanged(self):
        """Refuses an update when the model's parameters are no longer the ones zt.initialize
        sharded, all trained: one frozen since (requires_grad_(False)) got no gradient, and the
        update still moved it (Adam's moments, weight decay); one added since (a new module or
        a replaced Parameter) was never trained. Once per optimizer step, nothing changed by
        it: the step can be called again once the model is as it was."""
        for p in self.module.parameters():
            if id(p) in self._param_ids and p.requires_grad:
                continue
            for name, q in self.module.named_parameters():
                if q is p:
                    break
            if id(p) in self._param_ids:
                raise ValueError(f"zt: {name} no longer requires grad: the update would still "
                                 "move it (Adam's moments, weight decay), as zt trains every "
                                 "parameter it was given; freeze it before zt.initialize and "
                                 "pass only the trained part, or set requires_grad=True again "
                                 "and call step() again (nothing of this step was applied)")
            raise ValueError(f"zt: {name} was added to the model after zt.initialize, which "
                             "sharded the parameters it had then: this engine never trains it; "
                             "build the model whole before zt.initialize (a new engine for the "
                             "changed model: close this one first), or remove it and call "
                             "step() again (nothing of this step was applied)")

    def _place(self, value):
        """Tensors in `value` on the engine's device, their dtypes kept."""
        return _map_tensors(value, lambda t: t.to(self.device))

    def _cast(self, value):
        """Tensors in `value` on the engine's device, the floating ones in the compute dtype."""
        return _map_tensors(value, lambda t: t.to(self.device, self._dtype)
                            if t.is_floating_point() else t.to(self.device))

    def zero_grad(self, set_to_none=True):
        """Nothing to do: the engine owns the gradients from backward to step() (at stages 2-3
        it takes them into its shards in backward; at stages 0-1 they wait in the parameters'
        .grad until step(), so do not zero or clip them yourself: zero.gradient_clipping
        clips)."""

    def train(self, mode=True):
        self.module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def parameter_names(self):
        return list(self._core.parameter_names())

    def full_param(self, name):
        """The full fp32 master value of parameter `name` (collective)."""
        return self._core.full_param(name)

    def full_grad(self, name):
        """The gradient so far, averaged over the ranks and the micro steps run so far
        (collective; after backward): after the last of data.grad_accum micro steps, the one
        the next step applies."""
        return self._core.full_grad(name)

    def optimizer_state(self, name, state):
        """A full optimizer state of `name`, e.g. "exp_avg" (collective)."""
        return self._core.optimizer_state(name, state)

    def _parameter_names(self, params):
        """gathered_parameters' names from a name, names, or (DeepSpeed's form) the module's own
        parameters. Each name is one collective, so every rank must list them in one order: a
        set, whose order differs from rank to rank (string hashes are salted per process), is
        sorted."""
        unordered = isinstance(params, (set, frozenset))
        if isinstance(params, (str, torch.Tensor)):
            params = [params]
        by_id = None
        names = []
        for p in params:
            if isinstance(p, torch.Tensor):
                if by_id is None:
                    by_id = {id(t): n for n, t in self.module.named_parameters()}
                if id(p) not in by_id:
                    raise TypeError("gathered_parameters: a tensor that is no parameter of the "
                                    "engine's module; pass parameter names "
                                    "(engine.parameter_names()) or the module's own parameters")
                p = by_id[id(p)]
            names.append(p)
        return sorted(names) if unordered else names

    @contextlib.contextmanager
    def gathered_parameters(self, names, modifier_rank=None):
        """DeepSpeed's GatheredParameters: yields {name: full fp32 value} on every rank
        (collective). With modifier_rank, that rank's edits (in place, or tensors put back in the
        dict) are written into every rank's shards when the block ends. Given the module's own
        parameters (DeepSpeed's form), each of them holds its full value inside the block too,
        so `param.data.normal_()` or `param.data = t` there is an edit, as in DeepSpeed."""
        if not isinstance(names, (str, torch.Tensor, list, tuple, set, frozenset)):
            names = list(names)  # model.parameters(), a generator: read once
        given = [names] if isinstance(names, torch.Tensor) else (
            [] if isinstance(names, str) else list(names))
        names = self._parameter_names(names)
        values = dict(self._core.gathered(names))
        modifier = -1 if modifier_rank is None else int(modifier_rank)
        # The module's parameters given, with their own data to put back after the block (at
        # stage 3 an empty tensor: edits on it did nothing, without a word).
        held = [(self._parameter_names([p])[0], p, p.data) for p in given
                if isinstance(p, torch.Tensor)]
        gathered_at = {name: values[name].data_ptr() for name, _, _ in held}
        with torch.no_grad():
            for name, p, _ in held:
                p.data = values[name]
        body_raised = False
        try:
            yield values
        except BaseException:
            body_raised = True
            raise
        finally:
            for name, p, own in held:
                if p.data.data_ptr() != gathered_at[name]:
                    values[name] = p.data  # the body gave the parameter a tensor of its own
                p.data = own
            if modifier >= 0:
                # A missing or reshaped entry fails on every rank, inside the collective, not
                # before it (the other ranks would wait there).
                edits = []
                failed = body_raised
                for n in names:
                    v = values.get(n)
                    ok = isinstance(v, torch.Tensor) and v.is_floating_point()
                    failed = failed or not ok
                    edits.append(v if ok else torch.zeros(0))
                try:
                    self._core.write_gathered(names, modifier, edits, failed)
                except _zt.Error:
                    # The core's word for this rank's own failure: where the body raised, its
                    # exception is the one the caller gets (the other ranks get the core's).
                    if not body_raised:
                        raise

    def all_reduce(self, tensor):
        """Sums `tensor` over the ranks, in place, through the job's communicator (collective):
        for metrics such as a validation loss."""
        with torch.no_grad():
            self._core.all_reduce(tensor)
        return tensor

    def memory_report(self):
        """Bytes this rank's engine holds, by category (compute memory and tiers)."""
        return self._core.memory()

    def step_report(self):
        """The last optimizer step's report and where this rank's time went so far."""
        report = dict(self._last_step or {})
        report["times"] = self._core.times()
        return report

    def save_checkpoint(self, directory, tag=None, *, next_sample=None, metrics=None):
        """Saves to `directory` (a checkpoint.dir: step-N folders and `latest`) in zt's format,
        which `trainer --resume` loads at any world size and composition. `next_sample`: where
        the trainer's data would continue (default: the loaded checkpoint's position, or 0, plus
        the global batch for every step since). `metrics`: measurements of the saved state,
        lower is better, e.g. {"val_loss": 2.31}, the same on every rank (rank 0's go into the
        manifest; one rank's missing or unreadable metric refuses the save on every rank): with
        checkpoint.keep_best = "val_loss" the save with the lowest is kept and `directory`/best
        names it, and a save without it is refused. Collective. Returns the checkpoint's folder.
        `tag` (DeepSpeed's folder name) is refused: zt names the folder step-<N>."""
        # A bad metric is refused on every rank together (the core's check): raised here on one
        # rank alone, it left the others waiting in the save's collectives.
        measured, refusal = {}, ""
        for name, value in (metrics or {}).items():
            try:
                measured[str(name)] = float(value)
            except (TypeError, ValueError, OverflowError):
                refusal = refusal or (f"save_checkpoint: metric {name!r} is {value!r}, not a "
                                      "number; every rank passes the same metrics")
        if tag is not None:
            raise TypeError(f"zt: save_checkpoint takes no tag ({tag!r}): zt names each "
                            "checkpoint's folder step-<N> in `directory` and points `latest` "
                            "at it; pass the directory alone (next_sample by keyword)")
        if self._micro != 0 or self._open:
            raise RuntimeError("zt: save_checkpoint in the middle of a step (a forward open or "
                               f"{self._micro} micro steps without their update): call it "
                               "between steps")
        saved = self._core.save_checkpoint(os.fspath(directory),
                                           -1 if next_sample is None else next_sample, measured,
                                           refusal)
        self._note_unsaved_buffers()
        return saved

    def _note_unsaved_buffers(self):
        """Once per engine, on rank 0, as the trainer says it: the module's floating buffers
        (a BatchNorm's running statistics) are in no checkpoint."""
        if getattr(self, "_buffers_noted", False) or self.rank != 0:
            return
        self._buffers_noted = True
        names = [n for n, b in self.module.named_buffers() if b.is_floating_point() and b.numel()]
        if names:
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            print(f"zt: note: checkpoints do not hold the module's {len(names)} floating "
                  f"buffer(s) ({shown}): a run that loads one keeps the values its module has, "
                  "as a BatchNorm's running statistics would", flush=True)

    def load_checkpoint(self, path, tag=None, *, restore_rng=False, missing_ok=False):
        """Loads a checkpoint folder, a checkpoint.dir (its latest) or dir/best, saved at any
        world size and composition by zt.Engine or by the trainer; with `tag` (DeepSpeed's
        second argument), the folder `path`/`tag`, e.g. "step-00000100". Returns the saved trainer
        state (step, next_sample, ...). `restore_rng`: also load the CPU generator state the
        checkpoint recorded (rank 0's) into torch's default generator, on every rank; off, as
        DeepSpeed leaves it, since ranks that seed their own would then draw alike. The module's
        buffers are not in checkpoints: they keep their values. `missing_ok`: None, nothing
        loaded, where rank 0 finds no checkpoint at `path` (no such path, or no complete
        checkpoint in it: a first run), on every rank alike, as DeepSpeed's (None, None): a
        script resumes with it, where each rank asking os.path.exists could disagree across
        hosts. Collective."""
        if self._micro != 0 or self._open:
            # The core would keep the partial gradients taken so far and add them to the
            # loaded step's.
            raise RuntimeError("zt: load_checkpoint in the middle of a step (a forward open or "
                               f"{self._micro} micro steps without their update): call it "
                               "between steps")
        if tag is not None:
            path = os.path.join(os.fspath(path), os.fspath(tag))
        state = self._core.load_checkpoint(os.fspath(path), bool(restore_rng), bool(missing_ok))
        if state is None:
            if self.rank == 0:
                # Said, as the trainer's "starting fresh": a misspelt path loads nothing too.
                print(f"zt: load_checkpoint: no checkpoint at {os.path.abspath(path)}: nothing "
                      "loaded (missing_ok)", flush=True)
            return None
        self._awaiting_step = False
        return json.loads(state) if state else {}

    def close(self, restore=True):
        """Closes the engine (collective); it cannot be used after, and the process may build
        another (every rank alike). With `restore`, the module's parameters get their full fp32
        values back as tensors of their own, on the device each was on before initialize (its
        buffers their dtype and device), so the module works without zt (at stage 3 they
        hold values only inside their unit's call while the engine is open). Also at exit,
        without restoring, when the process then leaves the job."""
        if self._closed:
            return
        self._closed = True
        try:
            # A forward still open would leave its hooks on tensors of an engine that is gone
            # (a later backward through them ran on freed memory).
            self.abort()
            if restore:
                with torch.no_grad():
                    # Where they were before initialize: the engine's device held them since.
                    for name, p in self.module.named_parameters():
                        p.data = self._core.full_param(name).to(
                            self._param_devices.get(name, p.device))
                    for b, dtype, device in self._buffer_dtypes:
                        if b.dtype != dtype or b.device != device:
                            b.data = b.to(device, dtype)
        finally:
            # A restore that failed (a CommError) still takes the hooks off and closes the core.
            for h in self._hooks:
                h.remove()
            self._core.close()
            _open_engines.pop(self, None)


def _map_tensors(value, fn):
    """`value` with fn applied to every tensor in it, through nested tuples (named ones too),
    lists and dicts; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        mapped = [_map_tensors(v, fn) for v in value]
        if hasattr(value, "_fields"):  # a namedtuple takes its fields as arguments
            return type(value)(*mapped)
        try:  # torch.Size and torch.return_types take one sequence, as tuple and list do
            return type(value)(mapped)
        except TypeError:
            return tuple(mapped) if isinstance(value, tuple) else mapped
    if isinstance(value, dict):
        # A copy keeps what the type holds beside its items (a defaultdict's factory).
        out = copy.copy(value)
        for k, v in value.items():
            out[k] = _map_tensors(v, fn)
        return out
    return value


def initialize(model, config=None, overrides=(), units=None):
    """The engine of `model` under `config` (a TOML file's path, or a dict of sections as the
    file has them) with "section.key=value" `overrides`. Every rank calls it with the same
    model and config; rank 0's initial values are broadcast to the others."""
    return Engine(model, config, overrides, units)
