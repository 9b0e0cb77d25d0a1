"""Unigram language-model tokenization (Kudo 2018), the algorithm inside SentencePiece.

A unigram model gives every piece x of the vocabulary V a probability p(x). A
segmentation T of a string cuts it into pieces, and its likelihood is the product of
their probabilities; the tokenizer picks the most likely segmentation (Viterbi):

    p(x_1..x_L; T) = prod_{(i,j) in T} p(x_i..x_j)

Covers
  - the likelihood of a given segmentation (exact, with ``fractions.Fraction``);
  - Viterbi segmentation over the lattice of all pieces that match the text;
  - training as SentencePiece does it: a large seed vocabulary of frequent substrings;
    EM (expected piece counts by forward-backward over each word's lattice, then the
    Bayesian M-step ``log p = digamma(count) - digamma(total)``); pruning: the loss of a
    piece is how much the corpus likelihood drops if the piece is removed and its uses
    are re-segmented with the next best pieces; keep the top ``shrink`` (80%) by loss
    each round until ``1.1 * vocab_size`` are left, then keep the most probable pieces.
    Single characters are always kept, so any text over the training alphabet encodes;
  - ``Unigram.from_sentencepiece`` loads a trained SentencePiece model's own pieces and
    scores, and then segments exactly as SentencePiece does (tested).

Pre-tokenisation (SentencePiece's, with ``normalization_rule_name='identity'``):
spaces are part of the pieces, written as ``▁`` (U+2581); a ``▁`` is added in front of
the text (``add_dummy_prefix``); leading, trailing and repeated spaces are dropped
(``remove_extra_whitespaces``). Pieces never hold a ``▁`` except as their first
character, so the text falls apart into words ``▁word`` that are segmented one at a
time. Training reads the text line by line (each line is a "sentence", as in
SentencePiece's input file), so a newline never enters the vocabulary. A piece also
never mixes letters of one script with digits, punctuation or another script
(SentencePiece's ``split_by_unicode_script``/``split_by_number``), and is at most 16
characters long.

Unknown characters: a character that is not in the vocabulary becomes ``<unk>`` (id 0);
a run of such characters becomes a single ``<unk>``, as in SentencePiece. Its Viterbi
score is the lowest piece score minus 10. ``decode`` writes ``<unk>`` as ``" ⁇ "``, as
SentencePiece does; the original characters are lost.

Left out: subword regularisation (sampling segmentations), byte fallback, NFKC
normalisation rules, user-defined symbols, and SentencePiece's suffix-array seeding
(which keeps only maximal repeated substrings; here every repeated substring is a
candidate and the most frequent ``seed_size`` by frequency x length are kept).

Papers: Kudo 2018, "Subword regularization: improving neural network translation models
with multiple subword candidates"; Kudo & Richardson 2018, "SentencePiece". Used to
train T5 (Raffel et al. 2020) and Gopher (Rae et al. 2021), among others.
"""

from __future__ import annotations

import math
import os
import unicodedata
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from ..progress import tqdm  # the saved notebook shows the final line, not "0%"

from .base import Tokenizer, check_text, check_training_text, check_vocab_size, special_token_list

__all__ = [
    "Unigram",
    "UnigramTrainConfig",
    "SPACE",
    "spans_to_pieces",
    "piece_probabilities",
    "segmentation_likelihood",
    "viterbi",
    "sentencepiece_normalize",
    "digamma",
]

SPACE = "\u2581"  # '▁', SentencePiece's visible space
UNK = "<unk>"
UNK_PENALTY = 10.0  # SentencePiece: unknown characters score (lowest score - 10)


# ----------------------------------------------------------------------------------
# The model on paper: likelihood of a segmentation
# ----------------------------------------------------------------------------------
def spans_to_pieces(text: str, spans: Iterable[tuple[int, int]]) -> list[str]:
    """Cut ``text`` at 1-based inclusive spans ``(i, j)``, as the notes write T.

    >>> spans_to_pieces("ababc", [(1, 2), (3, 4), (5, 5)])
    ['ab', 'ab', 'c']
    """
    check_text(text)
    pieces, expect = [], 1
    for i, j in spans:
        if i != expect or j < i or j > len(text):
            raise ValueError(f"spans must tile the text from 1 to {len(text)} in order; got ({i}, {j})")
        pieces.append(text[i - 1 : j])
        expect = j + 1
    if expect != len(text) + 1:
        raise ValueError(f"spans cover only characters 1..{expect - 1} of {len(text)}")
    return pieces


