"""Byte-level BPE as a library (issue 32): streaming encode, loading a GPT-2-style vocabulary and
merge list, special tokens kept out of training, the trainer's tie-break."""

from __future__ import annotations

import io
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmbook.tokenizers import ByteBPETokenizer, Tokenizer
from llmbook.tokenizers.bpe import CHAR_SPLIT_PATTERN
from llmbook.tokenizers.byte_bpe import CL100K_SPLIT_PATTERN, GPT2_SPLIT_PATTERN, gpt2_bytes_to_unicode

# The pieces that make pre-tokenization depend on what follows: contractions ('ll waits for
# its second l), runs of spaces (the last space joins the next word), digit groups, CR/LF,
# special tokens and their halves, multi-byte characters.
ALPHABET = list("ab ' \n\n  \t\r,.!?0123456789") + ["ll", "'s", "'ll", "ve", "é", "今天", "🙂", "<|endoftext|>", "<|", "|>", "<|end", "<|x|>"]
SPECIALS = ["<|endoftext|>", "<|x|>"]


def _corpus(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(ALPHABET) for _ in range(n))


@pytest.fixture(scope="module", params=[GPT2_SPLIT_PATTERN, CL100K_SPLIT_PATTERN, CHAR_SPLIT_PATTERN, r"'ll|'|\w+"],
                ids=["gpt2", "cl100k", "char", "user"])
def tok(request):
    """Every read is processed at once (no gathering of small reads), so each cut is a chunk boundary."""
    t = ByteBPETokenizer.train(_corpus(0, 3000), 320, pattern=request.param, special_tokens=SPECIALS)
    t._STREAM_MIN_CHARS = 1
    return t


def _chunks(text: str, cuts: list[int]) -> list[str]:
    cuts = sorted(c % (len(text) + 1) for c in cuts)
    return [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]


# ---------------------------------------------------------------- encode_iterable


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.sampled_from(ALPHABET), max_size=40), cuts=st.lists(st.integers(0, 10_000), max_size=12),
       allowed=st.sampled_from([(), "all", ("<|x|>",)]))
def test_stream_equals_encode_for_any_cut(tok, parts, cuts, allowed):
    text = "".join(parts)
    assert list(tok.encode_iterable(_chunks(text, cuts), allowed_special=allowed)) == tok.encode(text, allowed_special=allowed)


def test_stream_one_character_at_a_time(tok):
    text = _corpus(1, 2000)
    for allowed in ((), "all"):
        assert list(tok.encode_iterable(iter(text), allowed_special=allowed)) == tok.encode(text, allowed_special=allowed)


def test_holding_back_one_piece_is_not_enough():
    """The reason for _STREAM_HOLDBACK = 2: with GPT-2's pattern "it'l" + "l" must give "it", "'ll"."""
    t = ByteBPETokenizer.train("it'll be well, it'll do", 300)
    t._STREAM_MIN_CHARS = 1
    assert list(t.encode_iterable(["it'l", "l"])) == t.encode("it'll")
    t._STREAM_HOLDBACK = 1
    assert list(t.encode_iterable(["it'l", "l"])) != t.encode("it'll")


def test_stream_reads_a_text_file_in_blocks(tok, tmp_path, monkeypatch):
    monkeypatch.setattr(tok, "_STREAM_MIN_CHARS", 100)
    monkeypatch.setattr(tok, "_STREAM_READ_CHARS", 37)
    text = _corpus(2, 5000)
    (tmp_path / "t.txt").write_text(text, encoding="utf-8", newline="")
    with open(tmp_path / "t.txt", encoding="utf-8", newline="") as f:
        assert list(tok.encode_iterable(f, allowed_special="all")) == tok.encode(text, allowed_special="all")
    assert list(tok.encode_iterable(io.StringIO(text))) == tok.encode(text)


def test_stream_is_lazy():
    """Ids come out before the input ends: nothing waits for the whole text."""
    t = ByteBPETokenizer.train("the cat sat on the mat", 260)
    t._STREAM_MIN_CHARS = 1
    fed = []

    def chunks():
        for k in range(10**9):
            fed.append(k)
            yield "the cat sat on the mat "

    ids = t.encode_iterable(chunks())
    first = [next(ids) for _ in range(20)]
    assert first == t.encode("the cat sat on the mat " * 4)[:20]
    assert len(fed) < 10


