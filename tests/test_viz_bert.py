"""Chapter 7 figures and the masked-word explorer, without a browser."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from llmbook.bert import BertConfig, BertForPreTraining, predict_masked
from llmbook.tokenizers.wordpiece import WordPiece
from llmbook.viz.bert import (NO_WORD, TOP_K_MAX, default_word, embedding_sum_figure, mask_word, masked_word_data,
                              masked_word_explorer, masked_word_figure, masked_word_spec, word_choices)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "to be or not that is the question , .".split()


@pytest.fixture(scope="module")
def predict():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.tiny(vocab_size=len(VOCAB), max_position=32)).eval()
    wp = WordPiece(VOCAB)
    return lambda text, top_k=5: predict_masked(model, wp, text, top_k=top_k)


def test_predict_masked_and_figure(predict):
    tokens, preds = predict("to be or [MASK] to be", top_k=3)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and tokens[4] == "[MASK]"
    assert [p for p, _ in preds] == [4]
    probs = [q for _, q in preds[0][1]]
    assert len(probs) == 3 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    fig = masked_word_figure(tokens, preds)
    assert isinstance(fig, Figure)


def test_bad_input_is_a_clear_error(predict):
    with pytest.raises(ValueError, match="empty"):
        predict("   ")
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        predict("to be or not")
    with pytest.raises(ValueError, match="predictions is empty"):
        masked_word_figure(["[CLS]"], [])
    with pytest.raises(ValueError, match="choice"):
        mask_word("a b", "nonsense")


def test_mask_word_and_choices():
    assert word_choices("to be") == ["0: to", "1: be"]  # no "(none: I typed [MASK])" trap without a [MASK]
    assert word_choices("to [MASK]") == [NO_WORD, "0: to", "1: [MASK]"]
    assert word_choices(". , !")[0] == NO_WORD  # nothing to mask: the only choice that draws nothing new
    assert mask_word("to be, or not", "1: be,") == "to [MASK], or not"
    assert mask_word("to be", "5: gone") == "to be"  # a stale label masks nothing


def test_explorer_renders_and_shows_errors_inline(predict):
    ex = masked_word_explorer(predict, sentence="to be or not to be")
    # every word is a function word: the first one is masked, and the picture is a prediction
    assert ex.controls["word"].value == "0: to" and ex.last_error is None and len(ex.view.children) == 1
    ex.controls["word"].value = "3: not"
    assert ex.last_error is None and len(ex.view.children) == 1
    ex.controls["sentence"].value = "that is the [MASK]"
    assert ex.controls["word"].value == NO_WORD and ex.last_error is None
    ex.controls["sentence"].value = ""
    assert "empty" in str(ex.last_error)


def test_default_word_masks_the_first_content_word():
    assert default_word("that is the question .") == "3: question"
    assert default_word("the question, to be.") == "1: question,"
    assert default_word("that is the [MASK]") == NO_WORD
    assert default_word(" , . ") == NO_WORD
    with pytest.raises(TypeError, match="sentence"):
        default_word(None)


def test_a_new_sentence_shows_a_prediction_at_once_in_one_render(predict):
    calls = []

    def counting(text, top_k=5):
        calls.append(text)
        return predict(text, top_k=top_k)

    ex = masked_word_explorer(counting, sentence="to be or [MASK] to be")
    first = ex.front.spec
    calls.clear()
    ex.controls["sentence"].value = "that is the question ."  # no [MASK] typed: a word is masked for the reader
    assert ex.last_error is None and ex.error.value == ""
    assert ex.controls["word"].value == "3: question"
    assert calls == ["that is the [MASK] ."]  # one model call, with the new word masked
    assert ex.front.spec != first  # the picture is the new sentence's, not the old one
    assert ex.front.spec["title"] == "that is the [MASK] ."


def test_a_cut_sentence_says_so(predict):
    long = " ".join(["to be or not"] * 12)  # 48 words, the model reads 32 positions
    ex = masked_word_explorer(predict, sentence="to [MASK] or not " + long)
    assert ex.last_error is None
    fig = ex.render(**ex.values())
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert "cut: the model reads the first 32 tokens" in title and len(title) < 200
    ex.controls["sentence"].value = long + " [MASK]"  # the [MASK] falls after position 32
    assert "past the first 32 tokens" in str(ex.last_error)


def test_errors_do_not_echo_a_long_input(predict):
    with pytest.raises(ValueError) as info:
        mask_word("a b", "x" * 5000)
    assert len(str(info.value)) < 200
    with pytest.raises(ValueError) as info:
        masked_word_explorer(predict, sentence=" ".join(["be"] * 400), word="nonsense " * 300)
    assert len(str(info.value)) < 400 and "word must be one of" in str(info.value)


def test_embedding_sum_figure():
    T, D = 5, 16
    fig = embedding_sum_figure(torch.randn(T, D), torch.randn(T, D), torch.randn(T, D), list("abcde"))
    assert isinstance(fig, Figure)
    with pytest.raises(ValueError, match="tokens"):
        embedding_sum_figure(torch.randn(T, D), torch.randn(T, D), torch.randn(T, D), list("abc"))
    fig = embedding_sum_figure(torch.randn(T, D), torch.randn(T, D), torch.randn(T, D), list("abcde"),
                               normed=torch.randn(T, D))
    assert len(fig.axes) == 5 + 2 and "LayerNorm" in fig.axes[4].get_title()   # five panels, two colour bars
    with pytest.raises(ValueError, match="normed"):
        embedding_sum_figure(torch.randn(T, D), torch.randn(T, D), torch.randn(T, D), list("abcde"), normed=torch.randn(D))


def test_spec_holds_the_models_top_pieces(predict):
    """The browser gets predict's top TOP_K_MAX pieces, largest first; its first k are predict's top k."""
    data = masked_word_data(predict, "to be or not to be", "3: not")
    spec = masked_word_spec(data)
    assert spec["kind"] == "panels" and spec["title"] == "to be or [MASK] to be"
    assert spec["top_k"] == {"name": "top_k", "label": "top k", "min": 1, "max": TOP_K_MAX}
    (panel,) = spec["panels"]
    tokens, preds = predict("to be or [MASK] to be", top_k=TOP_K_MAX)
    assert data["tokens"] == tokens and panel["title"] == f"[MASK] at piece {preds[0][0]} ([CLS] is piece 0)"
    assert panel["labels"] == [c for c, _ in preds[0][1]] and panel["type"] == "hbars" and panel["annotate"]
    assert panel["values"] == sorted(panel["values"], reverse=True) and 0 < sum(panel["values"]) <= 1 + 1e-3
    for k in (1, 3, 5):
        _, small = predict("to be or [MASK] to be", top_k=k)
        assert panel["labels"][:k] == [c for c, _ in small[0][1]]
        assert panel["values"][:k] == pytest.approx([q for _, q in small[0][1]], rel=1e-3)
    two = masked_word_spec(masked_word_data(predict, "[MASK] be or [MASK]", NO_WORD))
    assert len(two["panels"]) == 2 and two["columns"] == 2


def test_top_k_is_drawn_in_the_browser_and_sentences_are_cached(predict):
    calls = []

    def counting(text, top_k=5):
        calls.append((text, top_k))
        return predict(text, top_k=top_k)

    ex = masked_word_explorer(counting, sentence="to be or not to be", word="3: not", top_k=4)
    assert calls == [("to be or [MASK] to be", TOP_K_MAX)] and ex.front.step == 4
    spec = ex.front.spec
    ex.controls["top_k"].value = 2                       # the browser's slider: no new spec, no model call
    assert ex.front.step == 2 and ex.front.spec is spec and len(calls) == 1
    fig = ex.render(**ex.values())                       # the static picture follows it
    assert len(fig.axes[0].patches) == 2
    plt.close(fig)
    ex.controls["word"].value = "1: be"
    ex.controls["word"].value = "3: not"                 # seen before: from the cache
    assert [t for t, _ in calls] == ["to be or [MASK] to be", "to [MASK] or not to be"]
    assert ex.front.spec == spec and ex.cache.hits >= 1
    for bad in (0, TOP_K_MAX + 1, 2.5, True):
        with pytest.raises(ValueError, match="top_k must be an int from 1 to"):
            ex.controls["top_k"].value = bad
    assert ex.front.step == 2
    with pytest.raises(ValueError, match="top_k"):
        masked_word_explorer(predict, sentence="to be or not to be", top_k=99)
