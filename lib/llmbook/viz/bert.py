"""BERT figures and the masked-word explorer (chapter 7).

- ``masked_word_figure(tokens, predictions)``: one horizontal bar chart per [MASK]:
  the model's top pieces and their probabilities (data in, figure out).
- ``embedding_sum_figure(word, segment, position, tokens, normed=...)``: the three input
  embeddings of BERT, their sum and (given ``normed``) LayerNorm(sum), the encoder's input,
  as heatmaps (tokens x features).
- ``mask_word(sentence, choice)``: replace the chosen word of a sentence by [MASK];
  ``word_choices(sentence)`` lists the dropdown labels; ``default_word(sentence)`` is the
  word a new sentence masks at first (its first content word), so typing a sentence shows
  a prediction at once.
- ``masked_word_explorer(predict, sentence)``: a text box for the sentence and a
  dropdown that masks one of its words; ``predict(text) -> (tokens, predictions)`` is
  ``functools.partial(llmbook.bert.predict_masked, model, tokenizer)``. A sentence longer
  than the model's positions is cut by ``predict``; the picture says so. The picture is
  drawn in the browser (``llmbook.viz.frontend``, a ``panels`` view) from
  ``masked_word_data`` (one ``predict`` per masked sentence, its top ``TOP_K_MAX`` pieces,
  kept in a small cache) packed by ``masked_word_spec``; the top-k slider is a browser
  control that shows the first k of them, so moving it never waits for the kernel.

The explorer is meant for the small BERT pre-trained in the chapter: all-MiniLM-L6-v2
was trained for sentence embeddings and ships without a masked-LM head.
"""

from __future__ import annotations

import reprlib
from typing import Callable, Optional, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from .frontend import FrontControl, FrontView, ResultMemo, bar_panel, panels_spec
from .style import PALETTE
from .widget import Explorer

__all__ = ["masked_word_figure", "embedding_sum_figure", "mask_word", "word_choices", "default_word",
           "masked_word_data", "masked_word_spec", "masked_word_explorer", "NO_WORD", "TOP_K_MAX"]

NO_WORD = "(none: I typed [MASK])"
TOP_K_MAX = 15  # the top-k slider's largest value: predict is asked once for this many pieces
PUNCTUATION = ".,;:!?'\"()"
# Words too common to be an interesting guess: a new sentence masks its first other word.
FUNCTION_WORDS = frozenset(
    "a an the and or but nor if so of to in on at by for with from as than that this these those is are was were be "
    "been am do does did not no i me my you your thou thee thy he him his she her it its we us our they them their "
    "o oh what who which".split()
)


def word_choices(sentence: str) -> list[str]:
    """Dropdown labels: ``"i: word"`` for every whitespace-separated word (counted from 0),
    after ``NO_WORD`` when the sentence has a [MASK] of its own (or no word to mask): the
    option is offered only where it cannot end in "no [MASK]".

    >>> word_choices("to be or")
    ['0: to', '1: be', '2: or']
    >>> word_choices("to [MASK] or")[0] == NO_WORD
    True
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    words = [f"{i}: {w}" for i, w in enumerate(sentence.split())]
    own = "[MASK]" in sentence or not any(w.strip(PUNCTUATION) for w in sentence.split())
    return ([NO_WORD] if own else []) + words


def mask_word(sentence: str, choice: str, mask_token: str = "[MASK]") -> str:
    """``sentence`` with the word named by ``choice`` (a ``word_choices`` label) replaced.

    Punctuation glued to the word stays: "mat." -> "[MASK]." .

    >>> mask_word("the cat sat on the mat.", "5: mat.")
    'the cat sat on the [MASK].'
    >>> mask_word("the cat sat", "(none: I typed [MASK])")
    'the cat sat'
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    if choice is None or choice == NO_WORD:
        return sentence
    words = sentence.split()
    try:
        i_str, word = choice.split(": ", 1)
        i = int(i_str)
    except (ValueError, AttributeError):
        raise ValueError(f"choice must be a label of word_choices(sentence), got {reprlib.repr(choice)}") from None
    if not 0 <= i < len(words) or words[i] != word:
        return sentence  # a stale label from the previous sentence: mask nothing
    core = word.strip(PUNCTUATION)
    if not core:
        raise ValueError(f"{reprlib.repr(word)} is punctuation only; pick a word")
    start = word.index(core)
    words[i] = word[:start] + mask_token + word[start + len(core) :]
    return " ".join(words)


