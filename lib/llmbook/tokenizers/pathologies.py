"""Measuring tokenizer pathologies: digit chunks, token tax, collapsed (under-trained) rows.

Small helpers for notebook 01c, each a measurement that works with any tokenizer or any
embedding matrix:

- :func:`max_digit_run`: the longest run of digits inside one token, e.g. 3 for cl100k,
  whose pre-tokenizer cuts numbers into groups of at most three digits;
- :func:`tokens_per_character`: sequence length per character of each text, the measure
  behind the "token tax" that non-English text pays (Petrov et al. 2023, "Language Model
  Tokenizers Introduce Unfairness Between Languages");
- :func:`distance_to_reference` and :func:`collapsed_rows`: the distance of every row of
  an embedding matrix to the mean of rows known to be untrained. Land & Bartolo (2024,
  "Fishing for Magikarp: Automatically Detecting Under-trained Tokens in Large Language
  Models") use such distances for models whose input and output embeddings are tied,
  where a row's norm alone does not reveal it (it does for untied input embeddings).

Left out: the paper's second stage (prompting the model to repeat each candidate token),
which needs the model, and its first principal component removal.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

__all__ = ["max_digit_run", "tokens_per_character", "distance_to_reference", "collapsed_rows"]


def _check_str_list(value, name: str) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must not be empty")
    for s in value:
        if not isinstance(s, str):
            raise TypeError(f"{name} must hold str only, got {type(s).__name__}")
    return list(value)


def max_digit_run(pieces: Sequence[str]) -> int:
    """The longest run of consecutive decimal digits inside any one piece (0 if none).

    >>> max_digit_run(["123", "45", " x7"])
    3
    >>> max_digit_run(["a", "b"])
    0
    """
    if isinstance(pieces, (str, bytes)) or not isinstance(pieces, Sequence) or not all(isinstance(p, str) for p in pieces):
        raise TypeError(f"pieces must be a list of str (the tokens as text), got {type(pieces).__name__}")
    best = 0
    for p in pieces:
        run = 0
        for c in p:
            run = run + 1 if c.isdecimal() else 0
            best = max(best, run)
    return best


def tokens_per_character(encode: Callable[[str], Sequence[int]], texts: Sequence[str]) -> list[float]:
    """``len(encode(t)) / len(t)`` for every text ``t``: how long a sequence each character costs.

    >>> tokens_per_character(list, ["ab", "abcd"])          # one token per character
    [1.0, 1.0]
    >>> tokens_per_character(str.split, ["to be or not"])   # 4 words / 12 characters
    [0.3333333333333333]
    """
    if not callable(encode):
        raise TypeError(f"encode must be a function str -> list of ids, got {type(encode).__name__}")
    texts = _check_str_list(texts, "texts")
    if any(len(t) == 0 for t in texts):
        raise ValueError("texts must not contain an empty string (tokens per character is undefined)")
    return [len(encode(t)) / len(t) for t in texts]


def _check_embedding(embedding, reference_ids) -> tuple[torch.Tensor, list[int]]:
    if not isinstance(embedding, torch.Tensor) or embedding.dim() != 2 or not embedding.is_floating_point():
        raise TypeError("embedding must be a 2-D floating tensor (vocab_size, d_model), got "
                        f"{type(embedding).__name__}{tuple(embedding.shape) if isinstance(embedding, torch.Tensor) else ''}")
    if isinstance(reference_ids, torch.Tensor):
        reference_ids = reference_ids.tolist()
    if isinstance(reference_ids, (str, bytes)) or not isinstance(reference_ids, Sequence) or not reference_ids:
        raise ValueError("reference_ids must be a non-empty list of row ids")
    V = embedding.shape[0]
    for i in reference_ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < V:
            raise ValueError(f"reference_ids must hold ints in [0, {V}), got {i!r}")
    return embedding, list(reference_ids)


def distance_to_reference(embedding: torch.Tensor, reference_ids: Sequence[int]) -> torch.Tensor:
    """Euclidean distance of every row to the mean of the rows ``reference_ids``, shape (vocab_size,).

    >>> E = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 0.1]])
    >>> distance_to_reference(E, [0]).tolist()
    [0.0, 5.0, 0.10000000149011612]
    """
    E, ref = _check_embedding(embedding, reference_ids)
    center = E[ref].mean(dim=0)  # (d_model,)
    return (E - center).norm(dim=1)  # (vocab_size,)


def collapsed_rows(embedding: torch.Tensor, reference_ids: Sequence[int], radius: float) -> list[int]:
    """Ids of the rows within ``radius`` of the reference mean, nearest first (references included).

    >>> E = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 0.1], [0.05, 0.0]])
    >>> collapsed_rows(E, [0], radius=0.2)
    [0, 3, 2]
    """
    if isinstance(radius, bool) or not isinstance(radius, (int, float)) or not radius > 0:
        raise ValueError(f"radius must be a positive number, got {radius!r}")
    d = distance_to_reference(embedding, reference_ids)
    order = torch.argsort(d, stable=True)
    return [int(i) for i in order[d[order] <= radius]]
