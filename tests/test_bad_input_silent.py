"""Silent failures found by trying the library as a user would (issue 32): each case used to be
accepted (or failed with a message that named nothing); now it raises, naming the parameter.

Classes: state that does not match its model (a KV cache of another batch size or model), NaN
hyper-parameters, token ids of the wrong dtype, writes killed half-way, a user pre-tokenization
pattern that skips text."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from llmbook.gpt import GPT, GPTConfig
from llmbook.kv_cache import KVCache
from llmbook.llama import Llama, LlamaConfig

NAN = float("nan")


def _gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32)).eval()


# ---------------------------------------------------------------- state that does not match its model


def test_kv_cache_of_another_batch_size_is_refused():
    """A cache for 3 rows used with 1 silently read row 0 of an earlier batch's keys."""
    m = _gpt()
    cache = KVCache(m.config, 3)
    with pytest.raises(ValueError, match="k has batch size 1 but the cache was made for batch_size=3"):
        m(torch.tensor([[1, 2, 3]]), kv_cache=cache)
    llama = Llama(LlamaConfig.tiny()).eval()
    with pytest.raises(ValueError, match="batch_size=2"):
        llama(torch.tensor([[1, 2, 3]]), kv_cache=KVCache(llama.config, 2, 16))


def test_kv_cache_of_another_model_is_refused():
    m = _gpt()
    other_heads = GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=4, d_model=16, d_ff=32)
    with pytest.raises(ValueError, match="k has 2 heads of size 8 but the cache was made for 4 of size 4"):
        m(torch.tensor([[1, 2]]), kv_cache=KVCache(other_heads, 1))
    llama = Llama(LlamaConfig.tiny()).eval()
    one_layer = KVCache(dataclasses.replace(llama.config, n_layer=1), 1, 16)
    with pytest.raises(ValueError, match=r"layer must be an int in \[0, 1\): this cache was built for a model with 1 layers"):
        llama(torch.tensor([[1, 2]]), kv_cache=one_layer)


