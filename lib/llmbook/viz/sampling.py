"""The sampling explorer: the next-token distribution, the kept set, and a continuation.

``next_token_figure(probs, labels, kept)`` draws data (a probability vector, token
labels and a boolean kept mask); ``sampling_explorer(model, vocab)`` wires a prompt box
(a text area: a prompt such as "ROMEO:\\nWhat " keeps its line break), temperature /
top-k / top-p sliders and a seed to it and adds a sampled continuation.
top_k = 0 and top_p = 1 mean "no filter"; temperature = 0 is greedy decoding.

The explorer draws in the browser (a ``panels`` view of ``llmbook.viz.frontend``):
``sampling_spec`` sends the bars and the continuation; a :class:`SamplingMemo` keeps the
logits per prompt and the continuation per setting, so only what a move changes is
computed. ``sampling_render`` draws the same numbers with matplotlib (the static picture).
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
from .frontend import FrontView, ResultMemo, round_sig
from .style import PALETTE
from .widget import Explorer

__all__ = ["token_label", "next_token_figure", "SamplingMemo", "sampling_data", "sampling_spec", "sampling_render",
           "sampling_explorer"]

FILTERED = "#bbbbbb"  # bars of tokens the filters removed
TYPING_PAUSE_S = 0.5  # seconds the prompt box waits after the last keystroke before the model runs


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
    colours = [PALETTE[0] if k[i] else FILTERED for i in order]
    ax.bar(range(len(order)), p[order], color=colours)
    ax.set_xticks(range(len(order)), [token_label(labels[i]) for i in order])
    ax.set_ylabel("probability")
    ax.set_xlabel(f"next token (top {len(order)}; blue = kept by the filters, grey = removed)")
    ax.set_title(title or f"Next-token distribution: {int(k.sum())} of {len(p)} tokens kept, "
                 f"kept mass {p[k].sum():.2f}")

    return fig


class SamplingMemo:
    """What the sampling explorer computed, kept so a move redoes only what changed.

    - ``logits(prompt)``: the model's next-token logits after a prompt (one forward pass
      per prompt; a temperature, top-k, top-p or seed change reuses them);
    - ``continuation(prompt, temperature, top_k, top_p, seed)``: the sampled text (the
      same settings give the same text, so it is computed once);
    - ``labels``: the printable label of every vocabulary entry.

    The model must not change while a cache is in use (make a new explorer after training
    further). ``calls`` counts the forward passes for the distribution and ``generations``
    the continuations, for the tests. At most ``size`` entries of each kind are kept.
    """

    def __init__(self, model, vocab, n_new: int = 80, size: int = 64):
        if isinstance(n_new, bool) or not isinstance(n_new, int) or n_new < 0:
            raise ValueError(f"n_new must be a non-negative int, got {reprlib.repr(n_new)}")
        self.model, self.vocab, self.n_new, self.size = model, vocab, n_new, size
        self._logits, self._texts = ResultMemo(size), ResultMemo(size)
        self._labels: list[str] | None = None
        self.calls = 0
        self.generations = 0

    @property
    def labels(self) -> list[str]:
        if self._labels is None:
            self._labels = [self.vocab.decode([i]) for i in range(len(self.vocab))]
        return self._labels

    def _ids(self, prompt: str) -> torch.Tensor:
        if not isinstance(prompt, str) or not prompt:
            raise ValueError("prompt is empty: type a few characters")
        ids = self.vocab.encode_tensor(prompt)  # ValueError names unknown characters
        dev = next(self.model.parameters()).device
        return ids[:, -self.model.config.block_size:].to(dev)

    @torch.no_grad()
    def logits(self, prompt: str) -> torch.Tensor:
        """(V,) float CPU logits of the next token after ``prompt`` (computed once per prompt)."""
        def forward():
            ids = self._ids(prompt)
            self.model.eval()
            self.calls += 1
            return self.model(ids)[0][0, -1].float().cpu()

        return self._logits.get(prompt, forward)

    @torch.no_grad()
    def continuation(self, prompt: str, temperature: float, top_k: int | None, top_p: float | None, seed: int) -> str:
        """``n_new`` characters sampled after ``prompt`` with these settings and ``seed``."""
        def sample():
            ids = self._ids(prompt)
            g = torch.Generator(device=ids.device).manual_seed(seed)
            self.generations += 1
            out = self.model.generate(ids, self.n_new, temperature=temperature, top_k=top_k, top_p=top_p, generator=g)
            return self.vocab.decode(out[0, ids.shape[1]:])

        return self._texts.get((prompt, float(temperature), top_k, top_p, seed), sample)


def sampling_data(cache: SamplingMemo, prompt: str, temperature: float, top_k: int, top_p: float, seed: int) -> dict:
    """The numbers both views draw: next-token ``probs`` (at ``temperature``; greedy, T = 0,
    is the limit T -> 0: all mass on the most likely token), the ``kept`` mask of the filters,
    the token ``labels``, the sampled ``text`` and ``p1``, the distribution at T = 1 (the
    charts' probability axis is at least as tall as its top bar, so T > 1 shows flatter bars).

    ``top_k=0`` and ``top_p=1`` switch those filters off. Raises ValueError on an empty
    prompt, characters outside the vocabulary, or bad sampling values.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {reprlib.repr(seed)}")
    if not 0 <= seed < 2**63:  # torch.Generator takes a 64-bit seed
        raise ValueError(f"seed must be between 0 and 2**63 - 1, got {reprlib.repr(seed)}")
    k = None if top_k in (0, None) else int(top_k)
    p = None if top_p is None or top_p >= 1.0 else float(top_p)
    logits = cache.logits(prompt)
    kept = kept_mask(logits, temperature, k, p)  # validates temperature, top_k, top_p
    p1 = torch.softmax(logits, dim=-1)
    if temperature > 0:
        probs = torch.softmax(logits / temperature, dim=-1)
    else:  # greedy: what T -> 0 tends to, so T = 0 continues the picture of small T
        probs = torch.zeros_like(p1).scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    text = cache.continuation(prompt, temperature, k, p, seed)
    return {"probs": probs, "kept": kept, "labels": cache.labels, "text": text, "top_k": k, "top_p": p, "p1": p1}


def _settings(temperature: float, top_k: int | None, top_p: float | None, seed: int) -> str:
    t = "greedy (temperature 0)" if temperature == 0 else f"temperature {temperature:.2f}"
    return (f"{t}, top_k {'off' if top_k is None else top_k}, top_p {'off' if top_p is None else f'{top_p:.2f}'}, "
            f"seed {seed}")


def _distribution_title(probs: torch.Tensor, kept: torch.Tensor) -> str:
    return (f"Next-token distribution: {int(kept.sum())} of {len(probs)} tokens kept, "
            f"kept mass {float(probs[kept].sum()):.2f}")


def sampling_spec(cache: SamplingMemo, prompt: str, temperature: float, top_k: int, top_p: float, seed: int,
                  top_n: int = 20) -> dict:
    """The browser view's data: the ``top_n`` most probable tokens as bars (blue kept,
    grey filtered out) and the prompt with its sampled continuation."""
    d = sampling_data(cache, prompt, temperature, top_k, top_p, seed)
    probs, kept = d["probs"], d["kept"]
    order = torch.argsort(-probs, stable=True)[:top_n].tolist()
    n_kept = int(kept.sum())
    # with more tokens kept than bars drawn, every bar is blue: say where the cut falls
    if n_kept == len(probs):
        where = "; every token is kept: no filter is on"
    elif n_kept > len(order):
        where = f"; all {len(order)} shown are kept: the filters keep the {n_kept} most likely"
    else:
        where = "; blue = kept by the filters, grey = removed"
    return {
        "kind": "panels",
        "title": _settings(temperature, d["top_k"], d["top_p"], seed),
        "panels": [
            {"type": "bars", "title": _distribution_title(probs, kept),
             "labels": [token_label(d["labels"][i]) for i in order],
             "values": round_sig(probs[order].double()),
             "colors": [PALETTE[0] if bool(kept[i]) else FILTERED for i in order],
             "ylabel": "probability", "ymax": 1.05 * max(float(probs.max()), float(d["p1"].max())),
             "xlabel": f"next token (top {len(order)}{where})",
             "label_size": 12},
            {"type": "text", "title": f"a sample of {cache.n_new} characters (prompt in bold)",
             "segments": [{"text": prompt, "bold": True}, {"text": d["text"]}]},
        ],
    }


def sampling_render(model, vocab, prompt: str, temperature: float, top_k: int, top_p: float, seed: int,
                    n_new: int = 80, cache: SamplingMemo | None = None) -> list:
    """Figure of the next-token distribution for ``prompt`` and an HTML continuation.

    ``top_k=0`` and ``top_p=1`` switch those filters off. Raises ValueError on an empty
    prompt, characters outside the vocabulary, or bad sampling values.
    """
    cache = cache if cache is not None else SamplingMemo(model, vocab, n_new)
    d = sampling_data(cache, prompt, temperature, top_k, top_p, seed)
    fig = next_token_figure(d["probs"], d["labels"], d["kept"], title=None)
    body = (f'<div style="font-family:monospace;white-space:pre-wrap;border:1px solid #ddd;padding:6px">'
            f"<b>{html.escape(prompt)}</b>{html.escape(d['text'])}</div>")
    return [fig, body]


def sampling_explorer(model, vocab, prompt: str = "ROMEO:\nO, ", temperature: float = 1.0, top_k: int = 0,
                      top_p: float = 1.0, seed: int = 0, n_new: int = 80) -> Explorer:
    """Explorer with controls ``prompt``, ``temperature``, ``top_k``, ``top_p`` and ``seed``.

    Drawn in the browser: each move sends the bars and the continuation; the logits of a
    prompt are computed once (``explorer.cache``), so a temperature, top-k, top-p or seed
    change only re-filters them and samples the continuation.
    """
    if not hasattr(model, "generate") or not hasattr(vocab, "encode_tensor"):
        raise TypeError("model must be a llmbook GPT and vocab a CharVocab")
    cache = SamplingMemo(model, vocab, n_new)
    wide = {"description_width": "110px"}  # room for the full labels
    controls = {
        # A text area, not a one-line box: a one-line box drops the prompt's line breaks. It applies as
        # the reader types, like the text boxes of chapters 0 and 1a, once the typing pauses (a new
        # prompt costs a forward pass and a sampled continuation, up to a second on two cores).
        "prompt": widgets.Textarea(value=prompt, description="prompt", style=wide, continuous_update=True,
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
        return sampling_render(model, vocab, n_new=n_new, cache=cache, **values)

    def spec(**values):
        return sampling_spec(cache, **values)

    explorer = Explorer(render, controls, title="Sampling explorer: temperature, top-k, top-p (the prompt applies "
                                                "when you pause typing)",
                        front=FrontView(), spec=spec, typing_pause=TYPING_PAUSE_S)
    explorer.cache = cache
    return explorer
