"""T5 span corruption and GLM blank infilling (issue 16 item 1): rates, span lengths, inverses."""

import math

import pytest
import torch

from llmbook.objectives import (GLMExample, glm_blank_infilling, glm_reconstruct, noise_span_lengths,
                                span_corruption, t5_reconstruct)

SENT = list(range(1000, 1100))
MASK, START, END = 900, 901, 902


@pytest.mark.parametrize("L", [2, 3, 10, 37, 100, 512])
def test_t5_target_restores_the_input(L):
    g = torch.Generator().manual_seed(L)
    for _ in range(50):
        x = torch.randint(0, 500, (L,), generator=g)
        inp, tgt = span_corruption(x, SENT, generator=g)
        assert torch.equal(t5_reconstruct(inp, tgt, SENT), x)
        n_spans = int(torch.isin(inp, torch.tensor(SENT)).sum())
        assert tgt[0].item() == SENT[0] and tgt[-1].item() == SENT[n_spans]
        assert len(inp) + len(tgt) == L + 2 * n_spans + 1  # each span: one sentinel in, one out; plus the last


def test_t5_corruption_rate_and_mean_span_length_match_their_parameters():
    g = torch.Generator().manual_seed(0)
    L, spans = 512, []
    for _ in range(200):
        kept, noise = noise_span_lengths(L, 0.15, 3.0, generator=g)
        assert sum(noise) == round(L * 0.15) and sum(kept) + sum(noise) == L
        assert min(noise) >= 1 and min(kept) >= 1 and len(kept) == len(noise) == round(77 / 3)
        spans += noise
    assert sum(spans) / len(spans) == pytest.approx(77 / 26)  # mean span length: 2.96, the closest to 3
    # the layout is random: spans of many lengths, starting at many places
    assert len(set(spans)) >= 6
    for density, mean in [(0.3, 5.0), (0.5, 1.0)]:
        _, noise = noise_span_lengths(1000, density, mean, generator=g)
        assert sum(noise) == 1000 * density and sum(noise) / len(noise) == pytest.approx(mean)


def test_t5_span_lengths_follow_the_stars_and_bars_law():
    # N noise tokens cut into k non-empty runs at a uniformly random (k-1)-subset of the N-1 gaps:
    # P(length = j) = C(N-j-1, k-2) / C(N-1, k-1) for every span (chapter 7b derives it)
    L, N, k = 512, 77, 26
    g = torch.Generator().manual_seed(7)
    lengths = [n for _ in range(2000) for n in noise_span_lengths(L, 0.15, 3.0, generator=g)[1]]
    assert sum(math.comb(N - j - 1, k - 2) for j in range(1, N - k + 2)) == math.comb(N - 1, k - 1)
    for j in range(1, 11):
        p = math.comb(N - j - 1, k - 2) / math.comb(N - 1, k - 1)
        freq = lengths.count(j) / len(lengths)
        assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / len(lengths)) + 1e-3, (j, freq, p)


def test_t5_layout_starts_kept_ends_noise_and_is_flat_in_between():
    # T5's layout alternates kept, noise, ..., kept, noise: the first token is never noise and
    # the last always is (T5 appends </s> after it); in between every position is about as
    # likely to be noise as any other.
    g = torch.Generator().manual_seed(1)
    hits, n = torch.zeros(40), 3000
    for _ in range(n):
        kept, noise = noise_span_lengths(40, 0.15, 3.0, generator=g)
        pos = 0
        for a, b in zip(kept, noise):
            hits[pos + a:pos + a + b] += 1
            pos += a + b
    assert hits[0] == 0 and hits[-1] == n
    assert hits.sum() == 6 * n  # round(40 * 0.15) noise tokens every time
    rate = hits[3:30] / n  # away from the ends, where the layout forces kept / noise runs
    assert rate.max() / rate.min() < 1.4, rate


@pytest.mark.parametrize("call, exc, name", [
    (lambda: span_corruption([1, 2, 3], SENT, noise_density=0), ValueError, "noise_density"),
    (lambda: span_corruption([1, 2, 3], SENT, noise_density=1.5), ValueError, "noise_density"),
    (lambda: span_corruption([1, 2, 3], SENT, mean_span_length=0.5), ValueError, "mean_span_length"),
    (lambda: span_corruption([1], SENT), ValueError, "length"),
    (lambda: span_corruption(torch.zeros(2, 5, dtype=torch.long), SENT), ValueError, "ids"),
    (lambda: span_corruption(torch.rand(5), SENT), TypeError, "ids"),
    (lambda: span_corruption(list(range(100)), [7]), ValueError, "sentinels"),
    (lambda: span_corruption([1000, 2, 3, 4], SENT), ValueError, "sentinel"),
    (lambda: span_corruption(list(range(10)), "abc"), TypeError, "sentinels"),
])
def test_t5_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


