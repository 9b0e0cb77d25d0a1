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

__all__ = ["default_device", "seed_everything", "describe_device", "ENV_VAR"]

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
