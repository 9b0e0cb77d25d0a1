"""The sampling explorer: the next-token distribution, the kept set, and a continuation.

``next_token_figure(probs, labels, kept)`` draws data (a probability vector, token
labels and a boolean kept mask); ``sampling_explorer(model, vocab)`` wires a prompt box
(a text area: a prompt such as "ROMEO:\\nWhat " keeps its line break), temperature /
top-k / top-p sliders and a seed to it and adds a sampled continuation.
top_k = 0 and top_p = 1 mean "no filter"; temperature = 0 is greedy decoding.
"""

from __future__ import annotations

import html
import reprlib
from typing import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ..sampling import kept_mask
from .style import PALETTE
from .widget import Explorer

__all__ = ["token_label", "next_token_figure", "sampling_render", "sampling_explorer"]


def token_label(token: str) -> str:
    """Printable label for a token: space as ␣, newline as ↵.

    >>> token_label(" a\\n")
    '␣a↵'
    """
    return token.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")


def next_token_figure(probs, labels: Sequence[str], kept, top_n: int = 20, title: str | None = None) -> Figure:
    """Bars of the ``top_n`` most probable tokens; kept tokens coloured, filtered ones grey."""
    p = np.asarray(probs.detach().cpu() if isinstance(probs, torch.Tensor) else probs, dtype=float)
    k = np.asarray(kept.detach().cpu() if isinstance(kept, torch.Tensor) else kept, dtype=bool)
    if p.ndim != 1 or len(p) == 0:
        raise ValueError(f"probs must be a non-empty 1-D vector, got shape {p.shape}")
    if len(labels) != len(p) or k.shape != p.shape:
        raise ValueError(f"labels ({len(labels)}) and kept ({k.shape}) must match probs ({len(p)})")
    if not isinstance(top_n, int) or top_n < 1:
        raise ValueError(f"top_n must be a positive int, got {reprlib.repr(top_n)}")
    order = np.argsort(-p, kind="stable")[:top_n]
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    colours = [PALETTE[0] if k[i] else "#bbbbbb" for i in order]
    ax.bar(range(len(order)), p[order], color=colours)
    ax.set_xticks(range(len(order)), [token_label(labels[i]) for i in order])
    ax.set_ylabel("probability")
    ax.set_xlabel(f"next token (top {len(order)}; blue = kept by the filters, grey = removed)")
    ax.set_title(title or f"Next-token distribution: {int(k.sum())} of {len(p)} tokens kept, "
                 f"kept mass {p[k].sum():.2f}")

    return fig


@torch.no_grad()
def sampling_render(model, vocab, prompt: str, temperature: float, top_k: int, top_p: float, seed: int,
                    n_new: int = 80) -> list:
    """Figure of the next-token distribution for ``prompt`` and an HTML continuation.

    ``top_k=0`` and ``top_p=1`` switch those filters off. Raises ValueError on an empty
    prompt, characters outside the vocabulary, or bad sampling values.
    """
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("prompt is empty: type a few characters")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {reprlib.repr(seed)}")
    k = None if top_k in (0, None) else int(top_k)
    p = None if top_p is None or top_p >= 1.0 else float(top_p)
    ids = vocab.encode_tensor(prompt)  # ValueError names unknown characters
    model.eval()
    dev = next(model.parameters()).device
    ids = ids[:, -model.config.block_size:].to(dev)
    logits = model(ids)[0][0, -1].float().cpu()
    kept = kept_mask(logits, temperature, k, p)  # validates temperature, top_k, top_p
    shown_t = temperature if temperature > 0 else 1.0
    probs = torch.softmax(logits / shown_t, dim=-1)
    labels = [vocab.decode([i]) for i in range(len(vocab))]
    fig = next_token_figure(probs, labels, kept, title=None)
    g = torch.Generator(device=dev).manual_seed(seed)
    out = model.generate(ids, n_new, temperature=temperature, top_k=k, top_p=p, generator=g)
    text = vocab.decode(out[0, ids.shape[1]:])
    body = (f'<div style="font-family:monospace;white-space:pre-wrap;border:1px solid #ddd;padding:6px">'
            f"<b>{html.escape(prompt)}</b>{html.escape(text)}</div>")
    return [fig, body]


def sampling_explorer(model, vocab, prompt: str = "ROMEO:\nO, ", temperature: float = 1.0, top_k: int = 0,
                      top_p: float = 1.0, seed: int = 0, n_new: int = 80) -> Explorer:
    """Explorer with controls ``prompt``, ``temperature``, ``top_k``, ``top_p`` and ``seed``."""
    if not hasattr(model, "generate") or not hasattr(vocab, "encode_tensor"):
        raise TypeError("model must be a llmbook GPT and vocab a CharVocab")
    wide = {"description_width": "110px"}  # room for the full labels
    controls = {
        # A text area, not a one-line box: a one-line box drops the prompt's line breaks.
        "prompt": widgets.Textarea(value=prompt, description="prompt", style=wide, continuous_update=False,
                                   layout=widgets.Layout(width="60%", height="4em")),
        "temperature": widgets.FloatSlider(value=temperature, min=0.0, max=2.0, step=0.05, description="temperature", style=wide,
                                           continuous_update=False),
        "top_k": widgets.IntSlider(value=top_k, min=0, max=len(vocab), description="top_k (0=off)", style=wide,
                                   continuous_update=False),
        "top_p": widgets.FloatSlider(value=top_p, min=0.05, max=1.0, step=0.05, description="top_p", style=wide,
                                     continuous_update=False),
        "seed": widgets.IntText(value=seed, description="seed", style=wide, continuous_update=False),
    }

    def render(**values):
        return sampling_render(model, vocab, n_new=n_new, **values)

    return Explorer(render, controls, title="Sampling explorer: temperature, top-k, top-p")