@pytest.mark.parametrize("L", [2, 5, 20, 100, 300])
def test_glm_target_restores_the_input_and_the_layout_is_consistent(L):
    g = torch.Generator().manual_seed(L)
    for _ in range(40):
        x = torch.randint(0, 500, (L,), generator=g)
        ex = glm_blank_infilling(x, MASK, START, END, generator=g)
        assert torch.equal(glm_reconstruct(ex, MASK, START, END), x)
        na, n_tok = ex.n_context, len(ex.input_ids)
        assert int((ex.input_ids[:na] == MASK).sum()) == len(ex.spans)
        assert (ex.labels[:na] == -100).all() and (ex.position_ids[1, :na] == 0).all()
        assert torch.equal(ex.position_ids[0, :na], torch.arange(na))
        assert n_tok == na + sum(length + 1 for _, length in ex.spans)
        # Part B: [START] s_1..s_l as input, s_1..s_l [END] as target, positions (mask, 1..l+1)
        i = na
        for start, length in ex.spans:
            assert ex.input_ids[i] == START and ex.labels[i + length] == END
            assert torch.equal(ex.labels[i:i + length], x[start:start + length])
            assert torch.equal(ex.input_ids[i + 1:i + length + 1], x[start:start + length])
            assert ex.input_ids[ex.position_ids[0, i]] == MASK
            assert torch.equal(ex.position_ids[1, i:i + length + 1], torch.arange(1, length + 2))
            i += length + 1
        # spans never touch
        s = sorted(ex.spans)
        assert all(a + la < b for (a, la), (b, _) in zip(s, s[1:]))


def test_glm_attention_mask_is_bidirectional_on_a_and_causal_on_b():
    g = torch.Generator().manual_seed(3)
    ex = glm_blank_infilling(torch.arange(60), MASK, START, END, generator=g)
    m, na, L = ex.attention_mask, ex.n_context, len(ex.input_ids)
    assert m[:na, :na].all() and not m[:na, na:].any()  # A sees all of A, none of B
    assert m[na:, :na].all()  # B sees all of A
    assert torch.equal(m[na:, na:], torch.ones(L - na, L - na, dtype=torch.bool).tril())  # and earlier B


def test_glm_mask_ratio_and_poisson_span_lengths():
    g = torch.Generator().manual_seed(0)
    lengths, covered = [], []
    for _ in range(400):
        ex = glm_blank_infilling(torch.arange(400), MASK, START, END, generator=g)
        covered.append(sum(length for _, length in ex.spans) / 400)
        lengths += [length for _, length in ex.spans]
    assert min(covered) >= 0.15  # at least 15 % masked, every time ...
    assert sum(covered) / len(covered) < 0.15 + 3.2 / 400 + 0.005  # ... overshooting by about half a span
    # Poisson(3) with zeros redrawn: mean 3 / (1 - e^-3) = 3.157
    mean = sum(lengths) / len(lengths)
    se = math.sqrt(sum((v - mean) ** 2 for v in lengths) / len(lengths) / len(lengths))
    assert abs(mean - 3 / (1 - math.exp(-3))) < 3 * se


def test_glm_order_of_spans_is_shuffled():
    # Part B's first span is the leftmost one in about 1/k of the examples (k spans), not always
    g = torch.Generator().manual_seed(5)
    first_is_leftmost, expected = 0, 0.0
    for _ in range(300):
        ex = glm_blank_infilling(torch.arange(100), MASK, START, END, generator=g)
        starts = [start for start, _ in ex.spans]
        first_is_leftmost += starts[0] == min(starts)
        expected += 1 / len(starts)
    assert abs(first_is_leftmost - expected) < 4 * math.sqrt(expected)


@pytest.mark.parametrize("call, exc, name", [
    (lambda: glm_blank_infilling([1], MASK, START, END), ValueError, "ids"),
    (lambda: glm_blank_infilling([1, 2, 3], MASK, MASK, END), ValueError, "start_id"),
    (lambda: glm_blank_infilling([1, MASK, 3], MASK, START, END), ValueError, "mask_id"),
    (lambda: glm_blank_infilling([1, 2, 3], MASK, START, END, mask_ratio=0), ValueError, "mask_ratio"),
    (lambda: glm_blank_infilling([1, 2, 3], MASK, START, END, poisson_lambda=0), ValueError, "poisson_lambda"),
    (lambda: glm_reconstruct("x", MASK, START, END), TypeError, "example"),
])
def test_glm_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


# ---------------------------------------------------------------------- the chapter-7b experiment helpers
from llmbook.bert import BertConfig  # noqa: E402
from llmbook.objectives import (BertMLM, SpanVocab, blank_examples, fill_blank_mlm, fill_blank_span,  # noqa: E402
                                mlm_batch, span_batch, train_denoiser)
