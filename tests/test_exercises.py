"""Tests of llmbook.exercises: every checker passes a reader-style solution, calls a placeholder
"not attempted", fails plausible wrong answers with a hint and without raising, and draws
fresh inputs on every call."""

import itertools
import math
import random
import zlib
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import torch

import llmbook.exercises as ex
from llmbook.exercises import CHAPTERS, EXERCISES, Verdict, check, list_exercises


# ---------------------------------------------------------------- reproducible fresh inputs
@pytest.fixture(autouse=True)
def _reproducible_fresh_inputs(monkeypatch, request):
    """Each test draws its "fresh" inputs from a seed fixed by its name (a new one per call, so
    two calls still differ), so a run of the suite is reproducible. Readers get OS entropy.
    Known gap: some checkers have rare random inputs on which a right answer fails or a wrong
    one passes (found for 01b.2, 02.2, 07.3 over many seeds); a many-seed sweep is the next step."""
    base = zlib.crc32(request.node.nodeid.encode())
    calls = itertools.count()
    monkeypatch.setattr(ex._core, "_fresh_rng", lambda: random.Random(base * 1_000_003 + next(calls)))


# ---------------------------------------------------------------- contexts for widget exercises
def _lm():
    from llmbook.ngram import CharNGramLM
    return CharNGramLM(order=3, alpha=1.0).fit("the cat sat on the mat\nthe hat\n" * 3)


def _gpt_and_vocab():
    from llmbook.charvocab import CharVocab
    from llmbook.gpt import GPT, GPTConfig
    vocab = CharVocab.from_text("ROMEO: O, the night is dark\n")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(vocab), block_size=16, n_layer=1, n_head=2, d_model=16, d_ff=32)).eval()
    return model, vocab


ATT = torch.softmax(torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(1)), -1)
TOKS = {"chars": list, "words": str.split}


def _ctx(eid):
    if eid == "00.5":
        return {"model": _lm()}
    if eid == "01b.4":
        return {"tokenizers": TOKS}
    if eid in ("03.5", "07.6", "08a.5"):
        return {"attentions": ATT}
    if eid == "06b.5":
        m, v = _gpt_and_vocab()
        return {"model": m, "vocab": v}
    return {}


# ---------------------------------------------------------------- reader-style solutions
def _sequence_probability(lm, text):
    V, a = len(lm.vocab), lm.alpha
    p = (lm.count(text[0]) + a) / (lm.n_chars + a * V)
    for i in range(1, len(text)):
        h = text[max(0, i - 2):i]
        p *= (lm.count(h + text[i]) + a) / (lm.count(h) + a * V)
    return p


def _greedy(lm, prompt, n):
    out = prompt
    for _ in range(n):
        chars, p = lm.prob_next(out)
        out += chars[max(range(len(chars)), key=lambda i: float(p[i]))]
    return out[len(prompt):]


def _one_merge(seq, pair, new_id):
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and (seq[i], seq[i + 1]) == tuple(pair):
            out.append(new_id); i += 2
        else:
            out.append(seq[i]); i += 1
    return out


def _byte_pair_counts(text):
    b = text.encode("utf-8")
    return dict(Counter(zip(b, b[1:])))


def _likelihood(pieces):
    c = Counter(pieces)
    return math.prod(Fraction(c[p], len(pieces)) for p in pieces)


def _wordpiece(word, vocab):
    out, i = [], 0
    while i < len(word):
        for j in range(len(word), i, -1):
            piece = word[i:j] if i == 0 else "##" + word[i:j]
            if piece in vocab:
                out.append(piece); i = j; break
        else:
            return ["[UNK]"]
    return out


def _best_segmentation(text, lp):
    best = [(0.0, [])] + [(-math.inf, None)] * len(text)
    for i in range(1, len(text) + 1):
        for j in range(i):
            if text[j:i] in lp and best[j][1] is not None and best[j][0] + lp[text[j:i]] > best[i][0]:
                best[i] = (best[j][0] + lp[text[j:i]], best[j][1] + [text[j:i]])
    return best[-1][1]


