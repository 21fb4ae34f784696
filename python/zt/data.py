"""The trainer's data sources from Python: the same windows, seeds and rank slices as
`trainer` reads with the same [data] and [model] settings."""

from . import _zt
from .config import config_source


class Data:
    def __init__(self, config, overrides=(), validation=False):
        path, text, overrides = config_source(config, overrides, "zt.data")
        self._stream = _zt.DataStream(path, text, overrides, validation)

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
        """Samples in one rank's micro batch: data.micro_batch (for validation=True,
        eval.micro_batch, or data.micro_batch where that is 0)."""
        return self._stream.micro_batch

    def describe(self):
        """What the data is, as the trainer prints it: kind, source, token and window counts,
        window length, vocab and seed (a line per source for a blend)."""
        return self._stream.describe()

    @property
    def tokenizer(self):
        """The run's BPE tokenizer (data.tokenizer, else the one a prepared token file's index
        names), or None for byte-level text, synthetic data and bare token files."""
        return self._stream.tokenizer


def tokenizer(name, dir=""):
    """A BPE encoding by name (gpt2, r50k_base, p50k_base, cl100k_base, o200k_base) or the path
    of a NAME.tiktoken file: .encode, .encode_ordinary, .decode, .decode_bytes, .n_vocab,
    .eot_token. decode gives text (a token that ends inside a UTF-8 character shows U+FFFD);
    decode_bytes gives the tokens' exact bytes, for text streamed token by token."""
    return _zt.tokenizer(name, dir)


def data(config, overrides=(), validation=False):
    """The training data (or, with validation=True, [eval]'s held-out data) of `config`."""
    return Data(config, overrides, validation)
