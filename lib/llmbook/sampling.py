"""Turning next-token logits into a token: greedy, temperature, top-k and top-p.

A language model gives a vector of logits over the vocabulary for the next position.
Decoding picks one token from it. This module holds the four classic rules, each a
pure function on a logits tensor of shape ``(..., V)``:

* ``apply_temperature``: divide the logits by T (T < 1 sharpens, T > 1 flattens);
* ``top_k_filter``: keep the k largest logits, set the rest to -inf;
* ``top_p_filter``: keep the smallest set of tokens whose probability adds up to p
  ("nucleus sampling", Holtzman et al. 2020, *The Curious Case of Neural Text
  Degeneration*);
* ``sample_next``: the composition, with ``temperature=0`` meaning greedy (argmax).

Bad logits. NaN or +inf anywhere, or a row whose every entry is -inf (nothing left to
draw), raise a ValueError naming ``logits``: a NaN would otherwise become a "token" under
argmax and a crash inside ``torch.multinomial`` when sampling. On the CPU the check is
an ordinary ``if``; on an accelerator it is ``torch._assert_async`` (no host sync inside
a generation loop; a failure surfaces at the next synchronisation).

Beam search, repetition penalties, min-p and speculative decoding live in
``llmbook.decoding``; typical sampling is left out. Filtering happens in the order
temperature -> top-k -> top-p, as in Hugging Face's ``generate``.
"""

from __future__ import annotations

import torch

__all__ = ["apply_temperature", "top_k_filter", "top_p_filter", "sample_next", "kept_mask"]


def _check_logits(logits: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1, got {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be floating point, got {logits.dtype}")
    _check_values(logits)


def _check_values(logits: torch.Tensor) -> None:
    """NaN / +inf anywhere, or a row of only -inf -> ValueError naming ``logits``."""
    bad = torch.isnan(logits) | (logits == float("inf"))
    empty_row = (logits == float("-inf")).all(dim=-1)
    if logits.device.type != "cpu":
        # One device-side assert, no host sync (the error surfaces at the next sync).
        try:
            torch._assert_async(~(bad.any() | empty_row.any()), "logits contain NaN or +inf, or a row of only -inf")
        except NotImplementedError:
            pass  # a backend without device-side asserts: skip the check rather than sync
        return
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0])
        value = logits[where].item()
        raise ValueError(
            f"logits contain {value} at index {where} (shape {tuple(logits.shape)}): NaN or +inf cannot be "
            "sampled; check the model's output (a NaN loss, an overflow in half precision)"
        )
    if empty_row.any():
        row = tuple(int(i) for i in empty_row.nonzero()[0])
        raise ValueError(
            f"logits row {row} is -inf everywhere (shape {tuple(logits.shape)}): every token is masked, "
            "nothing can be drawn"
        )


def _check_temperature(temperature: float) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not temperature >= 0.0 or temperature == float("inf"):
        raise ValueError(f"temperature must be >= 0 and finite, got {temperature}")
    return float(temperature)


def _check_top_k(k: int | None) -> None:
    if k is None:
        return
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"top_k must be an int or None, got {type(k).__name__}")
    if k < 1:
        raise ValueError(f"top_k must be >= 1, got {k}")


def _check_top_p(p: float | None) -> None:
    if p is None:
        return
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"top_p must be a number or None, got {type(p).__name__}")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {p}")


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Divide logits by ``temperature`` (> 0); softmax of the result is the tempered distribution.

    >>> apply_temperature(torch.tensor([2.0, 4.0]), 2.0)
    tensor([1., 2.])
    """
    _check_logits(logits)
    t = _check_temperature(temperature)
    if t == 0.0:
        raise ValueError("temperature must be > 0 in apply_temperature; temperature=0 means greedy (use sample_next)")
    return logits / t


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` largest logits in the last dimension; the others become -inf.

    Ties at the k-th value are all kept (so slightly more than k may survive). ``k``
    larger than the vocabulary keeps everything.

    >>> top_k_filter(torch.tensor([1.0, 3.0, 2.0, 0.0]), 2)
    tensor([-inf, 3., 2., -inf])
    """
    _check_logits(logits)
    _check_top_k(k)
    if k is None:
        raise TypeError("top_k must be an int, got None")
    k = min(k, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest value
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the most probable tokens until their probability reaches ``p``.

    The token that crosses the threshold is kept, so at least one token always survives;
    ``p = 1`` keeps every token with non-zero probability.

    >>> probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    >>> top_p_filter(probs.log(), 0.7).exp()
    tensor([0.5000, 0.3000, 0.0000, 0.0000])
    """
    _check_logits(logits)
    _check_top_p(p)
    if p is None:
        raise TypeError("top_p must be a number, got None")
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    cum_before = torch.cumsum(probs, dim=-1) - probs  # probability mass strictly above each token
    drop_sorted = cum_before >= p  # a token is dropped once the tokens above it already reach p
    drop_sorted[..., 0] = False
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def kept_mask(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Boolean mask of the tokens ``sample_next`` may draw with these settings.

    >>> kept_mask(torch.tensor([1.0, 3.0, 2.0]), top_k=1)
    tensor([False,  True, False])
    """
    _check_logits(logits)
    t = _check_temperature(temperature)
    _check_top_k(top_k)
    _check_top_p(top_p)
    if t == 0.0:
        return torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.argmax(-1, keepdim=True), True)
    filtered = _filter(logits, t, top_k, top_p)
    return torch.isfinite(filtered)


def _filter(logits: torch.Tensor, t: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    logits = logits / t
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    return logits


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one token id per row of ``logits`` (shape ``(..., V)``); returns ``(...)`` long ids.

    ``temperature=0`` is greedy decoding (argmax; ``top_k``/``top_p`` do not matter).
    Otherwise the logits are divided by the temperature, filtered by top-k then top-p,
    and a token is drawn from the softmax with ``generator`` (for repeatable draws).

    >>> sample_next(torch.tensor([[0.1, 2.0, 0.3]]), temperature=0)
    tensor([1])
    >>> g = torch.Generator().manual_seed(0)
    >>> sample_next(torch.tensor([0.0, 0.0, 9.0]), top_k=1, generator=g)
    tensor(2)
    """
    _check_logits(logits)
    t = _check_temperature(temperature)
    _check_top_k(top_k)
    _check_top_p(top_p)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if t == 0.0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(_filter(logits.float(), t, top_k, top_p), dim=-1)
    flat = probs.reshape(-1, probs.shape[-1])  # (N, V): multinomial wants 1-D or 2-D
    if generator is not None and generator.device != flat.device:
        flat = flat.to(generator.device)
    ids = torch.multinomial(flat, 1, generator=generator).to(logits.device)  # (N, 1)
    return ids.reshape(logits.shape[:-1])
