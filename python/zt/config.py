"""A config given as a dict, written out as the TOML text zt's config reader takes.

zt.initialize(model, config={...}) and zt.data(config={...}) accept the same sections and keys
as a job's TOML file ({"zero": {"stage": 3}, "plugins": {"comm": "comm_ucx"}, ...}); zt checks
them as it checks the file, so an unknown key is the same error, naming the key.
"""

import json
import numbers
import os


def _auto_keys(value, where=""):
    """The dotted keys of a JSON object whose value is "auto", in the file's order."""
    if isinstance(value, dict):
        return [k for key, v in value.items() for k in _auto_keys(v, f"{where}{key}.")]
    return [where[:-1]] if value == "auto" else []


def _rank0():
    """Whether this process is rank 0 of its job (or a job of one): it speaks for the config,
    once, where every rank said it before."""
    for variable in ("RANK", "OMPI_COMM_WORLD_RANK"):
        if variable in os.environ:
            return os.environ[variable] == "0"
    if "SLURM_STEP_ID" in os.environ and "SLURM_PROCID" in os.environ:
        return os.environ["SLURM_PROCID"] == "0"
    return True


def _warn_about_json(path):
    """What a DeepSpeed JSON leaves to someone else, said: without an "optimizer" section
    (DeepSpeed then takes the optimizer that deepspeed.initialize is given, as Hugging Face's
    Trainer passes it) the job trains with optim_hybrid_adam's defaults, and a key whose value is
    "auto" (Hugging Face's Trainer fills those in) takes zt's default, as no zt config comes with
    the JSON here: lr 1e-3, fp32, no clipping, a decay over 10 steps. A file zt cannot read as
    JSON is left to zt's own reader, which names the fault."""
    import warnings
    try:
        with open(path, encoding="utf-8") as f:
            ds = json.load(f)
    except (OSError, ValueError):
        return
    if not isinstance(ds, dict) or not _rank0():
        return
    if "optimizer" not in ds:
        warnings.warn(f"zt: {path} has no \"optimizer\" section: the job trains with "
                      "optim_hybrid_adam's defaults (lr 1e-3, betas [0.9, 0.999], no weight "
                      "decay); give the JSON an \"optimizer\" section (docs/deepspeed.md) to "
                      "choose them", stacklevel=3)
    auto = _auto_keys(ds)
    if auto:
        warnings.warn(f"zt: {path} leaves {', '.join(auto)} to \"auto\", which Hugging Face's "
                      "Trainer fills in: zt.initialize has no other config to take them from, so "
                      "each takes zt's default where no override sets its zt key (the "
                      "optimizer's lr 1e-3, fp32 compute, no clipping, an lr schedule's decay "
                      "over run.steps = 10); give them as numbers in the JSON, or as overrides "
                      "(docs/deepspeed.md)", stacklevel=3)


def _value(value, where):
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        # A TOML basic string is a JSON string with the characters themselves (JSON's surrogate
        # pairs for characters beyond U+FFFF are not TOML).
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    raise TypeError(f"zt config: {where} = {value!r}: expected a bool, number, string, path or "
                    "list (a dict is a table of its own: {'codec': {'weights': {'bits': 8}}})")


# Top-level keys of a DeepSpeed config, none of them a section of zt's TOML.
_DEEPSPEED_KEYS = {"train_batch_size", "train_micro_batch_size_per_gpu",
                   "gradient_accumulation_steps", "zero_optimization", "optimizer", "scheduler",
                   "fp16", "bf16", "gradient_clipping"}


def to_toml(config):
    """The TOML text of {section: {key: value}}; a dotted section ("plugin.<id>",
    "codec.weights") may also be nested, {"plugin": {"<id>": {...}}}, as tomllib reads it."""
    if not isinstance(config, dict):
        raise TypeError("zt config: expected a dict of sections, e.g. {'zero': {'stage': 3}}")
    deepspeed = sorted(k for k in config if k in _DEEPSPEED_KEYS)
    if deepspeed:
        # deepspeed.initialize's config dict: zt reads that JSON at its own door, from a file.
        raise TypeError(f"zt config: {deepspeed[0]} is a DeepSpeed config key, not a section of "
                        "zt's TOML: write the DeepSpeed dict to a JSON file and pass its path "
                        "as the config, zt.initialize(model, config='ds_config.json') "
                        "(docs/deepspeed.md)")
    lines = []

    def section(name, keys):
        if not isinstance(keys, dict):
            raise TypeError(f"zt config: section [{name}] must be a dict of keys")
        # A table's own keys before its subtables, as TOML requires; a table of subtables only
        # ({"plugin": {...}}) has no header of its own.
        tables = {k: v for k, v in keys.items() if isinstance(v, dict)}
        if len(tables) < len(keys) or not keys:
            lines.append(f"[{name}]")
            for key, value in keys.items():
                if key not in tables:
                    lines.append(f"{key} = {_value(value, name + '.' + key)}")
        for key, table in tables.items():
            section(f"{name}.{key}", table)

    for name, keys in config.items():
        section(name, keys)
    return "\n".join(lines) + "\n"


def config_source(config, overrides, who):
    """(path, toml_text, overrides) for the core from a config given as a TOML file's path (a
    str or a pathlib.Path) or a dict of sections, and overrides given as "key=value" strings.
    Anything else is a TypeError naming `who`: a Path taken for "no path" trained on the
    defaults' synthetic data, and a string of overrides was split into its characters."""
    if isinstance(overrides, (str, bytes)):
        raise TypeError(f"{who}: overrides is a list of \"key=value\" strings, e.g. "
                        f"[{overrides!r}], not one string")
    overrides = list(overrides)
    if config is None:
        return "", "", overrides
    if isinstance(config, dict):
        return "", to_toml(config), overrides
    if isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        # deepspeed.initialize(config="ds_config.json"): a DeepSpeed JSON, read at zt's door as
        # run.deepspeed is (read as TOML, its first brace was a syntax error), with the parts
        # DeepSpeed's JSON has no keys for as the shipped configs choose them, and the optimizer
        # its "optimizer" section maps to (DeepSpeed could take one from initialize instead).
        if path.lower().endswith(".json"):
            _warn_about_json(path)
            return "", to_toml({"run": {"deepspeed": path},
                                "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                                            "optimizer": "optim_hybrid_adam"}}), overrides
        return path, "", overrides
    raise TypeError(f"{who}: config is a TOML file's path (str or pathlib.Path), a DeepSpeed "
                    f"JSON's path, or a dict of sections, not {type(config).__name__}")
