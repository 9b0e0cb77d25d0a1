"""Pre-training objectives of the third family: T5's span corruption and GLM's blank infilling.

BERT masks single tokens and predicts each one independently; GPT predicts every next
token. The encoder-decoder family (chapter 4's architecture) and GLM, the objective behind
ChatGLM, sit in between: they cut *spans* out of the text and train the model to write
them back.

**T5 span corruption** (Raffel et al., 2020, "Exploring the Limits of Transfer Learning with
a Unified Text-to-Text Transformer", section 3.1.4 and 3.3): a fraction ``noise_density``
(15 %) of the tokens is removed in spans whose mean length is ``mean_span_length`` (3).
The encoder reads the text with each span replaced by one *sentinel* token; the decoder
writes each sentinel followed by the tokens it stands for, and one last sentinel (the layout
of the paper's Figure 2, which this module follows):

    original  Thank you for inviting me to your party last week .
    inputs    Thank you <X> me to your party <Y> week .
    targets   <X> for inviting <Y> last <Z>

T5's released code (``nonnoise_span_to_unique_sentinel`` in ``t5/data/preprocessors.py``)
ends differently: its runs end with noise, so its target ends with the last span and then
``</s>``, with no closing sentinel. Both targets have N + k + 1 tokens (N noise tokens, k
spans), counting ``</s>`` there and the closing sentinel here.

The number of noise tokens is ``round(L * noise_density)`` and the number of spans
``round(noise / mean_span_length)``, as T5's ``random_spans_noise_mask`` computes them, except
that T5 multiplies in float32: where ``L * noise_density`` is exactly a tie in float64 (for
example L = 190: 28.5, rounded half to even to 28) T5's product lies just above it and rounds
up (29), at 39 of the lengths 2..4096 for the default 15 % (``tests/test_t5_reference_sampler.py``). The
noise tokens and the kept tokens are each cut into that many non-empty runs at uniformly
random places, and the runs alternate, starting with kept text and ending with noise (so the
first token is always kept and the last always removed; T5 appends ``</s>`` after the text,
which is never removed). So every sequence of length L has the same corruption rate, and
span lengths average ``mean_span_length``.

**GLM autoregressive blank infilling** (Du et al., 2022, "GLM: General Language Model
Pretraining with Autoregressive Blank Infilling"): span lengths are drawn from a Poisson
distribution (lambda = 3; a draw of 0 is redrawn) until at least ``mask_ratio`` (15 %) of
the tokens are covered. Part A is the text with each span replaced by one ``[MASK]``;
Part B is the spans, *in a random order*, each fed as ``[START] s_1 .. s_l`` and trained to
output ``s_1 .. s_l [END]``. One Transformer reads A then B with a mask that lets A see
all of A (bidirectional, like BERT) and B see A plus the earlier B tokens (causal, like
GPT). Two position ids per token: the first is the position in A (for a Part-B token,
the position of its span's ``[MASK]``), the second is 0 in Part A and 1..l+1 inside a span,
so the model knows which blank it is filling and how far into it it is.

Both transforms take a 1-D sequence of token ids and a ``torch.Generator``, and return
tensors; ``t5_reconstruct`` and ``glm_reconstruct`` invert them (the tests check that the
target always restores the input).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import torch

from .attention import causal_mask

__all__ = [
    "noise_span_lengths",
    "span_corruption",
    "t5_reconstruct",
    "GLMExample",
    "glm_blank_infilling",
    "glm_reconstruct",
    "SpanVocab",
    "BertMLM",
    "mlm_batch",
    "span_batch",
    "train_denoiser",
    "blank_examples",
    "fill_blank_mlm",
    "fill_blank_span",
    "word_items",
    "corrupted_items",
    "score_hidden_mlm",
    "score_hidden_mlm_chain",
    "score_hidden_span",
    "score_hidden_unigram",
    "score_hidden_bigram",
]


def _ids(name: str, ids) -> torch.Tensor:
    if isinstance(ids, torch.Tensor):
        t = ids
    else:
        try:
            t = torch.as_tensor(list(ids), dtype=torch.long)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be a 1-D sequence of token ids, got {type(ids).__name__}") from err
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D (one sequence), got shape {tuple(t.shape)}")
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {t.dtype}")
    return t.long()


def _fraction(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def _segment(n_items: int, n_segments: int, generator: torch.Generator | None) -> list[int]:
    """Cut n_items into n_segments non-empty runs at uniformly random places (sum = n_items)."""
    if n_segments == 1:
        return [n_items]
    cuts = torch.randperm(n_items - 1, generator=generator)[: n_segments - 1].sort().values + 1
    edges = [0] + cuts.tolist() + [n_items]
    return [b - a for a, b in zip(edges, edges[1:])]


def noise_span_lengths(length: int, noise_density: float = 0.15, mean_span_length: float = 3.0,
                       generator: torch.Generator | None = None) -> tuple[list[int], list[int]]:
    """T5's span layout for a sequence of ``length`` tokens: (kept run lengths, noise span lengths).

    The runs alternate kept, noise, kept, noise, ...; both lists have one entry per span.
    ``sum(noise) == round(length * noise_density)`` (at least 1, at most length - 1).
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        raise ValueError(f"length must be an int >= 2 (a span needs text around it), got {length!r}")
    _fraction("noise_density", noise_density)
    if (isinstance(mean_span_length, bool) or not isinstance(mean_span_length, (int, float))
            or not 1 <= mean_span_length < float("inf")):  # NaN fails the comparison
        raise ValueError(f"mean_span_length must be a finite number >= 1, got {mean_span_length!r}")
    n_noise = min(max(int(round(length * noise_density)), 1), length - 1)
    n_spans = max(int(round(n_noise / mean_span_length)), 1)
    n_spans = min(n_spans, n_noise, length - n_noise)  # every run must be non-empty
    noise = _segment(n_noise, n_spans, generator)
    kept = _segment(length - n_noise, n_spans, generator)
    return kept, noise


