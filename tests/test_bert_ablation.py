"""scripts/bert_finetune_ablation.py: the tweet splits and the frozen-feature probe protocol."""

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("bert_finetune_ablation", ROOT / "scripts" / "bert_finetune_ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tweet_splits_are_balanced_and_disjoint():
    m = _load()
    train, val, test = m.tweet_splits()
    assert (len(train), len(val), len(test)) == (2000, 500, 500)
    for part in (train, val, test):
        assert sum(y for _, y in part) == len(part) // 2  # balanced: chance is 50%
    assert not set(val) & set(test)  # test never overlaps the tweets that choose settings
    assert not {t for t, _ in train} & {t for t, _ in test}


def test_probe_rows_keeps_the_best_validation_decay():
    m = _load()
    g = torch.Generator().manual_seed(0)
    y = [torch.randint(0, 2, (n,), generator=g) for n in (200, 100, 100)]
    f = [torch.randn(len(t), 8, generator=g) + 1.5 * t[:, None].float() for t in y]  # separable-ish features
    rows = m.probe_rows({"x": f}, y, seeds=[0, 1, 2], weight_decays=(0.0, 10.0))
    row = rows["x"]
    means = {float(wd): sum(v) / len(v) for wd, v in row["val_acc_by_weight_decay"].items()}
    assert row["weight_decay"] == max(means, key=lambda wd: (means[wd], -wd))
    assert len(row["val_acc"]) == len(row["test_acc"]) == 3
    assert sum(row["val_acc"]) / 3 == pytest.approx(means[row["weight_decay"]])
    assert min(row["test_acc"]) > 0.6  # the features carry the label


def test_the_script_uses_the_library_features_and_probe():
    """The frozen features and the probe are the library's (issue 32): no copies in the script."""
    import llmbook.bert_finetune as lib

    m = _load()
    assert m.pooled_features is lib.pooled_features and m.linear_probe is lib.linear_probe
    for copy in ("frozen_features", "probe_correct", "probe_accuracy"):
        assert not hasattr(m, copy), copy
    g = torch.Generator().manual_seed(1)
    y = [torch.randint(0, 2, (n,), generator=g) for n in (60, 30, 30)]
    f = [torch.randn(len(t), 4, generator=g) + t[:, None].float() for t in y]
    row = m.probe_rows({"x": f}, y, seeds=[0], weight_decays=(0.0, 1.0))["x"]
    f_tr, _, f_te = m.standardise(*f)
    hits = lib.linear_probe(f_tr, y[0], f_te, y[2], seed=0, weight_decay=row["weight_decay"], per_item=True)
    assert row["test_correct"] == [m.bits(hits)]      # the test column is linear_probe's, on standardised features


def test_committed_result_records_its_protocol():
    data = json.loads((ROOT / "data" / "results" / "ch07_finetune_ablation.json").read_text())
    assert data["meta"]["command"].startswith("OMP_NUM_THREADS=1 ") and "python scripts/bert_finetune_ablation.py" in data["meta"]["command"]
    assert len(data["seeds"]) >= 3
    for name in ("MiniLM frozen [CLS] + linear head", "MiniLM frozen mean-pooled + linear head"):
        row = data["rows"][name]
        assert len(row["test_acc"]) == len(data["seeds"])
        best = max(data["weight_decays"], key=lambda wd: (sum(row["val_acc_by_weight_decay"][repr(wd)]), -wd))
        assert row["weight_decay"] == best  # chosen on validation, not on test
        assert row["bracketed"] and best < max(data["weight_decays"])  # the best decay lies inside the grid
        assert all(len(bits) == data["n_test"] and set(bits) <= {"0", "1"} for bits in row["test_correct"])
    ft = data["rows"]["MiniLM, fine-tuned"]  # the fine-tuned row is in the committed file, every seed, per tweet
    assert len(ft["test_acc"]) == len(data["seeds"]) and len(ft["test_correct"]) == len(data["seeds"])
    for acc, bits in zip(ft["test_acc"], ft["test_correct"]):
        assert len(bits) == data["n_test"] and bits.count("1") / len(bits) == acc
    # BERT's recipe, the script's defaults: 3 epochs of batch 16, the learning rate from BERT's three on validation
    m = _load()
    assert (data["epochs"], data["batch_size"]) == (m.EPOCHS, m.BATCH_SIZE) and data["learning_rates"] == list(m.LEARNING_RATES)
    assert ft["steps"] == [m.EPOCHS * math.ceil(data["n_train"] / m.BATCH_SIZE)] * len(data["seeds"])
    by_lr = ft["val_acc_by_lr"]  # the fine-tuning learning rate, like the probes' decay, from validation
    assert set(by_lr) == {repr(lr) for lr in data["learning_rates"]}
    assert all(len(v) == len(data["seeds"]) for v in by_lr.values())
    assert ft["lr"] == data["lr"] == max(data["learning_rates"], key=lambda lr: (sum(by_lr[repr(lr)]), lr))
    assert ft["val_acc"] == by_lr[repr(data["lr"])]
    assert len(ft["runs"]) == len(data["learning_rates"]) * len(data["seeds"])  # every run trained, scored on validation


def test_standardise_uses_the_training_rows_only():
    m = _load()
    g = torch.Generator().manual_seed(0)
    train, other = 3 + 2 * torch.randn(50, 4, generator=g), 10 + torch.randn(7, 4, generator=g)
    s_train, s_other = m.standardise(train, other)
    torch.testing.assert_close(s_train.mean(0), torch.zeros(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(s_train.std(0), torch.ones(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(s_other, (other - train.mean(0)) / train.std(0))  # the training statistics, not its own
