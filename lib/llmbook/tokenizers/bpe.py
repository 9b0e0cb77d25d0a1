"""Byte pair encoding (BPE) over characters, with a fast trainer.

BPE (Gage 1994, for compression; Sennrich, Haddow & Birch 2016, "Neural Machine
Translation of Rare Words with Subword Units", for tokenization) starts from the
characters of the corpus and repeatedly merges the most frequent adjacent pair of
symbols into a new symbol, until the vocabulary has the size asked for.

Pre-tokenization. The text is first cut into runs of letters, digits, other symbols and
whitespace (:data:`CHAR_SPLIT_PATTERN`); merges never cross a cut, so no token joins a
word to the space after it. Any other pattern may be given; text that none of its
alternatives matches is kept as pieces of its own (``split_keep_gaps`` in
:mod:`llmbook.tokenizers.base`), so no character is ever dropped.

Tie-break (the book's rule, used by the notebook's step-by-step trainer too): the pair
with the highest count wins; among pairs with equal counts, the one whose left symbol
has the smallest id wins, then the smallest right id. Characters are numbered in order
of first appearance in the training text and every merge gets the next id, so "smallest
id" means "seen first". On ``["the car", "the cat", "the rat"]`` 'th' (ids t=0, h=1)
beats 'he' (1, 2), and later 'ca' (3+1, ...) beats 'at'.

The trainer (:func:`train_merges`) is shared with byte-level BPE. It is fast because it

- counts each distinct pre-token once, weighted by its frequency (Shakespeare's 1.2M
  words are 30k distinct ones),
- keeps the pair counts and, per pair, the words containing it, and after a merge
  updates only the words that contained the merged pair,
- finds the best pair with a heap whose stale entries are refreshed when popped
  (a pair's count never grows after it is created, so a stale entry overestimates).

Encoding applies the learned merges to each pre-token, lowest rank first, which gives
the training-time segmentation; results are cached per pre-token.

Unknown characters (never seen in training) encode to id 0, ``<unk>``, which decodes to
U+FFFD. Byte-level BPE (:mod:`llmbook.tokenizers.byte_bpe`) has no unknowns.

Left out: dropout (BPE-dropout), and a minimum pair frequency (every pair with count
>= 1 may be merged).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from typing import Any, Iterable, Sequence

from .base import (
    Tokenizer,
    check_text,
    check_training_text,
    check_vocab_size,
    compile_pattern,
    special_token_list,
    split_keep_gaps,
)

__all__ = ["BPETokenizer", "CHAR_SPLIT_PATTERN", "pretokenize", "train_merges", "merge_pair", "count_pairs"]

#: Runs of letters (with their combining marks), digits, other symbols, whitespace.
CHAR_SPLIT_PATTERN = r"[\p{L}\p{M}]+|\p{N}+|[^\p{L}\p{M}\p{N}\s]+|\s+"

UNK = "<unk>"

Pair = tuple[int, int]


def pretokenize(text: str, pattern: str = CHAR_SPLIT_PATTERN) -> list[str]:
    r"""Cut ``text`` into the pieces that BPE merges within.

    Text that no alternative of ``pattern`` matches is kept as pieces of its own, so
    ``"".join(pretokenize(text, pattern)) == text`` for any pattern.

    >>> pretokenize("the car, 2 cats")
    ['the', ' ', 'car', ',', ' ', '2', ' ', 'cats']
    >>> pretokenize("hi, there!", r"\w+")
    ['hi', ', ', 'there', '!']
    """
    check_text(text)
    return split_keep_gaps(compile_pattern(pattern), text)


def merge_pair(seq: Sequence[int], pair: Pair, new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of ``pair`` in ``seq``, left to right.

    >>> merge_pair([1, 1, 1, 2], (1, 1), 9)
    [9, 1, 2]
    """
    return _merge_positions(list(seq), pair, new_id)[0]


def _merge_positions(seq: list[int], pair: Pair, new_id: int) -> tuple[list[int], list[int]]:
    """``merge_pair`` that also returns the old start positions of the merged pairs.

    Jumps between occurrences of the left symbol with ``list.index`` and copies the runs
    in between as slices, so the Python loop runs once per candidate, not per symbol.
    """
    a, b = pair
    out: list[int] = []
    starts: list[int] = []
    n = len(seq)
    i = 0  # everything before i has been copied to out
    j = 0  # where to look for the next `a`
    while True:
        try:
            j = seq.index(a, j, n - 1)
        except ValueError:
            break
        if seq[j + 1] == b:
            out.extend(seq[i:j])
            out.append(new_id)
            starts.append(j)
            i = j = j + 2
        else:
            j += 1
    out.extend(seq[i:])
    return out, starts


