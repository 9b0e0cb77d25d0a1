"""Bad input to the tokenizers (issue 17): each case asserts the exception type and that the
message names the parameter or the file."""

from __future__ import annotations

import json

import pytest

from llmbook.tokenizers import (
    BPETokenizer,
    ByteBPETokenizer,
    ByteTokenizer,
    CharTokenizer,
    Tokenizer,
    Unigram,
    UnigramTrainConfig,
    WhitespaceTokenizer,
    WordPiece,
)
from llmbook.tokenizers.base import special_token_list
from llmbook.tokenizers.bpe import pretokenize

TEXT = "the cat sat on the mat, the rat ate the hat! " * 4


def _train(cls, **kw):
    if cls is BPETokenizer:
        return cls.train(TEXT, vocab_size=40, **kw)
    if cls is ByteBPETokenizer:
        return cls.train(TEXT, vocab_size=270, **kw)
    if cls is ByteTokenizer:
        return cls.train(TEXT, vocab_size=260, **kw)
    return cls.train(TEXT, vocab_size=30, **kw)


FIVE = [WhitespaceTokenizer, CharTokenizer, ByteTokenizer, BPETokenizer, ByteBPETokenizer]


# ---------------------------------------------------------------- item 3: no text lost


@pytest.mark.parametrize("cls", [BPETokenizer, ByteBPETokenizer])
def test_user_pattern_that_skips_text_keeps_it(cls):
    tok = _train(cls, pattern=r"\w+")
    for text in ("the, rat!", "  sat on the mat  ", "!!!", "", "a"):  # characters of TEXT (no <unk>)
        assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("cls", [BPETokenizer, ByteBPETokenizer])
def test_pattern_with_groups_and_empty_matches_keeps_text(cls):
    # findall returns groups, not matches, and `x*` matches the empty string everywhere
    for pattern in (r"(\w)+", r"(a)|(t)", r"x*", r"(?=t)"):
        tok = _train(cls, pattern=pattern)
        assert tok.decode(tok.encode(TEXT)) == TEXT


def test_pretokenize_keeps_gaps():
    assert pretokenize("hi, there!", r"\w+") == ["hi", ", ", "there", "!"]
    assert "".join(pretokenize("a-b  c", r"[a-z]")) == "a-b  c"


@pytest.mark.parametrize("cls", [BPETokenizer, ByteBPETokenizer])
def test_invalid_pattern_is_a_value_error_naming_pattern(cls):
    with pytest.raises(ValueError, match="pattern"):
        _train(cls, pattern="(")
    with pytest.raises(TypeError, match="pattern"):
        _train(cls, pattern=None)


def test_invalid_pattern_in_constructor():
    vocab = [bytes([b]) for b in range(256)]
    with pytest.raises(ValueError, match=r"pattern '\[' is not a valid regular expression"):
        ByteBPETokenizer(vocab, pattern="[")
    with pytest.raises(ValueError, match="pattern"):
        BPETokenizer(["a"], [], pattern="a{2,1}")


def test_pretokenize_invalid_pattern():
    with pytest.raises(ValueError, match="pattern"):
        pretokenize("abc", "(?P<")


# ---------------------------------------------------------------- item 4: special_tokens as a str


@pytest.mark.parametrize("cls", FIVE)
def test_special_tokens_bare_str_rejected_in_train(cls):
    with pytest.raises(TypeError, match="special_tokens must be a list of str") as info:
        _train(cls, special_tokens="<|endoftext|>")
    assert "'<|endoftext|>'" in str(info.value)


@pytest.mark.parametrize("cls", FIVE)
def test_special_tokens_bare_str_rejected_in_constructor(cls):
    tok = _train(cls)
    state = tok._state()
    with pytest.raises(TypeError, match="special_tokens"):
        cls._from_state(state, "<eos>")


@pytest.mark.parametrize("cls", FIVE)
def test_special_tokens_list_and_tuple_are_accepted(cls):
    a = _train(cls, special_tokens=["<eos>", "<pad>"])
    b = _train(cls, special_tokens=("<eos>", "<pad>"))
    assert a.special_tokens == b.special_tokens
    assert set(a.special_tokens) == {"<eos>", "<pad>"}
    # ordinary letters stay ordinary
    assert not set(a.encode("eos pad <")) & set(a.special_tokens.values())


@pytest.mark.parametrize("bad, exc, what", [
    (["<eos>", "<eos>"], ValueError, "twice"),
    (["<eos>", ""], ValueError, "non-empty"),
    ([1], ValueError, "non-empty str"),
    (b"<eos>", TypeError, "bare bytes"),
    ({"<eos>": 1}, TypeError, "list of str"),
    ({"<eos>", "<pad>"}, TypeError, "not a set"),
    (5, TypeError, "list of str"),
])
def test_special_token_list_neighbours(bad, exc, what):
    with pytest.raises(exc, match="special_tokens") as info:
        special_token_list(bad)
    assert what in str(info.value)


def test_wordpiece_specials_bare_str():
    with pytest.raises(TypeError, match="specials must be a list of str"):
        WordPiece.train(TEXT, vocab_size=40, specials="[UNK]", progress=False)


def test_unigram_control_bare_str():
    with pytest.raises(TypeError, match="control must be a list of str"):
        Unigram([("<unk>", 0.0), ("a", -1.0)], control="<s>")


# ---------------------------------------------------------------- item 10: trainer options


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_unigram_em_iterations(value):
    with pytest.raises(ValueError, match="em_iterations"):
        Unigram.train(TEXT, vocab_size=40, config=UnigramTrainConfig(em_iterations=value), progress=False)


