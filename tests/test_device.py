"""llmbook.device: the device choice, its override, seeding."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from llmbook.device import ENV_VAR, default_device, describe_device, seed_everything


def test_default_without_override_follows_preference(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    dev = default_device()
    if torch.cuda.is_available():
        assert dev.type == "cuda"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        assert dev.type == "mps"
    else:
        assert dev == torch.device("cpu")


def test_preference_order_with_fake_backends(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("llmbook.device._mps_available", lambda: True)
    assert default_device().type == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device().type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("llmbook.device._mps_available", lambda: False)
    assert default_device().type == "cpu"


@pytest.mark.parametrize("value", ["cpu", "CPU", " cpu "])
def test_override_cpu(monkeypatch, value):
    monkeypatch.setenv(ENV_VAR, value)
    assert default_device() == torch.device("cpu")


def test_empty_override_is_ignored(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("llmbook.device._mps_available", lambda: False)
    assert default_device() == torch.device("cpu")


def test_bogus_override_names_the_variable(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "tpu")
    with pytest.raises(ValueError, match=ENV_VAR) as info:
        default_device()
    assert "cpu" in str(info.value) and "cuda" in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error when CUDA is absent")
def test_cuda_override_without_cuda(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "cuda")
    with pytest.raises(ValueError, match=f"{ENV_VAR}.*CUDA"):
        default_device()
    monkeypatch.setenv(ENV_VAR, "cuda:1")
    with pytest.raises(ValueError, match=ENV_VAR):
        default_device()


def test_mps_override_without_mps(monkeypatch):
    monkeypatch.setattr("llmbook.device._mps_available", lambda: False)
    monkeypatch.setenv(ENV_VAR, "mps")
    with pytest.raises(ValueError, match=f"{ENV_VAR}.*MPS"):
        default_device()


def test_seed_everything_repeats_every_generator():
    def draw():
        return random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist(), torch.randn(2, generator=g).tolist()

    g = seed_everything(123)
    first = draw()
    g = seed_everything(123)
    assert draw() == first
    g = seed_everything(124)
    assert draw() != first
    # A model initialised after seeding is the same twice.
    seed_everything(7)
    a = torch.nn.Linear(4, 3).weight.detach().clone()
    seed_everything(7)
    torch.testing.assert_close(torch.nn.Linear(4, 3).weight.detach(), a, rtol=0, atol=0)


def test_seed_everything_large_and_bad_seeds():
    seed_everything(2**40)  # NumPy only takes 32 bits: reduced, not an error
    for bad in (1.5, "0", None, True):
        with pytest.raises(TypeError, match="seed"):
            seed_everything(bad)


def test_describe_device(monkeypatch):
    assert describe_device(torch.device("cpu")) == f"cpu, torch {torch.__version__}"
    assert describe_device("cpu").startswith("cpu")
    monkeypatch.setenv(ENV_VAR, "cpu")
    assert describe_device() == f"cpu, torch {torch.__version__}"
