"""The tokenizer comparison: one text through every tokenizer of chapter 1, side by side.

- ``build_tokenizers(...)``: trains the small ones once (a few seconds) and returns
  name -> function ``text -> list of token strings``: whitespace, characters, UTF-8
  bytes, the book's character BPE and byte-level BPE, cl100k (GPT-4's ranks through the
  book's ``ByteBPETokenizer``), jieba, MiniLM's WordPiece, a SentencePiece unigram model
  and the book's ``Unigram``.
- ``compare(text, tokenizers)``: the token lists (pure; used by the notebook's table).
- ``comparison_html(rows, n_chars)``: a table, one row per tokenizer: name, number of
  tokens, tokens per character, and the tokens coloured alternately.
- ``comparison_figure(rows, n_chars)``: tokens per character as horizontal bars.
- ``render_compare(text, examples, tokenizers)`` and ``compare_explorer(...)``: the
  explorer, controls ``examples`` (dropdown of English and Chinese sentences, or "your
  text") and ``text`` (textarea). Empty text shows a message inline. The explorer draws
  in the browser from ``compare_spec(...)`` (the same table and bars as data, each text
  tokenized once); ``render_compare`` stays the static picture.

Token strings are shown as each tokenizer sees them: ``▁`` for SentencePiece's space,
``##`` for WordPiece continuations, bytes that are not a whole UTF-8 character as
``\\xe4``; ``·`` marks a space inside a token.
"""

from __future__ import annotations

import reprlib
import html
import io
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .bpe import token_spans_html
from .frontend import FrontView
from .style import PALETTE
from .widget import Explorer

__all__ = [
    "EXAMPLES",
    "YOUR_TEXT",
    "TokenRow",
    "build_tokenizers",
    "compare",
    "comparison_html",
    "comparison_figure",
    "render_compare",
    "compare_spec",
    "compare_explorer",
]

YOUR_TEXT = "your text"
MAX_TEXT = 5_000  # characters compared (keeps each re-render fast)

EXAMPLES: dict[str, str] = {
    "English: the mouse": "The mouse ate the cheese.",
    "English: Shakespeare": "Shall I compare thee to a summer's day? Thou art more lovely and more temperate.",
    "English: rare words": "Tokenization of antidisestablishmentarianism isn't straightforward!",
    "Chinese: the shop": "我今天去了商店。",
    "Chinese: the weather": "今天天气很好，我们去公园散步吧。",
    "Chinese: news": "中共中央总书记、国家主席江泽民发表新年讲话。",
    "Mixed: English and Chinese": "GPT-4 和 BERT 都是 Transformer 模型。",
}

Tokenize = Callable[[str], list[str]]


@dataclass(frozen=True)
class TokenRow:
    """One tokenizer's result: its name and the token strings."""

    name: str
    tokens: list[str]


def _byte_str(b: bytes) -> str:
    # A whole character shows as itself, a fragment of a UTF-8 character as \xNN.
    return b.decode("utf-8", errors="backslashreplace")


