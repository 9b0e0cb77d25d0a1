"""Where tensors live and how runs are made repeatable.

``default_device()`` picks the fastest backend present (CUDA, then Apple's MPS, then
the CPU); the environment variable ``LLMBOOK_DEVICE`` overrides the choice, for example
``LLMBOOK_DEVICE=cpu`` on a GPU machine to reproduce the committed notebook outputs.
``seed_everything(seed)`` seeds Python, NumPy and PyTorch so that CPU runs repeat
exactly. GPU kernels may still be non-deterministic; the book only promises bit-exact
repeats on the CPU.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["default_device", "seed_everything", "describe_device", "ENV_VAR", "model_device", "values_checkable",
           "check_index_range", "check_on_device"]

ENV_VAR = "LLMBOOK_DEVICE"
_KNOWN = ("cpu", "cuda", "mps")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def default_device() -> torch.device:
    """Return the device the book computes on.

    Order of preference: ``$LLMBOOK_DEVICE`` if set, else CUDA, else MPS, else CPU.

    >>> import os
    >>> os.environ["LLMBOOK_DEVICE"] = "cpu"
    >>> default_device()
    device(type='cpu')
    >>> del os.environ["LLMBOOK_DEVICE"]
    """
    override = os.environ.get(ENV_VAR, "").strip()
    if override:
        kind = override.split(":")[0].lower()
        if kind not in _KNOWN:
            raise ValueError(
                f"{ENV_VAR}={override!r} is not a device; use one of {', '.join(_KNOWN)} "
                "(optionally with an index, e.g. cuda:1)"
            )
        if kind == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"{ENV_VAR}={override!r} asks for CUDA, but torch sees no CUDA GPU")
        if kind == "mps" and not _mps_available():
            raise ValueError(f"{ENV_VAR}={override!r} asks for MPS, but it is not available")
        return torch.device(override.lower())
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed ``random``, NumPy and PyTorch (CPU and every GPU); return a seeded CPU generator.

    >>> g = seed_everything(1); a = torch.rand(2)
    >>> g = seed_everything(1); b = torch.rand(2)
    >>> torch.equal(a, b)
    True
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    return torch.Generator().manual_seed(seed)


def describe_device(device: torch.device | None = None) -> str:
    """One line naming the device, for the top of every notebook.

    >>> describe_device(torch.device("cpu")).startswith("cpu")
    True
    """
    device = default_device() if device is None else torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"cuda ({name}), torch {torch.__version__}"
    if device.type == "mps":
        return f"mps (Apple GPU), torch {torch.__version__}"
    # Thread counts and CPU names are left out so that the line is the same on every
    # CPU machine and the committed notebook outputs stay comparable.
    return f"cpu, torch {torch.__version__}"


# ---------------------------------------------------------------- checks without host syncs


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (or buffer): where its inputs must live.

    >>> model_device(torch.nn.Linear(2, 2))
    device(type='cpu')
    """
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    return torch.device("cpu")


def values_checkable(t: torch.Tensor) -> bool:
    """True when reading ``t``'s values costs no device sync and breaks no compiled graph.

    That is: ``t`` is on the CPU and no ``torch.compile`` trace is running. Value checks
    (an id out of range, a NaN) raise clear errors only then; on a GPU they become
    asynchronous device asserts (``check_index_range``) or are skipped, because reading
    one number back stalls the GPU until all queued work is done.
    """
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def check_index_range(name: str, t: torch.Tensor, high: int, low: int = 0, ignore_index: int | None = None,
                      what: str = "token ids", any_int: bool = False) -> None:
    """Check that every value of the integer tensor ``t`` lies in ``[low, high)`` (or equals ``ignore_index``).

    The one token-id check of every model (GPT, BERT, LLaMA, MoE) and of targets and labels.
    Token ids must be int64 or int32 (narrower integers have wrapped upstream: 300 as uint8
    is 44); ``any_int=True`` lets masks and segment ids be any integer dtype.
    On the CPU it raises ``ValueError`` naming ``name`` and the offending range; on CUDA it
    queues an asynchronous device assert (no host sync); on other devices, on ``meta`` and
    under ``torch.compile`` tracing it checks nothing.

    >>> check_index_range("idx", torch.tensor([[0, 4]]), high=5)
    >>> check_index_range("idx", torch.tensor([[0, 5]]), high=5)
    Traceback (most recent call last):
    ...
    ValueError: idx must lie in [0, 5) (token ids); 1 values do not, ranging over [5, 5]
    """
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor of {what}, got dtype {t.dtype}")
    if not any_int and t.dtype not in (torch.int64, torch.int32):
        # uint8/int8/int16 ids have already wrapped around or been cut to their range upstream
        # (300 as uint8 is 44), and nn.Embedding and cross_entropy do not take them all
        raise TypeError(f"{name} must be an int64 (torch.long) or int32 tensor of {what}, got dtype {t.dtype}; "
                        f"build it with dtype=torch.long")
    if t.numel() == 0 or torch.compiler.is_compiling():
        return
    if t.device.type == "cpu":
        lo, hi = (int(v) for v in torch.aminmax(t))  # one pass over t
        if lo >= low and hi < high:
            return
        bad = (t < low) | (t >= high)
        if ignore_index is not None:
            bad &= t != ignore_index
        if bool(bad.any()):
            vals = t[bad]
            also = f" (or {ignore_index} to ignore a position)" if ignore_index is not None else ""
            raise ValueError(f"{name} must lie in [{low}, {high}) ({what}){also}; {vals.numel()} values do not, "
                             f"ranging over [{int(vals.min())}, {int(vals.max())}]")
    elif t.device.type == "cuda":
        ok = (t >= low) & (t < high)
        if ignore_index is not None:
            ok |= t == ignore_index
        torch._assert_async(ok.all(), f"{name}: {what} out of range [{low}, {high})")


def check_on_device(name: str, t: torch.Tensor, device: torch.device) -> None:
    """Raise ``ValueError`` if ``t`` is not on ``device`` (the model's), saying how to move it.

    >>> check_on_device("idx", torch.zeros(1), torch.device("cpu"))
    """
    if t.device.type != device.type or (device.index is not None and t.device.index not in (None, device.index)):
        raise ValueError(f"{name} is on {t.device} but the model is on {device}; move it with "
                         f"{name}.to({str(device)!r}) (or llmbook.device.model_device(model))")