def piece_probabilities(pieces: Sequence[str]) -> dict[str, Fraction]:
    """Maximum-likelihood unigram probabilities: count(x) / number of pieces, exactly.

    >>> piece_probabilities(["ab", "ab", "c"])
    {'ab': Fraction(2, 3), 'c': Fraction(1, 3)}
    """
    if not pieces:
        raise ValueError("pieces is empty: no probabilities to estimate")
    counts = Counter(pieces)
    return {x: Fraction(c, len(pieces)) for x, c in counts.items()}


def segmentation_likelihood(pieces: Sequence[str], probs: Mapping[str, Any]):
    """p(x; T) = product of p(piece); exact if ``probs`` holds Fractions.

    >>> p = piece_probabilities(["ab", "ab", "c"])
    >>> segmentation_likelihood(["ab", "ab", "c"], p)
    Fraction(4, 27)
    """
    result: Any = Fraction(1)
    for x in pieces:
        if x not in probs:
            raise ValueError(f"piece {x!r} is not in the vocabulary (probs)")
        result = result * probs[x]
    return result


def viterbi(word: str, log_probs: Mapping[str, float], max_piece_len: int | None = None) -> tuple[list[str], float]:
    """Most likely segmentation of ``word`` and its log-likelihood.

    best[j] = max over pieces word[i:j] of best[i] + log p(word[i:j]); ties go to the
    piece that starts earliest (SentencePiece's order). A position that no piece covers
    raises ValueError (``Unigram`` handles unknown characters itself).

    >>> lp = {"a": math.log(0.2), "b": math.log(0.2), "ab": math.log(0.3), "c": math.log(0.3)}
    >>> viterbi("ababc", lp)[0]
    ['ab', 'ab', 'c']
    """
    check_text(word, "word")
    if max_piece_len is None:
        max_piece_len = max((len(x) for x in log_probs), default=1)
    n = len(word)
    best = [0.0] + [-math.inf] * n
    back = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(max(0, j - max_piece_len), j):
            lp = log_probs.get(word[i:j])
            if lp is not None and best[i] + lp > best[j]:
                best[j], back[j] = best[i] + lp, i
        if best[j] == -math.inf:
            raise ValueError(f"no piece of the vocabulary covers {word[j - 1]!r} in word {word!r}")
    pieces, j = [], n
    while j > 0:
        pieces.append(word[back[j] : j])
        j = back[j]
    return pieces[::-1], best[n]


def sentencepiece_normalize(text: str, add_dummy_prefix: bool = True, remove_extra_whitespaces: bool = True) -> str:
    """SentencePiece's identity normalisation: spaces -> ``▁``, one ``▁`` in front.

    >>> sentencepiece_normalize("  Hello   world ")
    '▁Hello▁world'
    """
    check_text(text)
    if remove_extra_whitespaces:
        text = " ".join(t for t in text.split(" ") if t)
    if not text:
        return ""
    if add_dummy_prefix:
        text = " " + text
    return text.replace(" ", SPACE)


def _split_words(normalized: str) -> list[str]:
    # Cut before every '▁': '▁to▁be' -> ['▁to', '▁be'] (a piece never holds an inner '▁').
    words, start = [], 0
    for k in range(1, len(normalized)):
        if normalized[k] == SPACE:
            words.append(normalized[start:k])
            start = k
    if normalized:
        words.append(normalized[start:])
    return words


