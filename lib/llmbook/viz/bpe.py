"""The BPE merge explorer: watch byte pair encoding learn, one merge at a time.

- ``bpe_trace(text, level, max_merges)``: train BPE on ``text`` (characters or bytes)
  and return every merge with its count plus the token count after each merge. Cached,
  so moving the slider re-trains nothing.
- ``tokenizer_at(trace, merges)``: the tokenizer that knows only the first ``merges``.
- ``token_spans_html(tokens)``: text coloured token by token (HTML spans).
- ``render_bpe(text, merges, level, corpus)``: the explorer's view: coloured text, the
  merge table (rank, pair, count), vocabulary size and tokens per character, and a plot
  of tokens per character against the number of merges.
- ``bpe_explorer(...) -> Explorer``: controls ``corpus`` (dropdown), ``text``
  (textarea, used when the corpus is "your text"), ``merges`` (slider) and ``level``
  (characters / bytes).

Character level uses :class:`llmbook.tokenizers.BPETokenizer`; byte level uses
:class:`llmbook.tokenizers.ByteBPETokenizer` with GPT-2's split, so on Chinese the
first merges rebuild the 3-byte characters before joining characters into words.
"""

from __future__ import annotations

import functools
import html
from dataclasses import dataclass
from typing import Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..tokenizers.bpe import BPETokenizer
from ..tokenizers.byte_bpe import ByteBPETokenizer
from .style import PALETTE
from .widget import Explorer

__all__ = ["BPETrace", "bpe_trace", "tokenizer_at", "token_spans_html", "render_bpe", "bpe_explorer", "CORPORA", "LEVELS"]

LEVELS = ("characters", "bytes")
YOUR_TEXT = "your text"
MAX_TEXT = 20_000  # characters the explorer trains on (keeps each re-train well under a second)
SHOWN_CHARS = 800  # characters drawn in colour; the statistics use the whole text
TABLE_ROWS = 12  # merges listed in the table (the most recent ones)

# Light tints so that black text stays readable; neighbours always differ.
_TINTS = ["#cfe3f2", "#f7e0b0", "#c6eadd", "#f5cdb8", "#eed3e5", "#d3ecf8", "#f9f3bd", "#dddddd"]


