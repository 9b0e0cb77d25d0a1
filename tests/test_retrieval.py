"""Retrieval: passages, exact cosine search, MiniLM embeddings, and the kNN-LM."""

import math

import pytest
import torch
import torch.nn.functional as F

from llmbook.data import load_text
from llmbook.gpt import GPT, GPTConfig
from llmbook.retrieval import (
    BM25Index, Datastore, MiniLMEmbedder, bm25_words, PassageIndex, build_datastore, knn_distribution, knn_lm_loss, knn_log_probs,
    knn_search, lm_states, mixture_loss, split_passages,
)


# ------------------------------------------------------------------ passages and the index
def test_split_passages_keeps_every_word_and_the_length_limit():
    text = load_text("shakespeare")[:20_000]
    for max_chars in (40, 200, 1000):
        ps = split_passages(text, max_chars=max_chars)
        assert all(0 < len(p) <= max_chars for p in ps)
        assert " ".join(ps).split() == text.split()  # nothing lost, nothing added
    speeches = split_passages(text, max_chars=10_000)
    assert speeches[0].startswith("THESEUS:\n") and speeches[1].startswith("HIPPOLYTA:\n")
    assert split_passages("one two three four", max_chars=8) == ["one two", "three", "four"]
    assert split_passages("abcdefghij", max_chars=4) == ["abcd", "efgh", "ij"]
    assert split_passages("a\n\nlonger one", max_chars=20, min_chars=3) == ["longer one"]


def test_split_passages_errors():
    with pytest.raises(TypeError, match="text must be a str"):
        split_passages(b"bytes")
    with pytest.raises(ValueError, match="max_chars must be >= 1"):
        split_passages("x", max_chars=0)
    with pytest.raises(ValueError, match="min_chars=5 must be <= max_chars=4"):
        split_passages("x", max_chars=4, min_chars=5)


def test_index_search_equals_brute_force():
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(50, 8, generator=g) * torch.rand(50, 1, generator=g) * 5  # any scale: cosine ignores it
    index = PassageIndex([f"p{i}" for i in range(50)], emb)
    q = torch.randn(6, 8, generator=g)
    cos = F.cosine_similarity(q.unsqueeze(1), emb.unsqueeze(0), dim=-1)  # (6, 50)
    hits = index.search(q, k=5)
    for row, c in zip(hits, cos):
        assert [h.index for h in row] == c.topk(5).indices.tolist()
        assert [h.score for h in row] == pytest.approx(c.topk(5).values.tolist(), abs=1e-5)
        assert row[0].passage == f"p{row[0].index}"


def test_index_errors():
    index = PassageIndex(["a", "b"], torch.eye(2))
    with pytest.raises(ValueError, match="k=3 is more than the 2 passages"):
        index.search(torch.ones(1, 2), k=3)
    with pytest.raises(ValueError, match="no embed function"):
        index.search("text", k=1)
    with pytest.raises(ValueError, match=r"query embeddings must be \(M, D=2\)"):
        index.search(torch.ones(1, 3), k=1)
    with pytest.raises(ValueError, match=r"embeddings must be an \(N=3, D\)"):
        PassageIndex(["a", "b", "c"], torch.eye(2))
    with pytest.raises(ValueError, match="passages must be a non-empty list"):
        PassageIndex([], torch.zeros(0, 2))


@pytest.fixture(scope="module")
def embedder():
    return MiniLMEmbedder()