def build_tokenizers(
    english: str | None = None,
    chinese: str | None = None,
    n_merges: int = 400,
    progress: bool = False,
) -> dict[str, Tokenize]:
    """Every tokenizer of the chapter as ``name -> (text -> tokens)``; trains the small ones.

    ``english``/``chinese`` are the training texts (default: 30,000 characters of
    Shakespeare and 8,000 of People's Daily). The trained tokenizers get ``n_merges``
    merges (BPE) or that many pieces beyond the alphabet (the two unigram models), so
    their vocabularies are comparable.
    """
    import sentencepiece as spm

    from ..data import load_text
    from ..tokenizers import BPETokenizer, ByteBPETokenizer, Unigram, UnigramTrainConfig, WordPiece

    if english is None:
        english = load_text("shakespeare")[:30_000]
    if chinese is None:
        chinese = load_text("peoples_daily")[:8_000]
    for name, value in (("english", english), ("chinese", chinese)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not isinstance(n_merges, int) or n_merges < 1:
        raise ValueError(f"n_merges must be a positive int, got {n_merges!r}")
    corpus = english + "\n" + chinese
    if not corpus.strip():
        raise ValueError("english and chinese are both empty: nothing to train on")
    alphabet = len(set(corpus))

    bpe = BPETokenizer.train(corpus, alphabet + 1 + n_merges, progress=progress)
    byte_bpe = ByteBPETokenizer.train(corpus, 256 + n_merges, progress=progress)
    cl100k = ByteBPETokenizer.from_tiktoken("cl100k_base")
    wordpiece = WordPiece.minilm()
    lines = [line for line in corpus.split("\n") if line.strip()]
    n_chars_sp = len(set("".join(lines).replace(" ", ""))) + 1  # + '▁'
    sp_size = n_chars_sp + 3 + n_merges
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buf,
        vocab_size=sp_size,
        model_type="unigram",
        normalization_rule_name="identity",
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
        hard_vocab_limit=False,
    )
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    unigram = Unigram.train(corpus, sp_size, config=UnigramTrainConfig.fast(), progress=progress)

    import jieba

    jieba.setLogLevel(60)  # no "Building prefix dict" chatter in the notebook
    jieba.initialize()

    def byte_tokens(text: str) -> list[str]:
        return [_byte_str(bytes([b])) for b in text.encode("utf-8")]

    return {
        "whitespace": lambda t: t.split(),
        "characters": lambda t: list(t),
        "UTF-8 bytes": byte_tokens,
        f"BPE, characters ({bpe.vocab_size})": bpe.tokenize,
        f"byte-level BPE ({byte_bpe.vocab_size})": lambda t: [_byte_str(byte_bpe.decode_bytes([i])) for i in byte_bpe.encode(t)],
        "cl100k, GPT-4 (100,277)": lambda t: [_byte_str(cl100k.decode_bytes([i])) for i in cl100k.encode(t)],
        "jieba (word dictionary)": lambda t: [w for w in jieba.lcut(t) if w.strip()],
        "WordPiece, MiniLM (30,522)": wordpiece.tokenize,
        f"SentencePiece unigram ({sp.get_piece_size()})": lambda t: sp.encode(t, out_type=str),
        f"book's Unigram ({unigram.vocab_size})": unigram.tokenize,
    }


def compare(text: str, tokenizers: Mapping[str, Tokenize]) -> list[TokenRow]:
    """Run ``text`` through every tokenizer.

    >>> rows = compare("to be", {"whitespace": str.split, "characters": list})
    >>> [(r.name, len(r.tokens)) for r in rows]
    [('whitespace', 2), ('characters', 5)]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("text is empty: type a sentence or pick an example")
    if not isinstance(tokenizers, Mapping) or not tokenizers:
        raise ValueError("tokenizers must map at least one name to a function")
    return [TokenRow(name, list(fn(text))) for name, fn in tokenizers.items()]


def comparison_html(rows: Sequence[TokenRow], n_chars: int) -> str:
    """A table: tokenizer, tokens, tokens per character, the tokens coloured."""
    if not isinstance(n_chars, int) or n_chars < 1:
        raise ValueError(f"n_chars must be a positive int, got {n_chars!r}")
    head = (
        '<table style="border-collapse:collapse;font-size:13px">'
        "<tr><th style='text-align:left;padding:2px 8px'>tokenizer</th>"
        "<th style='padding:2px 8px'>tokens</th><th style='padding:2px 8px'>tokens / char</th>"
        "<th style='text-align:left;padding:2px 8px'>tokens</th></tr>"
    )
    body = []
    for r in rows:
        body.append(
            "<tr style='border-top:1px solid #ddd'>"
            f"<td style='padding:2px 8px;white-space:nowrap'>{html.escape(r.name)}</td>"
            f"<td style='padding:2px 8px;text-align:right'>{len(r.tokens)}</td>"
            f"<td style='padding:2px 8px;text-align:right'>{len(r.tokens) / n_chars:.2f}</td>"
            f"<td style='padding:2px 8px'>{token_spans_html(r.tokens)}</td></tr>"
        )
    return head + "".join(body) + "</table>"


def comparison_figure(rows: Sequence[TokenRow], n_chars: int, title: str = "") -> Figure:
    """Tokens per character, one bar per tokenizer (fewer = shorter sequences)."""
    if not rows:
        raise ValueError("rows is empty: nothing to plot")
    if not isinstance(n_chars, int) or n_chars < 1:
        raise ValueError(f"n_chars must be a positive int, got {n_chars!r}")
    fig, ax = plt.subplots(figsize=(7.5, 0.35 * len(rows) + 1.2))
    names = [r.name for r in rows][::-1]
    values = [len(r.tokens) / n_chars for r in rows][::-1]
    ax.barh(names, values, color=PALETTE[0] if PALETTE else None)
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.2f}", va="center", fontsize=8)
    ax.set_xlabel("tokens per character")
    ax.set_xlim(0, max(values) * 1.15)
    ax.set_title(title or f"The same {n_chars} characters through every tokenizer")
    return fig


def _chosen_text(text: str, examples: str) -> str:
    """The text the explorer compares: the example's, or the typed one (cut to MAX_TEXT)."""
    if not isinstance(examples, str):
        raise TypeError(f"examples must be a str, got {type(examples).__name__}")
    if examples != YOUR_TEXT:
        if examples not in EXAMPLES:
            raise ValueError(f"examples={reprlib.repr(examples)} is neither {YOUR_TEXT!r} nor one of the "
                             f"{len(EXAMPLES)} names in llmbook.viz.tokenizers.EXAMPLES")
        text = EXAMPLES[examples]
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text[:MAX_TEXT]