def _check_sentinels(sentinels: Sequence[int], needed: int) -> list[int]:
    if isinstance(sentinels, (str, bytes)) or not hasattr(sentinels, "__len__"):
        raise TypeError(f"sentinels must be a sequence of token ids, got {type(sentinels).__name__}")
    s = [int(x) for x in sentinels]
    if len(set(s)) != len(s):
        raise ValueError("sentinels must be distinct token ids")
    if len(s) < needed:
        raise ValueError(f"sentinels: {needed} needed (one per span plus the final one), got {len(s)}")
    return s


def span_corruption(ids, sentinels: Sequence[int], noise_density: float = 0.15, mean_span_length: float = 3.0,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """T5's objective: (encoder inputs, decoder targets) for one sequence ``ids`` (1-D).

    ``sentinels`` are the ids of ``<extra_id_0>, <extra_id_1>, ...`` (T5 puts them at the end
    of its vocabulary); none of them may occur in ``ids``.

    >>> g = torch.Generator().manual_seed(0)
    >>> inp, tgt = span_corruption(torch.arange(20), sentinels=[100, 101, 102], generator=g)
    >>> torch.equal(t5_reconstruct(inp, tgt, [100, 101, 102]), torch.arange(20))
    True
    """
    x = _ids("ids", ids)
    kept, noise = noise_span_lengths(len(x), noise_density, mean_span_length, generator)
    s = _check_sentinels(sentinels, len(noise) + 1)
    if torch.isin(x, torch.tensor(s)).any():
        raise ValueError("ids already contain a sentinel id; sentinels must be ids the text never uses")
    inputs, targets, pos = [], [], 0
    for k, (a, b) in enumerate(zip(kept, noise)):
        inputs += x[pos:pos + a].tolist() + [s[k]]
        targets += [s[k]] + x[pos + a:pos + a + b].tolist()
        pos += a + b
    targets.append(s[len(noise)])  # the final sentinel closes the last span
    return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long)


def t5_reconstruct(inputs, targets, sentinels: Sequence[int]) -> torch.Tensor:
    """Put the spans of ``targets`` back in place of the sentinels of ``inputs``."""
    inp, tgt = _ids("inputs", inputs).tolist(), _ids("targets", targets).tolist()
    s = set(int(x) for x in sentinels)
    spans: dict[int, list[int]] = {}
    current = None
    for t in tgt:
        if t in s:
            current = t
            spans[current] = []
        elif current is None:
            raise ValueError("targets must start with a sentinel")
        else:
            spans[current].append(t)
    out = []
    for t in inp:
        if t in s:
            if t not in spans:
                raise ValueError(f"sentinel {t} of inputs has no span in targets")
            out += spans[t]
        else:
            out.append(t)
    return torch.tensor(out, dtype=torch.long)