def test_minilm_retrieves_the_passage_a_query_was_cut_from(embedder):
    passages = split_passages(load_text("shakespeare")[:60_000], max_chars=300, min_chars=120)[:60]
    index = PassageIndex.build(passages, embedder)
    assert index.embeddings.shape == (60, 384)
    torch.testing.assert_close(index.embeddings.norm(dim=-1), torch.ones(60))
    # the middle half of a passage's words as the query
    queries = [" ".join(w[len(w) // 4: 3 * len(w) // 4]) for w in (p.split() for p in passages)]
    hits = index.search(queries, k=1)
    assert [h[0].index for h in hits] == list(range(60))
    assert all(h[0].passage == p for h, p in zip(hits, passages))


def test_minilm_embedding_does_not_depend_on_padding(embedder):
    alone = embedder(["To be, or not to be"])
    batched = embedder(["To be, or not to be", "a much longer sentence that forces padding onto the first one"])
    torch.testing.assert_close(batched[0], alone[0], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="texts must be a non-empty list"):
        embedder("not a list")
    with pytest.raises(ValueError, match="max_len must be >= 3"):
        MiniLMEmbedder(max_len=2)


# ------------------------------------------------------------------ kNN-LM
@pytest.fixture(scope="module")
def tiny_gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig.baby(vocab_size=13, n_layer=2, n_head=2, d_model=16, d_ff=32, block_size=8)).eval()


def test_lm_states_cover_every_position_once(tiny_gpt):
    ids = torch.randint(0, 13, (45,), generator=torch.Generator().manual_seed(1))
    for stride in (1, 3, 8):
        st = lm_states(tiny_gpt, ids, stride=stride)
        assert torch.equal(st.targets, ids[1:])
        assert st.hidden.shape == (44, 16) and st.logits.shape == (44, 13)


def test_knn_lm_with_lambda_zero_is_the_language_model(tiny_gpt):
    ids = torch.randint(0, 13, (17,), generator=torch.Generator().manual_seed(2))  # exactly two windows of 8
    store = build_datastore(tiny_gpt, torch.randint(0, 13, (100,), generator=torch.Generator().manual_seed(3)))
    with torch.no_grad():
        direct = tiny_gpt(torch.stack([ids[:8], ids[8:16]]), torch.stack([ids[1:9], ids[9:17]]))[1]
    losses = knn_lm_loss(tiny_gpt, ids, store, [0.0, 0.5], k=4, stride=8)
    assert losses[0.0] == pytest.approx(float(direct), abs=1e-6)
    assert losses[0.5] != losses[0.0]


def test_knn_lm_memorises_its_own_datastore():
    # Querying the text the datastore was built from: the nearest key is the position itself
    # (all tokens differ, so no two positions share a context and a hidden state).
    torch.manual_seed(0)
    gpt = GPT(GPTConfig.baby(vocab_size=256, n_layer=2, n_head=2, d_model=16, d_ff=32, block_size=8)).eval()
    ids = torch.randperm(256, generator=torch.Generator().manual_seed(4))[:200]
    store = build_datastore(gpt, ids, stride=8)
    assert len(store) == 199 and torch.equal(store.values, ids[1:])
    losses = knn_lm_loss(gpt, ids, store, [0.0, 1.0], k=1, stride=8)
    assert losses[1.0] == pytest.approx(0.0, abs=1e-6)
    assert losses[0.0] > 1.0


def test_knn_search_and_distribution_against_brute_force():
    g = torch.Generator().manual_seed(5)
    store = Datastore(torch.randn(300, 6, generator=g), torch.randint(0, 9, (300,), generator=g))
    q = torch.randn(20, 6, generator=g)
    d, v = knn_search(q, store, k=7, chunk=6)  # several chunks
    full = torch.cdist(q, store.keys) ** 2  # (20, 300)
    ref = full.topk(7, largest=False)
    torch.testing.assert_close(d, ref.values, atol=1e-4, rtol=1e-4)
    assert torch.equal(v, store.values[ref.indices])
    p = knn_distribution(d, v, 9, temperature=2.0)
    torch.testing.assert_close(p.sum(-1), torch.ones(20))
    w = torch.softmax(-ref.values / 2.0, -1)
    want = torch.stack([torch.zeros(9).index_add(0, store.values[ref.indices[i]], w[i]) for i in range(20)])
    torch.testing.assert_close(p, want)
    torch.testing.assert_close(knn_log_probs(q, store, 9, k=7, temperature=2.0).exp(), want)


def test_mixture_loss_is_the_mixture_in_probability_space():
    lm, kn = torch.tensor([0.2, 0.5]), torch.tensor([0.9, 0.0])
    lam = 0.3
    want = -((lam * kn + (1 - lam) * lm).log()).mean()
    assert mixture_loss(lm.log(), kn.log(), lam) == pytest.approx(float(want))
    assert mixture_loss(lm.log(), kn.log(), 0.0) == pytest.approx(float(-lm.log().mean()))
    assert math.isinf(mixture_loss(lm.log(), kn.log(), 1.0))  # p_knn = 0 for the second token


def test_knn_errors(tiny_gpt):
    store = Datastore(torch.zeros(5, 16), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="k=6 is more than the 5 entries"):
        knn_search(torch.zeros(1, 16), store, k=6)
    with pytest.raises(ValueError, match=r"queries must be \(M, D=16\)"):
        knn_search(torch.zeros(1, 4), store, k=1)
    with pytest.raises(ValueError, match="temperature must be a number > 0"):
        knn_distribution(torch.zeros(1, 2), torch.zeros(1, 2, dtype=torch.long), 3, temperature=0)
    with pytest.raises(ValueError, match=r"values must lie in \[0, 3\) \(token ids"):
        knn_distribution(torch.zeros(1, 2), torch.full((1, 2), 3), 3)
    with pytest.raises(ValueError, match="lam must be a number in"):
        mixture_loss(torch.zeros(2), torch.zeros(2), 1.5)
    with pytest.raises(ValueError, match="each lambda must be a number in"):
        knn_lm_loss(tiny_gpt, torch.zeros(20, dtype=torch.long), store, [-0.1])
    with pytest.raises(ValueError, match="lambdas is empty"):
        knn_lm_loss(tiny_gpt, torch.zeros(20, dtype=torch.long), store, [])
    with pytest.raises(ValueError, match="need more than block_size=8"):
        build_datastore(tiny_gpt, torch.zeros(8, dtype=torch.long))
    with pytest.raises(ValueError, match="stride=9 must be <= block_size=8"):
        build_datastore(tiny_gpt, torch.zeros(20, dtype=torch.long), stride=9)
    with pytest.raises(ValueError, match="ids must be a 1-D tensor"):
        lm_states(tiny_gpt, torch.zeros(2, 20, dtype=torch.long))
    with pytest.raises(ValueError, match=r"values must be an \(N=5,\)"):
        Datastore(torch.zeros(5, 16), torch.zeros(4))


# ------------------------------------------------------------------ BM25, the lexical baseline
def test_bm25_equals_a_hand_computation():
    bm = BM25Index(["the cat sat", "the dog", "cat cat dog bird"])
    # N = 3, "cat" in 2 passages: idf = log(1 + (3 - 2 + 0.5) / (2 + 0.5)) = log 1.6; avgdl = 9 / 3 = 3.
    idf = math.log(1.6)
    k1, b = 1.5, 0.75
    p0 = idf * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 3 / 3))    # tf 1, 3 words
    p2 = idf * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 4 / 3))    # tf 2, 4 words
    assert p0 == pytest.approx(0.47000, abs=1e-5) and p2 == pytest.approx(0.60645, abs=1e-5)
    got = bm.scores("cat")[0].tolist()
    assert got == pytest.approx([p0, 0.0, p2], abs=1e-12)
    # Two query words add their terms; a word seen nowhere adds nothing; case and punctuation do not matter.
    idf_dog = math.log(1 + 1.5 / 2.5)
    p1_dog = idf_dog * 1 * 2.5 / (1 + k1 * (1 - b + b * 2 / 3))
    assert bm.scores(["Cat, DOG! unicorn"])[0][1].item() == pytest.approx(p1_dog, abs=1e-12)
    assert [h.index for h in bm.search("cat", k=3)[0]] == [2, 0, 1]