def test_stream_bad_input(tok, tmp_path):
    with pytest.raises(TypeError, match="iterable must be an iterable of str chunks or a text file, got a bare str"):
        tok.encode_iterable("a string")
    with pytest.raises(TypeError, match="iterable must be an iterable"):
        tok.encode_iterable(3)
    with pytest.raises(TypeError, match=r"iterable must yield str, got bytes at item 1 \(open the file in text mode"):
        list(tok.encode_iterable(["ok", b"bytes"]))
    (tmp_path / "b.txt").write_bytes(b"abc")
    with open(tmp_path / "b.txt", "rb") as f, pytest.raises(TypeError, match="iterable must yield str, got bytes"):
        list(tok.encode_iterable(f))
    with pytest.raises(ValueError, match="allowed_special names tokens that are not special tokens"):
        tok.encode_iterable(["x"], allowed_special=["<|nope|>"])


# ---------------------------------------------------------------- loading a vocabulary and a merge list


def _gpt2_files(tok: ByteBPETokenizer, ids: dict[bytes, int], tmp_path):
    """Write ``tok`` as GPT-2's vocab.json + merges.txt, giving token bytes the ids in ``ids``."""
    show = gpt2_bytes_to_unicode()
    as_str = lambda b: "".join(show[x] for x in b)  # noqa: E731
    (tmp_path / "vocab.json").write_text(json.dumps({as_str(b): i for b, i in ids.items()}), encoding="utf-8")
    lines = ["#version: 0.2"] + [f"{as_str(tok.vocab[a])} {as_str(tok.vocab[b])}" for (a, b), _ in tok.merges]
    (tmp_path / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path / "vocab.json", tmp_path / "merges.txt"


def test_merge_list_ranks_by_list_order_not_by_id(tmp_path):
    """A vocabulary numbered in another order than the merges (bytes shuffled, merged tokens in
    reverse) loads to the same segmentation; ranking by id, the old rule, gets it wrong."""
    text = _corpus(3, 4000)
    trained = ByteBPETokenizer.train(text, 330)
    rng = random.Random(0)
    byte_ids = list(range(256))
    rng.shuffle(byte_ids)
    n = len(trained.vocab)
    new_id = {i: (byte_ids[i] if i < 256 else n - 1 - (i - 256)) for i in range(n)}
    vocab = {trained.vocab[i]: new_id[i] for i in range(n)}
    loaded = ByteBPETokenizer.from_vocab_and_merges(vocab, [(trained.vocab[a], trained.vocab[b]) for (a, b), _ in trained.merges])
    probe = _corpus(4, 3000)
    want = [trained.vocab[i] for i in trained.encode(probe)]
    assert [loaded.vocab[i] for i in loaded.encode(probe)] == want
    assert loaded.encode(probe) == [new_id[i] for i in trained.encode(probe)]
    by_id = ByteBPETokenizer([b for b, _ in sorted(vocab.items(), key=lambda kv: kv[1])])  # ranks = ids
    assert [by_id.vocab[i] for i in by_id.encode(probe)] != want
    # the same through GPT-2's file format, and through save/load
    v, m = _gpt2_files(trained, vocab, tmp_path)
    from_files = ByteBPETokenizer.from_vocab_and_merges(v, m)
    assert from_files.encode(probe) == loaded.encode(probe)
    from_files.save(tmp_path / "t.json")
    assert Tokenizer.load(tmp_path / "t.json").encode(probe) == loaded.encode(probe)
    assert from_files.decode(from_files.encode(probe)) == probe


def test_merge_list_equals_hugging_face_bpe(tmp_path):
    """Hugging Face's byte-level BPE numbers its 256 bytes in its own order (not byte order):
    its vocab.json and merges.txt load to the same ids as HF's own encoder."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    text = _corpus(5, 20_000).replace("<|", "<").replace("|>", ">")
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=400, min_frequency=0, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    hf.train_from_iterator([text], trainer)
    hf.model.save(str(tmp_path))
    ids = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    assert [ids[c] for c in gpt2_bytes_to_unicode().values()] != list(range(256))  # not in byte order
    mine = ByteBPETokenizer.from_vocab_and_merges(tmp_path / "vocab.json", tmp_path / "merges.txt")
    probe = _corpus(6, 3000).replace("<|", "<").replace("|>", ">")
    assert mine.encode(probe) == hf.encode(probe).ids


def test_merge_list_special_tokens_keep_their_ids():
    vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256, "<|endoftext|>": 257}
    tok = ByteBPETokenizer.from_vocab_and_merges(vocab, [(b"a", b"b")], special_tokens=["<|endoftext|>"])
    assert tok.encode("abab<|endoftext|>", allowed_special="all") == [256, 256, 257]
    assert tok.encode("<|endoftext|>")[0] == ord("<")


def test_merge_list_bad_input(tmp_path):
    vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    with pytest.raises(ValueError, match=r"merges\[0\] = .* names a token that is not in vocab"):
        ByteBPETokenizer.from_vocab_and_merges(vocab, [(b"a", b"zz")])
    with pytest.raises(ValueError, match=r"merge_list\[0\] = \(97, 99\) makes b'ac', which is not in the vocab"):
        ByteBPETokenizer.from_vocab_and_merges(vocab, [(b"a", b"c")])
    with pytest.raises(ValueError, match="the ordinary ids must be 0..255 without gaps; 3 is missing"):
        ByteBPETokenizer.from_vocab_and_merges({bytes([b]): b + (b >= 3) for b in range(256)}, [])
    with pytest.raises(ValueError, match=r"vocab\[b'ab'\] must be an int id >= 0, got -1"):
        ByteBPETokenizer.from_vocab_and_merges(vocab | {b"ab": -1}, [])
    with pytest.raises(ValueError, match="special_tokens .* are not in vocab"):
        ByteBPETokenizer.from_vocab_and_merges(vocab, [], special_tokens=["<|endoftext|>"])
    with pytest.raises(ValueError, match="not in GPT-2's byte-to-unicode table"):
        ByteBPETokenizer.from_vocab_and_merges({"\x00": 0}, [])
    (tmp_path / "m.txt").write_text("#version: 0.2\na b c\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 is not 'left right'"):
        ByteBPETokenizer.from_vocab_and_merges(vocab, tmp_path / "m.txt")
    (tmp_path / "v.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab=.*v.json' is not a readable vocab.json"):
        ByteBPETokenizer.from_vocab_and_merges(tmp_path / "v.json", [])
    with pytest.raises(TypeError, match="merges must be a list of"):
        ByteBPETokenizer.from_vocab_and_merges(vocab, 5)


# ---------------------------------------------------------------- training


def test_no_merge_is_learned_across_or_inside_a_special_token():
    """Documents 'ab' and 'ba' joined by a frequent separator, one pre-token for the whole text
    (pattern \\S+): counted as plain text, 'b<', '>b', '<|' ... are merged; with the separator a
    special token, only pairs inside a document are counted."""
    text = "<|endoftext|>".join("ab" if k % 2 else "ba" for k in range(200))
    plain = ByteBPETokenizer.train(text, 300, pattern=r"\S+")
    assert any(set(plain.vocab[a] + plain.vocab[b]) & set(b"<|>") for (a, b), _ in plain.merges)  # the old behaviour
    tok = ByteBPETokenizer.train(text, 300, pattern=r"\S+", special_tokens=["<|endoftext|>"])
    assert [tok.vocab[a] + tok.vocab[b] for (a, b), _ in tok.merges] == [b"ab", b"ba"]  # 100 each: 'a' < 'b' first
    # a special token absent from the text changes nothing
    assert ByteBPETokenizer.train("x y y x", 260, special_tokens=["<|endoftext|>"]).merges == ByteBPETokenizer.train("x y y x", 259).merges


def test_tie_break_is_smallest_left_then_right_id():
    # 'ca', 'ab', 'bc' each occur twice: (b'a', b'b') has the smallest left byte and goes first
    tok = ByteBPETokenizer.train("cab cab", 257, pattern=r"\S+")
    assert tok.merges[0] == ((ord("a"), ord("b")), 2)
    tok = ByteBPETokenizer.train("ac ab", 257, pattern=r"\S+")  # equal left byte: the smaller right wins
    assert tok.merges[0] == ((ord("a"), ord("b")), 1)

