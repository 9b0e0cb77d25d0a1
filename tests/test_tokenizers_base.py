"""The shared tokenizer interface: special tokens, save/load, bad input (char and byte tokenizers)."""

import json

import pytest

from llmbook.tokenizers import ByteTokenizer, CharTokenizer, Tokenizer


def test_char_roundtrip_and_unknown():
    tok = CharTokenizer.train("我今天去了商店。hello", vocab_size=100)
    assert tok.decode(tok.encode("今天hello")) == "今天hello"
    # A character never seen in training is <unk> (id 0) and decodes to U+FFFD.
    assert tok.encode("猫") == [0]
    assert tok.decode(tok.encode("猫h")) == "\ufffdh"
    assert tok.tokenize("猫") == ["<unk>"]
    assert tok.coverage("猫h") == 0.5


def test_char_vocab_limit_keeps_most_frequent():
    tok = CharTokenizer.train("aaabbc", vocab_size=3)
    assert tok.chars == ["a", "b"] and tok.vocab_size == 3


def test_byte_encode_matches_utf8():
    assert ByteTokenizer().encode("今天") == [0xE4, 0xBB, 0x8A, 0xE5, 0xA4, 0xA9]
    assert ByteTokenizer().decode([0xE4, 0xBB]) == "\ufffd"  # a cut character


def test_special_tokens(tmp_path):
    tok = ByteTokenizer.train("x", 257, special_tokens=["<|endoftext|>"])
    assert tok.special_tokens == {"<|endoftext|>": 256} and tok.vocab_size == 257
    text = "a<|endoftext|>b"
    # Not allowed: encoded as ordinary bytes; allowed: one id.
    assert tok.encode(text) == list(text.encode())
    assert tok.encode(text, allowed_special="all") == [97, 256, 98]
    assert tok.encode(text, allowed_special={"<|endoftext|>"}) == [97, 256, 98]
    assert tok.decode([97, 256, 98]) == text
    assert tok.tokenize(text, allowed_special="all") == ["a", "<|endoftext|>", "b"]
    with pytest.raises(ValueError, match="not special tokens"):
        tok.encode(text, allowed_special={"<|pad|>"})


@pytest.mark.parametrize("make", [lambda: CharTokenizer.train("hello 世界", special_tokens=["<s>"]), lambda: ByteTokenizer(["<s>"])])
def test_save_load_roundtrip(tmp_path, make):
    tok = make()
    path = tmp_path / "tok.json"
    tok.save(path)
    json.loads(path.read_text(encoding="utf-8"))  # plain JSON
    back = Tokenizer.load(path)
    assert type(back) is type(tok)
    assert back.special_tokens == tok.special_tokens
    s = "hello<s>世界"
    assert back.encode(s, allowed_special="all") == tok.encode(s, allowed_special="all")
    assert type(tok).load(path).vocab_size == tok.vocab_size


def test_load_corrupt_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        Tokenizer.load(path)
    path.write_text(json.dumps({"format": "llmbook-tokenizer", "version": 1, "class": "CharTokenizer", "state": {}}))
    with pytest.raises(ValueError, match="damaged"):
        Tokenizer.load(path)
    path.write_text(json.dumps({"format": "llmbook-tokenizer", "version": 1, "class": "ByteTokenizer", "state": {}}))
    with pytest.raises(ValueError, match="not a CharTokenizer"):
        CharTokenizer.load(path)


def test_bad_input():
    tok = CharTokenizer.train("abc")
    with pytest.raises(TypeError, match="text must be a str"):
        tok.encode(b"abc")
    with pytest.raises(TypeError, match="text must be a str"):
        CharTokenizer.train(123)
    with pytest.raises(ValueError, match="text is empty"):
        CharTokenizer.train("")
    with pytest.raises(ValueError, match="vocab_size=1"):
        CharTokenizer.train("abc", vocab_size=1)
    with pytest.raises(ValueError, match="vocab_size=100"):
        ByteTokenizer.train("abc", vocab_size=100)
    with pytest.raises(ValueError, match="unknown id 99"):
        tok.decode([1, 99])
    with pytest.raises(ValueError, match="unknown id -1"):
        tok.decode([-1])
    with pytest.raises(TypeError, match="ids must contain ints"):
        tok.decode([1.0])
    with pytest.raises(TypeError, match="ids must be a sequence"):
        tok.decode("abc")