from llmbook.transformer import Transformer, TransformerConfig  # noqa: E402

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer " * 4


def test_span_vocab_round_trip_and_errors():
    v = SpanVocab(TEXT)
    assert v.decode(v.encode("not to be")) == "not to be"
    assert v.decode([v.mask, v.sentinels[1]]) == "[MASK]<X1>"
    assert len(v) == v.offset + len(set(TEXT))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        v.encode("Zebra")
    with pytest.raises(ValueError, match="chars"):
        SpanVocab("")


def test_batches_have_the_objectives_shapes():
    v = SpanVocab(TEXT)
    data = torch.tensor(v.encode(TEXT))
    g = torch.Generator().manual_seed(0)
    x, y = mlm_batch(data, v, 4, 32, g)
    assert x.shape == y.shape == (4, 32) and ((y == -100) | (y >= v.offset)).all()
    src, tgt_in, labels = span_batch(data, v, 4, 32, g)
    assert src.shape[0] == tgt_in.shape[0] == labels.shape[0] == 4
    assert (tgt_in[:, 0] == v.bos).all() and tgt_in.shape == labels.shape
    assert (labels[:, 0] == v.sentinels[0]).all()  # every target starts with <X0>
    # decoder input = labels shifted right (teacher forcing)
    keep = labels[:, :-1] != -100
    assert torch.equal(tgt_in[:, 1:][keep], labels[:, :-1][keep])


def test_blank_examples_cut_whole_words_inside_the_window():
    items = blank_examples(TEXT, 30, block=40, seed=0)
    for window, start, n in items:
        assert len(window) == 40 and n >= 3 and window[start:start + n].isalpha()
        assert not window[start - 1].isalpha() and not window[start + n].isalpha()
    assert blank_examples(TEXT, 5, block=40, seed=3) == blank_examples(TEXT, 5, block=40, seed=3)
    with pytest.raises(ValueError, match="too short"):
        blank_examples("a b c d e f g h i j k l m n o p q r s t u v w x y z " * 2, 3, block=40)


def test_a_short_training_learns_and_both_fillers_answer():
    v = SpanVocab(TEXT)
    data = torch.tensor(v.encode(TEXT))
    torch.manual_seed(0)
    bert = BertMLM(BertConfig(vocab_size=len(v), hidden_size=32, n_layers=1, n_heads=2, intermediate_size=64,
                              max_position=64, dropout=0.0, attention_dropout=0.0))
    t5 = Transformer(TransformerConfig.tiny(vocab_size=len(v), max_len=64))
    for model, kind in ((bert, "mlm"), (t5, "span")):
        losses = train_denoiser(model, kind, data, v, 60, batch_size=8, block=32, lr=3e-3)
        assert sum(losses[-10:]) < sum(losses[:10])  # it learns something
    items = blank_examples(TEXT, 4, block=32, seed=0)
    a, b = fill_blank_mlm(bert, v, items), fill_blank_span(t5, v, items)
    assert [len(x) for x in a] == [n for _, _, n in items]  # BERT is told the length
    assert all(isinstance(x, str) and len(x) <= 16 for x in b)
    with pytest.raises(ValueError, match="kind"):
        train_denoiser(bert, "clm", data, v, 1)


# ---------------------------------------------------------------------- scoring hidden characters by likelihood
from llmbook.objectives import (corrupted_items, score_hidden_bigram, score_hidden_mlm, score_hidden_mlm_chain,  # noqa: E402
                                score_hidden_span, score_hidden_unigram, word_items)


def test_corrupted_items_follow_each_pre_training_layout():
    text = TEXT * 3
    span = corrupted_items(text, 20, "span", block=64, seed=0)
    mlm = corrupted_items(text, 20, "mlm", block=64, seed=0)
    for (w, h), (w2, h2) in zip(span, mlm):
        assert len(w) == 64 and len(h) == len(h2) == round(0.15 * 64)
        assert list(h) == sorted(set(h)) and list(h2) == sorted(set(h2))
        assert h[-1] == 63  # T5: the last token is always noise
        runs = sum(1 for i, p in enumerate(h) if i == 0 or p != h[i - 1] + 1)
        assert runs == round(round(0.15 * 64) / 3)
    assert corrupted_items(text, 5, "mlm", seed=4) == corrupted_items(text, 5, "mlm", seed=4)
    assert word_items([("abc def", 4, 3)]) == [("abc def", (4, 5, 6))]
    for call, exc, name in ((lambda: corrupted_items(text, 5, "bert"), ValueError, "style"),
                            (lambda: corrupted_items(text, 0, "span"), ValueError, "n must"),
                            (lambda: corrupted_items("short", 5, "span"), ValueError, "text"),
                            (lambda: word_items([("abc", 2, 5)]), ValueError, "items"),
                            (lambda: score_hidden_unigram(TEXT, [("abc", (5,))]), ValueError, "hidden"),
                            (lambda: score_hidden_unigram(TEXT, [("abc", 1)]), TypeError, "hidden"),
                            (lambda: score_hidden_unigram("", [("abc", (1,))]), ValueError, "train_text"),
                            (lambda: score_hidden_bigram("a", [("abc", (1,))]), ValueError, "train_text")):
        with pytest.raises(exc, match=name):
            call()