@dataclass
class GLMExample:
    """One GLM training example (length L = n_context + sum over spans of (l + 1)).

    ``input_ids`` (L,), ``labels`` (L,) with -100 on Part A, ``position_ids`` (2, L),
    ``attention_mask`` (L, L) bool, True where query i may attend to key j; ``n_context``
    is the length of Part A; ``spans`` are (start, length) in the original sequence, in
    Part B's (shuffled) order.
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    position_ids: torch.Tensor
    attention_mask: torch.Tensor
    n_context: int
    spans: list[tuple[int, int]]


def _poisson_lengths(target: int, lam: float, generator: torch.Generator | None) -> list[int]:
    lengths, total = [], 0
    while total < target:
        n = int(torch.poisson(torch.tensor([lam], dtype=torch.float64), generator=generator).item())
        if n == 0:  # a span of length 0 masks nothing: draw again
            continue
        lengths.append(n)
        total += n
    return lengths


def glm_blank_infilling(ids, mask_id: int, start_id: int, end_id: int, mask_ratio: float = 0.15,
                        poisson_lambda: float = 3.0, generator: torch.Generator | None = None) -> GLMExample:
    """GLM's objective for one sequence ``ids`` (1-D): Part A with [MASK]s, Part B the shuffled spans.

    Spans never touch (at least one kept token between two spans), so each [MASK] stands
    for exactly one span. If the Poisson draws do not fit in the sequence, the last span
    is shortened.

    >>> g = torch.Generator().manual_seed(0)
    >>> ex = glm_blank_infilling(torch.arange(40), mask_id=90, start_id=91, end_id=92, generator=g)
    >>> torch.equal(glm_reconstruct(ex, 90, 91, 92), torch.arange(40))
    True
    """
    x = _ids("ids", ids)
    n = len(x)
    if n < 2:
        raise ValueError(f"ids must hold at least 2 tokens, got {n}")
    _fraction("mask_ratio", mask_ratio)
    if isinstance(poisson_lambda, bool) or not isinstance(poisson_lambda, (int, float)) or poisson_lambda <= 0:
        raise ValueError(f"poisson_lambda must be a positive number, got {poisson_lambda!r}")
    specials = [int(mask_id), int(start_id), int(end_id)]
    if len(set(specials)) != 3:
        raise ValueError("mask_id, start_id and end_id must be three different ids")
    if torch.isin(x, torch.tensor(specials)).any():
        raise ValueError("ids already contain mask_id, start_id or end_id; use ids the text never uses")
    lengths = _poisson_lengths(math.ceil(mask_ratio * n), float(poisson_lambda), generator)
    # Fit: k spans need sum(lengths) masked tokens plus k - 1 separators, and one kept token somewhere.
    while lengths and sum(lengths) + len(lengths) > n:
        excess = sum(lengths) + len(lengths) - n
        if lengths[-1] > excess:
            lengths[-1] -= excess
        else:
            lengths.pop()
    if not lengths:
        lengths = [1]
    k = len(lengths)
    free = n - sum(lengths) - (k - 1)  # kept tokens beyond the mandatory separators (>= 1)
    # Stars and bars: k + 1 gaps (before, between, after the spans), inner gaps >= 1.
    bars = torch.randperm(free + k, generator=generator)[:k].sort().values.tolist()
    gaps, prev = [], -1
    for b in bars:
        gaps.append(b - prev - 1)
        prev = b
    starts, pos = [], 0
    for i, (g, length) in enumerate(zip(gaps, lengths)):
        pos += g + (1 if i > 0 else 0)
        starts.append(pos)
        pos += length
    # Part A: the text with one [MASK] per span; remember where each [MASK] lands.
    part_a, mask_at, cursor = [], [], 0
    for st, length in zip(starts, lengths):
        part_a += x[cursor:st].tolist()
        mask_at.append(len(part_a))
        part_a.append(int(mask_id))
        cursor = st + length
    part_a += x[cursor:].tolist()
    # Part B: the spans in a random order.
    order = torch.randperm(k, generator=generator).tolist()
    inp, lab, pos1, pos2 = list(part_a), [-100] * len(part_a), list(range(len(part_a))), [0] * len(part_a)
    for j in order:
        span = x[starts[j]:starts[j] + lengths[j]].tolist()
        inp += [int(start_id)] + span
        lab += span + [int(end_id)]
        pos1 += [mask_at[j]] * (lengths[j] + 1)
        pos2 += list(range(1, lengths[j] + 2))
    L, na = len(inp), len(part_a)
    mask = torch.zeros(L, L, dtype=torch.bool)
    mask[:, :na] = True  # everyone sees Part A ...
    mask[na:, na:] = causal_mask(L - na)  # ... B sees earlier B (the book's one causal mask)
    return GLMExample(
        input_ids=torch.tensor(inp, dtype=torch.long),
        labels=torch.tensor(lab, dtype=torch.long),
        position_ids=torch.tensor([pos1, pos2], dtype=torch.long),
        attention_mask=mask,
        n_context=na,
        spans=[(starts[j], lengths[j]) for j in order],
    )


def glm_reconstruct(example: GLMExample, mask_id: int, start_id: int, end_id: int) -> torch.Tensor:
    """Fill each [MASK] of Part A with its span from Part B (read from the labels)."""
    if not isinstance(example, GLMExample):
        raise TypeError(f"example must be a GLMExample, got {type(example).__name__}")
    na = example.n_context
    part_a = example.input_ids[:na].tolist()
    fill: dict[int, list[int]] = {}
    labels, pos1 = example.labels.tolist(), example.position_ids[0].tolist()
    for i in range(na, len(labels)):
        if labels[i] != int(end_id):
            fill.setdefault(pos1[i], []).append(labels[i])
    out = []
    for i, t in enumerate(part_a):
        out += fill.get(i, []) if t == int(mask_id) else [t]
    return torch.tensor(out, dtype=torch.long)


# ----------------------------------------------------------------------------- a small experiment
# Chapter 7b compares the two denoising objectives at equal budget on Shakespeare characters:
# BERT's masked-LM (an encoder, one [MASK] per hidden character, each predicted on its own)
# against T5's span corruption (an encoder-decoder that writes each hidden span after its
# sentinel). The helpers below keep the notebook's cells short; the models are the book's own
# (``llmbook.bert.Bert`` + ``MLMHead``; chapter 4's ``llmbook.transformer.Transformer``).

N_SENTINELS = 16


class SpanVocab:
    """Characters plus the special tokens both objectives need.

    Ids: 0 [PAD], 1 [MASK], 2 [BOS], 3 [EOS], 4 .. 4+N_SENTINELS-1 the sentinels, then the
    characters of ``chars``.
    """

    SPECIALS = ["[PAD]", "[MASK]", "[BOS]", "[EOS]"] + [f"<X{i}>" for i in range(N_SENTINELS)]

    def __init__(self, chars: str):
        if not isinstance(chars, str) or not chars:
            raise ValueError("chars must be a non-empty str (the characters of the corpus)")
        self.chars = "".join(sorted(set(chars)))
        self.offset = len(self.SPECIALS)
        self.stoi = {c: i + self.offset for i, c in enumerate(self.chars)}
        self.pad, self.mask, self.bos, self.eos = 0, 1, 2, 3
        self.sentinels = list(range(4, 4 + N_SENTINELS))

    def __len__(self) -> int:
        return self.offset + len(self.chars)

    def encode(self, text: str) -> list[int]:
        missing = sorted(set(text) - set(self.stoi))
        if missing:
            raise ValueError(f"text has characters outside the vocabulary: {''.join(missing)!r}")
        return [self.stoi[c] for c in text]

    def decode(self, ids) -> str:
        out = []
        for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids):
            out.append(self.chars[i - self.offset] if i >= self.offset else self.SPECIALS[i])
        return "".join(out)


class BertMLM(torch.nn.Module):
    """The book's BERT encoder with its masked-LM head (no NSP): ids (B, T) -> logits (B, T, V)."""

    def __init__(self, config):
        super().__init__()
        from .bert import Bert, MLMHead

        self.bert = Bert(config)
        self.head = MLMHead(config, self.bert.embeddings.word)
        self.bert._init_weights(self.head.dense)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.bert(ids).last_hidden_state)


