"""Chapter 0's figures: the next-character distribution of a language model.

``next_char_bar`` draws a distribution given as data (characters and probabilities);
``render_next_char`` asks a fitted :class:`~llmbook.ngram.CharNGramLM` for the
distribution after a prompt and draws it; ``next_char_explorer`` wires that to a text
box and a temperature slider, drawn in the browser from ``next_char_spec`` (the same bars
as data; ``render_next_char`` stays the static picture). Invisible characters are drawn visibly: a space as
``␣``, a newline as ``↵``, a tab as ``⇥``.
"""

from __future__ import annotations

import reprlib
import math
from typing import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..ngram import CharNGramLM
from .frontend import FrontView, round_sig
from .style import PALETTE
from .widget import Explorer

__all__ = ["visible_char", "next_char_bar", "render_next_char", "next_char_spec", "next_char_explorer"]

XLABEL = "next character (␣ = space, ↵ = newline)"

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥"}


def visible_char(c: str) -> str:
    """A printable stand-in for whitespace characters.

    >>> [visible_char(c) for c in ["a", " ", "\\n"]]
    ['a', '␣', '↵']
    """
    if not isinstance(c, str):
        raise TypeError(f"c must be a str, got {type(c).__name__}")
    return "".join(_VISIBLE.get(ch, ch) for ch in c)


def next_char_bar(chars: Sequence[str], probs: Sequence[float] | torch.Tensor, title: str = "", top: int = 20,
                  ymax: float | None = None) -> Figure:
    """Bar chart of the ``top`` most likely next characters, most likely first (``ymax``: the
    top of the probability axis; by default just above the tallest bar)."""
    probs = torch.as_tensor(probs, dtype=torch.float64).flatten()
    if len(chars) != probs.numel():
        raise ValueError(f"chars and probs must have the same length, got {len(chars)} and {probs.numel()}")
    if probs.numel() == 0:
        raise ValueError("chars is empty: nothing to draw")
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise ValueError(f"top must be an int >= 1, got {reprlib.repr(top)}")
    labels, values, note = _top(chars, probs, top)
    k = len(labels)
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    ax.bar(range(k), values.tolist(), color=PALETTE[0])
    ax.set_xticks(range(k), labels, fontsize=12)
    ax.set_xlabel(XLABEL)
    ax.set_ylabel("probability")
    ax.set_ylim(0, ymax if ymax is not None else max(0.05, float(values[0]) * 1.15))
    ax.set_title(title, loc="left")
    ax.text(0.99, 0.95, note, transform=ax.transAxes, ha="right", va="top", fontsize=9, color="0.35")
    return fig


def _check_model_prompt(model: CharNGramLM, prompt: str) -> None:
    if not isinstance(model, CharNGramLM):
        raise TypeError(f"model must be a CharNGramLM, got {type(model).__name__}")
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if not prompt:
        raise ValueError("the prompt is empty: type at least one character for the model to continue")


def render_next_char(model: CharNGramLM, prompt: str, temperature: float = 1.0, top: int = 20) -> Figure:
    """Draw p(next character | prompt) of ``model`` at ``temperature``.

    Raises a ValueError for an empty prompt or one with characters the model never saw
    (the explorer shows it inline).
    """
    _check_model_prompt(model, prompt)
    chars, probs = model.prob_next(prompt, temperature=temperature)
    return next_char_bar(chars, probs, title=_title(model, prompt, temperature, probs), top=top,
                         ymax=_ymax(model, prompt, probs))


def _ymax(model: CharNGramLM, prompt: str, probs: torch.Tensor) -> float:
    """The probability axis: at least as tall as the T = 1 distribution's top bar, so that a
    temperature above 1 shows its bars shrinking (flatter), not an axis that shrinks with them."""
    _, p1 = model.prob_next(prompt, temperature=1.0)
    return max(0.05, float(torch.as_tensor(probs).max()), float(p1.max())) * 1.15


def _title(model: CharNGramLM, prompt: str, temperature: float, probs: torch.Tensor | None = None) -> str:
    history = prompt[-(model.order - 1) :] if model.order > 1 else ""
    shown = ("…" if len(prompt) > 30 else "") + visible_char(prompt[-30:])
    temp = "" if math.isclose(temperature, 1.0) else f", T = {temperature:g}"
    if model.order > 1:
        context = f"order-{model.order} model: only \u201c{visible_char(history)}\u201d matters"
    else:
        context = "order-1 (unigram) model: the prompt does not matter"
    title = f"p(next | \u201c{shown}\u201d){temp}\n{context}"
    p = torch.as_tensor(probs, dtype=torch.float64) if probs is not None else None
    if model.order > 1 and p is not None and float(p.max() - p.min()) < 1e-12:
        # every character known, but this history never seen: add-alpha smoothing alone speaks
        title += (f"\n\u201c{visible_char(history)}\u201d never occurs in the training text: no counts, "
                  "so every character is equally likely")
    return title


def _top(chars: Sequence[str], probs: torch.Tensor, top: int) -> tuple[list[str], torch.Tensor, str]:
    """The ``top`` most likely characters (visible labels) and their probabilities, and the mass note."""
    k = min(top, probs.numel())
    values, idx = torch.topk(probs, k)  # sorted, most likely first
    labels = [visible_char(chars[i]) for i in idx.tolist()]
    note = f"top {k} of {probs.numel()} characters hold {float(values.sum()):.0%} of the mass"
    return labels, values, note


def next_char_spec(model: CharNGramLM, prompt: str, temperature: float = 1.0, top: int = 20) -> dict:
    """The browser view's data: the bars ``render_next_char`` draws (a ``panels`` view).

    Same checks and errors as ``render_next_char``.
    """
    _check_model_prompt(model, prompt)
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise ValueError(f"top must be an int >= 1, got {reprlib.repr(top)}")
    chars, probs = model.prob_next(prompt, temperature=temperature)
    labels, values, note = _top(chars, torch.as_tensor(probs, dtype=torch.float64).flatten(), top)
    return {"kind": "panels", "panels": [{
        "type": "bars", "title": _title(model, prompt, temperature, probs), "title_left": True, "labels": labels,
        "values": round_sig(values), "colors": [PALETTE[0]] * len(labels), "ymax": _ymax(model, prompt, probs),
        "xlabel": XLABEL, "ylabel": "probability", "note": note, "label_size": 12,
    }]}


def next_char_explorer(model: CharNGramLM, prompt: str = "ROMEO:\nO", temperature: float = 1.0) -> Explorer:
    """A text box for the prompt and a temperature slider over ``render_next_char``."""
    if not isinstance(model, CharNGramLM):
        raise TypeError(f"model must be a CharNGramLM, got {type(model).__name__}")
    controls = {
        # A text area, so that a prompt can hold newlines ("ROMEO:" then a new line); applied
        # as the reader types (an n-gram look-up takes milliseconds).
        "prompt": widgets.Textarea(
            value=prompt,
            description="prompt",
            continuous_update=True,
            layout=widgets.Layout(width="60%", height="4em"),
        ),
        "temperature": widgets.FloatSlider(
            value=temperature,
            min=0.1,
            max=3.0,
            step=0.1,
            description="temperature",
            continuous_update=False,
            readout_format=".1f",
            style={"description_width": "initial"},
        ),
    }

    def render(prompt: str, temperature: float) -> Figure:
        return render_next_char(model, prompt, temperature)

    def spec(prompt: str, temperature: float) -> dict:
        return next_char_spec(model, prompt, temperature)

    return Explorer(render, controls, title="Next-character distribution", front=FrontView(), spec=spec)
