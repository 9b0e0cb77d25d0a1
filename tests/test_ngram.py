"""The character n-gram model of Chapter 0: counts, probabilities, sampling, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from llmbook.ngram import CharNGramLM

CORPUS = "the cat sat on the mat\nthe rat ate the hat\n"


@pytest.fixture(scope="module")
def tri() -> CharNGramLM:
    return CharNGramLM(order=3, alpha=0.5).fit(CORPUS)


def test_counts_match_hand_counting():
    lm = CharNGramLM(order=3, alpha=1.0).fit(CORPUS)
    for gram in ["t", "th", "the", "at", "at ", "e ", "\nt", "zz"[:1], "q"]:
        expected = sum(CORPUS.startswith(gram, i) for i in range(len(CORPUS)))
        assert lm.count(gram) == expected, gram
    assert lm.vocab == sorted(set(CORPUS))


def test_bigram_probability_by_hand():
    # p(c | 'a') = (N(a c) + alpha) / (N(a .) + alpha |V|)
    alpha = 0.5
    lm = CharNGramLM(order=2, alpha=alpha).fit(CORPUS)
    V = len(set(CORPUS))
    follow = [CORPUS[i + 1] for i in range(len(CORPUS) - 1) if CORPUS[i] == "a"]
    chars, p = lm.prob_next("a")
    for c, pc in zip(chars, p.tolist()):
        assert pc == pytest.approx((follow.count(c) + alpha) / (len(follow) + alpha * V))


@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("alpha", [0.0, 0.1, 1.0])
def test_next_distributions_sum_to_one(order, alpha):
    lm = CharNGramLM(order=order, alpha=alpha).fit(CORPUS)
    for context in ["", "t", "th", "the c", "zzz"[:0] + "hm", "\n"]:
        _, p = lm.prob_next(context)
        assert torch.all(p >= 0)
        assert float(p.sum()) == pytest.approx(1.0, abs=1e-12)


def test_log_prob_is_chain_rule_of_prob_next(tri):
    text = "the hat sat"
    total = 0.0
    for i, c in enumerate(text):
        chars, p = tri.prob_next(text[:i])
        total += math.log(float(p[chars.index(c)]))
    assert tri.log_prob(text) == pytest.approx(total, rel=1e-12)
    assert tri.sequence_probability(text) == pytest.approx(math.exp(total), rel=1e-9)
    assert tri.log_prob("") == 0.0


def test_all_strings_of_length_two_sum_to_one():
    lm = CharNGramLM(order=3, alpha=0.3).fit("abcab")
    total = sum(lm.sequence_probability(a + b) for a in lm.vocab for b in lm.vocab)
    assert total == pytest.approx(1.0, abs=1e-12)


def test_mle_backs_off_on_unseen_history():
    lm = CharNGramLM(order=2, alpha=0.0).fit("ab")  # 'b' is never followed by anything
    chars, p = lm.prob_next("b")
    unigram = CharNGramLM(order=1, alpha=0.0).fit("ab").prob_next("")[1]
    torch.testing.assert_close(p, unigram)
    assert lm.log_prob("ab") == pytest.approx(math.log(0.5))
    assert lm.log_prob("aa") == -math.inf  # seen history, unseen continuation: p = 0


def test_natural_text_beats_scrambled(tri):
    assert tri.log_prob("the cat") > tri.log_prob("tca eht")


def test_perplexity_uniform_model_is_vocab_size():
    lm = CharNGramLM(order=1, alpha=0.0).fit("abcd")
    assert lm.perplexity("dcba") == pytest.approx(4.0)


def test_temperature_sharpens_and_flattens(tri):
    chars, p1 = tri.prob_next("th")
    _, cold = tri.prob_next("th", temperature=0.01)
    _, hot = tri.prob_next("th", temperature=100.0)
    assert int(cold.argmax()) == int(p1.argmax())
    assert float(cold.max()) > 0.999
    assert float(hot.max() - hot.min()) < float(p1.max() - p1.min())
    uniform = torch.full_like(hot, 1 / len(chars))
    assert float((hot - uniform).abs().max()) < 0.01


def test_sampling_repeatable_with_seed(tri):
    a = tri.sample("the ", 40, generator=torch.Generator().manual_seed(3))
    b = tri.sample("the ", 40, generator=torch.Generator().manual_seed(3))
    c = tri.sample("the ", 40, generator=torch.Generator().manual_seed(4))
    assert a == b and len(a) == 40
    assert a != c
    assert set(a) <= set(tri.vocab)


def test_cold_sampling_is_greedy(tri):
    # As T -> 0 every sampled character is a most likely one (ties: any of them).
    out = tri.sample("th", 30, temperature=1e-4, generator=torch.Generator().manual_seed(0))
    text = "th"
    for c in out:
        chars, p = tri.prob_next(text)
        best = {ch for ch, pc in zip(chars, p.tolist()) if pc == float(p.max())}
        assert c in best
        text += c


def test_chinese_vocabulary():
    lm = CharNGramLM(order=2, alpha=0.0).fit("今天天气很好。今天很好。")
    chars, p = lm.prob_next("今")
    assert chars[int(p.argmax())] == "天" and float(p.max()) == 1.0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"order": 0}, ValueError, "order"),
        ({"order": 2.0}, TypeError, "order"),
        ({"order": True}, TypeError, "order"),
        ({"alpha": -1.0}, ValueError, "alpha"),
        ({"alpha": float("nan")}, ValueError, "alpha"),
        ({"alpha": "1"}, TypeError, "alpha"),
    ],
)
def test_bad_constructor_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        CharNGramLM(**kwargs)


def test_bad_input(tri):
    with pytest.raises(ValueError, match="empty"):
        CharNGramLM().fit("")
    with pytest.raises(TypeError, match="text"):
        CharNGramLM().fit(["a"])
    with pytest.raises(RuntimeError, match="fit"):
        CharNGramLM().prob_next("a")
    with pytest.raises(ValueError, match=r"never saw.*'Q'"):
        tri.prob_next("Quite")
    with pytest.raises(ValueError, match="prompt.*'Z'"):
        tri.sample("Zebra", 3)
    with pytest.raises(ValueError, match="temperature"):
        tri.prob_next("th", temperature=0.0)
    with pytest.raises(ValueError, match="temperature"):
        tri.sample("th", 3, temperature=-1.0)
    with pytest.raises(TypeError, match="temperature"):
        tri.prob_next("th", temperature="hot")
    with pytest.raises(ValueError, match="n must"):
        tri.sample("th", -1)
    with pytest.raises(TypeError, match="generator"):
        tri.sample("th", 2, generator=0)
    with pytest.raises(ValueError, match="ngram"):
        tri.count("")
    with pytest.raises(ValueError, match="non-empty"):
        tri.perplexity("")
    with pytest.raises(TypeError, match="context"):
        tri.prob_next(None)