def _windows(data: torch.Tensor, batch_size: int, block: int, g: torch.Generator) -> torch.Tensor:
    starts = torch.randint(len(data) - block, (batch_size,), generator=g)
    return torch.stack([data[s:s + block] for s in starts.tolist()])  # (B, block)


def mlm_batch(data: torch.Tensor, vocab: SpanVocab, batch_size: int, block: int, g: torch.Generator):
    """BERT's corruption of random windows: (corrupted ids, labels), both (B, block)."""
    from .bert import mask_tokens

    x = _windows(data, batch_size, block, g)
    return mask_tokens(x, mask_id=vocab.mask, vocab_size=len(vocab), special_ids=range(vocab.offset),
                       generator=g)


def span_batch(data: torch.Tensor, vocab: SpanVocab, batch_size: int, block: int, g: torch.Generator):
    """T5's corruption of random windows: (encoder inputs, decoder inputs, decoder targets), padded."""
    srcs, tgts = [], []
    for row in _windows(data, batch_size, block, g):
        inp, tgt = span_corruption(row, vocab.sentinels, generator=g)
        srcs.append(inp)
        tgts.append(torch.cat([tgt, torch.tensor([vocab.eos])]))
    pad = torch.nn.utils.rnn.pad_sequence
    src = pad(srcs, batch_first=True, padding_value=vocab.pad)
    tgt = pad(tgts, batch_first=True, padding_value=vocab.pad)
    tgt_in = torch.cat([torch.full((len(tgts), 1), vocab.bos), tgt[:, :-1]], dim=1)
    labels = tgt.masked_fill(tgt == vocab.pad, -100)
    return src, tgt_in, labels


