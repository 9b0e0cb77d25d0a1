"""Bad input to sampling, the training loop and the model configs (issue 17, item 5): NaN and
infinities raise clear errors naming the parameter; a non-finite loss stops training and keeps
the last good checkpoint."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.nn as nn

from llmbook.gpt import GPTConfig
from llmbook.sampling import apply_temperature, kept_mask, sample_next, top_k_filter, top_p_filter
from llmbook.sampling import _check_values
from llmbook.train import TrainConfig, load_checkpoint, train

NAN, INF = float("nan"), float("inf")


# ---------------------------------------------------------------- sampling


@pytest.mark.parametrize("temperature", [0, 0.7, 1.0])
@pytest.mark.parametrize("bad", [NAN, INF])
def test_nan_or_inf_logits_name_logits(temperature, bad):
    logits = torch.tensor([[0.1, 2.0, 0.3], [1.0, bad, 0.0]])
    with pytest.raises(ValueError, match=r"logits contain .* at index \(1, 1\)"):
        sample_next(logits, temperature=temperature, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_all_minus_inf_row_names_logits(temperature):
    logits = torch.tensor([[0.0, 1.0], [-INF, -INF]])
    with pytest.raises(ValueError, match=r"logits row \(1,\) is -inf everywhere"):
        sample_next(logits, temperature=temperature)


@pytest.mark.parametrize("fn", [
    lambda x: apply_temperature(x, 0.5),
    lambda x: top_k_filter(x, 2),
    lambda x: top_p_filter(x, 0.9),
    lambda x: kept_mask(x, top_k=1),
    lambda x: kept_mask(x, temperature=0),
])
def test_every_sampling_function_checks_values(fn):
    with pytest.raises(ValueError, match="logits"):
        fn(torch.tensor([0.0, NAN, 1.0]))
    with pytest.raises(ValueError, match="logits"):
        fn(torch.full((2, 3), -INF))


def test_partial_minus_inf_is_still_a_mask():
    """Neighbour: -inf entries (masked tokens) are fine as long as one token is left."""
    logits = torch.tensor([[-INF, 0.0, -INF], [1.0, -INF, 2.0]])
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        ids = sample_next(logits, generator=g)
        assert ids[0] == 1 and ids[1] in (0, 2)
    assert sample_next(logits, temperature=0).tolist() == [1, 2]


def test_half_precision_and_empty_batch():
    assert sample_next(torch.tensor([0.0, 5.0], dtype=torch.bfloat16), temperature=0) == 1
    assert sample_next(torch.zeros(0, 4), temperature=0).shape == (0,)
    with pytest.raises(ValueError, match="logits"):
        sample_next(torch.tensor([0.0, NAN], dtype=torch.float16), temperature=0)


def test_value_check_is_sync_free_off_the_cpu():
    """On an accelerator the check must not read a value back: a meta tensor has no values,
    so any host sync (bool(), .item()) would raise here."""
    _check_values(torch.zeros(2, 5, device="meta"))


# ---------------------------------------------------------------- configs


@pytest.mark.parametrize("field, value", [
    ("weight_decay", NAN), ("weight_decay", -0.1), ("weight_decay", INF),
    ("grad_clip", NAN), ("grad_clip", -1.0), ("grad_clip", INF),
    ("lr", NAN), ("lr", INF), ("lr", 0.0), ("lr", "1e-3"),
    ("min_lr", NAN), ("min_lr", -1e-4),
    ("beta1", NAN), ("beta1", 1.0), ("beta2", -0.5), ("beta2", 1.5),
    ("max_seconds", NAN), ("max_seconds", INF), ("max_seconds", 0),
    ("stop_after", -1), ("stop_after", 1.5),
    ("seed", "0"), ("seed", 1.0),
])
def test_train_config_rejects(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: value})


def test_train_config_min_lr_above_lr():
    with pytest.raises(ValueError, match="min_lr"):
        TrainConfig(lr=1e-4, min_lr=1e-3)


def test_train_revalidates_a_changed_config():
    cfg = TrainConfig(max_steps=2, progress=False)
    cfg.weight_decay = NAN  # dataclass fields can be set after construction
    with pytest.raises(ValueError, match="weight_decay"):
        train(nn.Linear(2, 2), lambda split, g: (torch.zeros(1, 2), torch.zeros(1, 2)), cfg)


@pytest.mark.parametrize("eps", [-1e-5, 0.0, NAN, INF, "1e-5", True])
def test_gpt_config_layer_norm_eps(eps):
    with pytest.raises(ValueError, match="layer_norm_eps"):
        GPTConfig(layer_norm_eps=eps)


def test_gpt_config_nan_dropout():
    with pytest.raises(ValueError, match="dropout"):
        GPTConfig(dropout=NAN)


# ---------------------------------------------------------------- non-finite loss


class _Regression(nn.Module):
    """A linear model whose forward(x, y) returns (prediction, loss), like the book's models."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, x, y):
        pred = self.lin(x).squeeze(-1)
        return pred, ((pred - y) ** 2).mean()


