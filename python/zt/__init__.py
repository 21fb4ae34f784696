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

import torch  # first: the binding runs on the LibTorch python3-torch loaded

from ._zt import (CommError, ConfigError, Error, InternalError, IoError, NumericError,
                  PluginError)
from . import nn
from .data import data
from .engine import Engine, initialize

__all__ = ["initialize", "Engine", "data", "nn", "Error", "ConfigError", "PluginError", "CommError",
           "IoError", "NumericError", "InternalError"]
