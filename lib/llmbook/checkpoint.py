"""Checkpoint IO in one place, for every model of the book: safetensors, atomic, never pickle.

Every file of tensors the library writes or reads goes through :func:`write_tensors` and
:func:`read_tensors` (``llmbook.train.save_checkpoint`` for the training loop and LoRA
adapters, ``llmbook.bert.save_checkpoint`` for BERT):

- the format is safetensors (Hugging Face): a JSON header and raw tensor bytes, so reading a
  file runs no code (``torch.load`` unpickles; the book never calls it, see
  ``tests/test_security.py``); metadata is a dict of strings, parsed with ``json.loads``;
- a path is written atomically (:func:`llmbook.atomic.write_atomic`: a temporary file in the
  same folder, then ``os.replace``; a killed write leaves the old file and its temporary
  file is removed by the next write); an open binary file (``io.BytesIO``, a socket's file,
  an archive member) is written or read as well;
- :func:`encode_json` / :func:`decode_json` carry Python values that JSON lacks: a tuple
  comes back a tuple (Adam's ``betas``), a tensor (a tensor learning rate) is stored as a
  tensor of the file and comes back equal, dtype included.
- :func:`load_state_checked` copies tensors into a model by name and shape, naming the first
  tensor that is unknown, missing or mis-shaped.

>>> import io
>>> buf = io.BytesIO()
>>> write_tensors(buf, {"w": torch.ones(2)}, {"note": "hi"})
>>> tensors, meta = read_tensors(io.BytesIO(buf.getvalue()))
>>> tensors["w"].tolist(), meta
([1.0, 1.0], {'note': 'hi'})
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any, BinaryIO, Union

import torch
import torch.nn as nn

__all__ = ["Target", "write_tensors", "read_tensors", "source_name", "encode_json", "decode_json", "load_state_checked"]

#: A path, or an open binary file (anything with ``write``/``read``).
Target = Union[str, os.PathLike, BinaryIO]


def _is_file(obj: Any, method: str) -> bool:
    return not isinstance(obj, (str, bytes, os.PathLike)) and callable(getattr(obj, method, None))


def source_name(target: Any) -> str:
    """How an error names a path or an open file."""
    if isinstance(target, (str, os.PathLike)):
        return str(target)
    name = getattr(target, "name", None)
    return f"{type(target).__name__} {name!r}" if isinstance(name, str) else f"the {type(target).__name__} given"


def write_tensors(target: Target, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None,
                  name: str = "path") -> None:
    """Write ``tensors`` (and string ``metadata``) as safetensors: atomically to a path, or to an open binary file."""
    from safetensors.torch import save, save_file

    metadata = dict(metadata or {})
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"metadata must map str to str, got {k!r}: {type(v).__name__}")
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    if _is_file(target, "write"):
        target.write(save(tensors, metadata=metadata))
        return
    if not isinstance(target, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path or a binary file open for writing, got {type(target).__name__}")
    from .atomic import write_atomic  # mode 0o644, stale temporary files removed

    write_atomic(Path(target), lambda tmp: save_file(tensors, tmp, metadata=metadata))


def _metadata_of(data: bytes) -> dict:
    """The ``__metadata__`` of a safetensors byte string (its 8-byte length, then a JSON header)."""
    if len(data) < 8:
        raise ValueError(f"{len(data)} bytes is too short for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"the header claims {n} bytes; the file has {len(data) - 8} after the length")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else {}


def read_tensors(source: Target, name: str = "path") -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Read a safetensors file (a path, or an open binary file): ``(tensors, metadata)``.

    A missing path raises FileNotFoundError; a truncated or garbled file ValueError, both naming it.
    """
    if _is_file(source, "read"):
        from safetensors.torch import load

        data = source.read()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"{name} must be opened in binary mode ('rb'): read() gave {type(data).__name__}")
        try:
            data = bytes(data)
            return load(data), _metadata_of(data)
        except Exception as err:  # safetensors raises its own error types for truncated/garbled data
            raise ValueError(f"checkpoint {source_name(source)} is corrupt or not a safetensors file: {err}") from err
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path or a binary file open for reading, got {type(source).__name__}")
    from safetensors import safe_open

    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
    except Exception as err:
        raise ValueError(f"checkpoint {path} is corrupt or not a safetensors file: {err}") from err


_TUPLE, _TENSOR = "__tuple__", "__tensor__"


def encode_json(value: Any, tensors: dict[str, torch.Tensor], key: str, where: str) -> Any:
    """``value`` as JSON-able data; tuples tagged, tensors moved into ``tensors`` under ``key``.

    ``where`` names the value in an error (``optimizer.param_groups[0]['lr']``).

    >>> t = {}
    >>> encode_json({"betas": (0.9, 0.95), "lr": torch.tensor(0.1)}, t, "g", "group")
    {'betas': {'__tuple__': [0.9, 0.95]}, 'lr': {'__tensor__': 'g.lr'}}
    """
    if isinstance(value, torch.Tensor):
        tensors[key] = value
        return {_TENSOR: key}
    if isinstance(value, tuple):
        return {_TUPLE: [encode_json(v, tensors, f"{key}.{i}", f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode_json(v, tensors, f"{key}.{i}", f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"{where} has a key that is not a str: {list(value)[:5]}")
        return {k: encode_json(v, tensors, f"{key}.{k}", f"{where}[{k!r}]") for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value  # json writes NaN/inf as NaN/Infinity and reads them back
    raise TypeError(f"{where} is a {type(value).__name__}, which a checkpoint cannot store "
                    "(numbers, strings, None, tuples, lists, dicts and tensors can)")


def decode_json(value: Any, tensors: dict[str, torch.Tensor], where: str) -> Any:
    """The inverse of :func:`encode_json`; a reference to a tensor the file lacks -> ValueError."""
    if isinstance(value, dict):
        if set(value) == {_TENSOR}:
            if value[_TENSOR] not in tensors:
                raise ValueError(f"{where} refers to tensor {value[_TENSOR]!r}, which the file does not hold")
            return tensors[value[_TENSOR]]
        if set(value) == {_TUPLE} and isinstance(value[_TUPLE], list):
            return tuple(decode_json(v, tensors, f"{where}[{i}]") for i, v in enumerate(value[_TUPLE]))
        return {k: decode_json(v, tensors, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list):
        return [decode_json(v, tensors, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


@torch.no_grad()
def load_state_checked(model: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Copy ``tensors`` into ``model`` by name; unknown, missing or mis-shaped tensors raise ValueError."""
    state = model.state_dict()
    unknown = [k for k in tensors if k not in state]
    if unknown:
        raise ValueError(f"checkpoint tensor {unknown[0]!r} has no counterpart in {type(model).__name__}")
    ptrs: dict[int, str] = {}
    for name, t in state.items():
        if name not in tensors:
            if t.data_ptr() in ptrs:
                continue  # tied: filled through its first name
            raise ValueError(f"checkpoint is missing tensor {name!r}")
        ptrs[t.data_ptr()] = name
        src = tensors[name]
        if tuple(src.shape) != tuple(t.shape):
            raise ValueError(f"checkpoint tensor {name!r} has shape {tuple(src.shape)}, the model expects {tuple(t.shape)}")
        t.copy_(src.to(t.dtype))