def digamma(x: np.ndarray) -> np.ndarray:
    """The digamma function psi(x) = d/dx log Gamma(x), for x > 0 (SentencePiece's series).

    >>> round(float(digamma(np.array([1.0]))[0]), 6)   # -Euler's gamma
    -0.577216
    """
    x = np.asarray(x, dtype=np.float64).copy()
    result = np.zeros_like(x)
    small = x < 7
    while small.any():  # psi(x) = psi(x + 1) - 1/x, until the asymptotic series is accurate
        result[small] -= 1.0 / x[small]
        x[small] += 1.0
        small = x < 7
    x = x - 0.5
    xx = 1.0 / x
    xx2 = xx * xx
    xx4 = xx2 * xx2
    return result + np.log(x) + xx2 / 24.0 - 7.0 / 960.0 * xx4 + 31.0 / 8064.0 * xx4 * xx2 - 127.0 / 30720.0 * xx4 * xx4


def _char_class(ch: str) -> str:
    # Approximates SentencePiece's Unicode-script rule: one class per script of letters,
    # one for digits, one for everything else (punctuation, symbols: script "Common").
    cat = unicodedata.category(ch)
    if cat == "Nd":
        return "digit"
    if cat[0] in "LM" or cat in ("Nl", "No"):
        name = unicodedata.name(ch, "")
        script = name.split(" ")[0] if name else "?"
        if script in ("CJK", "HIRAGANA", "KATAKANA", "IDEOGRAPHIC"):
            return "han"  # SentencePiece merges kana into Han
        return script
    return "common"


# ----------------------------------------------------------------------------------
# Training configuration
# ----------------------------------------------------------------------------------
@dataclass
class UnigramTrainConfig:
    """Options of ``Unigram.train`` (defaults follow SentencePiece, except ``shrink``)."""

    seed_size: int = 1_000_000  # most frequent substrings (by freq x length) kept as seeds
    seed_maximal: bool = True  # seeds only right-maximal substrings (as SentencePiece's suffix array)
    shrink: float = 0.8  # fraction of the vocabulary kept per pruning round (SentencePiece: 0.75)
    em_iterations: int = 2  # EM steps between two prunings (SentencePiece: num_sub_iterations)
    max_piece_len: int = 16  # longest piece, in characters
    overshoot: float = 1.1  # prune until overshoot * vocab_size, then keep the most probable
    add_dummy_prefix: bool = True  # put '▁' in front of every sentence
    remove_extra_whitespaces: bool = True  # drop leading, trailing and repeated spaces

    @classmethod
    def sentencepiece(cls) -> "UnigramTrainConfig":
        """SentencePiece's own settings (shrink 0.75)."""
        return cls(shrink=0.75)

    @classmethod
    def fast(cls) -> "UnigramTrainConfig":
        """Fewer seeds and a faster shrink, for demos on tiny texts."""
        return cls(seed_size=20_000, shrink=0.7)