def _corpus_text(name: str) -> str:
    from ..data import load_text

    if name == "Shakespeare":
        return load_text("shakespeare")[:MAX_TEXT]
    if name == "People's Daily":
        return load_text("peoples_daily")[: MAX_TEXT // 4]
    raise ValueError(f"corpus={name!r} is not one of {list(CORPORA)}")


CORPORA = (YOUR_TEXT, "Shakespeare", "People's Daily")


@dataclass(frozen=True, eq=False)  # hashed by identity (lru_cache keys)
class BPETrace:
    """Everything the explorer needs about one training run."""

    text: str  # the training text
    level: str  # "characters" or "bytes"
    tokenizer: "BPETokenizer | ByteBPETokenizer"  # trained with every merge in the trace
    pairs: list  # merge k joined pairs[k] = (left string, right string)
    counts: list  # count of that pair when it was merged
    n_base: int  # ids before any merge (<unk> + alphabet, or 256 bytes)


@functools.lru_cache(maxsize=16)
def bpe_trace(text: str, level: str = "characters", max_merges: int = 300) -> BPETrace:
    """Train BPE on ``text`` with up to ``max_merges`` merges and record each merge.

    >>> t = bpe_trace("the car\\nthe cat\\nthe rat", "characters", 3)
    >>> t.pairs, t.counts
    ([('t', 'h'), ('th', 'e'), ('c', 'a')], [3, 3, 2])
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text is empty: type some text (or pick a corpus) to train BPE on")
    if level not in LEVELS:
        raise ValueError(f"level={level!r} must be one of {LEVELS}")
    if isinstance(max_merges, bool) or not isinstance(max_merges, int) or max_merges < 0:
        raise ValueError(f"max_merges must be an int >= 0, got {max_merges!r}")
    if level == "characters":
        n_base = len(set(text)) + 1
        tok = BPETokenizer.train(text, n_base + max_merges, progress=False)
        pairs = [(tok.id_to_token(a), tok.id_to_token(b)) for a, b in tok.merges]
        counts = list(tok.merge_counts)
    else:
        n_base = 256
        tok = ByteBPETokenizer.train(text, 256 + max_merges, progress=False)
        pairs = [(tok._token_str(a), tok._token_str(b)) for (a, b), _ in tok.merges]
        counts = [c for _, c in tok.merges]
    return BPETrace(text, level, tok, pairs, counts, n_base)


def tokenizer_at(trace: BPETrace, merges: int) -> "BPETokenizer | ByteBPETokenizer":
    """The tokenizer that has learned only the first ``merges`` merges of ``trace``."""
    if isinstance(merges, bool) or not isinstance(merges, int) or merges < 0:
        raise ValueError(f"merges must be an int >= 0, got {merges!r}")
    if merges > len(trace.pairs):
        raise ValueError(
            f"merges={merges} is more than this text allows: after {len(trace.pairs)} merges every "
            "word is a single token (use fewer merges or a longer text)"
        )
    tok = trace.tokenizer
    if isinstance(tok, BPETokenizer):
        return BPETokenizer(tok.alphabet, tok.merges[:merges], tok.merge_counts[:merges], tok.pattern)
    return ByteBPETokenizer(tok.vocab[: 256 + merges], tok.pattern, merges=tok.merges[:merges])


def token_spans_html(tokens: Sequence[str]) -> str:
    """Tokens as adjacent coloured ``<span>``s (newlines kept, spaces visible as ·).

    >>> token_spans_html(["th", "e"]).count("<span")
    2
    """
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(f"tokens must be a list of strings, got {type(tokens).__name__}")
    parts = []
    for k, t in enumerate(tokens):
        shown = html.escape(str(t)).replace(" ", "·").replace("\n", "↵<br>")
        parts.append(
            f'<span title="token {k}" style="background:{_TINTS[k % len(_TINTS)]};'
            f'border-radius:3px;padding:1px 0;margin-right:1px">{shown}</span>'
        )
    return '<div style="font-family:monospace;line-height:1.9;white-space:normal">' + "".join(parts) + "</div>"


def _curve(trace: BPETrace, upto: int) -> tuple[list[int], list[float]]:
    """Tokens per character of the training text after k merges, at ~25 values of k."""
    n_chars = len(trace.text)
    return _curve_cached(trace, upto, n_chars)


@functools.lru_cache(maxsize=32)
def _curve_cached(trace: BPETrace, upto: int, n_chars: int) -> tuple[list[int], list[float]]:
    ks = sorted({round(upto * i / 24) for i in range(25)})
    return ks, [len(tokenizer_at(trace, k).encode(trace.text)) / n_chars for k in ks]


def render_bpe(text: str = "", merges: int = 10, level: str = "characters", corpus: str = YOUR_TEXT) -> list:
    """The explorer's view for one setting of the controls: [HTML, Figure]."""
    if corpus != YOUR_TEXT:
        text = _corpus_text(corpus)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = text[:MAX_TEXT]
    trace = bpe_trace(text, level, max(300, merges))
    tok = tokenizer_at(trace, merges)
    ids = tok.encode(text)
    shown_ids = tok.encode(text[:SHOWN_CHARS])
    tokens = [tok.id_to_token(i) for i in shown_ids]
    per_char = len(ids) / len(text)
    vocab = tok.vocab_size

    rows = "".join(
        f"<tr><td>{k}</td><td><code>{html.escape(a)}</code> + <code>{html.escape(b)}</code></td>"
        f"<td><code>{html.escape(a + b)}</code></td><td>{c}</td></tr>"
        for k, ((a, b), c) in list(enumerate(zip(trace.pairs, trace.counts)))[max(0, merges - TABLE_ROWS) : merges]
    ).replace("·", " ")
    table = (
        '<table style="border-collapse:collapse;font-size:90%"><tr><th>rank</th><th>pair</th><th>new token</th><th>count</th></tr>'
        + (rows or '<tr><td colspan="4"><i>no merges yet: every token is a single '
           + ("character" if level == "characters" else "byte") + "</i></td></tr>")
        + "</table>"
    )
    stats = (
        f"<p><b>{merges}</b> merges &nbsp;|&nbsp; vocabulary size <b>{vocab}</b> "
        f"({trace.n_base} {'characters + &lt;unk&gt;' if level == 'characters' else 'bytes'} + {merges} merges) "
        f"&nbsp;|&nbsp; {len(ids)} tokens for {len(text)} characters: <b>{per_char:.3f}</b> tokens per character</p>"
    )
    more = f"<p><i>showing the first {SHOWN_CHARS} of {len(text)} characters</i></p>" if len(text) > SHOWN_CHARS else ""
    view = f"{stats}{token_spans_html(tokens)}{more}<p><b>Latest merges</b></p>{table}"

    ks, ys = _curve(trace, max(merges, min(len(trace.pairs), 60)))
    fig, ax = plt.subplots(figsize=(6, 2.6))
    ax.plot(ks, ys, color=PALETTE[0], marker=".")
    ax.axvline(merges, color=PALETTE[3], linestyle="--", label=f"{merges} merges")
    ax.set_xlabel("number of merges")
    ax.set_ylabel("tokens per character")
    ax.set_title(f"BPE on {level}: shorter sequences as the vocabulary grows")
    ax.legend(loc="upper right")
    return [view, fig]


def bpe_explorer(text: str = "the car\nthe cat\nthe rat", merges: int = 3, level: str = "characters",
                 corpus: str = YOUR_TEXT, max_merges: int = 300) -> Explorer:
    """BPE merge explorer: corpus or own text, a merges slider, characters / bytes."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if corpus not in CORPORA:
        raise ValueError(f"corpus={corpus!r} is not one of {list(CORPORA)}")
    if level not in LEVELS:
        raise ValueError(f"level={level!r} must be one of {LEVELS}")
    controls = {
        "corpus": widgets.Dropdown(options=list(CORPORA), value=corpus, description="corpus"),
        "text": widgets.Textarea(value=text, description="text", continuous_update=False,
                                 layout=widgets.Layout(width="95%", height="5em")),
        "merges": widgets.IntSlider(value=merges, min=0, max=max_merges, description="merges", continuous_update=False),
        "level": widgets.ToggleButtons(options=list(LEVELS), value=level, description="level"),
    }
    return Explorer(render_bpe, controls, title="BPE merge explorer")
