"""llmbook.evaluation: log-likelihood multiple choice, normalisations, bits per byte (issue 16 item 5)."""

import math

import pytest
import torch

from llmbook.charvocab import CharVocab
from llmbook.evaluation import (MCItem, NORMALISATIONS, bits_per_byte, book_items, char_gpt_scorer, choose,
                                mc_accuracy, text_nll)
from llmbook.gpt import GPT, GPTConfig


def fixed_scorer(table):
    return lambda ctx, c: table[c]


def test_normalisation_changes_the_choice_as_designed():
    item = MCItem("x", (" long right answer", " no"), 0)
    table = {" long right answer": (-6.0, 4), " no": (-4.0, 1)}  # sum prefers " no", per token the long one
    s = fixed_scorer(table)
    assert choose(item, s, "sum") == 1
    assert choose(item, s, "per_token") == 0  # -1.5 > -4
    assert choose(item, s, "per_byte") == 0  # -6/18 > -4/3
    assert mc_accuracy([item], s, "sum") == 0.0 and mc_accuracy([item], s, "per_token") == 1.0


def test_bits_per_byte_counts_utf8_bytes():
    assert bits_per_byte(math.log(2) * 8, "abcdefgh") == pytest.approx(1.0)
    assert bits_per_byte(math.log(2) * 6, "中文") == pytest.approx(1.0)  # 2 characters, 6 bytes


def test_book_items_are_valid_and_shuffled():
    for lang in ("en", "zh"):
        items = book_items(lang)
        assert len(items) == 16 and all(len(it.choices) == 4 for it in items)
        assert len({it.answer for it in items}) >= 3  # the right answer is not always first
        assert book_items(lang) == items  # deterministic


def test_balanced_items_favour_no_length():
    """In the balanced set the right answer is the longest choice (bytes) in 4 items, the shortest in 4."""
    for lang in ("en", "zh"):
        first, balanced = book_items(lang), book_items(lang, balanced=True)
        assert [it.context for it in first] == [it.context for it in balanced]
        where = []
        for it in balanced:
            n = [len(c.encode("utf-8")) for c in it.choices]
            others = [x for i, x in enumerate(n) if i != it.answer]
            where.append("longest" if n[it.answer] > max(others) else "shortest" if n[it.answer] < min(others) else "neither")
        assert (where.count("longest"), where.count("shortest"), where.count("neither")) == (4, 4, 8)


def _tiny():
    vocab = CharVocab.from_text("abc .")
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=len(vocab), block_size=16, n_layer=1, n_head=2, d_model=16, d_ff=32)).eval(), vocab


def test_char_scorer_equals_a_direct_computation_and_text_nll_scores_every_token_once():
    model, vocab = _tiny()
    score = char_gpt_scorer(model, vocab)
    lp, n = score("ab", "ca")
    ids = vocab.encode("abca")
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids]))[0][0], -1)
    assert n == 2 and lp == pytest.approx(float(logp[1, ids[2]] + logp[2, ids[3]]), abs=1e-5)
    text = "abc. cab. bca. " * 3
    ids = vocab.encode(text)
    nll, count = text_nll(lambda x: model(x)[0], ids, 8)
    assert count == len(ids) - 1
    # one window covering everything gives the fully-conditioned total
    nll_full, _ = text_nll(lambda x: model(x)[0], ids[:16], 16)
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([ids[:16]]))[0][0], -1)
    assert nll_full == pytest.approx(-float(lp[:-1].gather(1, torch.tensor(ids[1:16])[:, None]).sum()), abs=1e-4)


@pytest.mark.parametrize("call, exc, name", [
    (lambda: MCItem("", ("a", "b"), 0), ValueError, "context"),
    (lambda: MCItem("x", ("a",), 0), ValueError, "choices"),
    (lambda: MCItem("x", ("a", "b"), 2), ValueError, "answer"),
    (lambda: choose(MCItem("x", ("a", "b"), 0), lambda c, x: (0.0, 1), "mean"), ValueError, "normalisation"),
    (lambda: mc_accuracy([], lambda c, x: (0.0, 1)), ValueError, "items"),
    (lambda: bits_per_byte(1.0, ""), ValueError, "text"),
    (lambda: text_nll(lambda x: x, [1, 2, 3], 1), ValueError, "window"),
    (lambda: book_items("fr"), ValueError, "lang"),
    (lambda: book_items("en", balanced="yes"), TypeError, "balanced"),
])
def test_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_normalisations_listed():
    assert NORMALISATIONS == ("sum", "per_token", "per_byte")