def test_matching_cache_still_gives_the_uncached_logits():
    m = _gpt()
    idx = torch.tensor([[1, 2, 3, 4]])
    full = m(idx)[0]
    cache = KVCache(m.config, 1)
    step = torch.cat([m(idx[:, :3], kv_cache=cache)[0], m(idx[:, 3:], kv_cache=cache)[0]], dim=1)
    torch.testing.assert_close(step, full, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- NaN hyper-parameters


def _bert_cfg(**kw):
    from llmbook.bert import BertConfig

    return BertConfig(vocab_size=30, hidden_size=16, n_layers=1, n_heads=2, intermediate_size=32, max_position=16, **kw)


@pytest.mark.parametrize("make, match", [
    (lambda: _bert_cfg(layer_norm_eps=NAN), "layer_norm_eps must be a finite number > 0, got nan"),
    (lambda: _bert_cfg(initializer_range=NAN), "initializer_range must be a finite number > 0, got nan"),
    (lambda: _bert_cfg(initializer_range=-0.02), "initializer_range must be a finite number > 0"),
    (lambda: __import__("llmbook.layers", fromlist=["x"]).LayerNorm(4, eps=NAN), "eps must be a non-negative float, got nan"),
    (lambda: __import__("llmbook.positional", fromlist=["x"]).LearnedPositionalEmbedding(4, 8, init_std=NAN),
     "init_std must be a finite number >= 0, got nan"),
    (lambda: __import__("llmbook.moe", fromlist=["x"]).MoEGPT(_gpt().config, 4, 2, aux_loss_weight=NAN),
     "aux_loss_weight must be a finite number >= 0, got nan"),
    (lambda: __import__("llmbook.scaling", fromlist=["x"]).power_law(1e6, 1.0, NAN), "alpha must be a finite number, got nan"),
    (lambda: __import__("llmbook.scaling", fromlist=["x"]).power_law(1e6, 1.0, 0.1, c=NAN), "c must be a finite number"),
    (lambda: __import__("llmbook.decoding", fromlist=["x"]).length_penalty(3, NAN), "alpha must be a finite number"),
    (lambda: __import__("llmbook.objectives", fromlist=["x"]).noise_span_lengths(20, 0.15, NAN),
     "mean_span_length must be a finite number >= 1, got nan"),
])
def test_nan_hyper_parameters_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("kw, match", [({"lr": NAN}, "lr must be a finite number > 0, got nan"),
                                       ({"lr": 1e-3, "beta": NAN}, "beta must be a finite number > 0, got nan")])
def test_dpo_train_nan_lr_or_beta(kw, match):
    from llmbook.post_training import dpo_train

    m = _gpt()
    with pytest.raises(ValueError, match=match):
        dpo_train(m, _gpt(), [(([1, 2], [-100, 2]), ([1, 3], [-100, 3]))], steps=1, **kw)


# ---------------------------------------------------------------- token ids of the wrong dtype


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int8])
def test_narrow_integer_token_ids_are_refused(dtype):
    """uint8 ids have already wrapped (300 -> 44) before the model sees them; BERT accepted them."""
    from llmbook.bert import Bert

    with pytest.raises(TypeError, match=rf"input_ids must be an (int64 \(torch.long\) or int32 tensor|integer tensor).* got dtype {dtype}"):
        Bert(_bert_cfg())(torch.tensor([[1, 2, 3]], dtype=dtype))
    with pytest.raises(TypeError, match="targets must be an int64"):
        _gpt()(torch.tensor([[1, 2]]), torch.tensor([[2, 3]], dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_post_training_labels_of_the_wrong_dtype(dtype):
    """causal_lm_loss took uint8 labels (cross_entropy accepts Byte targets); token_kl took any dtype."""
    from llmbook.post_training import causal_lm_loss, sequence_logprobs, token_kl

    logits, labels = torch.randn(2, 5, 20), torch.randint(0, 20, (2, 5)).to(dtype)
    for call in (lambda: causal_lm_loss(logits, labels), lambda: sequence_logprobs(logits, labels),
                 lambda: token_kl(logits, logits, labels)):
        with pytest.raises(TypeError, match="labels must be an"):
            call()


def test_float_token_ids_are_not_truncated():
    from llmbook.post_training import pad_batch
    from llmbook.retrieval import lm_states

    with pytest.raises(TypeError, match=r"examples\[0\] input_ids must be a list of int token ids, got a float \(1.5\)"):
        pad_batch([([1.5, 2], [1, 2])], 0)
    with pytest.raises(TypeError, match="ids must be an int64 .* got dtype torch.float32"):
        lm_states(_gpt(), torch.arange(12.0))


# ---------------------------------------------------------------- a write killed half-way


_WRITER = """
import sys, time
from pathlib import Path
from llmbook.atomic import write_atomic

def slow(tmp):
    Path(tmp).write_bytes(b"half a file")
    print("writing", flush=True)
    time.sleep(60)

write_atomic(Path(sys.argv[1]), slow)
"""


def test_a_killed_write_keeps_the_old_file_and_its_temp_file_is_cleaned(tmp_path):
    """SIGKILL mid-write (no finally runs): the target keeps its old bytes; the orphan temporary
    file is removed by the next write once it is stale."""
    from llmbook.atomic import STALE_SECONDS, write_atomic

    target = tmp_path / "ck.bin"
    target.write_bytes(b"old")
    p = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "writing"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    assert target.read_bytes() == b"old"
    orphans = list(tmp_path.glob("ck.bin.*.tmp"))
    assert len(orphans) == 1 and orphans[0].read_bytes() == b"half a file"
    old = time.time() - STALE_SECONDS - 1
    os.utime(orphans[0], (old, old))
    write_atomic(target, lambda tmp: open(tmp, "wb").write(b"new"))
    assert target.read_bytes() == b"new" and not list(tmp_path.glob("ck.bin.*.tmp"))


# ---------------------------------------------------------------- a pattern that skips text


def test_streaming_with_a_pattern_that_skips_text_keeps_it():
    """A user pattern that matches words only: the text between matches becomes pieces, in
    encode and in encode_iterable alike."""
    from llmbook.tokenizers import ByteBPETokenizer

    text = "the cat, the hat!  the rat?\n" * 20
    tok = ByteBPETokenizer.train(text, 280, pattern=r"\w+")
    tok._STREAM_MIN_CHARS = 1
    chunks = [text[i:i + 7] for i in range(0, len(text), 7)]
    assert tok.decode(list(tok.encode_iterable(chunks))) == text
    assert list(tok.encode_iterable(chunks)) == tok.encode(text)