def train_denoiser(model: torch.nn.Module, kind: str, data: torch.Tensor, vocab: SpanVocab, steps: int,
                   batch_size: int = 32, block: int = 64, lr: float = 2e-3, seed: int = 0,
                   progress: bool = False) -> list[float]:
    """Train ``model`` with ``kind`` = "mlm" or "span" for ``steps`` AdamW updates; returns the losses.

    The same optimiser, schedule (linear warm-up over 10 % of the steps, then cosine to 10 %),
    batch size and window length for both objectives; only the corruption differs.
    """
    import torch.nn.functional as F

    if kind not in ("mlm", "span"):
        raise ValueError(f"kind must be 'mlm' or 'span', got {kind!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.1 + 0.45 * (1 + math.cos(math.pi * (s - warm) / max(1, steps - warm))))
    model.train()
    losses = []
    it = range(steps)
    if progress:
        from .progress import tqdm

        it = tqdm(it, desc=kind, leave=False)
    for _ in it:
        if kind == "mlm":
            x, y = mlm_batch(data, vocab, batch_size, block, g)
            logits = model(x.to(device))
        else:
            src, tgt_in, y = span_batch(data, vocab, batch_size, block, g)
            logits = model(src.to(device), tgt_in.to(device))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.to(device).reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.detach())
    model.eval()
    return [float(v) for v in losses]


def blank_examples(text: str, n: int, block: int = 64, min_len: int = 3, seed: int = 0) -> list[tuple[str, int, int]]:
    """``n`` fill-in-the-blank items from ``text``: (window, start, length) of one whole word.

    Each window of ``block`` characters holds a word of >= ``min_len`` letters that is not at
    the window's edges; that word is the blank. Deterministic for ``seed``.
    """
    import re

    rng = torch.Generator().manual_seed(seed)
    items = []
    tries = 0
    while len(items) < n:
        tries += 1
        if tries > 100 * n:
            raise ValueError(f"text is too short to cut {n} windows of {block} characters with a blank")
        s = int(torch.randint(len(text) - block, (1,), generator=rng))
        window = text[s:s + block]
        words = [m for m in re.finditer(r"[A-Za-z]+", window)
                 if len(m.group()) >= min_len and 4 <= m.start() and m.end() <= block - 4]
        if words:
            m = words[int(torch.randint(len(words), (1,), generator=rng))]
            items.append((window, m.start(), m.end() - m.start()))
    return items


