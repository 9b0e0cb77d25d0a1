"""Chapter 7 figures and the masked-word explorer, without a browser."""

from __future__ import annotations

import pytest
import torch
from matplotlib.figure import Figure

from llmbook.bert import BertConfig, BertForPreTraining, predict_masked
from llmbook.tokenizers.wordpiece import WordPiece
from llmbook.viz.bert import NO_WORD, embedding_sum_figure, mask_word, masked_word_explorer, masked_word_figure, word_choices

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
    assert word_choices("to be")[1:] == ["0: to", "1: be"]
    assert mask_word("to be, or not", "1: be,") == "to [MASK], or not"
    assert mask_word("to be", "5: gone") == "to be"  # a stale label masks nothing


def test_explorer_renders_and_shows_errors_inline(predict):
    ex = masked_word_explorer(predict, sentence="to be or not to be")
    assert ex.last_error is not None and "[MASK]" in str(ex.last_error)  # nothing masked yet
    ex.controls["word"].value = "3: not"
    assert ex.last_error is None and len(ex.view.children) == 1
    ex.controls["sentence"].value = "that is the [MASK]"
    assert ex.controls["word"].options[0] == NO_WORD and ex.last_error is None
    ex.controls["sentence"].value = ""
    assert "empty" in str(ex.last_error)


def test_embedding_sum_figure():
    T, D = 5, 16
    fig = embedding_sum_figure(torch.randn(T, D), torch.randn(T, D), torch.randn(T, D), list("abcde"))
    assert isinstance(fig, Figure)
    with pytest.raises(ValueError, match="tokens"):
        embedding_sum_figure(torch.randn(T, D), torch.randn(T, D), torch.randn(T, D), list("abc"))
