"""The BPE explorer's pure functions (no browser) and the word-level tokenizers."""

import pytest
from matplotlib.figure import Figure

from llmbook.tokenizers import PennTreebankTokenizer, WhitespaceTokenizer
from llmbook.tokenizers.whitespace import treebank_split
from llmbook.viz.bpe import bpe_explorer, bpe_trace, render_bpe, tokenizer_at, token_spans_html


def test_trace_seed_example():
    t = bpe_trace("the car\nthe cat\nthe rat", "characters", 3)
    assert t.pairs == [("t", "h"), ("th", "e"), ("c", "a")] and t.counts == [3, 3, 2]
    assert tokenizer_at(t, 2).tokenize("the cat") == ["the", " ", "c", "a", "t"]


def test_render_characters_and_bytes_on_chinese():
    html, fig = render_bpe("今天天气很好。今天我去了商店。", merges=4, level="bytes")
    assert isinstance(fig, Figure) and "vocabulary size <b>260</b>" in html
    html, fig = render_bpe("今天天气很好。今天我去了商店。", merges=1, level="characters")
    assert "今天" in html and "tokens per character" in html


def test_render_corpus_ignores_text():
    html, _ = render_bpe("", merges=20, level="characters", corpus="Shakespeare")
    assert "<b>20</b> merges" in html


def test_render_bad_input():
    with pytest.raises(ValueError, match="text is empty"):
        render_bpe("", merges=3)
    with pytest.raises(ValueError, match="merges=50 is more than this text allows"):
        render_bpe("ab ab", merges=50)
    with pytest.raises(ValueError, match="level="):
        render_bpe("ab", merges=0, level="words")
    with pytest.raises(TypeError, match="text must be a str"):
        render_bpe(42, merges=0)
    with pytest.raises(ValueError, match="corpus="):
        render_bpe("ab", merges=0, corpus="Homer")
    with pytest.raises(TypeError, match="tokens must be a list"):
        token_spans_html("abc")


def test_explorer_shows_error_inline():
    ex = bpe_explorer()
    assert ex.last_error is None
    ex.controls["text"].value = ""
    assert ex.last_error is not None and "empty" in ex.error.value
    ex.controls["text"].value = "the car"
    assert ex.last_error is None


def test_whitespace_and_treebank():
    assert treebank_split("the mouse ate the cheese.") == ["the", "mouse", "ate", "the", "cheese", "."]
    assert treebank_split("don't") == ["do", "n't"]
    assert treebank_split("father-in-law") == ["father-in-law"]
    assert treebank_split("'Tis 'quoted'") == ["'", "Tis", "'", "quoted'"]
    assert treebank_split("Hello, world! (It's 3.14.)") == ["Hello", ",", "world", "!", "(", "It", "'s", "3.14", ".", ")"]
    ws = WhitespaceTokenizer.train("我今天去了商店。 the cheese.")
    assert ws.tokenize("我今天去了商店。") == ["我今天去了商店。"]  # no spaces: one "word"
    assert ws.tokenize("the cheese") == ["the", "<unk>"]  # 'cheese' != 'cheese.'
    assert ws.decode(ws.encode("the   cheese.")) == "the cheese."  # spacing is lost (documented)
    ptb = PennTreebankTokenizer.train("I don't like cheese. You don't either.", vocab_size=5)
    assert ptb.words == ["do", "n't", "I", "like"]  # most frequent first, ties by first seen
    assert ptb.coverage("don't") == 1.0
    with pytest.raises(ValueError, match="no words"):
        WhitespaceTokenizer.train("   ")
    with pytest.raises(TypeError, match="text must be a str"):
        ptb.encode(None)