@torch.no_grad()
def fill_blank_mlm(model: torch.nn.Module, vocab: SpanVocab, items) -> list[str]:
    """BERT's answer for each blank: one [MASK] per hidden character (it is *told* the length),
    every masked position filled by its most likely character, all at once."""
    device = next(model.parameters()).device
    x = torch.tensor([vocab.encode(w) for w, _, _ in items])
    for i, (_, s, n) in enumerate(items):
        x[i, s:s + n] = vocab.mask
    pred = model(x.to(device)).argmax(-1).cpu()
    return [vocab.decode(pred[i, s:s + n]) for i, (_, s, n) in enumerate(items)]


@torch.no_grad()
def fill_blank_span(model, vocab: SpanVocab, items, max_new: int = 16) -> list[str]:
    """T5's answer: the blank is one sentinel (the length is *not* given); the decoder writes
    <X0> then the span, greedily, until it writes <X1> or [EOS]."""
    device = next(model.parameters()).device
    srcs = []
    for w, s, n in items:
        ids = vocab.encode(w)
        srcs.append(torch.tensor(ids[:s] + [vocab.sentinels[0]] + ids[s + n:]))
    src = torch.nn.utils.rnn.pad_sequence(srcs, batch_first=True, padding_value=vocab.pad).to(device)
    out = model.greedy_decode(src, vocab.bos, vocab.eos, max_new_tokens=max_new).cpu()
    answers = []
    for row in out.tolist():
        if row and row[0] == vocab.sentinels[0]:
            row = row[1:]
        span = []
        for t in row:
            if t == vocab.eos or t in vocab.sentinels or t == vocab.pad:
                break
            span.append(t)
        answers.append(vocab.decode([t for t in span if t >= vocab.offset]))
    return answers


# ----------------------------------------------------------------------------- scoring by likelihood
# A greedy answer says little about a model that is still unsure: one most likely string hides
# how much probability the right one got. The scores below give each hidden character its
# negative log-likelihood (nats) under the model, teacher-forced where the model writes. A test
# item is (window, hidden positions); the three ways of choosing the positions follow.


def word_items(items) -> list[tuple[str, tuple[int, ...]]]:
    """``blank_examples``' (window, start, length) items as (window, hidden positions): one whole word.

    >>> word_items([("to be or not", 3, 2)])
    [('to be or not', (3, 4))]
    """
    out = []
    for it in items:
        if not (isinstance(it, tuple) and len(it) == 3):
            raise TypeError("items must be (window, start, length) tuples from blank_examples")
        w, s, n = it
        if not (isinstance(w, str) and 0 <= s and n >= 1 and s + n <= len(w)):
            raise ValueError(f"items: a blank ({s}, {n}) outside its window of {len(w)} characters")
        out.append((w, tuple(range(s, s + n))))
    return out


