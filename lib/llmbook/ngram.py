"""A character n-gram language model: the smallest thing that deserves the name.

A language model assigns a probability to every sequence x_1..x_L. By the chain rule

    p(x_1..x_L) = prod_i p(x_i | x_1..x_{i-1}),

so a model only has to predict the next symbol from the ones before it. An n-gram
model makes the Markov assumption that only the last ``order - 1`` characters matter
and estimates each conditional from counts, with add-alpha (Laplace/Lidstone) smoothing
so that unseen continuations keep a little probability:

    p(c | h) = (N(h c) + alpha) / (N(h) + alpha * |V|),   N(h) = sum_c' N(h c').

The first ``order - 1`` characters of a sequence have a shorter history; they use the
lower-order model (unigram for x_1, bigram for x_2, ...), which keeps the chain rule
exact. With ``alpha = 0`` (pure counts) a history never seen in training has no
estimate; the model then *backs off* to the next shorter history, so every
conditional is still a proper distribution (a continuation never seen after a seen
history gets probability 0, as maximum likelihood says).

There is no end-of-sequence symbol: the model is normalised per length, that is, the
probabilities of all strings of one length L sum to 1, for every L. That is all that
perplexity and sampling need. A distribution over texts of every length would multiply in
a last factor p(</s> | x_1..x_L), the probability that the text stops there (chapter 0,
section 1; Jurafsky & Martin, *Speech and Language Processing*, chapter 3).

Covers: fitting by counting, next-character distributions, sequence log-probability,
perplexity, sampling with temperature. Leaves out: interpolation and Kneser-Ney
smoothing (Chen & Goodman, 1998), words or subword tokens (chapter 1), and neural
models (chapter 2 onwards). The idea goes back to Shannon, "A Mathematical Theory of
Communication" (1948), who sampled English from letter n-gram statistics by hand.

Counts are stored sparsely: every k-gram (k = 1..order) is turned into one integer
code in base |V|, and ``torch.unique`` gives the sorted codes and their counts; a
lookup is a binary search (``torch.searchsorted``). So the model works for a Chinese
vocabulary of thousands of characters as well as for English letters.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["CharNGramLM"]


def _code_points(text: str) -> np.ndarray:
    """Unicode code points of ``text`` as an array (fast: no Python loop per character)."""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _lookup(keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """values[keys == query] for each query (0 where the key is absent); keys sorted."""
    if keys.numel() == 0:
        return torch.zeros_like(query)
    pos = torch.searchsorted(keys, query).clamp(max=keys.numel() - 1)
    return torch.where(keys[pos] == query, values[pos], torch.zeros_like(query))


class CharNGramLM:
    """Character n-gram language model with add-alpha smoothing.

    Parameters
    ----------
    order:
        n of the n-gram: the next character is predicted from the previous
        ``order - 1`` characters (1 = unigram, 2 = bigram, 3 = trigram).
    alpha:
        add-alpha smoothing constant (1.0 = Laplace; 0.0 = raw maximum likelihood,
        with back-off to a shorter history when a history was never seen).

    >>> lm = CharNGramLM(order=2, alpha=0.0).fit("abab")
    >>> lm.vocab
    ['a', 'b']
    >>> chars, probs = lm.prob_next("a")       # 'a' is always followed by 'b'
    >>> [(c, round(p, 3)) for c, p in zip(chars, probs.tolist())]
    [('a', 0.0), ('b', 1.0)]
    >>> round(lm.sequence_probability("ab"), 3)  # p(a) * p(b | a) = 2/4 * 1
    0.5
    """

    def __init__(self, order: int = 2, alpha: float = 1.0) -> None:
        if not isinstance(order, int) or isinstance(order, bool):
            raise TypeError(f"order must be an int, got {type(order).__name__}")
        if order < 1:
            raise ValueError(f"order must be >= 1 (1 = unigram, 2 = bigram, ...), got {order}")
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
            raise TypeError(f"alpha must be a number, got {type(alpha).__name__}")
        if not math.isfinite(alpha) or alpha < 0:
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha}")
        self.order = order
        self.alpha = float(alpha)
        self.vocab: list[str] = []
        self._stoi: dict[str, int] = {}
        self._vocab_cp = np.zeros(0, dtype=np.uint32)  # code points of vocab, for fast encoding
        # For k = 1..order: sorted codes of the k-grams seen and how often each occurs,
        # and the same for their histories (the first k-1 characters) with row totals.
        self._codes: dict[int, torch.Tensor] = {}
        self._counts: dict[int, torch.Tensor] = {}
        self._hist_codes: dict[int, torch.Tensor] = {}
        self._hist_totals: dict[int, torch.Tensor] = {}
        self.n_chars = 0

    def __repr__(self) -> str:
        state = f"vocab={len(self.vocab)}, trained on {self.n_chars:,} chars" if self.vocab else "not fitted"
        return f"CharNGramLM(order={self.order}, alpha={self.alpha}, {state})"

    # ------------------------------------------------------------------ fitting

    def fit(self, text: str) -> "CharNGramLM":
        """Count every k-gram (k = 1..order) of ``text``; the vocabulary is its characters.

        Returns ``self`` so that ``CharNGramLM(3).fit(text)`` reads as one step.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            raise ValueError("text is empty: an n-gram model needs a corpus to count")
        vocab = sorted(set(text))
        V = len(vocab)
        if V ** self.order >= 2**62:
            raise ValueError(f"order={self.order} with {V} distinct characters overflows the int64 n-gram codes")
        self.vocab, self._stoi = vocab, {c: i for i, c in enumerate(vocab)}
        self._vocab_cp = _code_points("".join(vocab))  # sorted, as vocab is
        ids = self._ids(text)  # (L,)
        self.n_chars = len(text)
        for k in range(1, self.order + 1):
            if len(text) < k:
                empty = torch.zeros(0, dtype=torch.int64)
                self._codes[k] = self._counts[k] = self._hist_codes[k] = self._hist_totals[k] = empty
                continue
            windows = ids.unfold(0, k, 1)  # (L-k+1, k): every k-gram
            powers = V ** torch.arange(k - 1, -1, -1, dtype=torch.int64)  # (k,)
            codes = (windows * powers).sum(dim=1)  # (L-k+1,): base-V number of each k-gram
            if V**k <= 2**24:  # small table: a dense bincount is faster than sorting
                dense = torch.bincount(codes, minlength=V**k)
                self._codes[k] = dense.nonzero().flatten()
                self._counts[k] = dense[self._codes[k]]
            else:
                self._codes[k], self._counts[k] = torch.unique(codes, sorted=True, return_counts=True)
            # N(h) is the row sum over continuations (not the count of h itself, which
            # differs by one when h ends the text). Codes sorted => histories sorted.
            hist, inverse = torch.unique_consecutive(self._codes[k] // V, return_inverse=True)
            totals = torch.zeros(hist.numel(), dtype=torch.int64).index_add_(0, inverse, self._counts[k])
            self._hist_codes[k], self._hist_totals[k] = hist, totals
        return self

    def _check_fitted(self) -> None:
        if not self.vocab:
            raise RuntimeError("the model is not fitted yet: call fit(text) first")

    def encode(self, text: str, name: str = "text") -> torch.Tensor:
        """Character ids of ``text``; unknown characters raise a ValueError listing them."""
        self._check_fitted()
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str, got {type(text).__name__}")
        unknown = sorted(set(text) - self._stoi.keys())
        if unknown:
            shown = ", ".join(repr(c) for c in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
            raise ValueError(
                f"{name} contains characters the model never saw in training: {shown}. "
                f"An n-gram model only knows its {len(self.vocab)} training characters."
            )
        return self._ids(text)

    def _ids(self, text: str) -> torch.Tensor:
        # vocab is sorted by code point, so a character's id is its rank among them.
        return torch.from_numpy(np.searchsorted(self._vocab_cp, _code_points(text)).astype(np.int64))

    def count(self, ngram: str) -> int:
        """How often ``ngram`` (1..order characters) occurs in the training text.

        >>> CharNGramLM(order=2).fit("the cat the hat").count("th")
        2
        """
        self._check_fitted()
        if not isinstance(ngram, str):
            raise TypeError(f"ngram must be a str, got {type(ngram).__name__}")
        if not 1 <= len(ngram) <= self.order:
            raise ValueError(f"ngram must have 1..{self.order} characters, got {len(ngram)}")
        if any(c not in self._stoi for c in ngram):
            return 0
        ids = self.encode(ngram, "ngram")
        code = int((ids * len(self.vocab) ** torch.arange(len(ngram) - 1, -1, -1)).sum())
        return int(_lookup(self._codes[len(ngram)], self._counts[len(ngram)], torch.tensor([code]))[0])

    # ------------------------------------------------------------------ probabilities

    def _cond_log_probs(self, ids: torch.Tensor, start_hist: torch.Tensor) -> torch.Tensor:
        """log p(x_i | history) for each position i of ``ids``.

        ``start_hist[i]`` is the history length to try first; a history whose
        denominator N(h) + alpha |V| is 0 (never seen, alpha = 0) backs off by one.
        """
        V = len(self.vocab)
        hist_len = start_hist.clone()
        out = torch.empty(ids.numel(), dtype=torch.float64)
        for m in range(self.order - 1, -1, -1):  # longest history first
            sel = (hist_len == m).nonzero().flatten()
            if sel.numel() == 0:
                continue
            k = m + 1
            code = torch.zeros(sel.numel(), dtype=torch.int64)
            for j in range(k):  # base-V code of x_{i-m} .. x_i
                code = code * V + ids[sel - m + j]
            n_hc = _lookup(self._codes[k], self._counts[k], code).double()
            if m == 0:
                n_h = torch.full_like(n_hc, float(self.n_chars))
            else:
                n_h = _lookup(self._hist_codes[k], self._hist_totals[k], code // V).double()
            denom = n_h + self.alpha * V
            ok = denom > 0
            out[sel[ok]] = torch.log(n_hc[ok] + self.alpha) - torch.log(denom[ok])
            hist_len[sel[~ok]] = m - 1  # unseen history: back off to a shorter one
        return out

    def prob_next(self, context: str, temperature: float = 1.0) -> tuple[list[str], torch.Tensor]:
        """Distribution of the next character after ``context``: (vocabulary, probabilities).

        Only the last ``order - 1`` characters of ``context`` matter. ``temperature``
        rescales the distribution as p^(1/T), renormalised: T < 1 sharpens it towards
        the most likely character, T > 1 flattens it towards uniform.

        >>> lm = CharNGramLM(order=2, alpha=1.0).fit("aab")
        >>> chars, p = lm.prob_next("a")            # N(aa)=1, N(ab)=1, N(a.)=2, |V|=2
        >>> [round(x, 3) for x in p.tolist()]       # (1+1)/(2+2) each
        [0.5, 0.5]
        """
        self._check_fitted()
        temperature = _check_temperature(temperature)
        hist = self.encode(context, "context")[max(0, len(context) - (self.order - 1)) :]
        V = len(self.vocab)
        m = hist.numel()
        # Score every candidate c as the last position of the string "hist + c": lay the
        # V candidate strings end to end and ask only for their last positions (history
        # length m there; -1 elsewhere, a length that is never scored).
        ids = torch.cat([hist.repeat(V, 1), torch.arange(V).unsqueeze(1)], dim=1).flatten()  # (V*(m+1),)
        last = torch.arange(V) * (m + 1) + m  # (V,)
        start = torch.full((ids.numel(),), -1, dtype=torch.int64).index_fill_(0, last, m)
        logp = self._cond_log_probs(ids, start)[last]  # (V,)
        return list(self.vocab), _apply_temperature(logp, temperature)

    def log_prob(self, text: str) -> float:
        """Natural log of p(text) = sum_i log p(x_i | previous order-1 characters).

        >>> lm = CharNGramLM(order=1, alpha=0.0).fit("aab")
        >>> round(lm.log_prob("ab"), 4) == round(math.log(2/3) + math.log(1/3), 4)
        True
        """
        self._check_fitted()
        ids = self.encode(text)
        if ids.numel() == 0:
            return 0.0  # the empty sequence: an empty product
        start = torch.arange(ids.numel()).clamp(max=self.order - 1)  # x_1 has no history
        return float(self._cond_log_probs(ids, start).sum())

    def sequence_probability(self, text: str) -> float:
        """p(text) itself (underflows to 0.0 for long texts: prefer ``log_prob``)."""
        return math.exp(self.log_prob(text))

    def perplexity(self, text: str) -> float:
        """exp(-log p(text) / len(text)): the effective number of choices per character."""
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty str")
        return math.exp(-self.log_prob(text) / len(text))

    # ------------------------------------------------------------------ generation

    def sample(
        self,
        prompt: str = "",
        n: int = 100,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> str:
        """Continue ``prompt`` with ``n`` sampled characters; returns the completion only.

        Pass a seeded ``torch.Generator`` for a repeatable sample.

        >>> lm = CharNGramLM(order=2, alpha=0.0).fit("abcabcabc")
        >>> lm.sample("a", n=5, generator=torch.Generator().manual_seed(0))
        'bcabc'
        """
        self._check_fitted()
        if not isinstance(n, int) or isinstance(n, bool):
            raise TypeError(f"n must be an int, got {type(n).__name__}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        self.encode(prompt, "prompt")  # validate before sampling
        temperature = _check_temperature(temperature)
        text = prompt
        for _ in range(n):
            _, p = self.prob_next(text[-(self.order - 1) :] if self.order > 1 else "", temperature)
            text += self.vocab[int(torch.multinomial(p, 1, generator=generator))]
        return text[len(prompt) :]


def _check_temperature(temperature: float) -> float:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a finite number > 0, got {temperature}")
    return float(temperature)


def _apply_temperature(logp: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(log p / T): p^(1/T) renormalised, computed in log space (no underflow)."""
    return torch.softmax(logp / temperature, dim=0)
