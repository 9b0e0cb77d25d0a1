"""Damaged files and checkpoint IO (issue 17, items 8 and 10): each damaged file raises a clear
error naming the file and what is wrong; writes leave no orphan temporary file and give every
saved file the same mode."""

from __future__ import annotations

import json
import os
import time
import warnings

import numpy as np
import pytest
import torch

from llmbook import data
from llmbook.atomic import STALE_SECONDS, write_atomic
from llmbook.gpt import GPT, GPTConfig
from llmbook.train import TrainConfig, load_checkpoint, random_windows, save_checkpoint, train


def _tiny_gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32))


def _rewrite_metadata(path, change):
    """Re-save a safetensors file with its 'llmbook' metadata changed by `change(info) -> str`."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta["llmbook"] = change(json.loads(meta["llmbook"]))
    save_file(tensors, str(path), metadata=meta)


# ---------------------------------------------------------------- train.load_checkpoint


def test_dangling_alias_names_file_and_alias(tmp_path):
    path = tmp_path / "ck.safetensors"
    save_checkpoint(path, _tiny_gpt())

    def dangle(info):
        info["aliases"] = {"lm_head.weight": "model.nowhere.weight"}
        return json.dumps(info)

    _rewrite_metadata(path, dangle)
    with pytest.raises(ValueError, match="tied weight 'lm_head.weight' points to 'model.nowhere.weight'") as info:
        load_checkpoint(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", json.dumps({"aliases": [], "meta": {}}),
                                 json.dumps({"aliases": {}, "meta": "x"})])
def test_damaged_llmbook_metadata_names_file(tmp_path, bad):
    path = tmp_path / "ck.safetensors"
    save_checkpoint(path, _tiny_gpt())
    _rewrite_metadata(path, lambda info: bad)
    with pytest.raises(ValueError) as info:
        load_checkpoint(path)
    assert str(path) in str(info.value)
    assert "corrupt" in str(info.value) or "metadata" in str(info.value)


def test_checkpoint_of_another_model_names_file(tmp_path):
    path = tmp_path / "ck.safetensors"
    save_checkpoint(path, _tiny_gpt())
    other = GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=2, n_head=2, d_model=16, d_ff=32))
    with pytest.raises(ValueError, match="does not fit the model GPT") as info:
        load_checkpoint(path, other)
    assert str(path) in str(info.value)


def test_optimizer_state_for_another_optimizer_names_file(tmp_path):
    model = _tiny_gpt()
    opt = torch.optim.AdamW(model.parameters())
    model(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long))[1].backward()
    opt.step()
    path = tmp_path / "ck.safetensors"
    save_checkpoint(path, model, opt)
    fewer = torch.optim.AdamW(list(model.parameters())[:2])
    with pytest.raises(ValueError, match="optimizer state that does not fit") as info:
        load_checkpoint(path, optimizer=fewer)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------- train(resume=True)


def _setup(tmp_path):
    ids = torch.randint(0, 20, (500,), generator=torch.Generator().manual_seed(0))
    gb = random_windows(ids[:400], ids[400:], block_size=8, batch_size=2)
    cfg = TrainConfig(max_steps=4, warmup_steps=1, eval_interval=4, eval_batches=1, progress=False,
                      checkpoint_path=str(tmp_path / "run.safetensors"))
    return gb, cfg


def test_resume_without_rng_state_names_file(tmp_path):
    gb, cfg = _setup(tmp_path)
    model = _tiny_gpt()
    from llmbook.train import configure_optimizer

    save_checkpoint(cfg.checkpoint_path, model, configure_optimizer(model, cfg))  # no state= (not from train())
    with pytest.raises(ValueError, match="has no batch_rng or torch_rng state") as info:
        train(_tiny_gpt(), gb, cfg, resume=True)
    assert cfg.checkpoint_path in str(info.value)


def test_resume_with_damaged_rng_state_names_file(tmp_path):
    gb, cfg = _setup(tmp_path)
    model = _tiny_gpt()
    from llmbook.train import configure_optimizer

    save_checkpoint(cfg.checkpoint_path, model, configure_optimizer(model, cfg),
                    state={"batch_rng": torch.zeros(3, dtype=torch.uint8), "torch_rng": torch.get_rng_state()})
    with pytest.raises(ValueError, match="damaged random-number state") as info:
        train(_tiny_gpt(), gb, cfg, resume=True)
    assert cfg.checkpoint_path in str(info.value)


def test_resume_from_inference_checkpoint_names_file(tmp_path):
    gb, cfg = _setup(tmp_path)
    save_checkpoint(cfg.checkpoint_path, _tiny_gpt())  # no optimizer
    with pytest.raises(ValueError, match="no optimizer state") as info:
        train(_tiny_gpt(), gb, cfg, resume=True)
    assert cfg.checkpoint_path in str(info.value)


# ---------------------------------------------------------------- orphan temporary files, modes


def test_stale_temp_file_removed_by_next_write(tmp_path):
    path = tmp_path / "ck.safetensors"
    orphan = tmp_path / "ck.safetensors.abc123.tmp"  # what a killed write leaves
    orphan.write_bytes(b"half a checkpoint")
    old = time.time() - STALE_SECONDS - 5
    os.utime(orphan, (old, old))
    fresh = tmp_path / "ck.safetensors.live99.tmp"  # another writer, still busy: kept
    fresh.write_bytes(b"in progress")
    other = tmp_path / "other.safetensors.zzz.tmp"  # another target's file: not ours to touch
    other.write_bytes(b"x")
    os.utime(other, (old, old))
    save_checkpoint(path, _tiny_gpt())
    assert not orphan.exists() and fresh.exists() and other.exists()
    load_checkpoint(path)


def test_failed_write_leaves_no_temp_file(tmp_path):
    def boom(tmp):
        open(tmp, "w").write("partial")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_atomic(tmp_path / "x.json", boom)
    assert list(tmp_path.iterdir()) == []


def test_every_saved_file_has_the_same_mode(tmp_path):
    from llmbook import bert
    from llmbook.tokenizers import ByteBPETokenizer, WordPiece

    save_checkpoint(tmp_path / "train.safetensors", _tiny_gpt())
    cfg = bert.BertConfig(vocab_size=30, hidden_size=16, n_layers=1, n_heads=2,
                          intermediate_size=32, max_position=16)
    bert.save_checkpoint(bert.BertForPreTraining(cfg), tmp_path / "bert.safetensors", cfg)
    ByteBPETokenizer.train("abc abd", 258).save(tmp_path / "tok.json")
    WordPiece.train("low lower lowest " * 3, vocab_size=20, progress=False).save_vocab(tmp_path / "vocab.txt")
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()}
    assert set(modes.values()) == {"0o644"}, modes


# ---------------------------------------------------------------- bert.load_checkpoint


@pytest.mark.parametrize("field, value", [("config", "{not json"), ("config", "[1]"), ("config", '{"nope": 1}'),
                                          ("extra", "{oops")])
def test_bert_checkpoint_bad_metadata_names_file(tmp_path, field, value):
    from safetensors import safe_open
    from safetensors.torch import save_file

    from llmbook import bert

    path = tmp_path / "bert.safetensors"
    cfg = bert.BertConfig(vocab_size=30, hidden_size=16, n_layers=1, n_heads=2,
                          intermediate_size=32, max_position=16)
    bert.save_checkpoint(bert.BertForPreTraining(cfg), path, cfg)
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta[field] = value
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(ValueError, match="damaged metadata") as info:
        bert.load_checkpoint(path)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------- data cache


def test_non_utf8_checksum_file_rebuilds_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBOOK_DATA_DIR", str(tmp_path))
    monkeypatch.setitem(data.TEXTS, "tiny", lambda: "a\nb\n")
    assert data.load_text("tiny") == "a\nb\n"
    (sum_path,) = tmp_path.glob("tiny.*.sha256")
    sum_path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.warns(UserWarning, match="failed its checksum; rebuilding"):
        assert data.load_text("tiny") == "a\nb\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt: the next load is silent
        assert data.load_text("tiny") == "a\nb\n"


# ---------------------------------------------------------------- GGUF


def _write_tiny_gguf(path, with_tokenizer: bool, with_vocab_key: bool = False):
    gguf = pytest.importorskip("gguf")
    from llmbook.llama import LlamaConfig, expected_gguf_tensors

    c = LlamaConfig.tiny()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(c.n_layer)
    w.add_context_length(c.max_seq_len)
    w.add_embedding_length(c.d_model)
    w.add_feed_forward_length(c.d_ff)
    w.add_head_count(c.n_head)
    w.add_head_count_kv(c.n_kv_head)
    w.add_layer_norm_rms_eps(c.norm_eps)
    w.add_rope_freq_base(c.rope_base)
    if with_vocab_key:
        w.add_vocab_size(c.vocab_size)
    if with_tokenizer:
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"t{i}" for i in range(c.vocab_size)])
    rng = np.random.default_rng(0)
    for gname, (_, shape) in expected_gguf_tensors(c).items():
        w.add_tensor(gname, rng.standard_normal(shape).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return c


@pytest.mark.parametrize("with_tokenizer, with_vocab_key", [(False, False), (True, False), (False, True)])
def test_gguf_config_with_or_without_tokenizer_table(tmp_path, with_tokenizer, with_vocab_key):
    from llmbook.llama import load_gguf, read_gguf_config

    path = tmp_path / "tiny.gguf"
    c = _write_tiny_gguf(path, with_tokenizer, with_vocab_key)
    assert read_gguf_config(path) == c
    model = load_gguf(path)
    assert model.config == c


def test_gguf_header_parsed_once(tmp_path, monkeypatch):
    import gguf

    from llmbook.llama import load_gguf, read_gguf_config

    path = tmp_path / "tiny.gguf"
    _write_tiny_gguf(path, with_tokenizer=False)
    calls = []
    real = gguf.GGUFReader

    def counting(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(gguf, "GGUFReader", counting)
    read_gguf_config(path)
    assert len(calls) == 1
    calls.clear()
    load_gguf(path)
    assert len(calls) == 1


def test_gguf_without_any_vocabulary_source_names_file(tmp_path):
    gguf = pytest.importorskip("gguf")
    from llmbook.llama import read_gguf_config

    path = tmp_path / "bare.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for add, v in ((w.add_block_count, 1), (w.add_context_length, 16), (w.add_embedding_length, 8),
                   (w.add_feed_forward_length, 16), (w.add_head_count, 2), (w.add_layer_norm_rms_eps, 1e-5)):
        add(v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError, match="cannot tell the vocabulary size") as info:
        read_gguf_config(path)
    assert str(path) in str(info.value)
