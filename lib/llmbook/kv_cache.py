"""One key/value cache for every decoder in the book (GPT, LLaMA, the decoding helpers).

During generation each new token needs the keys and values of every earlier position,
in every layer. Recomputing them costs a whole forward pass over the prefix per step;
keeping them costs memory: ``2 * n_layer * B * n_kv_heads * max_len * head_dim`` numbers.

``KVCache(config, batch_size, max_len=None, device=None, dtype=None)`` preallocates that
memory for any config with ``n_layer``, ``n_head`` and ``head_dim`` (GPT's ``GPTConfig``,
LLaMA's ``LlamaConfig``). A config with ``n_kv_head`` (grouped-query attention) stores only
those G heads, which is GQA's saving. ``max_len`` defaults to the config's ``block_size``
(GPT's learned positions stop there); LLaMA callers give it.

The API, the same for both models:

- ``length``: how many positions are filled; the model reads it as the absolute position
  of its first new token and advances it by T after all layers have appended;
- ``append(layer, k, v)``: write k, v (B, G, T, hd) at positions ``length .. length+T-1`` of
  ``layer`` and return the keys and values of positions ``0 .. length+T-1``;
- ``truncate(n)``: forget everything from position n on (speculative decoding rolls back
  rejected drafts this way); ``reset()`` is ``truncate(0)``;
- ``nbytes()``: memory held (or, before allocation, that will be held).

With ``device`` left as None the buffers are allocated at the first ``append``, on the
device and in the dtype of the keys the model produces, so a cache built without naming
a device works wherever the model lives (CPU, CUDA, MPS or the meta device).
"""

from __future__ import annotations

import math

import torch

__all__ = ["KVCache"]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


class KVCache:
    """Preallocated keys and values of every layer; ``length`` counts the filled positions."""

    def __init__(self, config, batch_size: int, max_len: int | None = None,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        for attr in ("n_layer", "n_head", "head_dim"):
            if not hasattr(config, attr):
                raise TypeError(f"config must be a model config with n_layer, n_head and head_dim "
                                f"(GPTConfig, LlamaConfig); {type(config).__name__} has no {attr!r}")
        _positive_int("batch_size", batch_size)
        if max_len is None:
            max_len = getattr(config, "block_size", None)
            if max_len is None:
                raise ValueError(f"max_len must be given for a {type(config).__name__} (it has no block_size)")
        _positive_int("max_len", max_len)
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype must be a torch.dtype or None, got {dtype!r}")
        n_kv = getattr(config, "n_kv_head", None) or config.n_head
        self.shape = (batch_size, n_kv, max_len, config.head_dim)  # (B, G, max_len, hd)
        self.n_layer = config.n_layer
        self.max_len = max_len
        self.dtype = dtype or torch.float32
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.length = 0
        if device is not None:
            self.allocate(torch.device(device), self.dtype)

    @property
    def allocated(self) -> bool:
        return bool(self.k)

    def allocate(self, device: torch.device, dtype: torch.dtype) -> None:
        """Create the zeroed buffers (done by the first ``append`` when no device was given)."""
        self.dtype = dtype
        self.k = [torch.zeros(self.shape, device=device, dtype=dtype) for _ in range(self.n_layer)]
        self.v = [torch.zeros(self.shape, device=device, dtype=dtype) for _ in range(self.n_layer)]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, G, T, hd) at positions length..length+T-1 of ``layer``.

        Returns the keys and values of positions 0..length+T-1, each (B, G, S, hd). Does not
        advance ``length``: the model does that once every layer has appended.
        """
        self._check_fits(layer, k, v)
        B, T = k.shape[0], k.shape[2]
        end = self.length + T
        if end > self.max_len:
            raise ValueError(f"KV cache full: the cache holds {self.max_len} positions; "
                             f"{self.length} filled + {T} new is too many")
        if not self.k:
            self.allocate(k.device, k.dtype)
        elif k.device != self.k[0].device:
            raise ValueError(f"k is on {k.device} but the cache's buffers are on {self.k[0].device}")
        self.k[layer][:B, :, self.length:end] = k
        self.v[layer][:B, :, self.length:end] = v
        return self.k[layer][:B, :, :end], self.v[layer][:B, :, :end]

    def _check_fits(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """A cache built for another batch size or another model is refused, naming what differs."""
        B, G, _, hd = self.shape
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.n_layer:
            raise ValueError(f"layer must be an int in [0, {self.n_layer}): this cache was built for a model with "
                             f"{self.n_layer} layers, got layer={layer!r}")
        for name, t in (("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor) or t.dim() != 4:
                raise ValueError(f"{name} must be a (batch, kv_heads, T, head_dim) tensor, got {getattr(t, 'shape', type(t))}")
        if k.shape[0] != B:
            raise ValueError(f"k has batch size {k.shape[0]} but the cache was made for batch_size={B}: "
                             "build one KVCache per batch (another batch's rows would be mixed in)")
        if k.shape[1] != G or k.shape[3] != hd:
            raise ValueError(f"k has {k.shape[1]} heads of size {k.shape[3]} but the cache was made for {G} of size {hd}: "
                             "it belongs to another model's config")
        if v.shape[:3] != k.shape[:3] or v.shape[3] != hd:
            raise ValueError(f"v of shape {tuple(v.shape)} does not match k of shape {tuple(k.shape)}")

    def truncate(self, n: int) -> None:
        """Keep positions 0..n-1 only (the next append writes at position n)."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= self.length:
            raise ValueError(f"n must be an int in [0, {self.length}] (the filled length), got {n!r}")
        self.length = n

    def reset(self) -> None:
        """Empty the cache (the buffers are kept and overwritten)."""
        self.length = 0

    def nbytes(self) -> int:
        """Memory held by the cache, in bytes (what it holds or, before allocation, will hold)."""
        per = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.n_layer * math.prod(self.shape) * per

    def __repr__(self) -> str:
        B, G, L, hd = self.shape
        return (f"KVCache(layers={self.n_layer}, batch={B}, kv_heads={G}, head_dim={hd}, "
                f"length={self.length}/{L}, dtype={self.dtype})")
