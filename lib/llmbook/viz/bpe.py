"""The BPE merge explorer: watch byte pair encoding learn, one merge at a time.

- ``bpe_trace(text, level, max_merges)``: train BPE on ``text`` (characters or bytes)
  and return every merge with its count plus the token count after each merge. Cached,
  so moving the slider re-trains nothing.
- ``tokenizer_at(trace, merges)``: the tokenizer that knows only the first ``merges``.
- ``token_spans_html(tokens)``: text coloured token by token (HTML spans).
- ``render_bpe(text, merges, level, corpus)``: the explorer's view: coloured text, the
  merge table (rank, pair, count), vocabulary size and tokens per character, and a plot
  of tokens per character against the number of merges.
- ``merge_history(trace, text)``: the merge history of ``text`` computed once: its base
  units (characters or bytes) and, for each boundary between two units, the merge that
  removes it. The tokens after k merges are the runs whose inner boundaries all have a
  step below k, so the browser view (``llmbook.viz.frontend``) moves the merge slider
  without asking Python; ``bpe_spec`` packs it with the merge table and the curve.
- ``bpe_explorer(...) -> Explorer``: controls ``corpus`` (dropdown), ``text``
  (textarea, used when the corpus is "your text"; disabled otherwise) and ``level``
  (characters / bytes) need Python; ``merges`` (slider, 0 to the merges this text
  allows) is drawn and handled in the browser.

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

from ..tokenizers.base import split_keep_gaps
from ..tokenizers.bpe import BPETokenizer
from ..tokenizers.byte_bpe import ByteBPETokenizer
from .frontend import FrontControl, FrontView
from .style import PALETTE
from .widget import Explorer

__all__ = ["BPETrace", "bpe_trace", "tokenizer_at", "token_spans_html", "render_bpe", "merge_history", "tokens_at",
           "bpe_spec", "bpe_explorer", "CORPORA", "LEVELS"]

LEVELS = ("characters", "bytes")
YOUR_TEXT = "your text"
MAX_TEXT = 20_000  # characters the explorer trains on (keeps each re-train well under a second)
SHOWN_CHARS = 800  # characters drawn in colour; the statistics use the whole text
TABLE_ROWS = 12  # merges listed in the table (the most recent ones)

# Light tints so that dark text stays readable (in a dark theme too: the ink is set, not inherited);
# neighbours always differ.
_TINTS = ["#cfe3f2", "#f7e0b0", "#c6eadd", "#f5cdb8", "#eed3e5", "#d3ecf8", "#f9f3bd", "#dddddd"]
_INK = "#1f1f1f"


def _visible(s: str) -> str:
    """A token with its spaces and newlines visible (· and ↵), as the browser-drawn view writes them."""
    return s.replace(" ", "\u00b7").replace("\n", "\u21b5")


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
            f"merges={merges} is more than this text allows: after {len(trace.pairs)} "
            f"merge{'' if len(trace.pairs) == 1 else 's'} every "
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
            f'<span title="token {k}" style="background:{_TINTS[k % len(_TINTS)]};color:{_INK};'
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

    # merges numbered from 1, as the chapter's prose counts them; cells padded apart
    td = '<td style="padding:2px 12px;text-align:{}">{}</td>'
    rows = "".join(
        "<tr>" + td.format("right", k + 1)
        + td.format("left", f"<code>{html.escape(_visible(a))}</code> + <code>{html.escape(_visible(b))}</code>")
        + td.format("left", f"<code>{html.escape(_visible(a + b))}</code>") + td.format("right", c) + "</tr>"
        for k, ((a, b), c) in list(enumerate(zip(trace.pairs, trace.counts)))[max(0, merges - TABLE_ROWS) : merges]
    )
    head = "".join(f'<th style="padding:2px 12px;text-align:{a}">{h}</th>'
                   for h, a in (("merge", "right"), ("pair", "left"), ("new token", "left"), ("count", "right")))
    table = (
        f'<table style="border-collapse:collapse;font-size:90%"><tr>{head}</tr>'
        + (rows or '<tr><td colspan="4"><i>no merges yet: every token is a single '
           + ("character" if level == "characters" else "byte") + "</i></td></tr>")
        + "</table>"
    )
    plural = lambda n, word: f"{n} {word}{'' if n == 1 else 's'}"
    stats = (
        f"<p><b>{merges}</b> merge{'' if merges == 1 else 's'} &nbsp;|&nbsp; vocabulary size <b>{vocab}</b> "
        f"({trace.n_base} {'characters + &lt;unk&gt;' if level == 'characters' else 'bytes'} + {merges}) "
        f"&nbsp;|&nbsp; {plural(len(ids), 'token')} for {plural(len(text), 'character')}: <b>{per_char:.3f}</b> tokens per character</p>"
    )
    more = f"<p><i>showing the first {SHOWN_CHARS} of {len(text)} characters</i></p>" if len(text) > SHOWN_CHARS else ""
    view = f"{stats}{token_spans_html(tokens)}{more}<p><b>Latest merges</b> (· is a space, ↵ a new line)</p>{table}"

    ks, ys = _curve(trace, max(merges, min(len(trace.pairs), 60)))
    fig, ax = plt.subplots(figsize=(6, 2.6))
    ax.plot(ks, ys, color=PALETTE[0], marker=".")
    ax.axvline(merges, color=PALETTE[3], linestyle="--", label=f"{merges} merges")
    ax.set_xlabel("number of merges")
    ax.set_ylabel("tokens per character")
    ax.set_title(f"BPE on {level}: shorter sequences as the vocabulary grows")
    ax.legend(loc="upper right")
    return [view, fig]


def _piece_steps(ids: list[int], ranks: dict, first_id: int) -> list[int]:
    """For one pre-token: the merge (rank) that removes each inner boundary, -1 if none does.

    Merges the adjacent pair of lowest rank, leftmost first, as ``apply_merges`` does.

    >>> _piece_steps([0, 1, 2], {(0, 1): 0, (3, 2): 1}, first_id=3)
    [0, 1]
    """
    parts, starts = list(ids), list(range(len(ids)))
    steps = [-1] * max(0, len(ids) - 1)
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get((parts[i], parts[i + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        r, i = best
        steps[starts[i + 1] - 1] = r  # the boundary before the right part disappears at merge r
        parts[i: i + 2] = [first_id + r]
        del starts[i + 1]
    return steps


@functools.lru_cache(maxsize=16)
def merge_history(trace: BPETrace, text: str) -> tuple[list, list[int]]:
    """``(units, steps)`` of ``text`` under ``trace``'s merges; see the module docstring.

    ``units``: the characters (character level) or byte values (byte level) of ``text``;
    ``steps[i]``: the merge (0-based) that joins unit i to unit i + 1, or -1 (never, e.g.
    between two pre-tokens).

    >>> t = bpe_trace("the car\\nthe cat\\nthe rat", "characters", 3)
    >>> units, steps = merge_history(t, "the cat")
    >>> tokens_at(units, steps, 2, "characters")
    ['the', ' ', 'c', 'a', 't']
    """
    tok = trace.tokenizer
    units: list = []
    steps: list[int] = []
    memo: dict[str, list[int]] = {}
    if isinstance(tok, BPETokenizer):
        ranks, first = tok._ranks, len(tok.alphabet) + 1
        encode = lambda piece: [tok._char_id.get(c, 0) for c in piece]  # noqa: E731
        as_units = list
    else:
        ranks, first = {pair: k for k, (pair, _) in enumerate(tok.merges)}, 256
        encode = lambda piece: list(piece.encode("utf-8"))  # noqa: E731
        as_units = encode
    for piece in split_keep_gaps(tok._split, text):
        if piece not in memo:
            memo[piece] = _piece_steps(encode(piece), ranks, first)
        if units:
            steps.append(-1)  # pre-tokens never merge across their boundary
        units.extend(as_units(piece))
        steps.extend(memo[piece])
    return units, steps


def tokens_at(units: Sequence, steps: Sequence[int], merges: int, level: str = "characters") -> list[str]:
    """The tokens after the first ``merges`` merges, from ``merge_history`` (the browser does the same).

    >>> tokens_at(["a", "b", "c"], [0, -1], 1)
    ['ab', 'c']
    """
    if len(steps) != max(0, len(units) - 1):
        raise ValueError(f"steps must have len(units) - 1 = {max(0, len(units) - 1)} entries, got {len(steps)}")
    runs: list[list] = []
    for i, u in enumerate(units):
        if i and 0 <= steps[i - 1] < merges:
            runs[-1].append(u)
        else:
            runs.append([u])
    if level == "bytes":
        from .attention import byte_token_labels

        return byte_token_labels([bytes(r) for r in runs])
    return ["".join(r) for r in runs]


def _tokens_by_k(trace: BPETrace, text: str) -> list[int]:
    """Number of tokens of ``text`` after k merges, for k = 0 .. len(trace.pairs)."""
    units, steps = merge_history(trace, text)
    removed = [0] * (len(trace.pairs) + 1)
    for s in steps:
        if s >= 0:
            removed[s + 1] += 1
    out, gone = [], 0
    for k in range(len(trace.pairs) + 1):
        gone += removed[k]
        out.append(len(units) - gone)
    return out


def _pair_labels(trace: BPETrace) -> list[list[str]]:
    """The merge table's pairs; at byte level a byte that is part of a character shows as <E4>."""
    if trace.level == "characters":
        return [[a, b] for a, b in trace.pairs]
    from .attention import byte_token_labels

    vocab = trace.tokenizer.vocab
    return [[byte_token_labels([vocab[a]])[0], byte_token_labels([vocab[b]])[0]] for (a, b), _ in trace.tokenizer.merges]