def render_compare(text: str, examples: str, tokenizers: Mapping[str, Tokenize]) -> list:
    """The explorer's view: the table and the bar chart, for the example or the typed text."""
    text = _chosen_text(text, examples)
    rows = compare(text, tokenizers)
    return [comparison_html(rows, len(text)), comparison_figure(rows, len(text))]


def compare_spec(text: str, examples: str, tokenizers: Mapping[str, Tokenize], cache: dict | None = None) -> dict:
    """The browser view's data (a ``panels`` view): the token table and tokens per character.

    ``cache`` (optional, text -> rows) keeps each text's tokens, so going back to a text
    (or an example) does not tokenize it again. Same checks and errors as ``render_compare``.
    """
    text = _chosen_text(text, examples)
    if cache is not None and text in cache:
        rows = cache[text]
    else:
        rows = compare(text, tokenizers)
        if cache is not None:
            if len(cache) >= 64:
                cache.pop(next(iter(cache)))  # the oldest
            cache[text] = rows
    n = len(text)
    source = "your text" if examples == YOUR_TEXT else f"example \u201c{examples}\u201d"
    return {"kind": "panels", "title": f"{source}: {n} characters through every tokenizer", "panels": [
        {"type": "tokens", "columns": ["tokenizer", "tokens", "tokens / char", "tokens"], "n_chars": n,
         "rows": [{"name": r.name, "tokens": [str(t) for t in r.tokens]} for r in rows]},
        {"type": "hbars", "title": f"The same {n} characters through every tokenizer", "labels": [r.name for r in rows],
         "values": [round(len(r.tokens) / n, 6) for r in rows], "colors": [PALETTE[0]] * len(rows), "xlabel": "tokens per character",
         "digits": 2},
    ]}


def compare_explorer(
    tokenizers: Mapping[str, Tokenize],
    text: str = "The mouse ate the cheese. 我今天去了商店。",
    examples: str = YOUR_TEXT,
) -> Explorer:
    """Controls ``examples`` (dropdown) and ``text`` (textarea, used with "your text")."""
    controls = {
        "examples": widgets.Dropdown(options=[YOUR_TEXT, *EXAMPLES], value=examples, description="example"),
        "text": widgets.Textarea(value=text, description="text", continuous_update=False, layout=widgets.Layout(width="95%")),
    }
    cache: dict = {}
    return Explorer(
        lambda examples, text: render_compare(text, examples, tokenizers),
        controls,
        title="One text, every tokenizer",
        front=FrontView(),
        spec=lambda examples, text: compare_spec(text, examples, tokenizers, cache),
    )
