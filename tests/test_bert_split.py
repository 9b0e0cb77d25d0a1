"""bert.py split (issue 32): the model in llmbook.bert, pre-training data in llmbook.bert_data,
fine-tuning in llmbook.bert_finetune; every name stays importable from llmbook.bert."""

from __future__ import annotations

import subprocess
import sys

import llmbook.bert as bert
import llmbook.bert_data as bert_data
import llmbook.bert_finetune as bert_finetune


def test_every_public_name_still_comes_from_llmbook_bert():
    for name in bert.__all__:
        assert hasattr(bert, name), name
    for mod in (bert_data, bert_finetune):
        for name in mod.__all__:
            assert name in bert.__all__, name
            assert getattr(bert, name) is getattr(mod, name), name


def test_each_concept_lives_in_its_own_module():
    assert bert.mask_tokens.__module__ == "llmbook.bert_data"
    assert bert.fine_tune.__module__ == "llmbook.bert_finetune"
    assert bert.Bert.__module__ == "llmbook.bert"
    src = open(bert.__file__, encoding="utf-8").read()
    assert "def mask_tokens" not in src and "def fine_tune" not in src


def test_either_import_order_works_in_a_fresh_process():
    for code in ("from llmbook.bert_data import mask_tokens; from llmbook.bert import fine_tune",
                 "from llmbook.bert_finetune import fine_tune; from llmbook.bert import mask_tokens, Bert",
                 "from llmbook.bert import *; mask_tokens, linear_probe, BertConfig"):
        subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ one evaluation loop (issue 32)
import pytest  # noqa: E402
import torch  # noqa: E402

from llmbook.tokenizers.wordpiece import WordPiece  # noqa: E402

_WORDS = "good great bad awful the movie was day".split()
_DATA = [("the movie was good", 1), ("the day was awful", 0), ("great", 1), ("bad bad day", 0), ("the movie", 1)]


def _tiny():
    wp = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _WORDS)
    torch.manual_seed(0)
    cfg = bert.BertConfig(vocab_size=len(wp.vocab), hidden_size=16, n_layers=1, n_heads=2, intermediate_size=32,
                          max_position=16)
    return wp, cfg


def test_no_grad_batches_concatenates_any_batch_size_and_restores_the_mode():
    wp, cfg = _tiny()
    model = bert.Bert(cfg).train()
    seen = []

    def step(b, chunk):
        seen.append((torch.is_grad_enabled(), model.training, len(chunk), b["input_ids"].shape[0]))
        out = model(**b)
        return out.pooled, out.last_hidden_state[:, 0]

    whole = bert_finetune._no_grad_batches(model, wp, _DATA, step, max_len=8, batch_size=len(_DATA))
    for bs in (1, 2, 3):
        parts = bert_finetune._no_grad_batches(model, wp, _DATA, step, max_len=8, batch_size=bs)
        assert isinstance(parts, tuple) and len(parts) == 2
        for a, b in zip(parts, whole):
            assert a.shape == b.shape == (len(_DATA), cfg.hidden_size)
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)   # rows do not depend on the batching
    assert all(not grad and not training and n == rows for grad, training, n, rows in seen)   # eval, no gradients
    assert [n for *_, n, _ in seen[-2:]] == [3, 2]   # the last batch holds the rest
    assert model.training                           # the mode is restored
    with pytest.raises(ValueError, match="data"):
        bert_finetune._no_grad_batches(model, wp, [], step, max_len=8, batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        bert_finetune._no_grad_batches(model, wp, _DATA, step, max_len=8, batch_size=0)


def test_pooled_features_cls_and_mean_in_one_pass():
    wp, cfg = _tiny()
    model = bert.Bert(cfg).eval()
    b = bert.batch_encode(wp, [t for t, _ in _DATA], max_len=8)
    with torch.no_grad():
        out = model(**b)
    cls, mean = bert.pooled_features(model, wp, _DATA, max_len=8, batch_size=2, pooling=("cls", "mean"))
    torch.testing.assert_close(cls, out.pooled, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mean, bert.mean_pool(out.last_hidden_state, b["attention_mask"]), atol=1e-5, rtol=1e-5)
    assert torch.equal(bert.pooled_features(model, wp, _DATA, max_len=8, batch_size=2), cls)   # "cls" is the default
    assert torch.equal(bert.pooled_features(model, wp, _DATA, max_len=8, batch_size=2, pooling="mean"), mean)
    with pytest.raises(ValueError, match="pooling"):
        bert.pooled_features(model, wp, _DATA, max_len=8, pooling="max")
    with pytest.raises(TypeError, match="model"):
        bert.pooled_features(bert.BertForSequenceClassification(cfg), wp, _DATA)


def test_classify_correct_through_the_shared_loop():
    wp, cfg = _tiny()
    clf = bert.BertForSequenceClassification(cfg).eval()
    b = bert.batch_encode(wp, [t for t, _ in _DATA], max_len=8)
    with torch.no_grad():
        pred = clf(b["input_ids"], b["token_type_ids"], b["attention_mask"]).argmax(-1)
    hits = bert.classify_correct(clf, wp, _DATA, max_len=8, batch_size=2)
    assert hits.dtype == torch.bool and hits.tolist() == (pred == torch.tensor([y for _, y in _DATA])).tolist()


def test_linear_probe_per_item_and_weight_decay():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (120,), generator=g)
    f = torch.randn(120, 6, generator=g) + 1.5 * y[:, None].float()
    hits = bert.linear_probe(f[:80], y[:80], f[80:], y[80:], per_item=True)
    assert hits.shape == (40,) and hits.dtype == torch.bool
    assert bert.linear_probe(f[:80], y[:80], f[80:], y[80:]) == pytest.approx(hits.float().mean().item())
    assert hits.float().mean() > 0.7                                   # the features carry the label
    # 0.01 (AdamW's default) is the default decay; a huge decay pulls the weights to 0 and changes the answers
    assert torch.equal(bert.linear_probe(f[:80], y[:80], f[80:], y[80:], weight_decay=0.01, per_item=True), hits)
    strong = bert.linear_probe(f[:80], y[:80], f[:80], y[:80], weight_decay=90.0, per_item=True, steps=50)
    weak = bert.linear_probe(f[:80], y[:80], f[:80], y[:80], weight_decay=0.0, per_item=True, steps=50)
    assert not torch.equal(strong, weak)
    with pytest.raises(ValueError, match="weight_decay"):
        bert.linear_probe(f, y, f, y, weight_decay=-1.0)