class _Lattice:
    """All (word, start, end, piece) edges of a set of strings, vectorised with numpy.

    Forward-backward and Viterbi run over every string at once, position by position,
    which keeps EM in numpy instead of a Python loop over millions of edges.
    """

    def __init__(self, lengths: np.ndarray, ew, es, ee, ep):
        self.lengths = lengths
        self.n, self.L = len(lengths), int(lengths.max()) if len(lengths) else 0
        self.ew, self.es, self.ee, self.ep = ew, es, ee, ep

    def select(self, keep_edge: np.ndarray) -> "_Lattice":
        return _Lattice(self.lengths, self.ew[keep_edge], self.es[keep_edge], self.ee[keep_edge], self.ep[keep_edge])

    def _groups(self, key_pos: np.ndarray):
        # Sort edges by (position, word, start) and yield, per position, the edge slice
        # plus the boundaries of each word's group inside it.
        order = np.lexsort((self.es, self.ew, key_pos))
        pos = key_pos[order]
        bounds = np.searchsorted(pos, np.arange(self.L + 2))
        return order, bounds

    def forward(self, logp: np.ndarray, use_max: bool = False):
        """alpha[w, j] = logsumexp (or max) over edges ending at j of alpha[w, start] + logp."""
        alpha = np.full((self.n, self.L + 1), -np.inf)
        alpha[:, 0] = 0.0
        back = np.full((self.n, self.L + 1), -1, dtype=np.int64) if use_max else None
        order, bounds = self._groups(self.ee)
        for j in range(1, self.L + 1):
            sl = order[bounds[j] : bounds[j + 1]]
            if len(sl) == 0:
                continue
            w = self.ew[sl]
            vals = alpha[w, self.es[sl]] + logp[self.ep[sl]]
            starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
            gw = w[starts]
            m = np.maximum.reduceat(vals, starts)
            if use_max:
                rep = np.repeat(m, np.diff(np.r_[starts, len(vals)]))
                idx = np.where(vals == rep, np.arange(len(vals)), len(vals))
                first = np.minimum.reduceat(idx, starts)  # earliest start wins ties
                alpha[gw, j] = m
                back[gw, j] = sl[first]
            else:
                finite = np.isfinite(m)
                mm = np.where(finite, m, 0.0)
                s = np.add.reduceat(np.exp(vals - np.repeat(mm, np.diff(np.r_[starts, len(vals)]))), starts)
                alpha[gw, j] = np.where(finite, mm + np.log(s), -np.inf)
        return alpha, back

    def backward(self, logp: np.ndarray):
        """beta[w, i] = logsumexp over edges starting at i of logp + beta[w, end]."""
        beta = np.full((self.n, self.L + 1), -np.inf)
        beta[np.arange(self.n), self.lengths] = 0.0
        order, bounds = self._groups(self.es)
        for i in range(self.L - 1, -1, -1):
            sl = order[bounds[i] : bounds[i + 1]]
            if len(sl) == 0:
                continue
            w = self.ew[sl]
            vals = beta[w, self.ee[sl]] + logp[self.ep[sl]]
            starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
            m = np.maximum.reduceat(vals, starts)
            finite = np.isfinite(m)
            mm = np.where(finite, m, 0.0)
            s = np.add.reduceat(np.exp(vals - np.repeat(mm, np.diff(np.r_[starts, len(vals)]))), starts)
            beta[w[starts], i] = np.where(finite, mm + np.log(s), -np.inf)
        return beta

    def expected_counts(self, logp: np.ndarray, freqs: np.ndarray, n_pieces: int):
        """E-step: expected number of uses of each piece, and the corpus log-likelihood."""
        alpha, _ = self.forward(logp)
        beta = self.backward(logp)
        z = alpha[np.arange(self.n), self.lengths]  # log p(word), summed over segmentations
        post = np.exp(alpha[self.ew, self.es] + logp[self.ep] + beta[self.ew, self.ee] - z[self.ew])
        counts = np.bincount(self.ep, weights=post * freqs[self.ew], minlength=n_pieces)
        return counts, float((z * freqs).sum())

    def viterbi_paths(self, logp: np.ndarray) -> tuple[list[list[int]], np.ndarray]:
        """Best segmentation of every string, as lists of piece indices, and its score."""
        best, back = self.forward(logp, use_max=True)
        score = best[np.arange(self.n), self.lengths]
        paths: list[list[int]] = []
        es, ep = self.es.tolist(), self.ep.tolist()
        back_rows = back.tolist()
        for w, n in enumerate(self.lengths.tolist()):
            row, path, j = back_rows[w], [], n
            if not math.isfinite(score[w]):
                paths.append([])
                continue
            while j > 0:
                e = row[j]
                path.append(ep[e])
                j = es[e]
            paths.append(path[::-1])
        return paths, score


def _build_lattice(strings: list[str], index: Mapping[str, int], max_len: int, exclude_self: bool = False) -> _Lattice:
    ew, es, ee, ep = [], [], [], []
    for w, s in enumerate(strings):
        n = len(s)
        for i in range(n):
            for j in range(i + 1, min(n, i + max_len) + 1):
                p = index.get(s[i:j])
                if p is not None and not (exclude_self and i == 0 and j == n):
                    ew.append(w)
                    es.append(i)
                    ee.append(j)
                    ep.append(p)
    arr = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    return _Lattice(arr([len(s) for s in strings]), arr(ew), arr(es), arr(ee), arr(ep))