def default_word(sentence: str) -> str:
    """The ``word_choices`` label a new sentence starts with: its first content word.

    ``NO_WORD`` when the sentence already has a [MASK] or has no word at all (only
    punctuation); the first word when every word is a function word ("to be or not").

    >>> default_word("the king is dead.")
    '1: king'
    >>> default_word("to be or not to be")
    '0: to'
    >>> default_word("the [MASK] is dead.") == NO_WORD, default_word("... !") == NO_WORD
    (True, True)
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    if "[MASK]" in sentence:
        return NO_WORD
    words = [(i, w) for i, w in enumerate(sentence.split()) if w.strip(PUNCTUATION)]
    if not words:
        return NO_WORD
    content = [(i, w) for i, w in words if w.strip(PUNCTUATION).lower() not in FUNCTION_WORDS]
    i, w = (content or words)[0]
    return f"{i}: {w}"


def _mask_title(pos: int) -> str:
    # the menu counts words from 0; the model reads WordPiece pieces after [CLS]: say which count this is
    return f"[MASK] at piece {pos} ([CLS] is piece 0)"


def _clip(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def masked_word_figure(tokens: Sequence[str], predictions, title: Optional[str] = None) -> Figure:
    """Bar charts of the top predictions at each [MASK]: ``predictions`` as from ``predict_masked``."""
    if not tokens:
        raise ValueError("tokens is empty")
    if not predictions:
        raise ValueError("predictions is empty: the input has no [MASK]")
    n = len(predictions)
    k = max(len(p) for _, p in predictions)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 0.45 * k + 1.6), squeeze=False)
    for ax, (pos, cands) in zip(axes[0], predictions):
        labels = [c for c, _ in cands][::-1]
        probs = [p for _, p in cands][::-1]
        ax.barh(range(len(cands)), probs, color=PALETTE[0] if PALETTE else None)
        ax.set_yticks(range(len(cands)), labels)
        for y, p in enumerate(probs):
            ax.text(p, y, f" {p:.2f}", va="center", fontsize=9)
        ax.set_xlim(0, max(1e-3, max(probs)) * 1.3)
        ax.set_xlabel("probability")
        ax.set_title(_mask_title(pos))
    fig.suptitle(_clip(title, 160) if title else _clip(" ".join(tokens)), fontsize=10)

    return fig


def embedding_sum_figure(word, segment, position, tokens: Sequence[str], max_features: int = 48,
                         normed=None) -> Figure:
    """Heatmaps of token, segment and position embeddings (T, D), their sum, and BERT's input.

    BERT's input is LayerNorm(token + segment + position), not the raw sum: pass that
    tensor as ``normed`` (T, D) to draw it as a fifth panel, on its own colour scale (the
    LayerNorm rescales every row to about unit variance). Without it the last panel is the
    raw sum. Only the first ``max_features`` features are drawn so the cells stay visible.
    """
    parts = []
    named = [("word", word), ("segment", segment), ("position", position)] + ([("normed", normed)] if normed is not None else [])
    for name, x in named:
        x = torch.as_tensor(x).detach().to("cpu", torch.float32)
        if x.dim() == 3:
            x = x[0]
        if x.dim() != 2:
            raise ValueError(f"{name} must have shape (T, D), got {tuple(x.shape)}")
        parts.append(x)
    T = len(tokens)
    if any(p.shape[0] != T for p in parts):
        raise ValueError(f"tokens has {T} entries but the embeddings have {[p.shape[0] for p in parts]} rows")
    mats = parts[:3] + [parts[0] + parts[1] + parts[2]]
    titles = ["token", "+ segment", "+ position", "= sum"]
    lim = float(max(m[:, :max_features].abs().max() for m in mats))
    n = 5 if normed is not None else 4
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 0.28 * T + 1.8), sharey=True)
    for ax, m, t in zip(axes, mats, titles):
        im = ax.imshow(m[:, :max_features].numpy(), cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_title(t)
        ax.set_xlabel(f"feature (first {max_features})")
    axes[0].set_yticks(range(T), list(tokens))
    axes[0].set_ylabel("token")
    fig.colorbar(im, ax=list(axes[:4]), shrink=0.8, label="value")
    if normed is not None:
        m = parts[3][:, :max_features]
        lim_n = float(m.abs().max())
        im_n = axes[4].imshow(m.numpy(), cmap="RdBu_r", vmin=-lim_n, vmax=lim_n, aspect="auto")
        axes[4].set_title("LayerNorm(sum)\n= BERT's input")
        axes[4].set_xlabel(f"feature (first {max_features})")
        fig.colorbar(im_n, ax=axes[4], shrink=0.8, label="value (own scale)")
    return fig


def _check_top_k(top_k) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= TOP_K_MAX:
        raise ValueError(f"top_k must be an int from 1 to {TOP_K_MAX}, got {reprlib.repr(top_k)}")
    return top_k


def masked_word_data(predict: Callable[..., tuple], sentence: str, word: str, cache: Optional[ResultMemo] = None) -> dict:
    """The masked sentence and the model's top ``TOP_K_MAX`` pieces at each [MASK].

    Returns ``{"text", "tokens", "predictions", "title"}`` (``predictions`` as from
    ``predict_masked``, largest first). ``predict`` runs once per masked text; with a
    ``cache`` a text seen before is not run again. Raises ValueError for an empty sentence,
    a sentence without [MASK] (from ``predict``) or a [MASK] past the positions the model reads.
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    if not sentence.strip():
        raise ValueError("the sentence is empty: type a sentence with [MASK] in it")
    text = mask_word(sentence, word)
    cache = cache if cache is not None else ResultMemo()
    tokens, preds = cache.get(text, lambda: predict(text, top_k=TOP_K_MAX))
    # predict keeps the first max_position pieces: a cut input no longer ends with [SEP]
    cut = bool(tokens) and tokens[-1] != "[SEP]"
    if cut and not preds and "[MASK]" in text:
        raise ValueError(f"the [MASK] is past the first {len(tokens)} tokens, all this model reads: "
                         "mask an earlier word or shorten the sentence")
    head = _clip(text, 90 if cut else 110)
    title = f"{head}  (cut: the model reads the first {len(tokens)} tokens)" if cut else head
    return {"text": text, "tokens": list(tokens), "predictions": preds, "title": title}


