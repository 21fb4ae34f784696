"""The trainer's data sources from Python: the same windows, seeds and rank slices as
`trainer` reads with the same [data] and [model] settings."""

from . import _zt
from .config import to_toml


class Data:
    def __init__(self, config, overrides=(), validation=False):
        path = config if isinstance(config, str) else ""
        text = to_toml(config) if isinstance(config, dict) else ""
        self._stream = _zt.DataStream(path, text, list(overrides), validation)

    def get(self, step_start, micro, rank, world):
        """Rank `rank`'s micro batch `micro` of the step whose global batch starts at sample
        `step_start`: (input, target)."""
        return self._stream.get(step_start, micro, rank, world)

    def samples(self, first, count):
        return self._stream.samples(first, count)

    def samples_per_step(self, world):
        return self._stream.samples_per_step(world)

    @property
    def micro_batch(self):
        return self._stream.micro_batch

    def describe(self):
        return self._stream.describe()


def data(config, overrides=(), validation=False):
    """The training data (or, with validation=True, [eval]'s held-out data) of `config`."""
    return Data(config, overrides, validation)