def corrupted_items(text: str, n: int, style: str, block: int = 64, noise_density: float = 0.15,
                    mean_span_length: float = 3.0, seed: int = 0) -> list[tuple[str, tuple[int, ...]]]:
    """``n`` windows of ``block`` characters of ``text``, each with its hidden positions.

    ``style="span"``: T5's layout (``noise_span_lengths``): ``round(noise_density * block)``
    characters in ``round(N / mean_span_length)`` spans, the last span at the window's end.
    ``style="mlm"``: as many characters at uniformly random positions (BERT's 15 %; at test
    time every one of them is a [MASK]). Deterministic for ``seed``.

    >>> [len(h) for _, h in corrupted_items("abcdefghij" * 20, 3, "span", block=40, seed=0)]
    [6, 6, 6]
    >>> corrupted_items("abcdefghij" * 20, 1, "span", block=40, seed=0)[0][1][-1]   # T5: the last token is noise
    39
    """
    if style not in ("span", "mlm"):
        raise ValueError(f"style must be 'span' (T5's layout) or 'mlm' (BERT's), got {style!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 2:
        raise ValueError(f"block must be an int >= 2, got {block!r}")
    if not isinstance(text, str) or len(text) <= block:
        raise ValueError(f"text must be a str longer than block={block}")
    g = torch.Generator().manual_seed(seed)
    items = []
    for _ in range(n):
        s = int(torch.randint(len(text) - block, (1,), generator=g))
        kept, noise = noise_span_lengths(block, noise_density, mean_span_length, generator=g)
        if style == "span":
            hidden, pos = [], 0
            for a, b in zip(kept, noise):
                hidden += range(pos + a, pos + a + b)
                pos += a + b
        else:
            hidden = torch.randperm(block, generator=g)[:sum(noise)].sort().values.tolist()
        items.append((text[s:s + block], tuple(hidden)))
    return items


def _hidden_runs(positions: Sequence[int]) -> list[list[int]]:
    """Maximal runs of consecutive positions: [1, 2, 5] -> [[1, 2], [5]]."""
    runs: list[list[int]] = []
    for p in positions:
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _check_items(items, vocab: SpanVocab | None = None) -> list[tuple[str, list[int]]]:
    out = []
    for it in items:
        if not (isinstance(it, tuple) and len(it) == 2 and isinstance(it[0], str)):
            raise TypeError("items must be (window, hidden positions) pairs, as word_items and corrupted_items give")
        w, hidden = it
        try:
            h = [int(p) for p in hidden]
        except TypeError:
            raise TypeError(f"items: hidden positions must be a sequence of ints, got {hidden!r}") from None
        if not h or h != sorted(set(h)) or h[0] < 0 or h[-1] >= len(w):
            raise ValueError(f"items: hidden positions must be distinct, sorted and inside the window, got {h}")
        out.append((w, h))
    return out


@torch.no_grad()
def score_hidden_mlm(model: torch.nn.Module, vocab: SpanVocab, items, batch_size: int = 100) -> list[list[float]]:
    """-log p (nats) of each hidden character under a masked LM (``BertMLM``).

    Every hidden position is a [MASK], so the model is told where the characters are and how
    many; all are predicted at once, each on its own (BERT's factorisation).
    """
    its = _check_items(items)
    device = next(model.parameters()).device
    out = []
    for b in range(0, len(its), batch_size):
        chunk = its[b:b + batch_size]
        x = torch.tensor([vocab.encode(w) for w, _ in chunk])  # (B, block); windows have one length
        y = x.clone()
        for i, (_, h) in enumerate(chunk):
            x[i, h] = vocab.mask
        logp = torch.log_softmax(model(x.to(device)).float(), -1).cpu()  # (B, block, V)
        for i, (_, h) in enumerate(chunk):
            out.append((-logp[i, h, y[i, h]]).tolist())
    return out


@torch.no_grad()
def score_hidden_mlm_chain(model: torch.nn.Module, vocab: SpanVocab, items,
                           batch_size: int = 500) -> list[list[float]]:
    """-log p (nats) of each hidden character under a masked LM, left to right (the chain rule).

    The k-th hidden character of a window is scored with the hidden characters before it
    shown (their true values) and itself and those after it still [MASK]: the factorisation
    ``sum_k -log p(c_k | context, c_<k)`` that a decoder scored teacher-forced uses, instead
    of ``score_hidden_mlm``'s ``sum_k -log p(c_k | context)`` with every hidden character
    masked at once. One forward pass per hidden character.
    """
    its = _check_items(items)
    device = next(model.parameters()).device
    rows, where = [], []  # one masked copy of a window per hidden character; (item, position) it scores
    for i, (w, h) in enumerate(its):
        ids = vocab.encode(w)
        for k, p in enumerate(h):
            x = list(ids)
            for q in h[k:]:
                x[q] = vocab.mask
            rows.append(x)
            where.append((i, p, ids[p]))
    out: list[list[float]] = [[] for _ in its]
    for b in range(0, len(rows), batch_size):
        x = torch.tensor(rows[b:b + batch_size])
        logp = torch.log_softmax(model(x.to(device)).float(), -1).cpu()  # (B, block, V)
        for r, (i, p, y) in enumerate(where[b:b + batch_size]):
            out[i].append(float(-logp[r, p, y]))
    return out


def _span_example(vocab: SpanVocab, window: str, hidden: list[int]):
    """Encoder input, decoder target, and which target tokens are characters, for one item."""
    ids = vocab.encode(window)
    runs = _hidden_runs(hidden)
    if len(runs) + 1 > len(vocab.sentinels):
        raise ValueError(f"items: {len(runs)} hidden spans need {len(runs) + 1} sentinels, the vocabulary has "
                         f"{len(vocab.sentinels)}")
    src, tgt, is_char, pos = [], [], [], 0
    for k, run in enumerate(runs):
        src += ids[pos:run[0]] + [vocab.sentinels[k]]
        tgt += [vocab.sentinels[k]] + [ids[p] for p in run]
        is_char += [False] + [True] * len(run)
        pos = run[-1] + 1
    src += ids[pos:]
    tgt += [vocab.sentinels[len(runs)], vocab.eos]  # the closing sentinel and [EOS], as in span_batch
    is_char += [False, False]
    return src, tgt, is_char


@torch.no_grad()
def score_hidden_span(model: torch.nn.Module, vocab: SpanVocab, items,
                      batch_size: int = 100) -> tuple[list[list[float]], list[list[float]]]:
    """Teacher-forced -log p (nats) under a span-corruption encoder-decoder (``Transformer``).

    Each run of hidden positions is one sentinel in the encoder's input; the decoder's target
    is ``<X0> run0 <X1> run1 ... <Xk> [EOS]``, the layout it was trained on (``span_batch``).
    Returns, per item, the scores of the hidden characters and those of the other target
    tokens (the sentinels and [EOS]: where each span ends, which a masked LM is told).
    """
    its = _check_items(items)
    device = next(model.parameters()).device
    pad = torch.nn.utils.rnn.pad_sequence
    chars, layout = [], []
    for b in range(0, len(its), batch_size):
        ex = [_span_example(vocab, w, h) for w, h in its[b:b + batch_size]]
        src = pad([torch.tensor(s) for s, _, _ in ex], batch_first=True, padding_value=vocab.pad)
        tgt = pad([torch.tensor(t) for _, t, _ in ex], batch_first=True, padding_value=vocab.pad)
        tgt_in = torch.cat([torch.full((len(ex), 1), vocab.bos), tgt[:, :-1]], dim=1)  # teacher forcing
        logp = torch.log_softmax(model(src.to(device), tgt_in.to(device)).float(), -1).cpu()  # (B, T, V)
        nll = -logp.gather(-1, tgt[..., None]).squeeze(-1)  # (B, T)
        for i, (_, t, is_char) in enumerate(ex):
            row = nll[i, :len(t)].tolist()
            chars.append([v for v, c in zip(row, is_char) if c])
            layout.append([v for v, c in zip(row, is_char) if not c])
    return chars, layout


def score_hidden_unigram(train_text: str, items) -> list[list[float]]:
    """The trivial baseline: -log p (nats) of each hidden character under the character
    frequencies of ``train_text`` (add-one smoothed), blind to the context.

    >>> [round(v, 3) for v in score_hidden_unigram("aab", [("ab", (0, 1))])[0]]
    [0.511, 0.916]
    """
    if not isinstance(train_text, str) or not train_text:
        raise ValueError("train_text must be a non-empty str")
    its = _check_items(items)
    counts = Counter(train_text)
    n_types = len(set(counts) | {c for w, _ in its for c in w})
    total = len(train_text) + n_types
    return [[-math.log((counts.get(w[p], 0) + 1) / total) for p in h] for w, h in its]


def score_hidden_bigram(train_text: str, items) -> list[list[float]]:
    """A second trivial baseline: -log p (nats) of each hidden character given the character just
    before it in the window (hidden or not, as a decoder fed its own span would see it), from
    the character-pair counts of ``train_text``, add-one smoothed; the first character of a
    window falls back to the frequencies.

    >>> [round(v, 3) for v in score_hidden_bigram("abab", [("ab", (1,))])[0]]   # (2 + 1) / (2 + 2)
    [0.288]
    """
    if not isinstance(train_text, str) or len(train_text) < 2:
        raise ValueError("train_text must be a str of at least 2 characters")
    its = _check_items(items)
    pairs = Counter(zip(train_text, train_text[1:]))
    firsts = Counter(train_text[:-1])
    n_types = len(set(train_text) | {c for w, _ in its for c in w})
    unigram = score_hidden_unigram(train_text, items)
    return [[-math.log((pairs.get((w[p - 1], w[p]), 0) + 1) / (firsts.get(w[p - 1], 0) + n_types)) if p > 0 else u
             for p, u in zip(h, uni)] for (w, h), uni in zip(its, unigram)]