# ----------------------------------------------------------------------------------
# The tokenizer
# ----------------------------------------------------------------------------------
class Unigram(Tokenizer):
    """A unigram language-model tokenizer (SentencePiece-compatible segmentation).

    Parameters
    ----------
    pieces:
        ``(piece, log_prob)`` in id order. Id 0 is ``<unk>``; pieces listed in
        ``control`` (such as ``<s>``) get ids but never match text.
    control:
        pieces that are ids only (SentencePiece's control symbols, ``<unk>``).
    add_dummy_prefix, remove_extra_whitespaces:
        SentencePiece's normalisation options (see the module docstring).

    >>> uni = Unigram([("<unk>", 0.0), ("▁", -2.0), ("a", -2.0), ("b", -2.0), ("c", -2.0), ("▁ab", -1.5), ("ab", -1.0)])
    >>> uni.tokenize("ababc")
    ['▁ab', 'ab', 'c']
    >>> uni.decode(uni.encode("ababc abx"))
    'ababc ab ⁇ '
    """

    def __init__(
        self,
        pieces: Sequence[tuple[str, float]],
        control: Iterable[str] = ("<unk>", "<s>", "</s>"),
        add_dummy_prefix: bool = True,
        remove_extra_whitespaces: bool = True,
    ):
        if not isinstance(pieces, (list, tuple)) or not pieces:
            raise TypeError("pieces must be a non-empty list of (str, float) pairs")
        for item in pieces:
            if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"pieces must hold (str, float) pairs, got {item!r}")
            if not isinstance(item[1], (int, float)) or math.isnan(item[1]):
                raise ValueError(f"score of piece {item[0]!r} must be a number, got {item[1]!r}")
        names = [p for p, _ in pieces]
        if len(set(names)) != len(names):
            dup = next(p for p, c in Counter(names).items() if c > 1)
            raise ValueError(f"pieces lists {dup!r} twice")
        if names[0] != UNK:
            raise ValueError(f"pieces[0] must be {UNK!r} (the unknown piece), got {names[0]!r}")
        self.pieces = [(p, float(s)) for p, s in pieces]
        self.control = set(special_token_list(control, name="control", ordered=False)) | {UNK}
        self.add_dummy_prefix = bool(add_dummy_prefix)
        self.remove_extra_whitespaces = bool(remove_extra_whitespaces)
        self.piece_to_id = {p: i for i, (p, _) in enumerate(self.pieces)}
        # Only ordinary pieces take part in the segmentation.
        self.log_probs = {p: s for p, s in self.pieces if p not in self.control}
        self.max_piece_len = max((len(p) for p in self.log_probs), default=1)
        self.unk_score = min(self.log_probs.values(), default=0.0) - UNK_PENALTY
        self._cache: dict[str, list[int]] = {}
        super().__init__({p: self.piece_to_id[p] for p in self.control if p in self.piece_to_id and p != UNK})

    # -- construction ------------------------------------------------------------
    @classmethod
    def from_sentencepiece(cls, model: "str | os.PathLike | bytes", **kwargs: Any) -> "Unigram":
        """Load the pieces and scores of a trained SentencePiece unigram model.

        ``model`` is a path to a ``.model`` file or the serialised model proto (bytes).
        The normalisation options are not read from the proto (that would need
        protobuf); pass ``add_dummy_prefix``/``remove_extra_whitespaces`` if the model
        was trained with non-default values.
        """
        import sentencepiece as spm

        if isinstance(model, (bytes, bytearray)):
            where = "model (the bytes given)"
            if not model:
                raise ValueError(f"{where} is empty, not a SentencePiece model")
        elif isinstance(model, (str, os.PathLike)):
            where = f"model {str(model)!r}"
            if not Path(model).is_file():
                raise ValueError(f"{where} is not a file")
        else:
            raise TypeError(f"model must be a path or bytes, got {type(model).__name__}")
        try:
            if isinstance(model, (bytes, bytearray)):
                sp = spm.SentencePieceProcessor(model_proto=bytes(model))
            else:
                sp = spm.SentencePieceProcessor(model_file=str(model))
        except (RuntimeError, OSError) as exc:  # sentencepiece's parse errors are RuntimeErrors
            raise ValueError(f"{where} is not a readable SentencePiece model: {exc}") from None
        if sp.get_piece_size() == 0:
            raise ValueError(f"{where} holds no pieces")
        pieces, control = [], []
        for i in range(sp.get_piece_size()):
            p = sp.id_to_piece(i)
            pieces.append((p, float(sp.get_score(i))))
            if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i) or sp.is_byte(i):
                control.append(p)
        if pieces[0][0] != UNK:
            raise ValueError("only models with <unk> at id 0 are supported (SentencePiece's default)")
        return cls(pieces, control=control, **kwargs)

    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        config: UnigramTrainConfig | None = None,
        progress: bool = True,
        history: list | None = None,
    ) -> "Unigram":  # type: ignore[override]
        """Learn ``vocab_size`` pieces (``<unk>``, ``<s>``, ``</s>`` included) from ``text``.

        ``history``, if given a list, receives one dict per stage (for plotting the shrinking):
        ``round`` (0, 1, ...), ``step`` (what made this size: ``"seeds"``, ``"first EM"`` (whose
        steps drop pieces expected less than half a time), ``"prune + EM"``, or the last,
        ``"most probable"``, a cut by probability to the target), ``vocab_size`` and the corpus
        ``log_likelihood`` (None for the seeds).
        """
        check_training_text(text)
        cfg = config or UnigramTrainConfig()
        if not isinstance(cfg, UnigramTrainConfig):
            raise TypeError(f"config must be a UnigramTrainConfig, got {type(cfg).__name__}")
        if not 0 < cfg.shrink < 1:
            raise ValueError(f"config.shrink must be in (0, 1), got {cfg.shrink}")
        for name in ("em_iterations", "seed_size", "max_piece_len"):
            v = getattr(cfg, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"config.{name} must be an int >= 1, got {v!r}")
        if not cfg.overshoot >= 1.0 or cfg.overshoot == float("inf"):
            raise ValueError(f"config.overshoot must be a finite number >= 1, got {cfg.overshoot!r}")
        specials = [UNK, "<s>", "</s>"]
        words: Counter = Counter()
        for line in text.split("\n"):
            words.update(_split_words(sentencepiece_normalize(line, cfg.add_dummy_prefix, cfg.remove_extra_whitespaces)))
        if not words:
            raise ValueError("text is empty after normalisation (only whitespace): cannot train")
        word_list = list(words)
        freqs = np.array([words[w] for w in word_list], dtype=np.float64)
        chars: Counter = Counter()
        for w, f in words.items():
            for ch in w:
                chars[ch] += f
        check_vocab_size(vocab_size, len(chars) + len(specials), "every character of the text plus <unk>, <s>, </s>")
        target = vocab_size - len(specials)
        bar = tqdm(desc="Unigram EM + pruning", disable=not progress, unit="round")

        # 1. Seed vocabulary: every repeated substring that may be a piece, scored by
        #    frequency x length (long frequent strings first), plus every character.
        sub: Counter = Counter()
        follower: dict[str, str] = {}  # the character after the first occurrence seen
        branching: set[str] = set()  # substrings followed by two different characters
        for w, f in words.items():
            classes = [None if (k == 0 and ch == SPACE) else _char_class(ch) for k, ch in enumerate(w)]
            for i in range(len(w)):
                cls_i = classes[i]
                for j in range(i + 2, min(len(w), i + cfg.max_piece_len) + 1):
                    if w[j - 1] == SPACE:
                        break
                    c = classes[j - 1]
                    if cls_i is None:
                        cls_i = c  # a leading '▁' takes the class of what follows
                    elif c != cls_i:
                        break
                    s = w[i:j]
                    sub[s] += f
                    nxt = w[j] if j < len(w) else SPACE  # a word ends at the next '▁' or line end
                    if follower.setdefault(s, nxt) != nxt:
                        branching.add(s)
        # Like SentencePiece's suffix-array seeds: repeated (freq >= 2) and right-maximal
        # (not always followed by the same character, so not a mere prefix of a longer seed).
        seeds = [s for s, c in sub.items() if c >= 2 and (s in branching or not cfg.seed_maximal)]
        seeds.sort(key=lambda s: (-sub[s] * len(s), s))
        seeds = seeds[: cfg.seed_size]
        vocab = sorted(chars) + [s for s in seeds if s not in chars]
        score = np.array([chars[s] if s in chars else sub[s] * len(s) for s in vocab], dtype=np.float64)
        logp = np.log(score) - np.log(score.sum())
        is_char = np.array([len(s) == 1 for s in vocab])
        index = {s: k for k, s in enumerate(vocab)}
        lattice = _build_lattice(word_list, index, cfg.max_piece_len)
        alive = np.ones(len(vocab), dtype=bool)
        if history is not None:
            history.append({"round": 0, "step": "seeds", "vocab_size": len(vocab), "log_likelihood": None})

        def em_step() -> float:
            nonlocal logp
            counts, loglik = lattice.expected_counts(logp, freqs, len(vocab))
            # Pieces expected less than half a time are dropped (SentencePiece); characters stay.
            keep = alive & ((counts >= 0.5) | is_char)
            alive[:] = keep
            counts = np.where(keep, np.maximum(counts, 1e-3), 0.0)
            new = np.full(len(vocab), -np.inf)
            new[keep] = digamma(counts[keep]) - digamma(np.array([counts[keep].sum()]))[0]
            logp = new
            return loglik

        def restrict() -> None:
            nonlocal lattice
            lattice = lattice.select(alive[lattice.ep])

        round_no = 0
        while True:
            for _ in range(cfg.em_iterations):
                loglik = em_step()
            restrict()
            n_alive = int(alive.sum())
            if history is not None:
                history.append({"round": round_no + 1, "step": "prune + EM" if round_no else "first EM",
                                "vocab_size": n_alive, "log_likelihood": loglik})
            bar.update(1)
            bar.set_postfix(vocab=n_alive)
            if n_alive <= cfg.overshoot * target:
                break
            cls._prune(vocab, alive, logp, is_char, lattice, freqs, cfg, target)
            restrict()
            round_no += 1
        for _ in range(cfg.em_iterations):  # re-fit the probabilities of the survivors
            loglik = em_step()
            restrict()
        bar.close()

        # 3. Final vocabulary: every character, then the most probable other pieces.
        ids = np.flatnonzero(alive)
        chars_first = sorted(ids, key=lambda k: (not is_char[k], -logp[k], vocab[k]))
        chosen = chars_first[:target] if len(chars_first) > target else chars_first
        chosen.sort(key=lambda k: (-logp[k], vocab[k]))
        if history is not None:
            history.append({"round": round_no + 2, "step": "most probable", "vocab_size": len(chosen),
                            "log_likelihood": loglik})
        pieces = [(UNK, 0.0), ("<s>", 0.0), ("</s>", 0.0)] + [(vocab[k], float(logp[k])) for k in chosen]
        return cls(pieces, add_dummy_prefix=cfg.add_dummy_prefix, remove_extra_whitespaces=cfg.remove_extra_whitespaces)

    @staticmethod
    def _prune(vocab, alive, logp, is_char, lattice, freqs, cfg, target) -> None:
        """Keep the ``shrink`` fraction of pieces whose removal would cost most likelihood."""
        ids = np.flatnonzero(alive)
        # How often each piece is used in the best segmentation of the corpus.
        paths, _ = lattice.viterbi_paths(logp)
        used = np.zeros(len(vocab))
        for path, f in zip(paths, freqs.tolist()):
            for p in path:
                used[p] += f
        total = used.sum()
        # Best segmentation of each piece without the piece itself: what replaces it.
        alive_index = {vocab[k]: int(k) for k in ids}
        strings = [vocab[k] for k in ids]
        alt_lattice = _build_lattice(strings, alive_index, cfg.max_piece_len, exclude_self=True)
        alt_paths, alt_score = alt_lattice.viterbi_paths(logp)
        keep_always, candidates = [], []
        for row, k in enumerate(ids.tolist()):
            if is_char[k] or not alt_paths[row]:
                keep_always.append(k)  # no alternative: removing it would lose text
                continue
            if alt_score[row] > logp[k]:
                continue  # never its own best segmentation: never used, drop
            if used[k] == 0:
                candidates.append((0.0, k))
                continue
            alts = alt_paths[row]
            logsum_alt = math.log(total + used[k] * (len(alts) - 1))
            lp_alt = sum(math.log(used[a] + used[k]) - logsum_alt for a in alts)
            lp_piece = math.log(used[k]) - math.log(total)
            # Likelihood lost, per word, if every use of k becomes its alternative.
            candidates.append((used[k] / freqs.sum() * (lp_piece - lp_alt), k))
        n_keep = max(int(cfg.overshoot * target), int(cfg.shrink * len(ids)))
        candidates.sort(key=lambda t: (-t[0], vocab[t[1]]))
        survivors = set(keep_always)
        for _, k in candidates:
            if len(survivors) >= n_keep:
                break
            survivors.add(k)
        alive[:] = False
        alive[list(survivors)] = True

    # -- encoding ------------------------------------------------------------------
    @property
    def _base_vocab_size(self) -> int:
        return len(self.pieces)

    def _special_may_overlap(self) -> bool:
        return True  # <s>, </s> are listed among the pieces (ids 1, 2)

    def normalize(self, text: str) -> str:
        """The text as the model sees it: ``▁`` for spaces, dummy prefix."""
        return sentencepiece_normalize(text, self.add_dummy_prefix, self.remove_extra_whitespaces)

    def _segment_word(self, word: str) -> list[int]:
        # Viterbi in SentencePiece's order: push from each start to every piece that
        # matches there; a strictly better score replaces, so ties keep the earliest start.
        n = len(word)
        lp, unk_score, max_len = self.log_probs, self.unk_score, self.max_piece_len
        best = [0.0] + [-math.inf] * n
        back = [0] * (n + 1)
        is_unk = [False] * (n + 1)
        for i in range(n):
            if best[i] == -math.inf:
                continue
            base = best[i]
            single = False
            for j in range(i + 1, min(n, i + max_len) + 1):
                s = lp.get(word[i:j])
                if s is None:
                    continue
                if j == i + 1:
                    single = True
                if base + s > best[j]:
                    best[j], back[j], is_unk[j] = base + s, i, False
            if not single and base + unk_score > best[i + 1]:
                best[i + 1], back[i + 1], is_unk[i + 1] = base + unk_score, i, True
        ids: list[int] = []
        j = n
        while j > 0:
            i = back[j]
            ids.append(0 if is_unk[j] else self.piece_to_id[word[i:j]])
            j = i
        return ids[::-1]

    def _encode_ordinary(self, text: str) -> list[int]:
        out: list[int] = []
        cache = self._cache
        for word in _split_words(self.normalize(text)):
            ids = cache.get(word)
            if ids is None:
                ids = self._segment_word(word)
                if len(cache) < 200_000:
                    cache[word] = ids
            for i in ids:
                if i == 0 and out and out[-1] == 0:
                    continue  # a run of unknown characters is one <unk> (SentencePiece)
                out.append(i)
        return out

    def _token_str(self, id: int) -> str:
        return self.pieces[id][0]

    def _decode_ordinary(self, ids: list[int]) -> str:
        text = "".join(" \u2047 " if i == 0 else self.pieces[i][0] for i in ids).replace(SPACE, " ")
        if self.add_dummy_prefix and text.startswith(" "):
            text = text[1:]  # the dummy prefix
        return text

    def log_likelihood(self, text: str) -> float:
        """Log-probability of the Viterbi segmentation of ``text`` (sum of piece scores)."""
        ids = self.encode(check_text(text))
        return float(sum(self.unk_score if i == 0 else self.pieces[i][1] for i in ids))

    # -- persistence -----------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "pieces": [[p, s] for p, s in self.pieces],
            "control": sorted(self.control),
            "add_dummy_prefix": self.add_dummy_prefix,
            "remove_extra_whitespaces": self.remove_extra_whitespaces,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "Unigram":
        return cls(
            [tuple(x) for x in state["pieces"]],
            control=state["control"],
            add_dummy_prefix=state["add_dummy_prefix"],
            remove_extra_whitespaces=state["remove_extra_whitespaces"],
        )

    def __repr__(self) -> str:
        return f"Unigram(vocab_size={self.vocab_size})"