def test_bm25_equals_the_formula_written_per_passage():
    text = load_text("shakespeare")[:30_000]
    passages = split_passages(text, max_chars=200, min_chars=40)
    bm = BM25Index(passages, k1=1.2, b=0.6)
    words = [bm25_words(p) for p in passages]
    avgdl = sum(map(len, words)) / len(words)
    query = "my lord the duke of Athens and his daughter"
    expect = []
    for w_d in words:
        score = 0.0
        for w in bm25_words(query):
            n_w = sum(w in set(x) for x in words)
            if n_w == 0:
                continue
            tf = w_d.count(w)
            idf = math.log(1 + (len(words) - n_w + 0.5) / (n_w + 0.5))
            score += idf * tf * 2.2 / (tf + 1.2 * (1 - 0.6 + 0.6 * len(w_d) / avgdl))
        expect.append(score)
    assert bm.scores(query)[0].tolist() == pytest.approx(expect, rel=1e-12, abs=1e-12)
    hits = bm.search(query, k=5)[0]
    assert [h.score for h in hits] == sorted(expect, reverse=True)[:5]


def test_bm25_finds_a_cut_out_piece_and_breaks_ties_in_order():
    passages = split_passages(load_text("shakespeare")[:30_000], max_chars=200, min_chars=60)
    bm = BM25Index(passages)
    for i in (3, 17, 40):
        words = passages[i].split()
        assert bm.search(" ".join(words[len(words) // 4: 3 * len(words) // 4]), k=1)[0][0].index == i
    same = BM25Index(["a b", "c d", "a b"])
    assert [h.index for h in same.search("a", k=2)[0]] == [0, 2]


def test_bm25_bad_input():
    with pytest.raises(ValueError, match="passages"):
        BM25Index([])
    with pytest.raises(ValueError, match="passages"):
        BM25Index("one string")
    with pytest.raises(ValueError, match="k1"):
        BM25Index(["a"], k1=-1)
    with pytest.raises(ValueError, match="b must"):
        BM25Index(["a"], b=1.5)
    bm = BM25Index(["a b", "c"])
    with pytest.raises(ValueError, match="k=3"):
        bm.search("a", k=3)
    with pytest.raises(ValueError, match="queries"):
        bm.scores([1, 2])
    with pytest.raises(TypeError, match="text"):
        bm25_words(None)