def _tiny_models(v):
    torch.manual_seed(0)
    bert = BertMLM(BertConfig(vocab_size=len(v), hidden_size=32, n_layers=1, n_heads=2, intermediate_size=64,
                              max_position=64, dropout=0.0, attention_dropout=0.0)).eval()
    t5 = Transformer(TransformerConfig.tiny(vocab_size=len(v), max_len=64)).eval()
    return bert, t5


def test_span_scores_are_the_teacher_forced_cross_entropy():
    v = SpanVocab(TEXT)
    _, t5 = _tiny_models(v)
    window = TEXT[:40]
    hidden = (3, 4, 5, 20, 39)  # two spans inside, one at the end
    chars, layout = score_hidden_span(t5, v, [(window, hidden)])
    ids = v.encode(window)
    s = v.sentinels
    src = ids[:3] + [s[0]] + ids[6:20] + [s[1]] + ids[21:39] + [s[2]]
    tgt = [s[0]] + ids[3:6] + [s[1], ids[20], s[2], ids[39], s[3], v.eos]
    with torch.no_grad():
        logp = torch.log_softmax(t5(torch.tensor([src]), torch.tensor([[v.bos] + tgt[:-1]])), -1)[0]
    nll = -logp[torch.arange(len(tgt)), torch.tensor(tgt)]
    is_char = torch.tensor([t >= v.offset for t in tgt])
    torch.testing.assert_close(torch.tensor(chars[0]), nll[is_char])
    torch.testing.assert_close(torch.tensor(layout[0]), nll[~is_char])


def test_scores_do_not_depend_on_the_batch():
    # items of different lengths are padded together; padding must not change any score
    v = SpanVocab(TEXT)
    bert, t5 = _tiny_models(v)
    items = corrupted_items(TEXT * 3, 3, "mlm", block=40, seed=1) + word_items(blank_examples(TEXT, 3, block=40))
    together_c, together_l = score_hidden_span(t5, v, items)
    for i, it in enumerate(items):
        c, lay = score_hidden_span(t5, v, [it])
        torch.testing.assert_close(torch.tensor(c[0]), torch.tensor(together_c[i]))
        torch.testing.assert_close(torch.tensor(lay[0]), torch.tensor(together_l[i]))
    together = score_hidden_mlm(bert, v, items, batch_size=2)
    for i, it in enumerate(items):
        torch.testing.assert_close(torch.tensor(score_hidden_mlm(bert, v, [it])[0]), torch.tensor(together[i]))
        assert len(together[i]) == len(it[1]) and min(together[i]) > 0


def test_mlm_scores_read_each_masked_position():
    v = SpanVocab(TEXT)
    bert, _ = _tiny_models(v)
    window, hidden = TEXT[:40], (2, 7, 8)
    x = torch.tensor([v.encode(window)])
    y = x[0, list(hidden)].clone()
    x[0, list(hidden)] = v.mask
    with torch.no_grad():
        logp = torch.log_softmax(bert(x), -1)[0]
    torch.testing.assert_close(torch.tensor(score_hidden_mlm(bert, v, [(window, hidden)])[0]),
                               -logp[torch.tensor(hidden), y])


def test_mlm_chain_scores_reveal_earlier_hidden_characters():
    # the k-th hidden character is scored with the earlier ones shown and itself and the later ones masked
    v = SpanVocab(TEXT)
    bert, _ = _tiny_models(v)
    window, hidden = TEXT[:40], (2, 7, 8)
    got = score_hidden_mlm_chain(bert, v, [(window, hidden)], batch_size=2)[0]
    ids = torch.tensor(v.encode(window))
    want = []
    for k, p in enumerate(hidden):
        x = ids.clone()
        x[list(hidden[k:])] = v.mask
        with torch.no_grad():
            want.append(float(-torch.log_softmax(bert(x[None]), -1)[0, p, ids[p]]))
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want))
    # the first hidden character sees exactly what score_hidden_mlm shows it
    assert abs(got[0] - score_hidden_mlm(bert, v, [(window, hidden)])[0][0]) < 1e-5
    with pytest.raises(TypeError):
        score_hidden_mlm_chain(bert, v, ["not an item"])