def masked_word_spec(data: dict) -> dict:
    """The browser view of ``masked_word_data``: one horizontal bar chart per [MASK], its
    pieces largest first, cut to the first k by the browser's top-k slider."""
    if not data["predictions"]:
        raise ValueError("predictions is empty: the input has no [MASK]")
    panels = [bar_panel([c for c, _ in cands], [p for _, p in cands], _mask_title(pos), "h", 0,
                        xlabel="probability", annotate=True) for pos, cands in data["predictions"]]
    return panels_spec(panels, title=_clip(data["title"], 160), columns=min(3, len(panels)),
                         top_k={"name": "top_k", "label": "top k", "min": 1, "max": TOP_K_MAX})


def masked_word_explorer(
    predict: Callable[[str], tuple],
    sentence: str = "to be or not to be, that is the question.",
    word: Optional[str] = None,
    top_k: int = 8,
    title: str = "Masked-word explorer (the small BERT pre-trained in this chapter)",
) -> Explorer:
    """An Explorer: type a sentence (with [MASK]) or pick a word to mask, see the top predictions.

    ``predict(text, top_k=...)`` returns ``(tokens, predictions)`` as
    ``llmbook.bert.predict_masked`` does. ``word`` (a ``word_choices`` label) defaults to
    ``default_word(sentence)``; a newly typed sentence also starts with its first content
    word masked, so it shows a prediction at once. Errors (an empty sentence, a [MASK]
    past the positions the model reads) are shown inline by the Explorer. ``top_k`` (1 to
    ``TOP_K_MAX``) is drawn in the browser: predict runs once per masked sentence, for
    ``TOP_K_MAX`` pieces, and ``explorer.cache`` keeps the answers.
    """
    if not callable(predict):
        raise TypeError("predict must be callable: predict(text, top_k=k) -> (tokens, predictions)")
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    _check_top_k(top_k)
    choices = word_choices(sentence)
    if word is None:
        word = default_word(sentence)
    if word not in choices:
        shown = choices if len(choices) <= 8 else choices[:8] + ["..."]
        raise ValueError(f"word must be one of {shown}, got {reprlib.repr(word)}")
    cache = ResultMemo(size=64)

    def render(sentence: str, word: str, top_k: int) -> Figure:
        data = masked_word_data(predict, sentence, word, cache)
        k = _check_top_k(top_k)
        preds = [(pos, cands[:k]) for pos, cands in data["predictions"]]
        return masked_word_figure(data["tokens"], preds, title=data["title"])

    def spec(sentence: str, word: str) -> dict:
        return masked_word_spec(masked_word_data(predict, sentence, word, cache))

    controls = {
        "sentence": widgets.Text(value=sentence, description="sentence", continuous_update=False, layout=widgets.Layout(width="90%")),
        "word": widgets.Dropdown(options=choices, value=word, description="mask word"),
    }
    front = FrontView(step=top_k)
    front_controls = {"top_k": FrontControl(front, "step", "top_k", check=_check_top_k)}
    holder: dict = {}

    def update_words(change) -> None:
        # Runs before the Explorer's own re-render (observed first): the word list follows
        # the new sentence and its first content word is masked, so the one re-render that
        # follows shows a prediction (not "no [MASK]" over the old picture). The Explorer
        # does not re-render for these word changes: it re-renders once, for the sentence.
        control, on_change = controls["word"], getattr(holder.get("explorer"), "_on_change", None)
        if on_change is not None:
            control.unobserve(on_change, names="value")
        try:
            control.options = word_choices(change["new"])
            control.value = default_word(change["new"])
        finally:
            if on_change is not None:
                control.observe(on_change, names="value")

    controls["sentence"].observe(update_words, names="value")
    holder["explorer"] = Explorer(render, controls, title=title, front=front, spec=spec, front_controls=front_controls)
    holder["explorer"].cache = cache
    return holder["explorer"]