def _attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def _rms_norm(x, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _sinusoidal(n, d, base=10000.0):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    ang = pos / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(ang), torch.cos(ang)
    return pe.float()


def _top_p_keep(probs, p):
    s, i = probs.sort(descending=True)
    keep, total = torch.zeros_like(probs, dtype=torch.bool), 0.0
    for v, j in zip(s.tolist(), i.tolist()):
        keep[j] = True
        total += v
        if total >= p:
            break
    return keep


def _row_parallel(x, weight, bias, n_shards):
    return sum(xs @ ws.T for xs, ws in zip(x.chunk(n_shards, -1), weight.chunk(n_shards, 1))) + bias


def _expert(d, f):
    return 2 * d * f + f + d


def _widget_solution(eid):
    """What a reader would read off the widget, computed with the library the widget draws from."""
    if eid == "00.5":
        chars, p = _lm().prob_next("the ", 0.5)
        return {"prompt": "the ", "temperature": 0.5, "char": "c", "prob": round(float(p[chars.index("c")]), 3)}
    if eid == "01a.4":
        from llmbook.viz.bpe import bpe_trace, tokenizer_at
        t = "the car the cat the rat"
        return {"text": t, "level": "characters", "merges": 3, "n_tokens": len(tokenizer_at(bpe_trace(t, "characters", 300), 3).encode(t))}
    if eid == "01b.4":
        return {"text": "the cat sat", "tokenizer": "words", "n_tokens": 3}
    if eid in ("03.5", "07.6", "08a.5"):
        return {"layer": 1, "head": 2, "query": 4, "key": 1, "weight": round(float(ATT[1, 2, 4, 1]), 2)}
    if eid == "04.5":
        from llmbook.viz.norm import norm_stats
        return {"batch_size": 4, "padded_length": 10, "seed": 1, "bn_change": round(norm_stats(4, 10, 1)["bn_change"], 3)}
    if eid == "05.5":
        from llmbook.positional import sinusoidal_encoding
        return {"d_model": 64, "base": 10000, "position": 7, "dim": 4, "value": round(float(sinusoidal_encoding(8, 64)[7, 4]), 2)}
    if eid == "06b.5":
        from llmbook.sampling import kept_mask
        m, v = _gpt_and_vocab()
        with torch.no_grad():
            logits = m(torch.tensor([v.encode("ROMEO: O")]))[0][0, -1]
        return {"prompt": "ROMEO: O", "temperature": 1.0, "top_k": 0, "top_p": 0.5, "n_kept": int(kept_mask(logits, top_p=0.5).sum())}
    raise KeyError(eid)


SOLUTIONS = {
    "00.1": _sequence_probability,
    "00.2": {"unigram": True, "bigram": False},
    "00.3": _greedy,
    "00.4": lambda V, n: V ** (n - 1),
    "01a.1": _one_merge,
    "01a.2": _byte_pair_counts,
    "01a.3": lambda n: (n - 1, n - n // 2),
    "01b.1": _likelihood,
    "01b.2": _wordpiece,
    "01b.3": _best_segmentation,
    "02.1": lambda G, D, H: G * H * (D + H + 2),
    "02.2": {"ff": False, "rnn": True, "lstm": True},
    "02.3": {"forward_half": False, "backward_half": True},
    "03.1": {"large_c": "one-hot", "small_c": "uniform"},
    "03.2": _attention,
    "03.3": lambda B, H, T, bytes_per=4: B * H * T * T * bytes_per,
    "03.4": "equivariant",
    "04.1": lambda d, f: 4 * (d * d + d) + (d * f + f) + (f * d + d) + 2 * (2 * d),
    "04.2": -1,
    "04.3": _rms_norm,
    "04.4": [4, 5, 6],
    "05.1": lambda d: d / 2,
    "05.2": _sinusoidal,
    "05.3": lambda hd, base, T: sum(T * base ** (-2 * i / hd) >= 2 * math.pi for i in range(hd // 2)),
    "05.4": True,
    "05.6": lambda hd, base, s, j: base * s ** (hd / (2 * j)),
    "06b.1": lambda V, n, L, d: V * d + n * d + L * (12 * d * d + 13 * d) + 2 * d,
    "06b.2": lambda C, N: C / (6 * N),
    "06b.3": _top_p_keep,
    "06b.4": 1,
    "07.1": lambda p, r: p * r,
    "07.2": lambda V, D, L, F, P: (V + P + 2) * D + 2 * D + L * (4 * (D * D + D) + (D * F + F) + (F * D + D) + 4 * D) + D * D + D,
    "07.3": lambda s, m, model: m + 1 if model == "gpt" else len(s),
    "07.4": 512,
    "07.5": "ValueError",
    "08a.1": lambda V, D, L, H, G, F: V * D + L * (2 * D + 2 * D * D + 2 * D * (D // H) * G + 3 * D * F) + D,
    "08a.2": lambda w, H, G: w.reshape(G, H // G, w.shape[0] // H, w.shape[1]).mean(1).reshape(-1, w.shape[1]),
    "08a.3": lambda D, m=256: m * -(-int(8 * D / 3) // m),
    "08a.4": 0.75,
    "08b.1": lambda f, P: [len(f) * a for a in f],
    "08b.2": lambda D, L, d, f, n, k: (D + L * ((n - 1) * _expert(d, f) + n * d), D + L * ((k - 1) * _expert(d, f) + n * d)),
    "08b.3": {"normalized": "zero", "raw": "nonzero"},
    "08b.4": {"small_tau": "nearest", "large_tau": "votes"},
    "08c.1": lambda T, w: (w * (w + 1) / 2 + (T - w) * w) / (T * (T + 1) / 2),
    "08c.2": lambda n, P: 2 * (P - 1) * n / P,
    "08c.3": lambda N, D, L, al, be: tuple(np.linalg.lstsq(np.stack([np.ones(len(N)), np.asarray(N) ** -al, np.asarray(D) ** -be], 1),
                                                           np.asarray(L), rcond=None)[0]),
    "08c.4": {"7B on 8": 1, "175B on 64": 3, "175B on 8": None},
    "08c.5": _row_parallel,
}

# two (or more) plausible wrong answers per exercise
WRONG = {
    "00.1": [lambda lm, t: math.prod(lm.count(c) / lm.n_chars for c in t),
             lambda lm, t: math.prod((lm.count(c) + lm.alpha) / (lm.n_chars + lm.alpha * len(lm.vocab)) for c in t)],
    "00.2": [{"unigram": True, "bigram": True}, {"unigram": False, "bigram": False}],
    "00.3": [lambda lm, p, n: p + _greedy(lm, p, n), lambda lm, p, n: _greedy(lm, p, n - 1)],
    "00.4": [lambda V, n: V ** n, lambda V, n: V * (n - 1)],
    "01a.1": [ex.ch01a._overlapping_merge, lambda s, p, i: _one_merge(s[::-1], tuple(p)[::-1], i)[::-1]],
    "01a.2": [lambda t: dict(Counter(zip(t, t[1:]))), lambda t: dict(Counter(zip(t.encode()[::3], t.encode()[3::3])))],
    "01a.3": [lambda n: (n // 2, n - n // 2), lambda n: (n - 1, 1)],
    "01b.1": [lambda s: Fraction(1, len(set(s))) ** len(s), lambda s: math.prod(Fraction(Counter(s)[p], len(s)) for p in set(s))],
    "01b.2": [lambda w, v: [w[:1]] + ["##" + c for c in w[1:]], lambda w, v: ["[UNK]"]],
    "01b.3": [lambda t, lp: list(t), lambda t, lp: [t]],
    "02.1": [lambda G, D, H: G * H * (D + H + 1), lambda G, D, H: G * H * (D + H)],
    "02.2": [{"ff": True, "rnn": True, "lstm": True}, {"ff": False, "rnn": False, "lstm": False}],
    "02.3": [{"forward_half": True, "backward_half": True}, {"forward_half": True, "backward_half": False}],
    "03.1": [{"large_c": "uniform", "small_c": "one-hot"}, {"large_c": "unchanged", "small_c": "unchanged"}],
    "03.2": [lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -1) @ v,
             lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -2) @ v,
             lambda q, k, v: torch.softmax(q @ k / math.sqrt(q.shape[-1]), -1) @ v],
    "03.3": [lambda B, H, T, b=4: B * T * T * b, lambda B, H, T, b=4: B * H * T * b],
    "03.4": ["invariant", "neither"],
    "04.1": [lambda d, f: 4 * d * d + 2 * d * f, lambda d, f: 4 * (d * d + d) + (d * f + f) + (f * d + d)],
    "04.2": [1, 0],
    "04.3": [lambda x, eps=1e-6: (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps),
             lambda x, eps=1e-6: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps),
             lambda x, eps=1e-6: x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + eps)],
    "04.4": [[4], [5, 6], list(range(7))],
    "05.1": [lambda d: d, lambda d: 1],
    "05.2": [lambda n, d, base=10000.0: torch.cat([_sinusoidal(n, d, base)[:, 0::2], _sinusoidal(n, d, base)[:, 1::2]], 1),
             lambda n, d, base=10000.0: _sinusoidal(n, d, base).flip(-1)],
    "05.3": [lambda hd, b, T: sum(T * b ** (-2 * i / hd) >= 1 for i in range(hd // 2)),
             lambda hd, b, T: sum(T * b ** (-i / hd) >= 2 * math.pi for i in range(hd // 2))],
    "05.4": [False, "no"],
    # the slowest plane's base for every plane; base * s; the exponent inverted; a smaller base
    "05.6": [lambda hd, b, s, j: b * s ** (hd / (hd - 2)), lambda hd, b, s, j: b * s,
             lambda hd, b, s, j: b * s ** (2 * j / hd), lambda hd, b, s, j: b / s ** (hd / (2 * j))],
    "06b.1": [lambda V, n, L, d: V * d + n * d + L * (12 * d * d + 13 * d), lambda V, n, L, d: V * d + L * (12 * d * d + 13 * d) + 2 * d],
    "06b.2": [lambda C, N: C / (2 * N), lambda C, N: C / N],
    "06b.3": [lambda p, q: p.sort(descending=True)[0].cumsum(0) - p.sort(descending=True)[0] < q,
             lambda p, q: torch.zeros_like(p, dtype=torch.bool).index_fill(0, p.sort(descending=True)[1][p.sort(descending=True)[0].cumsum(0) <= q], True)],
    "06b.4": [0, 2],
    "07.1": [lambda p, r: r, lambda p, r: p * 0.8],
    "07.2": [lambda V, D, L, F, P: (V + P + 2) * D + 2 * D + L * (4 * (D * D + D) + (D * F + F) + (F * D + D) + 4 * D),
             lambda V, D, L, F, P: (V + P) * D + 2 * D + L * (4 * (D * D + D) + (D * F + F) + (F * D + D) + 4 * D) + D * D + D],
    "07.3": [lambda s, m, model: m if model == "gpt" else len(s), lambda s, m, model: len(s.encode()) if model == "bert" else m + 1],
    "07.4": [600, 510],
    "07.5": ["IndexError", "no error"],
    "08a.1": [lambda V, D, L, H, G, F: 2 * V * D + L * (2 * D + 2 * D * D + 2 * D * (D // H) * G + 3 * D * F) + D,
              lambda V, D, L, H, G, F: V * D + L * (2 * D + 4 * D * D + 3 * D * F) + D],
    "08a.2": [lambda w, H, G: w.reshape(G, H // G, w.shape[0] // H, w.shape[1])[:, 0].reshape(-1, w.shape[1]),
              lambda w, H, G: w.reshape(H // G, G, w.shape[0] // H, w.shape[1]).mean(0).reshape(-1, w.shape[1])],
    "08a.3": [lambda D, m=256: int(8 * D / 3), lambda D, m=256: m * (int(8 * D / 3) // m)],
    "08a.4": [3.0, 2 / 3],
    "08b.1": [lambda f, P: [2 * len(f) * p for p in P], lambda f, P: list(f)],
    "08b.2": [lambda D, L, d, f, n, k: (D + L * (n - 1) * _expert(d, f), D + L * (k - 1) * _expert(d, f)),
              lambda D, L, d, f, n, k: (D + L * ((n - 1) * _expert(d, f) + n * d), D + L * (k * _expert(d, f) + n * d))],
    "08b.3": [{"normalized": "nonzero", "raw": "nonzero"}, {"normalized": "zero", "raw": "zero"}],
    "08b.4": [{"small_tau": "votes", "large_tau": "nearest"}, {"small_tau": "nearest", "large_tau": "uniform"}],
    "08c.1": [lambda T, w: w / T, lambda T, w: T * w / (T * (T + 1) / 2)],
    "08c.2": [lambda n, P: n, lambda n, P: (P - 1) * n / P],
    "08c.3": [lambda N, D, L, al, be: SOLUTIONS["08c.3"](N, D, L, al, be)[::-1],
              lambda N, D, L, al, be: (0.0,) + tuple(np.linalg.lstsq(np.stack([np.asarray(N) ** -al, np.asarray(D) ** -be], 1),
                                                                     np.asarray(L), rcond=None)[0])],
    "08c.4": [{"7B on 8": 3, "175B on 64": 3, "175B on 8": 3}, {"7B on 8": 1, "175B on 64": 1, "175B on 8": 1}],
    "08c.5": [lambda x, w, b, n: sum(xs @ ws.T + b for xs, ws in zip(x.chunk(n, -1), w.chunk(n, 1))),
              lambda x, w, b, n: x.chunk(n, -1)[0] @ w.chunk(n, 1)[0].T + b],
}

WIDGETS = sorted(e.id for e in EXERCISES.values() if e.kind == "widget")
def _n_kept_without_top_p(r):
    from llmbook.sampling import kept_mask
    m, v = _gpt_and_vocab()
    with torch.no_grad():
        logits = m(torch.tensor([v.encode(r["prompt"])]))[0][0, -1]
    return int(kept_mask(logits).sum())


def _bpe_count(r, merges):
    from llmbook.viz.bpe import bpe_trace, tokenizer_at
    return len(tokenizer_at(bpe_trace(r["text"], r["level"], 300), merges).encode(r["text"]))


def _pe(pos, dim):
    from llmbook.positional import sinusoidal_encoding
    return round(float(sinusoidal_encoding(pos + 1, 64)[pos, dim]), 2)


WIDGET_WRONG = {  # plausible wrong reports per widget exercise: misreadings, each beyond the reading tolerance
    "00.5": [lambda r: {**r, "prob": r["prob"] + 0.1},
             lambda r: {**r, "prob": round(float(_lm().prob_next(r["prompt"], 1.0)[1][_lm().prob_next(r["prompt"], 1.0)[0].index(r["char"])]), 3)}],  # read at T = 1
    "01a.4": [lambda r: {**r, "n_tokens": len(r["text"])},  # before any merge
              lambda r: {**r, "n_tokens": _bpe_count(r, r["merges"] - 1)}],  # one merge short
    "01b.4": [lambda r: {**r, "n_tokens": len(r["text"])},  # the characters
              lambda r: {**r, "tokenizer": "chars"}],  # the count of another tokenizer's row
    "04.5": [lambda r: {**r, "bn_change": r["bn_change"] + 0.05},
             lambda r: {**r, "bn_change": round(__import__("llmbook.viz.norm", fromlist=["norm_stats"]).norm_stats(
                 r["batch_size"], r["padded_length"], r["seed"])["ln_change"], 3)}],  # LayerNorm's panel
    "05.5": [lambda r: {**r, "value": r["value"] + 0.2},
             lambda r: {**r, "value": _pe(r["position"] + 1, r["dim"])}],  # positions counted from 1
    "06b.5": [lambda r: {**r, "n_kept": r["n_kept"] + 1},
              lambda r: {**r, "n_kept": _n_kept_without_top_p(r)}],  # the top-p filter forgotten
}
for _w in ("03.5", "07.6", "08a.5"):
    WIDGET_WRONG[_w] = [lambda r: {**r, "weight": round(float(ATT[1, 2, 1, 4]), 2)},  # the transposed cell
                        lambda r: {**r, "weight": round(float(ATT[1, 1, 4, 1]), 2)}]  # another head's cell


def _solution(eid):
    return _widget_solution(eid) if eid in WIDGETS else SOLUTIONS[eid]


def test_registry_covers_every_chapter():
    assert set(SOLUTIONS) | set(WIDGETS) == set(EXERCISES)
    for ch in CHAPTERS:
        exs = list_exercises(ch)
        assert len(exs) >= 3, ch
        assert len({e.kind for e in exs}) >= 2, ch  # a mix of kinds in every chapter
    kinds = Counter(e.kind for e in EXERCISES.values())
    assert set(kinds) == set(ex.KINDS)
    chinese = [e.id for e in EXERCISES.values() if any("\u4e00" <= c <= "\u9fff" for c in e.title)]
    assert any(i.startswith("01") for i in chinese) and any(i.startswith("07") for i in chinese)
    for ch in ("00", "01a", "01b", "03", "04", "05", "06b", "07", "08a"):  # the chapters with a widget
        assert any(e.kind == "widget" for e in list_exercises(ch)), ch
    with pytest.raises(ValueError, match="chapter"):
        list_exercises("99")


def test_unknown_id_raises_listing_ids():
    with pytest.raises(ValueError, match="03.2"):
        check("99.9", 1)


@pytest.mark.parametrize("eid", list(EXERCISES))
def test_solution_passes(eid, capsys):
    v = check(eid, _solution(eid), **_ctx(eid))
    out = capsys.readouterr().out
    assert isinstance(v, Verdict) and v.passed and v.attempted, v.message
    assert out.strip() == v.message and "passed" in out


@pytest.mark.parametrize("eid", list(EXERCISES))
def test_placeholders_not_attempted(eid, capsys):
    placeholders = [..., NotImplemented]
    if callable(SOLUTIONS.get(eid)):
        def returns_not_implemented(*a, **k):
            return NotImplemented
        def returns_ellipsis(*a, **k):
            ...
            return ...
        def raises(*a, **k):
            raise NotImplementedError
        placeholders += [returns_not_implemented, returns_ellipsis, raises]
    if eid in WIDGETS:
        placeholders.append({k: ... for k in _widget_solution(eid)})
    for p in placeholders:
        v = check(eid, p, **_ctx(eid))
        assert not v.passed and not v.attempted
        assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("eid", list(EXERCISES))
def test_wrong_answers_fail_with_hint(eid, capsys):
    wrongs = [w(_widget_solution(eid)) for w in WIDGET_WRONG[eid]] if eid in WIDGETS else WRONG[eid]
    assert len(wrongs) >= 2
    for w in wrongs:
        v = check(eid, w, **_ctx(eid))  # must not raise
        out = capsys.readouterr().out
        assert not v.passed and v.attempted, (eid, v.message)
        assert "Hint:" in v.message and out.strip() == v.message
        assert "Traceback" not in out


@pytest.mark.parametrize("eid", [e.id for e in EXERCISES.values() if e.kind in ("derive", "complete")])
def test_fresh_inputs_differ_between_calls(eid):
    a = check(eid, SOLUTIONS[eid])
    b = check(eid, SOLUTIONS[eid])
    assert a.inputs and repr(a.inputs) != repr(b.inputs)


def test_reader_exception_is_one_line(capsys):
    v = check("03.2", lambda q, k, v: q.nonexistent())
    assert not v.passed and "your function raised AttributeError" in v.message and "\n" not in v.message
    check("00.4", lambda V, n: V + "x")
    out = capsys.readouterr().out
    assert "raised TypeError" in out and "Traceback" not in out


def test_wrong_type_is_reported_not_raised():
    v = check("00.4", 42)  # a number where a formula was asked for
    assert not v.passed and "expected a function" in v.message
    v = check("00.5", {"prompt": "the "})  # a report lacking keys
    assert not v.passed and "lacks" in v.message
    v = check("00.5", {"prompt": "the ", "temperature": 1.0, "char": "c", "prob": 0.1})  # no model passed
    assert not v.passed and "model=" in v.message


def test_failure_does_not_print_the_prediction_answer(capsys):
    check("06b.4", 0)
    check("07.4", 600)
    out = capsys.readouterr().out
    assert "512" not in out and " 1 " not in out and "not yet" in out


def test_checks_leave_torch_rng_alone():
    state = torch.get_rng_state()
    check("02.3", SOLUTIONS["02.3"])
    check("08b.3", SOLUTIONS["08b.3"])
    assert torch.equal(state, torch.get_rng_state())


def test_random_fraction_formula_matches_mask_tokens():
    from llmbook.bert import IGNORE_INDEX, mask_tokens
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 30000, (64, 512), generator=g)
    x, y = mask_tokens(ids, mask_id=1, vocab_size=30000, special_ids=[0], mlm_probability=0.15, generator=g)
    measured = ((y != IGNORE_INDEX) & (x != 1) & (x != ids)).float().mean().item()
    assert abs(measured - SOLUTIONS["07.1"](0.15, 0.1)) < 0.002


# ---------------------------------------------------------------- chapter 06a (Building a GPT)
def _window_average(x, w):
    T = x.shape[-2]
    i = torch.arange(T)
    band = ((i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - w)).to(x.dtype)  # (T, T): t - w < s <= t
    return (band / band.sum(-1, keepdim=True)) @ x


SOLUTIONS.update({
    "06a.1": _window_average,
    "06a.2": lambda d, h: 4 * d * d + 4 * d,
    "06a.3": {"one_block": "unchanged", "two_blocks": "changed"},
    "06a.4": {"train_mode": False, "eval_mode": True},
})
WRONG.update({
    "06a.1": [lambda x, w: _window_average(x, x.shape[-2]),  # the whole past, not a window
              lambda x, w: torch.stack([x[..., max(0, t - w + 1):t + 1, :].sum(-2) / w for t in range(x.shape[-2])], -2)],
    "06a.2": [lambda d, h: 4 * d * d, lambda d, h: 3 * d * d + 3 * d, lambda d, h: h * (4 * d * d + 4 * d)],
    "06a.3": [{"one_block": "unchanged", "two_blocks": "unchanged"}, {"one_block": "changed", "two_blocks": "changed"}],
    "06a.4": [{"train_mode": True, "eval_mode": True}, {"train_mode": False, "eval_mode": False}],
})


def test_06a_window_average_is_the_causal_average_for_a_wide_window():
    x = torch.randn(2, 7, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    loop = torch.stack([x[:, :t + 1].mean(1) for t in range(7)], 1)
    torch.testing.assert_close(_window_average(x, 7), loop)
    torch.testing.assert_close(ex.ch06a._window_average_ref(x, 100), loop)
    torch.testing.assert_close(ex.ch06a._window_average_ref(x, 1), x)


def test_06a_attention_params_do_not_depend_on_heads():
    assert {ex.ch06a._attention_param_count(48, h) for h in (1, 2, 3, 4, 6, 8, 12)} == {4 * 48 * 48 + 4 * 48}


# ---------------------------------------------------------------- chapter 01c (tokenizer pathologies)
def _collapsed(E, ref, radius):
    d = (E - E[list(ref)].mean(0)).norm(dim=1)
    return sorted((i for i in range(E.shape[0]) if d[i] <= radius), key=lambda i: float(d[i]))


SOLUTIONS.update({
    "01c.1": lambda n, space: math.ceil(n / 3) + (1 if space else 0),
    "01c.2": {"default": "text", "allow_fim_prefix": "text"},
    "01c.3": _collapsed,
})
WRONG.update({
    "01c.1": [lambda n, s: n // 3 + int(s), lambda n, s: math.ceil(n / 3), lambda n, s: n + int(s)],
    "01c.2": [{"default": "text", "allow_fim_prefix": "error"}, {"default": "text", "allow_fim_prefix": "control"},
              {"default": "control", "allow_fim_prefix": "control"}],
    "01c.3": [lambda E, ref, r: sorted(_collapsed(E, ref, r)), lambda E, ref, r: [i for i in _collapsed(E, ref, r) if i not in ref],
              lambda E, ref, r: [i for i in E.norm(dim=1).argsort().tolist()[:len(_collapsed(E, ref, r))]]],
})


def test_01c_number_tokens_reference_is_the_group_rule():
    tok = ex.ch01c._cl100k()
    for s in ["7", "42", "123", "1234", "1000000", "123456789012"]:
        assert len(tok.encode(s)) == math.ceil(len(s) / 3) and len(tok.encode(" " + s)) == math.ceil(len(s) / 3) + 1


# ---------------------------------------------------------------- chapter 06c (decoding)
def _tokens_per_round(a, k):
    return float(k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)


def _accept_reject(p, q, drafts, u, residual=True, prefix=True):
    k = len(drafts)
    ok = [bool(u[i] < p[i, drafts[i]] / q[i, drafts[i]]) for i in range(k)]
    n = ok.index(False) if prefix and False in ok else (k if prefix else sum(ok))
    if n == k:
        return n, p[k]
    r = torch.clamp(p[n] - q[n], min=0.0) if residual else p[n]
    return n, r / r.sum()


SOLUTIONS.update({
    "06c.1": lambda a, k, c: _tokens_per_round(a, k) / (k * c + 1),
    "06c.2": lambda n, k: math.ceil(n / (k + 1)),
    "06c.3": {"width_1_no_eos": True, "width_1_eos_alpha": False, "width_4_never_worse": False},
    "06c.4": _accept_reject,
})
WRONG.update({
    "06c.1": [lambda a, k, c: _tokens_per_round(a, k), lambda a, k, c: _tokens_per_round(a, k) / (k * c)],
    "06c.2": [lambda n, k: n // (k + 1), lambda n, k: math.ceil(n / k)],
    "06c.3": [{"width_1_no_eos": True, "width_1_eos_alpha": True, "width_4_never_worse": False},
              {"width_1_no_eos": True, "width_1_eos_alpha": False, "width_4_never_worse": True},
              {"width_1_no_eos": False, "width_1_eos_alpha": False, "width_4_never_worse": False}],
    "06c.4": [lambda p, q, d, u: _accept_reject(p, q, d, u, residual=False),
              lambda p, q, d, u: _accept_reject(p, q, d, u, prefix=False)],
})


def test_06c_eos_trap_beam_of_one_passes_over_the_eos_for_any_jitter():
    from llmbook.decoding import beam_search
    for seed in range(20):
        fn = ex.ch06c._bigram_fn(ex.ch06c._eos_trap(random.Random(seed)))
        assert beam_search(fn, torch.tensor([0]), 6, beam_width=1, eos_id=4).tokens.tolist() == [4]
        assert beam_search(fn, torch.tensor([0]), 6, beam_width=1, length_penalty=1.5,
                           eos_id=4).tokens.tolist() == [1, 2, 3, 4]


def test_06c_checker_rule_replays_the_library_round():
    """The checker's reference, llmbook.decoding.accept_reject, replays speculative_generate's first round exactly
    (same draws)."""
    from llmbook.decoding import accept_reject, speculative_generate
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        P, Q = torch.softmax(2 * torch.randn(6, 6, generator=g), -1), torch.softmax(2 * torch.randn(6, 6, generator=g), -1)
        k, g1, g2 = 3, torch.Generator().manual_seed(100 + seed), torch.Generator().manual_seed(100 + seed)
        out = speculative_generate(lambda ids: P.log()[ids], lambda ids: Q.log()[ids], torch.tensor([0]), k + 1,
                                   k=k, generator=g1)
        drafts, qs, last = [], [], 0
        for _ in range(k):  # the draft phase, with the library's draws in the library's order
            q = torch.softmax(Q.log()[last], -1)
            last = int(torch.multinomial(q[None], 1, generator=g2))
            drafts.append(last)
            qs.append(q)
        d = torch.tensor(drafts)
        p = torch.softmax(P.log()[torch.cat([torch.tensor([0]), d])], -1)  # (k + 1, V)
        u = torch.rand(k, generator=g2)
        n, dist = accept_reject(p, torch.stack(qs), d, u)
        nxt = int(torch.multinomial(dist[None], 1, generator=g2))
        assert out.tokens[:n + 1].tolist() == drafts[:n] + [nxt] and out.accepted >= n


def test_06c_3_message_names_all_three_answers():
    msg = ex.check("06c.3", SOLUTIONS["06c.3"]).message
    assert "(c) width 4 is never less probable than greedy: False" in msg and "...." not in msg


def test_06c_beam_trap_prunes_the_greedy_path_for_any_jitter():
    from llmbook.decoding import beam_search, greedy_decode
    for seed in range(20):
        trap = ex.ch06c._beam_trap(random.Random(seed))
        fn = ex.ch06c._bigram_fn(trap)
        greedy = greedy_decode(fn, torch.tensor([0]), 3).tolist()
        lp = sum(math.log(float(trap[x, y])) for x, y in zip([0] + greedy, greedy))
        assert greedy[0] == 1 and beam_search(fn, torch.tensor([0]), 3, beam_width=4).logprob < lp - 1.0


# ---------------------------------------------------------------- chapter 02b (Bahdanau attention)
def _additive_weights(q, K, W, U, b, v):
    return torch.softmax(torch.tanh(W @ q + K @ U.T + b) @ v, dim=-1)  # e_j = v . tanh(W q + U k_j + b)


SOLUTIONS.update({
    "02b.1": _additive_weights,
    "02b.2": lambda dq, dk, da: da * (dq + dk + 2),
    "02b.3": {"equal_keys": "uniform", "large_v": "one-hot"},
})
WRONG.update({
    "02b.1": [lambda q, K, W, U, b, v: torch.softmax((W @ q + K @ U.T + b) @ v, -1),
              lambda q, K, W, U, b, v: torch.tanh(W @ q + K @ U.T + b) @ v,
              lambda q, K, W, U, b, v: torch.softmax(torch.tanh(W @ q + K @ U.T + b) @ v, 0).flip(0)],
    "02b.2": [lambda dq, dk, da: da * (dq + dk), lambda dq, dk, da: da * (dq + dk + 1)],
    "02b.3": [{"equal_keys": "unchanged", "large_v": "unchanged"}, {"equal_keys": "uniform", "large_v": "uniform"}],
})


# ---------------------------------------------------------------- chapter 08d (evaluation beyond loss)
def _pick(choices, logprobs, n_tokens, how, length=lambda c: len(c.encode("utf-8")), best=max):
    unit = {"sum": lambda i: 1, "per_token": lambda i: n_tokens[i], "per_byte": lambda i: length(choices[i])}[how]
    return best(range(len(choices)), key=lambda i: logprobs[i] / unit(i))


SOLUTIONS.update({
    "08d.1": lambda ppl, n_tokens, n_bytes: n_tokens * math.log2(ppl) / n_bytes,
    "08d.2": _pick,
    "08d.3": {"winner_longest": True, "winner_shortest": False},
})
WRONG.update({
    "08d.1": [lambda p, n, b: math.log2(p), lambda p, n, b: n * math.log(p) / b, lambda p, n, b: b * math.log2(p) / n],
    "08d.2": [lambda ch, lp, n, how: _pick(ch, lp, n, how, length=len),  # characters, not bytes
              lambda ch, lp, n, how: _pick(ch, lp, n, how, best=min),  # the lowest score
              lambda ch, lp, n, how: _pick(ch, lp, n, "sum"),  # the normalisation ignored
              lambda ch, lp, n, how: _pick(ch, lp, n, "per_token" if how == "per_byte" else how)],  # tokens for bytes
    "08d.3": [{"winner_longest": True, "winner_shortest": True}, {"winner_longest": False, "winner_shortest": False},
              {"winner_longest": False, "winner_shortest": True}],
})


# ---------------------------------------------------------------- chapter 08e (looking inside)
def _silence(head, axis=2, in_place=False):
    def hook(z, name):
        z = z if in_place else z.clone()
        z.select(axis, head).zero_()
        return z
    return hook


def _prefix(pattern, n, shift=1):
    B, H, T, _ = pattern.shape
    total, count = torch.zeros(H), 0
    for b in range(B):
        for t in range(T - int(n[b]), T):
            total += pattern[b, :, t, t - int(n[b]) + shift]
            count += 1
    return total / count


def _patch(z, clean, head, axis=2, in_place=False):
    z = z if in_place else z.clone()
    if head < z.shape[axis]:
        z.select(axis, head).copy_(clean.select(axis, head))
    return z


def _uniform_prefix(T, n):
    return sum(1.0 / (t + 1) for t in range(T - n, T)) / n


SOLUTIONS.update({"08e.1": _silence, "08e.2": _prefix, "08e.3": _patch, "08e.4": _uniform_prefix})
WRONG.update({
    "08e.1": [lambda h: _silence(h, axis=1), lambda h: _silence(h, in_place=True),  # a position, not a head; in place
              lambda h: (lambda z, name: torch.zeros_like(z))],  # every head
    "08e.2": [lambda p, n: _prefix(p, n, shift=0), lambda p, n: p.diagonal(-1, dim1=-2, dim2=-1).mean((0, 2))],
    "08e.3": [lambda z, c, h: _patch(z, c, h, in_place=True), lambda z, c, h: c.clone(),  # in place; everything
              lambda z, c, h: _patch(z, c, h, axis=1), lambda z, c, h: _patch(z, c, h, axis=3)],  # a position; the head size
    "08e.4": [lambda T, n: 1.0 / T, lambda T, n: 1.0 / n, lambda T, n: 1.0 / (T - n + 1)],
})


def test_08d_per_token_never_overturns_a_longest_sum_winner():
    """The 08d.3 property the checker measures, on a hand-made overturn and over many random items."""
    assert ex.ch08d._mc_pick(["a", "bb"], [-1.5, -2.0], [1, 2], "sum") == 0
    assert ex.ch08d._mc_pick(["a", "bb"], [-1.5, -2.0], [1, 2], "per_token") == 1  # the shortest winner overturned
    rng = random.Random(0)
    for _ in range(2000):
        n = [rng.randint(1, 10) for _ in range(rng.randint(2, 5))]
        lp = [-rng.uniform(0.01, 40) for _ in n]
        s = max(range(len(n)), key=lp.__getitem__)
        if n[s] == max(n):
            assert max(range(len(n)), key=lambda i: lp[i] / n[i]) == s


# ---------------------------------------------------------------- chapter 09 (post-training)
def _mask_labels(input_ids, prompt_lens, lengths):
    """09.1: the token id where prompt_lens[i] <= t < lengths[i], -100 on the prompt and the padding."""
    t = torch.arange(input_ids.shape[1])
    return input_ids.masked_fill(~((t >= prompt_lens[:, None]) & (t < lengths[:, None])), -100)


def _ipo(pc, pr, rc, rr, tau):
    """09.2, pair by pair: (h - 1 / (2 tau))^2 with h the policy's log-ratio margin over the reference's."""
    return torch.stack([((a - c) - (b - d) - 1 / (2 * tau)) ** 2 for a, b, c, d in zip(pc, pr, rc, rr)]).mean()


def _multi_lora(x, W, b, A, B, adapter, alpha):
    """09.3, written row by row: W x + b + (alpha / r) B A x with the row's own adapter."""
    return torch.stack([W @ xi + b + alpha / A.shape[1] * (B[k] @ (A[k] @ xi)) for xi, k in zip(x, adapter)])


SOLUTIONS.update({
    "09.1": _mask_labels,
    "09.2": _ipo,
    "09.3": _multi_lora,
    "09.4": {"A": False, "B": True},
})
WRONG.update({
    # the padding kept; masked by the pad id (a real answer token here); shifted by one position
    "09.1": [lambda x, p, n: _mask_labels(x, p, torch.full_like(n, x.shape[1])),
             lambda x, p, n: _mask_labels(x, p, n).masked_fill(x == 0, -100),
             lambda x, p, n: torch.cat([_mask_labels(x, p, n)[:, 1:], torch.full((len(x), 1), -100)], 1)],
    # target 1 / tau; no reference; DPO's loss
    "09.2": [lambda pc, pr, rc, rr, t: (((pc - rc) - (pr - rr) - 1 / t) ** 2).mean(),
             lambda pc, pr, rc, rr, t: ((pc - pr - 1 / (2 * t)) ** 2).mean(),
             lambda pc, pr, rc, rr, t: -torch.nn.functional.logsigmoid(t * ((pc - rc) - (pr - rr))).mean()],
    # no scaling; every row through adapter 0; the frozen layer alone
    "09.3": [lambda x, W, b, A, B, k, al: _multi_lora(x, W, b, A, B, k, A.shape[1]),
             lambda x, W, b, A, B, k, al: _multi_lora(x, W, b, A, B, torch.zeros_like(k), al),
             lambda x, W, b, A, B, k, al: x @ W.T + b],
    "09.4": [{"A": True, "B": True}, {"A": False, "B": False}, {"A": True, "B": False}],
})


def test_09_1_pad_id_occurs_in_an_answer_and_rows_differ_in_length():
    """09.1's batches always need lengths: padding exists, and the pad id is also a labelled answer token."""
    rng = random.Random(0)
    for _ in range(200):
        x, p, n = ex.ch09._label_batch(rng)
        labels = ex.ch09._library_labels(x, p, n)
        assert int(n.min()) < x.shape[1] == int(n.max())
        assert bool(((labels == ex.ch09.PAD) & (x == ex.ch09.PAD)).any())
        torch.testing.assert_close(labels, _mask_labels(x, p, n), rtol=0, atol=0)


def test_09_3_reference_is_the_library_lora_layer_row_by_row():
    """The checker's reference (one LoRALinear per adapter) equals the formula written row by row."""
    rng = random.Random(1)
    g = torch.Generator().manual_seed(1)
    x, W, b = torch.randn(6, 5, generator=g), torch.randn(4, 5, generator=g), torch.randn(4, generator=g)
    A, B = torch.randn(3, 2, 5, generator=g), torch.randn(3, 4, 2, generator=g)
    adapter = torch.tensor([2, 0, 1, 1, 0, 2])
    got = ex.ch09._multi_lora_ref(rng)(x, W, b, A, B, adapter, 8.0)
    torch.testing.assert_close(got, _multi_lora(x, W, b, A, B, adapter, 8.0))


# ---------------------------------------------------------------- chapter 07b (T5 and GLM objectives)
def _t5_lengths(L, r, mu):
    n = round(L * r)
    k = round(n / mu)
    return (L - n + k, n + k + 1)


def _glm_mask(n_a, n_b):
    m = torch.zeros(n_a + n_b, n_a + n_b, dtype=torch.bool)
    m[:, :n_a] = True
    m[n_a:, n_a:] = torch.ones(n_b, n_b).tril().bool()
    return m


SOLUTIONS.update({
    "07b.1": _t5_lengths,
    "07b.2": _glm_mask,
    "07b.3": {"first_token": 0, "last_token": 1},
    "07b.4": lambda lam: lam / (1 - math.exp(-lam)),
})
WRONG.update({
    "07b.1": [lambda L, r, mu: (_t5_lengths(L, r, mu)[0], _t5_lengths(L, r, mu)[1] - 1),
              lambda L, r, mu: (L - round(L * r), round(L * r))],
    "07b.2": [lambda a, b: torch.ones(a + b, a + b).tril().bool(), lambda a, b: torch.ones(a + b, a + b, dtype=torch.bool)],
    "07b.3": [{"first_token": 0.15, "last_token": 0.15}, {"first_token": 1, "last_token": 0}],
    "07b.4": [lambda lam: lam, lambda lam: lam * (1 - math.exp(-lam))],
})


def test_07b_mean_span_formula_matches_the_library_draws():
    from llmbook.objectives import glm_blank_infilling
    g = torch.Generator().manual_seed(0)
    lengths = [n for _ in range(300) for _, n in glm_blank_infilling(torch.arange(2000), 2000, 2001, 2002, generator=g).spans]
    mean = sum(lengths) / len(lengths)
    se = (sum((v - mean) ** 2 for v in lengths) / len(lengths)) ** 0.5 / len(lengths) ** 0.5
    assert abs(mean - SOLUTIONS["07b.4"](3.0)) < 3 * se  # the fitting step shortens only the last span, rarely


def test_07b_t5_lengths_reader_formula_matches_span_corruption():
    from llmbook.objectives import span_corruption
    for L, r, mu in [(100, 0.15, 3.0), (512, 0.15, 3.0), (37, 0.3, 2.0)]:
        inp, tgt = span_corruption(torch.arange(L), list(range(L, 2 * L + 1)), r, mu)
        assert (len(inp), len(tgt)) == _t5_lengths(L, r, mu)


# ---------------------------------------------------------------- chapter 03b (FlashAttention)
def _merge(m_a, l_a, m_b, l_b):
    m = max(m_a, m_b)
    return m, l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m)


def _combine(o_a, lse_a, o_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse) * o_a + torch.exp(lse_b - lse) * o_b, lse


def _tile_kind(i0, i1, j0, j1, T, S):
    if j0 > i1 - 1 + S - T:
        return "skip"
    return "full" if j1 - 1 <= i0 + S - T else "mask"


SOLUTIONS.update({
    "03b.1": _merge,
    "03b.2": _combine,
    "03b.3": _tile_kind,
})
WRONG.update({
    "03b.1": [lambda m_a, l_a, m_b, l_b: (max(m_a, m_b), l_a + l_b),
              lambda m_a, l_a, m_b, l_b: (max(m_a, m_b), l_a * math.exp(max(m_a, m_b) - m_a) + l_b * math.exp(max(m_a, m_b) - m_b))],
    "03b.2": [lambda o_a, lse_a, o_b, lse_b: ((o_a + o_b) / 2, torch.logaddexp(lse_a, lse_b)),
              # unstable: exp(lse) overflows on the checker's large-score case
              lambda o_a, lse_a, o_b, lse_b: ((torch.exp(lse_a) * o_a + torch.exp(lse_b) * o_b) / (torch.exp(lse_a) + torch.exp(lse_b)),
                                              torch.log(torch.exp(lse_a) + torch.exp(lse_b)))],
    "03b.3": [lambda i0, i1, j0, j1, T, S: _tile_kind(i0, i1, j0, j1, T, T),  # top-left
              lambda i0, i1, j0, j1, T, S: "mask"],
})


def test_03b_split_k_combine_gives_attention():
    # attention over all keys = the combination of attention over two halves (Flash-Decoding's split-K)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(9, 4, generator=g, dtype=torch.float64),
               torch.randn(9, 2, generator=g, dtype=torch.float64))
    halves = []
    for sl in (slice(0, 4), slice(4, 9)):
        s = q @ k[sl].T
        halves += [torch.softmax(s, -1) @ v[sl], torch.logsumexp(s, -1, keepdim=True)]
    o, lse = _combine(*halves)
    torch.testing.assert_close(o, torch.softmax(q @ k.T, -1) @ v, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.T, -1, keepdim=True), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- chapter 08f (quantization)
def _worst_error(M, bits):
    return M / 2 ** (bits - 1)


def _q5_0_block(block, order="little"):
    d = block[:2].contiguous().view(torch.float16).float()
    qh = int.from_bytes(bytes(block[2:6].tolist()), order)
    high = torch.tensor([(qh >> k) & 1 for k in range(32)], dtype=torch.uint8)
    low = torch.cat([block[6:] & 0x0F, block[6:] >> 4])
    return d * ((low | (high << 4)).float() - 16)


SOLUTIONS.update({"08f.1": _worst_error, "08f.2": _q5_0_block,
                  "08f.3": {"q8_0_again": "lossless", "q4_0_again": "lossless", "q4_0_to_q8_0": "lossy"}})
WRONG.update({
    "08f.1": [lambda M, b: M / 2 ** b, lambda M, b: M / (2 ** b - 1), lambda M, b: M / (2 * (2 ** (b - 1) - 1))],
    "08f.2": [lambda b: _q5_0_block(b, order="big"),                                   # qh read big-endian
              lambda b: _q5_0_block(b) + 16 * b[:2].contiguous().view(torch.float16).float(),   # no offset of 16
              lambda b: _q5_0_block(b).reshape(2, 16).t().flatten()],                  # nibbles interleaved
    "08f.3": [{"q8_0_again": "lossless", "q4_0_again": "lossless", "q4_0_to_q8_0": "lossless"},
              {"q8_0_again": "lossy", "q4_0_again": "lossy", "q4_0_to_q8_0": "lossy"},
              {"q8_0_again": "lossless", "q4_0_again": "lossy", "q4_0_to_q8_0": "lossy"}],
})


def test_08f_worst_error_is_reached_by_q4_0():
    from llmbook.quant import dequantize_q4_0, quantize_q4_0
    x = torch.tensor([3.0, -3.0] + [0.5] * 30)
    assert float((dequantize_q4_0(quantize_q4_0(x)) - x).abs().max()) == pytest.approx(_worst_error(3.0, 4))


def test_08f_reader_q5_0_block_equals_gguf():
    gguf = pytest.importorskip("gguf")
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(0))
    raw = gguf.quants.quantize(x.numpy(), gguf.GGMLQuantizationType.Q5_0)
    ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q5_0)
    for row in range(4):
        assert torch.equal(_q5_0_block(torch.from_numpy(raw[row])), torch.from_numpy(ref[row]))


def test_a_check_cell_echoes_no_verdict_repr():
    """UX report s6: a check cell printed its message and then Jupyter echoed ``Verdict(...)`` under it."""
    import glob
    import json

    from IPython.core.formatters import DisplayFormatter

    from llmbook.exercises._core import Verdict

    data, _ = DisplayFormatter().format(Verdict("00.1", False, "msg"))
    assert data == {}, data
    assert repr(Verdict("00.1", False, "msg")) == "Verdict('00.1', passed=False)"  # still readable in a REPL
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    for path in sorted(glob.glob(str(root / "notebooks" / "*.ipynb"))):
        for i, cell in enumerate(json.load(open(path, encoding="utf-8"))["cells"]):
            for out in cell.get("outputs", []):
                text = "".join(out.get("data", {}).get("text/plain", []))
                assert not text.startswith("Verdict("), f"{path} cell {i} saved a Verdict echo"


def test_08c_checkers_reject_the_library_functions(capsys):
    """The notebook imports row_parallel_linear: passing it (or F.linear) is not an answer (review of 08c)."""
    import torch.nn.functional as F
    from llmbook.parallel import column_parallel_linear, row_parallel_linear
    for fn in (row_parallel_linear, column_parallel_linear, F.linear):
        v = check("08c.5", fn)
        assert not v.passed and v.attempted and "library" in v.message
    capsys.readouterr()


def test_08c_ring_allreduce_simulation_sums_and_counts():
    """The 08c.2 checker's ring: every device ends with the sum, having sent 2 (P - 1) / P of the data."""
    for P in (1, 2, 3, 5):
        data = [list(torch.arange(6 * P).add(10 * d).chunk(P)) for d in range(P)]
        result, sent = ex.ch08c._ring_allreduce(data)
        total = sum(torch.cat(dev) for dev in data)
        assert all(torch.equal(r, total) for r in result)
        assert sent == [2 * (P - 1) * 6] * P
    assert ex.ch08c._lowest_stage(7e9, 8) == 1 and ex.ch08c._lowest_stage(174_604_259_328, 8) is None


# ---------------------------------------------------------------- chapter 08g (retrieval-augmented generation)
def _grade_reply(answer, gold, names):
    import re
    words = lambda t: " ".join(re.sub(r"[^a-z]+", " ", t.lower()).split())
    a, g = f" {words(answer)} ", words(gold)
    if f" {g} " not in a:
        return False
    return not any(f" {n} " in a for n in map(words, names) if n and n != g and f" {n} " not in f" {g} ")


def _fuse(rankings, k=60):
    score = {}
    for ranking in rankings:
        for r, i in enumerate(ranking, 1):
            score[i] = score.get(i, 0.0) + 1.0 / (k + r)
    return sorted(score, key=lambda i: (-score[i], i))


def _recall_curve(ranks, kmax):
    return [sum(r is not None and r <= k for r in ranks) / len(ranks) for k in range(1, kmax + 1)]


SOLUTIONS.update({"08g.1": _fuse, "08g.2": _recall_curve, "08g.3": {"scores": "double", "ranking": "same"}})
WRONG.update({
    "08g.1": [lambda rankings, k=60: sorted({i for r in rankings for i in r}),                      # ids in order
              lambda rankings, k=60: [i for i in rankings[0]] + [i for r in rankings[1:] for i in r if i not in rankings[0]],
              lambda rankings, k=60: sorted({i for r in rankings for i in r},                      # ranks from 0
                                            key=lambda i: (-sum(1 / (k + r.index(i)) for r in rankings if i in r), i))],
    "08g.2": [lambda ranks, kmax: [sum(r is not None and r < k for r in ranks) / len(ranks) for k in range(1, kmax + 1)],
              lambda ranks, kmax: [sum(r == k for r in ranks) / len(ranks) for k in range(1, kmax + 1)]],
    "08g.3": [{"scores": "same", "ranking": "same"}, {"scores": "other", "ranking": "changes"},
              {"scores": "double", "ranking": "changes"}],
})


def test_08g_fusion_of_one_ranking_keeps_its_order():
    assert _fuse([[7, 3, 9]]) == [7, 3, 9]
    assert _fuse([[1, 2], [2, 1]]) == [1, 2]                    # a tie: the smaller id first
    assert _fuse([[5, 1], [1, 6]], k=1) == [1, 5, 6]            # 1/3 + 1/2 beats 1/2


def test_08g_grader_reference_is_the_library():
    from llmbook.rag import grade_answer
    names = ["HERMIA", "DUKE", "DUKE SENIOR", "LYSANDER"]
    for a in ("Hermia", "It is Hermia.", "Hermia or Lysander", "Hermione", "Duke Senior", "Duke", "", "DUKE SENIOR:"):
        for g in ("HERMIA", "DUKE SENIOR", "DUKE"):
            assert _grade_reply(a, g, names) == grade_answer(a, g, names), (a, g)
