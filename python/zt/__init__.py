"""zt: ZeRO training of a torch.nn.Module on zt's native engine.

    import zt
    engine = zt.initialize(model, config="job.toml")   # the trainer's TOML, or a dict
    for x, y in batches:
        loss = engine.loss(x, y)        # or: out = engine(x); loss = my_loss(out, y)
        engine.backward(loss)
        engine.step()

Ranks come from torchrun's (or mpirun's, srun's) environment, or from
`python3 -m zt.launch --nproc N script.py`.
"""

import sys

from . import _build_info


def _not_this_interpreter(why):
    """The error for a python3 this package was not built for, naming the one it was."""
    built = _build_info
    return ImportError(
        f"zt cannot load in {sys.executable} (Python {sys.version.split()[0]}): {why}. This zt "
        f"was built for {built.PYTHON} (Python {built.PYTHON_VERSION}) and its torch, LibTorch "
        f"{built.LIBTORCH_VERSION}: run your script with that interpreter, e.g. "
        f"PYTHONPATH=build/python {built.PYTHON} -m zt.launch --nproc 2 script.py (a python3 "
        f"of pyenv, conda or a venv earlier on PATH shadows it)")


try:
    import torch  # first: the binding runs on the LibTorch python3-torch loaded
except ModuleNotFoundError as e:
    raise _not_this_interpreter("it has no torch") from e
if torch.__version__.split(".")[:2] != _build_info.LIBTORCH_VERSION.split(".")[:2]:
    raise _not_this_interpreter(f"its torch is {torch.__version__}")
try:
    from ._zt import (CommError, ConfigError, Error, InternalError, IoError, NumericError,
                      PluginError)
except ImportError as e:
    raise _not_this_interpreter(f"the binding module does not load ({e})") from e
from . import nn
from .data import data, tokenizer
from .engine import Engine, initialize

__all__ = ["initialize", "Engine", "data", "tokenizer", "nn", "Error", "ConfigError", "PluginError", "CommError",
           "IoError", "NumericError", "InternalError"]