def bpe_spec(text: str = "", level: str = "characters", corpus: str = YOUR_TEXT) -> dict:
    """The browser view's data for one text and level: the merge history of the shown
    text, the merge table and the token count after every number of merges."""
    if corpus not in CORPORA:
        raise ValueError(f"corpus={corpus!r} is not one of {list(CORPORA)}")
    if corpus != YOUR_TEXT:
        text = _corpus_text(corpus)
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    full = len(text)
    text = text[:MAX_TEXT]  # a longer text is cut, and the view says so (cut_from)
    trace = bpe_trace(text, level, 300)
    units, steps = merge_history(trace, text[:SHOWN_CHARS])
    return {"kind": "bpe", "title": "BPE merge explorer", "level": level, "n_base": trace.n_base,
            **({"cut_from": full} if full > MAX_TEXT else {}),
            "n_chars": len(text), "shown_chars": min(len(text), SHOWN_CHARS), "units": units, "steps": steps,
            "pairs": _pair_labels(trace), "counts": list(trace.counts),
            "tokens_by_k": _tokens_by_k(trace, text)}


def bpe_explorer(text: str = "the car\nthe cat\nthe rat", merges: int = 3, level: str = "characters",
                 corpus: str = YOUR_TEXT, max_merges: int = 300) -> Explorer:
    """BPE merge explorer: corpus or own text and characters / bytes (Python re-trains,
    once per text), a merges slider (browser, up to the merges the text allows, at most
    ``max_merges``)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if corpus not in CORPORA:
        raise ValueError(f"corpus={corpus!r} is not one of {list(CORPORA)}")
    if level not in LEVELS:
        raise ValueError(f"level={level!r} must be one of {LEVELS}")
    if isinstance(max_merges, bool) or not isinstance(max_merges, int) or not 0 <= max_merges <= 300:
        raise ValueError(f"max_merges must be an int in 0..300, got {max_merges!r}")
    if isinstance(merges, bool) or not isinstance(merges, int) or not 0 <= merges <= max_merges:
        raise ValueError(f"merges must be an int in 0..max_merges={max_merges}, got {merges!r}")
    controls = {
        "corpus": widgets.Dropdown(options=list(CORPORA), value=corpus, description="corpus"),
        # beside the corpus menu (the controls share a row when they fit), the text box on a row of its own
        "level": widgets.ToggleButtons(options=list(LEVELS), value=level, description="level"),
        # applied as the reader types (a small text re-trains in well under a second)
        "text": widgets.Textarea(value=text, description="text", continuous_update=True,
                                 layout=widgets.Layout(width="95%", height="5em")),
    }

    def sync_text_box(_change=None) -> None:
        # The text box is used only for "your text": say so instead of ignoring what is typed.
        own = controls["corpus"].value == YOUR_TEXT
        controls["text"].disabled = not own
        controls["text"].placeholder = "" if own else 'pick "your text" as corpus to type here'
        controls["text"].tooltip = None if own else 'pick "your text" as corpus to train on this box'

    controls["corpus"].observe(sync_text_box, names="value")
    sync_text_box()
    front = FrontView(step=merges)

    def spec(corpus: str, text: str, level: str) -> dict:
        out = bpe_spec(text, level, corpus)
        available = min(len(out["pairs"]), max_merges)
        out["pairs"], out["counts"] = out["pairs"][:available], out["counts"][:available]
        out["tokens_by_k"] = out["tokens_by_k"][: available + 1]
        out["steps"] = [s if s < available else -1 for s in out["steps"]]
        return out

    def merges_now(step: int) -> int:
        available = len(front.spec.get("pairs", [])) if front.spec else max_merges
        return min(max(step, 0), available)

    return Explorer(render_bpe, controls, title="BPE merge explorer", front=front, spec=spec,
                    front_controls={"merges": FrontControl(front, "step", "merges", to_trait=int, from_trait=merges_now)},
                    summary="BPE merge explorer: interactive (corpus, text, level, merges); run the notebook to use it.")
