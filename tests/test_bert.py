"""Chapter 7: the book's BERT against transformers and sentence-transformers, data builders, bad input."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

from llmbook.bert import (
    IGNORE_INDEX,
    Bert,
    BertConfig,
    BertForPreTraining,
    BertForSequenceClassification,
    batch_encode,
    classify_accuracy,
    classify_correct,
    fine_tune,
    load_checkpoint,
    make_nsp_pairs,
    mask_tokens,
    mean_pool,
    minilm_dir,
    save_checkpoint,
    speeches,
)
from llmbook.tokenizers.wordpiece import WordPiece

SENTENCES = [
    "The cat sat on the mat.",
    "A dog is playing in the garden with a red ball.",
    "Stock markets fell sharply on Monday.",
    "Tokenization is fun!",
]


@pytest.fixture(scope="module")
def minilm():
    return Bert.from_pretrained_minilm()


@pytest.fixture(scope="module")
def wp():
    return WordPiece.minilm()


# ------------------------------------------------------------------ reference equivalence
def test_minilm_matches_transformers_bertmodel(minilm, wp):
    from transformers import BertModel

    hf = BertModel.from_pretrained(str(minilm_dir()), local_files_only=True).eval()
    b = batch_encode(wp, SENTENCES[:2], SENTENCES[2:], max_len=64)  # pairs, padded: segments and masks both matter
    with torch.no_grad():
        ours = minilm(**b, output_hidden_states=True)
        ref = hf(**b, output_hidden_states=True)
    real = b["attention_mask"].bool()
    assert len(ours.hidden_states) == len(ref.hidden_states) == 7
    for h_ours, h_ref in zip(ours.hidden_states, ref.hidden_states):
        torch.testing.assert_close(h_ours[real], h_ref[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.pooled, ref.pooler_output, atol=1e-5, rtol=0)
    # The explicit attention path (return_attention=True) gives the same states and HF's weights.
    with torch.no_grad():
        explicit = minilm(**b, return_attention=True)
    torch.testing.assert_close(explicit.last_hidden_state[real], ours.last_hidden_state[real], atol=1e-5, rtol=0)
    assert len(explicit.attentions) == 6 and explicit.attentions[0].shape == (2, 12, b["input_ids"].shape[1], b["input_ids"].shape[1])
    torch.testing.assert_close(explicit.attentions[0].sum(-1), torch.ones(2, 12, b["input_ids"].shape[1]))


def test_minilm_sentence_embeddings_match_sentence_transformers(minilm, wp):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(minilm_dir()), device="cpu")
    ref = torch.as_tensor(st.encode(SENTENCES, convert_to_numpy=True))
    b = batch_encode(wp, SENTENCES, max_len=256)
    with torch.no_grad():
        emb = mean_pool(minilm(**b).last_hidden_state, b["attention_mask"])
    emb = torch.nn.functional.normalize(emb, dim=-1)
    torch.testing.assert_close(emb, ref, atol=1e-5, rtol=0)


# ------------------------------------------------------------------ masking
def test_masking_proportions():
    g = torch.Generator().manual_seed(0)
    V, cls, sep, pad, mask = 1000, 2, 3, 0, 4
    specials = [0, 1, 2, 3, 4]
    ids = torch.randint(5, V, (64, 40), generator=g)
    ids[:, 0], ids[:, 20], ids[:, 39], ids[:8, 30:] = cls, sep, sep, pad
    n_candidates = n_chosen = n_mask = n_random = n_same = 0
    for _ in range(50):  # 50 batches, ~120,000 candidate tokens
        x, y = mask_tokens(ids, mask_id=mask, vocab_size=V, special_ids=specials, generator=g)
        chosen = y != IGNORE_INDEX
        assert not chosen[torch.isin(ids, torch.tensor(specials))].any(), "a special token was chosen"
        assert torch.equal(y[chosen], ids[chosen])  # labels are the original ids
        assert torch.equal(x[~chosen], ids[~chosen])  # unchosen tokens are untouched
        n_candidates += int((~torch.isin(ids, torch.tensor(specials))).sum())
        n_chosen += int(chosen.sum())
        n_mask += int((x[chosen] == mask).sum())
        n_same += int((x[chosen] == ids[chosen]).sum())
        n_random += int(((x[chosen] != mask) & (x[chosen] != ids[chosen])).sum())
        assert not torch.isin(x[chosen & (x != mask)], torch.tensor([0, 1, 2, 3])).any()  # random never special
    # Tolerances: 4 standard deviations of a binomial with these counts is < 0.005 / 0.01.
    assert abs(n_chosen / n_candidates - 0.15) < 0.005
    assert abs(n_mask / n_chosen - 0.8) < 0.01
    # A random draw hits the original token with probability 1/995: count it under "same".
    assert abs(n_random / n_chosen - 0.1) < 0.01
    assert abs(n_same / n_chosen - 0.1) < 0.01


def test_masking_bad_input():
    ids = torch.tensor([[1, 5, 6]])
    with pytest.raises(ValueError, match="mlm_probability"):
        mask_tokens(ids, mask_id=3, vocab_size=10, special_ids=[0], mlm_probability=1.5)
    with pytest.raises(ValueError, match="mask_id"):
        mask_tokens(ids, mask_id=30, vocab_size=10, special_ids=[0])
    with pytest.raises(TypeError, match="input_ids"):
        mask_tokens([[1, 2]], mask_id=3, vocab_size=10, special_ids=[0])


# ------------------------------------------------------------------ NSP
def test_nsp_pairs_half_real_and_really_adjacent():
    from llmbook.data import load_text

    docs = speeches(load_text("shakespeare"))
    assert len(docs) > 10_000
    pairs = make_nsp_pairs(docs, 20_000, seed=0)
    frac = sum(p.is_next for p in pairs) / len(pairs)
    assert abs(frac - 0.5) < 0.015  # 4.2 standard deviations of Binomial(20000, 0.5)
    for p in pairs:
        d, i = p.where_a
        assert docs[d][i] == p.a
        if p.is_next:
            assert p.where_b == (d, i + 1) and p.b == docs[d][i + 1]
        else:
            d2, j = p.where_b
            assert d2 != d and docs[d2][j] == p.b
    assert make_nsp_pairs(docs, 50, seed=3) == make_nsp_pairs(docs, 50, seed=3)


def test_nsp_bad_input():
    with pytest.raises(ValueError, match="documents"):
        make_nsp_pairs([["only one"]], 10)
    with pytest.raises(ValueError, match="n_pairs"):
        make_nsp_pairs([["a", "b"], ["c", "d"]], 0)


# ------------------------------------------------------------------ bad input to the model
def test_too_long_input_errors_unless_truncate():
    model = Bert(BertConfig.tiny(vocab_size=50, max_position=16)).eval()
    ids = torch.randint(0, 50, (2, 20))
    with pytest.raises(ValueError, match="position table has 16"):
        model(ids)
    out = model(ids, truncate=True)
    assert out.last_hidden_state.shape == (2, 16, 128)
    torch.testing.assert_close(out.last_hidden_state, model(ids[:, :16]).last_hidden_state)


def test_segment_ids_must_be_0_or_1():
    model = Bert(BertConfig.tiny(vocab_size=50)).eval()
    ids = torch.randint(0, 50, (1, 6))
    with pytest.raises(ValueError, match="token_type_ids.*0.*or 1"):
        model(ids, torch.tensor([[0, 0, 1, 2, 1, 1]]))
    with pytest.raises(ValueError, match="token_type_ids"):
        model(ids, torch.tensor([[0, -1, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="input_ids"):
        model(torch.tensor([[1, 2, 99]]))
    with pytest.raises(TypeError, match="input_ids"):
        model(torch.rand(1, 4))


def test_checkpoint_shape_mismatch_names_the_tensor(tmp_path, minilm):
    small = BertForPreTraining(BertConfig.tiny(vocab_size=60))
    path = tmp_path / "tiny.safetensors"
    save_checkpoint(small, path, small.config, extra={"note": "x"})
    loaded, extra = load_checkpoint(path)
    assert extra == {"note": "x"}
    assert loaded.mlm.word_embeddings.weight is loaded.bert.embeddings.word.weight  # tie survives
    torch.testing.assert_close(loaded.bert.embeddings.word.weight, small.bert.embeddings.word.weight.half().float())
    # A MiniLM state dict into a tiny config: the error names the tensor.
    from safetensors.torch import load_file

    state = load_file(str(minilm_dir() / "model.safetensors"))
    with pytest.raises(ValueError, match=r"embeddings\.word_embeddings\.weight.*\(30522, 384\)"):
        Bert(BertConfig.tiny(vocab_size=30522)).load_hf_state_dict(state)
    # A corrupt file gives a clear error.
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="safetensors"):
        load_checkpoint(bad)


def test_config_validation():
    with pytest.raises(ValueError, match="divisible"):
        BertConfig(hidden_size=100, n_heads=3)
    with pytest.raises(ValueError, match="n_layers"):
        BertConfig(n_layers=0)
    assert BertConfig.minilm().hidden_size == 384 and BertConfig.minilm().layer_norm_eps == 1e-12


# ------------------------------------------------------------------ fine-tuning
def test_fine_tuning_tiny_model_beats_chance():
    """A tiny BERT from scratch learns a fixed toy sentiment subset from seed 0 (a few seconds)."""
    torch.manual_seed(0)
    wp = WordPiece(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        + "good great love happy fine nice bad awful hate sad poor terrible the movie was day food is".split()
    )
    pos = "good great love happy fine nice".split()
    neg = "bad awful hate sad poor terrible".split()
    import random

    rng = random.Random(0)
    data = []
    for _ in range(600):
        label = rng.randrange(2)
        word = rng.choice(pos if label else neg)
        data.append((f"the {rng.choice(['movie', 'day', 'food'])} was {word}", label))
    train, val = data[:500], data[500:]
    config = BertConfig(vocab_size=len(wp.vocab), hidden_size=32, n_layers=1, n_heads=2, intermediate_size=64, max_position=16)
    model = BertForSequenceClassification(config)
    before = classify_accuracy(model, wp, val)
    fine_tune(model, wp, train, epochs=3, lr=3e-3, batch_size=32, max_len=16, seed=0)
    after = classify_accuracy(model, wp, val)
    assert after > 0.85 and after > before + 0.2, (before, after)  # chance is 0.5
    hits = classify_correct(model, wp, val, batch_size=7)             # per item, batches of any size
    assert hits.shape == (len(val),) and hits.dtype == torch.bool
    assert int(hits.sum()) / len(val) == after
    with pytest.raises(ValueError, match="data"):
        classify_correct(model, wp, [])


def test_mean_pool_bad_input():
    with pytest.raises(ValueError, match="hidden"):
        mean_pool(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="attention_mask"):
        mean_pool(torch.zeros(1, 3, 4), torch.ones(1, 2))


def test_fused_layernorm_equals_chapter4_layernorm():
    from llmbook.bert import FusedLayerNorm
    from llmbook.layers import LayerNorm

    torch.manual_seed(0)
    slow, fast = LayerNorm(24, eps=1e-12), FusedLayerNorm(24, eps=1e-12)
    with torch.no_grad():
        slow.weight.normal_(), slow.bias.normal_()
    fast.load_state_dict(slow.state_dict())
    x = torch.randn(3, 7, 24) * 5 + 2
    torch.testing.assert_close(fast(x), slow(x), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------ pre-training learns
def test_pretraining_beats_most_frequent_token_baseline():
    """Masked-LM plumbing end to end (masking, labels, loss at the chosen positions, tied decoder,
    warm-up schedule): on counting sequences (each token is the previous one + 1, mod 20) a tiny
    BERT must use the context, so its held-out masked-token accuracy must far exceed the
    most-frequent-token baseline (about 1/20) that a collapsed model would score."""
    n_sym, first, T = 20, 5, 12
    config = BertConfig(vocab_size=first + n_sym, hidden_size=32, n_layers=2, n_heads=2, intermediate_size=64, max_position=T)
    specials = list(range(first))  # [PAD] [UNK] [CLS] [SEP] [MASK]

    def batch(n, g):
        start = torch.randint(n_sym, (n, 1), generator=g)
        ids = first + (start + torch.arange(T - 2)) % n_sym
        ids = torch.cat([torch.full((n, 1), 2), ids, torch.full((n, 1), 3)], 1)
        x, y = mask_tokens(ids, mask_id=4, vocab_size=config.vocab_size, special_ids=specials, generator=g)
        return {"input_ids": x, "token_type_ids": torch.zeros_like(x), "attention_mask": torch.ones_like(x),
                "mlm_labels": y, "nsp_labels": torch.zeros(n, dtype=torch.long)}

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: a second thread only waits (several times slower on a busy CPU)
    try:
        acc, baseline = _train_counting(config, specials, batch)
    finally:
        torch.set_num_threads(threads)
    assert baseline < 0.1 and acc > 0.6, (baseline, acc)


def _train_counting(config, specials, batch):
    from llmbook.bert import linear_warmup_decay, pretraining_accuracy

    torch.manual_seed(0)
    model = BertForPreTraining(config)
    g = torch.Generator().manual_seed(0)
    val = batch(256, torch.Generator().manual_seed(1))
    targets = val["mlm_labels"][val["mlm_labels"] != IGNORE_INDEX]
    baseline = (targets == torch.mode(targets).values).float().mean().item()
    steps = 500  # a few seconds on one thread; 0.81 measured
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = linear_warmup_decay(opt, warmup_steps=20, total_steps=steps)
    for _ in range(steps):
        b = batch(32, g)
        loss = model(b["input_ids"], b["token_type_ids"], b["attention_mask"], mlm_labels=b["mlm_labels"]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    acc, _ = pretraining_accuracy(model, val)
    return acc, baseline


def test_linear_warmup_decay_bad_input():
    from llmbook.bert import linear_warmup_decay

    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        linear_warmup_decay(opt, warmup_steps=0, total_steps=10)
    with pytest.raises(ValueError, match="total_steps"):
        linear_warmup_decay(opt, warmup_steps=1, total_steps=0)
    with pytest.raises(ValueError, match="floor"):
        linear_warmup_decay(opt, warmup_steps=1, total_steps=10, floor=2.0)
