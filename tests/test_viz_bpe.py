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


# ----------------------------------------------------------------- the browser view's merge history
@pytest.mark.parametrize("level", ["characters", "bytes"])
def test_merge_history_gives_the_tokenizers_tokens_at_every_step(level):
    """The browser view draws tokens from (units, steps); they must be exactly what the
    tokenizer with the first k merges produces, for every k."""
    from llmbook.viz.bpe import _tokens_by_k, merge_history, tokens_at

    text = "the car\nthe cat\nthe rat sat on the mat.\n今天天气很好。今天我去了商店。 🙂🙂"
    trace = bpe_trace(text, level, 300)
    units, steps = merge_history(trace, text)
    counts = _tokens_by_k(trace, text)
    assert len(counts) == len(trace.pairs) + 1 and counts[0] == len(units)
    for k in range(len(trace.pairs) + 1):
        ids = tokenizer_at(trace, k).encode(text)
        assert counts[k] == len(ids), k
        got = tokens_at(units, steps, k, level)
        if level == "characters":
            assert got == [tokenizer_at(trace, k).id_to_token(i) for i in ids], k
        else:
            from llmbook.viz.attention import byte_token_labels

            assert got == byte_token_labels([trace.tokenizer.vocab[i] for i in ids]), k


def test_byte_level_tokens_label_split_characters_readably():
    from llmbook.viz.bpe import merge_history, tokens_at

    trace = bpe_trace("今天天气很好", "bytes", 300)
    units, steps = merge_history(trace, "今天")
    assert tokens_at(units, steps, 0, "bytes")[:3] == ["今[:1]", "今[1:2]", "今[2:]"]  # no "\ufffd"
    assert tokens_at(units, steps, len(trace.pairs), "bytes") == ["今天"]


def test_explorer_merges_slider_stops_at_the_merges_the_text_allows():
    ex = bpe_explorer(text="the car\nthe cat\nthe rat", merges=3)
    spec = ex.front.spec
    assert spec["kind"] == "bpe" and len(spec["pairs"]) == 7  # 7 merges make every word one token
    assert spec["tokens_by_k"] == [len(tokenizer_at(bpe_trace("the car\nthe cat\nthe rat", "characters", 300), k)
                                       .encode("the car\nthe cat\nthe rat")) for k in range(8)]
    assert ex.values()["merges"] == 3
    ex.front.step = 250  # the browser cannot go past 7; a stale value is clamped
    assert ex.values()["merges"] == 7
    html, _fig = ex.render(**ex.values())
    assert "<b>7</b> merges" in html


def test_explorer_text_box_is_disabled_while_a_corpus_is_chosen():
    ex = bpe_explorer()
    text = ex.controls["text"]
    assert not text.disabled
    ex.controls["corpus"].value = "Shakespeare"
    assert text.disabled and ex.last_error is None and ex.front.spec["n_chars"] > 1000
    ex.controls["corpus"].value = "your text"
    assert not text.disabled and ex.front.spec["n_chars"] == len(text.value)


def test_explorer_error_greys_out_the_picture():
    ex = bpe_explorer()
    ex.controls["text"].value = ""
    assert ex.front.stale and "llmbook-stale" in ex.view._dom_classes
    ex.controls["text"].value = "ab ab"
    assert not ex.front.stale and "llmbook-stale" not in ex.view._dom_classes


def test_static_merge_table_counts_from_one_and_shows_spaces():
    """The static copy's table agrees with the browser-drawn one and the prose (review 2026-11-26 UX #8):
    merges numbered 1, 2, 3; a space and a new line visible as · and ↵; cells padded; '1 token' singular."""
    import re

    html, _ = render_bpe("the car\nthe cat\nthe rat", merges=3, level="characters")
    rows = re.findall(r"<tr>(.*?)</tr>", html.split("Latest merges")[1])[1:]
    firsts = [re.search(r">(\d+)</td>", r).group(1) for r in rows]
    assert firsts == ["1", "2", "3"] and "padding:2px 12px" in rows[0]
    html, _ = render_bpe("the cat the car the rat the bat", merges=5, level="bytes")
    table = html.split("Latest merges")[1]
    assert "<code>·</code> + <code>the</code>" in table and "<code>·the</code>" in table  # merge 3 joins a space
    assert "<code> </code>" not in table
    html, _ = render_bpe("ab", merges=1, level="characters")
    assert "1 token for 2 characters" in html and "<b>1</b> merge " in html
    assert "color:#1f1f1f" in token_spans_html(["a"])  # dark ink on the light tints, whatever the theme