def _batches(bad_at: int, bad_value: float):
    """get_batch whose `bad_at`-th training batch (1-based) holds a non-finite input."""
    calls = {"train": 0}

    def get_batch(split, g):
        x = torch.randn(8, 4, generator=g)
        y = x.sum(-1)
        if split == "train":
            calls["train"] += 1
            if calls["train"] == bad_at:
                x = x.clone()
                x[0, 0] = bad_value
        return x, y

    return get_batch


@pytest.mark.parametrize("bad_value", [NAN, INF])
def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path, bad_value):
    torch.manual_seed(0)
    model = _Regression()
    path = tmp_path / "ck.safetensors"
    cfg = TrainConfig(max_steps=10, lr=1e-2, warmup_steps=1, eval_interval=100, eval_batches=1, progress=False,
                      checkpoint_path=str(path), checkpoint_interval=1)
    with pytest.raises(FloatingPointError, match=r"loss is (nan|inf) at step 4") as info:
        train(model, _batches(4, bad_value), cfg)
    assert str(path) in str(info.value)
    ck = load_checkpoint(path)
    assert ck["meta"]["history"]["step"] == 3  # the last good save, not overwritten
    assert all(math.isfinite(v) for v in ck["meta"]["history"]["train_losses"])
    assert all(bool(torch.isfinite(t).all()) for t in ck["model"].values())
    # on the CPU the check runs before the update: the weights in memory are good too
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_non_finite_loss_without_checkpoint_path():
    cfg = TrainConfig(max_steps=5, warmup_steps=1, eval_interval=100, eval_batches=1, progress=False)
    with pytest.raises(FloatingPointError, match=r"at step 1: .*checkpoint_path is None"):
        train(_Regression(), _batches(1, NAN), cfg)


def test_finite_run_unaffected(tmp_path):
    torch.manual_seed(0)
    cfg = TrainConfig(max_steps=5, lr=1e-2, warmup_steps=1, eval_interval=5, eval_batches=1, progress=False,
                      checkpoint_path=str(tmp_path / "ok.safetensors"))
    result = train(_Regression(), _batches(0, NAN), cfg)
    assert result.step == 5 and all(math.isfinite(v) for v in result.train_losses)
    assert oct(os.stat(tmp_path / "ok.safetensors").st_mode & 0o777) == "0o644"


# ---------------------------------------------------------------- compression (neighbours)


@pytest.mark.parametrize("symbols, match", [([0, 1.5], r"symbols\[1\] must be an int"), ([True], r"symbols\[0\]"),
                                             ("0123", "symbols must be a sequence"),
                                             (torch.tensor([0.0, 1.0]), "symbols must hold integer ids")])
def test_compress_symbols_must_be_ints(symbols, match):
    from llmbook.compression import compress, ideal_bits

    uniform = lambda prefix: [0.25] * 4  # noqa: E731
    with pytest.raises(TypeError, match=match):
        compress(symbols, uniform)
    with pytest.raises(TypeError, match=match):
        ideal_bits(symbols, uniform)


def test_compress_accepts_integer_tensors_and_numpy_ints():
    import numpy as np

    from llmbook.compression import compress, decompress

    uniform = lambda prefix: [0.25] * 4  # noqa: E731
    data = compress(torch.tensor([0, 3, 1]), uniform)
    assert decompress(data, uniform) == [0, 3, 1] and compress(np.array([0, 3, 1]), uniform) == data


def test_predictor_returning_nan_names_probs():
    from llmbook.compression import compress

    with pytest.raises(ValueError, match="probs must be finite"):
        compress([0, 1], lambda prefix: [0.5, NAN])


@pytest.mark.parametrize("gelu", ["erf", "", None, "TANH"])
def test_gpt_config_gelu(gelu):
    with pytest.raises(ValueError, match="gelu"):
        GPTConfig(gelu=gelu)


def test_gpt_gelu_switch_changes_only_the_activation():
    """gelu='exact' is the erf GELU; a config saved before the switch existed loads as tanh."""
    from dataclasses import asdict

    import torch.nn.functional as F

    from llmbook.gpt import MLP

    cfg = GPTConfig.baby(vocab_size=11)
    saved = {k: v for k, v in asdict(cfg).items() if k != "gelu"}  # an older checkpoint's config
    assert GPTConfig(**saved).gelu == "tanh"
    x = torch.randn(2, 3, cfg.d_model)
    torch.manual_seed(0)
    tanh_mlp = MLP(cfg)
    torch.manual_seed(0)
    exact_mlp = MLP(GPTConfig.baby(vocab_size=11, gelu="exact"))
    h = tanh_mlp.c_fc(x)
    torch.testing.assert_close(tanh_mlp(x), tanh_mlp.c_proj(F.gelu(h, approximate="tanh")))
    torch.testing.assert_close(exact_mlp(x), exact_mlp.c_proj(F.gelu(h)))
    assert not torch.equal(tanh_mlp(x), exact_mlp(x))