def count_pairs(words: Iterable[tuple[Sequence[int], int]]) -> Counter:
    """Count adjacent pairs over ``(symbols, frequency)`` words (overlaps counted).

    >>> count_pairs([([1, 1, 1], 2), ([1, 2], 1)])
    Counter({(1, 1): 4, (1, 2): 1})
    """
    counts: Counter = Counter()
    for seq, freq in words:
        for pair in zip(seq, seq[1:]):
            counts[pair] += freq
    return counts


class _Largest:
    """A heap key that pops the largest value first (heapq pops the smallest)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: "_Largest") -> bool:
        return self.key > other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Largest) and self.key == other.key


TIE_BREAKS = ("smallest_id", "largest_symbols")


def train_merges(
    words: "dict[tuple[int, ...], int] | Iterable[tuple[Sequence[int], int]]",
    num_merges: int,
    first_id: int,
    progress: "bool | None" = None,
    desc: str = "BPE merges",
    tie_break: str = "smallest_id",
    symbols: "Sequence[str | bytes] | None" = None,
) -> list[tuple[Pair, int]]:
    """Learn up to ``num_merges`` merges; merge ``k`` creates the id ``first_id + k``.

    ``words``: distinct pre-tokens as symbol-id sequences with their frequencies.
    Returns ``[((left, right), count), ...]`` in merge order; fewer than ``num_merges``
    if every word has become a single symbol. Tie-break (``tie_break``), among pairs of
    equal count: ``"smallest_id"`` (the default) the smallest left id, then the smallest
    right id; ``"largest_symbols"`` the pair whose (left, right) strings are
    lexicographically greatest, which needs ``symbols``, the string (or bytes) of every id
    below ``first_id`` (merged symbols are their concatenations).

    >>> train_merges({(0, 1, 2): 3, (3, 4, 5): 1}, 2, first_id=6)
    [((0, 1), 3), ((6, 2), 3)]
    >>> train_merges({(0, 1, 2): 3}, 1, first_id=3, tie_break="largest_symbols", symbols="abc")
    [((1, 2), 3)]
    """
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be an int >= 0, got {num_merges!r}")
    if isinstance(first_id, bool) or not isinstance(first_id, int) or first_id < 0:
        raise ValueError(f"first_id must be an int >= 0, got {first_id!r}")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    sym: "list | None" = None
    if tie_break == "largest_symbols":
        if symbols is None or len(symbols) < first_id:
            raise ValueError(f"tie_break='largest_symbols' needs symbols, the string of each of the {first_id} first ids")
        sym = list(symbols[:first_id])

    def entry(count: int, a: int, b: int) -> tuple:
        return (-count, a, b) if sym is None else (-count, _Largest((sym[a], sym[b])), a, b)
    items = list(words.items()) if isinstance(words, dict) else [(tuple(s), f) for s, f in words]
    seqs: list[list[int]] = [list(s) for s, _ in items]
    freqs: list[int] = [f for _, f in items]

    counts: dict[Pair, int] = defaultdict(int)
    where: dict[Pair, set[int]] = defaultdict(set)  # pair -> words that (may) contain it
    for wi, seq in enumerate(seqs):
        f = freqs[wi]
        for pair in zip(seq, seq[1:]):
            counts[pair] += f
            where[pair].add(wi)
    heap = [entry(c, a, b) for (a, b), c in counts.items()]
    heapq.heapify(heap)

    if progress is None:
        progress = num_merges >= 2000  # only the long runs get a bar
    bar = None
    if progress:
        from ..progress import tqdm

        bar = tqdm(total=num_merges, desc=desc, leave=False)

    merges: list[tuple[Pair, int]] = []
    new_id = first_id
    while len(merges) < num_merges and heap:
        top = heapq.heappop(heap)
        neg, a, b = top[0], top[-2], top[-1]
        current = counts.get((a, b), 0)
        if current != -neg:
            if current > 0:  # stale: the count fell since this entry was pushed
                heapq.heappush(heap, entry(current, a, b))
            continue
        pair = (a, b)
        merges.append((pair, current))
        if sym is not None:
            sym.append(sym[a] + sym[b])  # the string of new_id
        delta: dict[Pair, int] = defaultdict(int)
        for wi in where.pop(pair, ()):
            seq = seqs[wi]
            new, starts = _merge_positions(seq, pair, new_id)
            if not starts:
                continue  # stale membership: an earlier merge removed the pair
            f = freqs[wi]
            # Only pairs that touch a merged position change. Old side: pairs j..j+1 with
            # j or j+1 in a merged pair; new side: pairs that contain new_id.
            last = len(seq) - 2
            old_js = {j for st in starts for j in (st - 1, st, st + 1) if 0 <= j <= last}
            for j in old_js:
                delta[(seq[j], seq[j + 1])] -= f
            last = len(new) - 2
            new_js = {j for k, st in enumerate(starts) for j in (st - k - 1, st - k) if 0 <= j <= last}
            for j in new_js:
                p = (new[j], new[j + 1])
                delta[p] += f
                where[p].add(wi)
            seqs[wi] = new
        for p, d in delta.items():
            if d == 0:
                continue
            before = counts.get(p, 0)
            after = before + d
            if after > 0:
                counts[p] = after
                if before == 0:  # a new pair (it contains new_id): give it a heap entry
                    heapq.heappush(heap, entry(after, p[0], p[1]))
            else:
                counts.pop(p, None)
        counts.pop(pair, None)
        new_id += 1
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return merges


def apply_merges(seq: list[int], ranks: dict[Pair, int], first_id: int, new_ids: "Sequence[int] | None" = None) -> list[int]:
    """Encode one pre-token: merge the adjacent pair of lowest rank until none applies.

    ``ranks``: pair -> merge index k (the merge created ``first_id + k``, so a pair that
    contains it has a rank above k, as in any trained tokenizer). ``new_ids``, if given,
    names the id merge k creates instead (``new_ids[k]``; ``first_id`` is then unused): a
    vocabulary loaded from a merge list need not number its tokens in merge order. Equal pairs merge left
    to right, as :func:`merge_pair` does. The candidate pairs sit in a heap keyed by
    (rank, position) over a linked list of symbols, so a long word costs O(n log n), not
    a rescan of the word per merge (see :func:`llmbook.tokenizers.byte_bpe.bpe_encode_piece`).

    >>> apply_merges([0, 1, 2], {(0, 1): 0, (3, 2): 1}, first_id=3)
    [4]
    >>> apply_merges([5, 5, 5, 5, 5], {(5, 5): 0}, first_id=6)
    [6, 6, 5]
    """
    n = len(seq)
    if n < 2:
        return list(seq)
    sym = list(seq)  # sym[i]: id of the part that starts at position i
    nxt = list(range(1, n + 1))  # where the part starting at i ends
    prv = list(range(-1, n - 1))  # start of the previous part (-1: none)
    alive = [True] * n
    get = ranks.get
    # Entry (rank, i, end): parts i and nxt[i] make the pair, ending at `end`; an entry
    # whose parts have changed since it was pushed no longer matches (i, end): skipped.
    heap = [(r, i, i + 2) for i in range(n - 1) if (r := get((sym[i], sym[i + 1]))) is not None]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        r, i, end = pop(heap)
        j = nxt[i] if alive[i] else n
        if j >= n or nxt[j] != end:
            continue
        alive[j] = False
        nxt[i] = end
        sym[i] = first_id + r if new_ids is None else new_ids[r]
        if end < n:
            prv[end] = i
            r2 = get((sym[i], sym[end]))
            if r2 is not None:
                push(heap, (r2, i, nxt[end]))
        p = prv[i]
        if p >= 0:
            r2 = get((sym[p], sym[i]))
            if r2 is not None:
                push(heap, (r2, p, end))
    out = []
    i = 0
    while i < n:
        out.append(sym[i])
        i = nxt[i]
    return out


class BPETokenizer(Tokenizer):
    """Character-level BPE: ``<unk>`` (id 0), the alphabet (ids 1..), then one id per merge.

    >>> tok = BPETokenizer.train("the car\\nthe cat\\nthe rat", vocab_size=13)
    >>> [tok.id_to_token(tok.merge_id(k)) for k in range(3)]
    ['th', 'the', 'ca']
    >>> tok.tokenize("the cart")
    ['the', ' ', 'ca', 'r', 't']
    """

    def __init__(
        self,
        alphabet: Sequence[str],
        merges: Sequence[Pair],
        merge_counts: "Sequence[int] | None" = None,
        pattern: str = CHAR_SPLIT_PATTERN,
        special_tokens: "dict[str, int] | Sequence[str] | None" = None,
    ) -> None:
        alphabet = list(alphabet)
        if any(not isinstance(c, str) or len(c) != 1 for c in alphabet) or len(set(alphabet)) != len(alphabet):
            raise ValueError("alphabet must be distinct single characters")
        self.alphabet = alphabet
        self._split = compile_pattern(pattern)
        self.pattern = pattern
        self._char_id = {c: k + 1 for k, c in enumerate(alphabet)}
        self.merges: list[Pair] = [(int(a), int(b)) for a, b in merges]
        self.merge_counts: list[int] = list(merge_counts) if merge_counts is not None else [0] * len(self.merges)
        if len(self.merge_counts) != len(self.merges):
            raise ValueError("merge_counts must have one count per merge")
        first = len(alphabet) + 1
        self._strings: list[str] = [UNK] + alphabet
        for k, (a, b) in enumerate(self.merges):
            if not (0 < a < first + k and 0 < b < first + k):
                raise ValueError(f"merge {k} = ({a}, {b}) uses an id that does not exist yet")
            self._strings.append(self._strings[a] + self._strings[b])
        self._ranks = {pair: k for k, pair in enumerate(self.merges)}
        self._cache: dict[str, list[int]] = {}
        super().__init__(special_tokens)

    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        pattern: str = CHAR_SPLIT_PATTERN,
        special_tokens: "Sequence[str] | None" = None,
        progress: "bool | None" = None,
    ) -> "BPETokenizer":
        """Learn ``vocab_size - 1 - len(alphabet) - len(special_tokens)`` merges from ``text``.

        Stops early (a smaller vocabulary) if every pre-token has become one symbol.
        """
        check_training_text(text)
        specials = special_token_list(special_tokens)
        split = compile_pattern(pattern)
        alphabet = list(dict.fromkeys(text))  # order of first appearance
        check_vocab_size(vocab_size, len(alphabet) + 1 + len(specials), f"<unk> + the {len(alphabet)} characters of the text + special tokens")
        char_id = {c: k + 1 for k, c in enumerate(alphabet)}
        words = Counter(split_keep_gaps(split, text))
        seqs = {tuple(char_id[c] for c in w): f for w, f in words.items()}
        num = vocab_size - 1 - len(alphabet) - len(specials)
        merges = train_merges(seqs, num, first_id=len(alphabet) + 1, progress=progress, desc="BPE (characters)")
        return cls(alphabet, [p for p, _ in merges], [c for _, c in merges], pattern=pattern, special_tokens=specials)

    def merge_id(self, k: int) -> int:
        """Id of the token made by merge ``k`` (0-based)."""
        if not 0 <= k < len(self.merges):
            raise ValueError(f"k={k} is out of range: the tokenizer has {len(self.merges)} merges")
        return len(self.alphabet) + 1 + k

    @property
    def _base_vocab_size(self) -> int:
        return len(self._strings)

    def _encode_word(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            get = self._char_id.get
            ids = apply_merges([get(c, 0) for c in word], self._ranks, len(self.alphabet) + 1)
            if len(self._cache) < 200_000:
                self._cache[word] = ids
        return ids

    def _encode_ordinary(self, text: str) -> list[int]:
        out: list[int] = []
        for word in split_keep_gaps(self._split, text):
            out.extend(self._encode_word(word))
        return out

    def _decode_ordinary(self, ids: list[int]) -> str:
        s = self._strings
        return "".join("\ufffd" if i == 0 else s[i] for i in ids)

    def _token_str(self, id: int) -> str:
        return self._strings[id]

    def _state(self) -> dict[str, Any]:
        return {"alphabet": "".join(self.alphabet), "merges": self.merges, "merge_counts": self.merge_counts, "pattern": self.pattern}

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "BPETokenizer":
        return cls(list(state["alphabet"]), [tuple(m) for m in state["merges"]], state["merge_counts"], state["pattern"], special_tokens)