@pytest.mark.parametrize("field, value", [("seed_size", 0), ("max_piece_len", 0), ("overshoot", 0.5),
                                          ("overshoot", float("nan")), ("shrink", float("nan"))])
def test_unigram_config_neighbours(field, value):
    cfg = UnigramTrainConfig(**{field: value})
    with pytest.raises(ValueError, match=field):
        Unigram.train(TEXT, vocab_size=40, config=cfg, progress=False)


@pytest.mark.parametrize("value", [0, -2, 1.5, "2", None, True])
def test_wordpiece_min_frequency(value):
    with pytest.raises(ValueError, match="min_frequency"):
        WordPiece.train(TEXT, vocab_size=40, min_frequency=value, progress=False)


def test_wordpiece_min_frequency_still_works():
    wp = WordPiece.train(TEXT, vocab_size=60, min_frequency=3, progress=False)
    assert wp.vocab_size <= 60


# ---------------------------------------------------------------- text that UTF-8 cannot hold


@pytest.mark.parametrize("cls", [ByteTokenizer, ByteBPETokenizer])
def test_lone_surrogate_names_text(cls):
    tok = _train(cls)
    with pytest.raises(ValueError, match=r"text contains the lone surrogate U\+D800 at index 2"):
        tok.encode("ab\ud800c")


def test_lone_surrogate_in_training_text():
    with pytest.raises(ValueError, match="text contains the lone surrogate"):
        ByteBPETokenizer.train("ab\udfffc", vocab_size=260)


# ---------------------------------------------------------------- item 8: damaged files


def test_load_with_invalid_saved_regex(tmp_path):
    path = tmp_path / "tok.json"
    _train(ByteBPETokenizer).save(path)
    obj = json.loads(path.read_text())
    obj["state"]["pattern"] = "(unclosed"
    path.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="pattern") as info:
        Tokenizer.load(path)
    assert str(path) in str(info.value) and "damaged" in str(info.value)


def test_load_with_non_str_pattern(tmp_path):
    path = tmp_path / "tok.json"
    _train(BPETokenizer).save(path)
    obj = json.loads(path.read_text())
    obj["state"]["pattern"] = 42
    path.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="pattern") as info:
        BPETokenizer.load(path)
    assert str(path) in str(info.value)


def test_load_with_bare_str_special_tokens_in_file(tmp_path):
    path = tmp_path / "tok.json"
    _train(CharTokenizer).save(path)
    obj = json.loads(path.read_text())
    obj["special_tokens"] = "<eos>"
    path.write_text(json.dumps(obj))
    with pytest.raises(ValueError, match="special_tokens") as info:
        Tokenizer.load(path)
    assert str(path) in str(info.value)


def test_load_non_utf8_file(tmp_path):
    path = tmp_path / "tok.json"
    path.write_bytes(b"\xff\xfe{not json")
    with pytest.raises(ValueError, match="not a saved llmbook tokenizer") as info:
        Tokenizer.load(path)
    assert str(path) in str(info.value)


def test_from_tiktoken_empty_file(tmp_path):
    path = tmp_path / "empty.tiktoken"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="holds no ranks") as info:
        ByteBPETokenizer.from_tiktoken(path)
    assert str(path) in str(info.value)


def test_from_tiktoken_file_missing_bytes(tmp_path):
    import base64

    path = tmp_path / "few.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(10)))
    with pytest.raises(ValueError, match="single bytes have no rank") as info:
        ByteBPETokenizer.from_tiktoken(path)
    assert str(path) in str(info.value)


def test_from_tiktoken_garbled_line(tmp_path):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"YQ== 0\nnot-base64!! 1\n")
    with pytest.raises(ValueError, match=r"bad.tiktoken:2"):
        ByteBPETokenizer.from_tiktoken(path)


@pytest.mark.parametrize("content, match", [(b"\xff\xfe[UNK]\n", "not UTF-8"), (b"[UNK]\na\na\n", "twice"),
                                            (b"a\nb\n", "unk_token"), (b"", "unk_token")])
def test_wordpiece_from_vocab_damaged_file(tmp_path, content, match):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=match) as info:
        WordPiece.from_vocab(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("content", [b"garbage", b"\x00" * 64])
def test_unigram_from_damaged_sentencepiece_file(tmp_path, content):
    pytest.importorskip("sentencepiece")
    path = tmp_path / "bad.model"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="bad.model") as info:
        Unigram.from_sentencepiece(path)
    assert "SentencePiece" in str(info.value) or "no pieces" in str(info.value)


@pytest.mark.parametrize("content", [b"", b"garbage"])
def test_unigram_from_damaged_sentencepiece_bytes(content):
    pytest.importorskip("sentencepiece")
    with pytest.raises(ValueError, match="model"):
        Unigram.from_sentencepiece(content)


def test_load_in_a_fresh_process_without_importing_the_class(tmp_path):
    """The classes register on import and llmbook.tokenizers imports lazily: Tokenizer.load of a
    saved ByteBPETokenizer used to fail with 'not a known tokenizer class' in a fresh process."""
    import subprocess
    import sys

    _train(ByteBPETokenizer).save(tmp_path / "t.json")
    code = ("import sys; from llmbook.tokenizers.base import Tokenizer; "
            "t = Tokenizer.load(sys.argv[1]); print(type(t).__name__, t.decode(t.encode('the cat')))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "t.json")], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ByteBPETokenizer the cat"
