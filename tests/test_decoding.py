"""Decoding: beam search vs greedy, logit processors vs transformers, speculative decoding."""

import math

import pytest
import torch
from scipy import stats

from llmbook.decoding import (
    accept_reject, beam_search, expected_tokens_per_round, greedy_decode, length_penalty, min_p_filter,
    repetition_penalty, speculative_generate,
    truncated_draft,
)
from llmbook.gpt import GPT, GPTConfig
from llmbook.llama import Llama, LlamaConfig, generate


class Bigram:
    """A hand-made "model": the next token's logits depend only on the last token (a table)."""

    def __init__(self, logits: torch.Tensor):
        self.table = logits  # (V, V): row = previous token

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        return self.table[ids]  # (B, T, V)


def _random_llama(seed: int = 0, n_layer: int = 2) -> Llama:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=40, d_model=32, n_layer=n_layer, n_head=4, n_kv_head=2, d_ff=64, max_seq_len=128)
    m = Llama(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)  # spread the logits so that the argmax changes along a sequence
    return m


# ----------------------------------------------------------------------------- beam search


def _trap_model() -> Bigram:
    # From token 0 the greedy choice is token 1 (0.6 > 0.4), but after 1 every continuation
    # is unlikely (0.25 each), while after 2 token 3 has probability 0.9.
    probs = torch.full((5, 5), 0.01)
    probs[0] = torch.tensor([0.0, 0.6, 0.4, 0.0, 0.0])
    probs[1] = torch.tensor([0.25, 0.25, 0.25, 0.25, 0.0])
    probs[2] = torch.tensor([0.025, 0.025, 0.025, 0.9, 0.025])
    probs[3] = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2])
    probs[4] = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2])
    return Bigram(torch.log(probs + 1e-12))


def _logprob(model: Bigram, prompt: list[int], new: list[int]) -> float:
    seq = torch.tensor([prompt + new])
    logp = torch.log_softmax(model(seq)[0, :-1].double(), -1)
    return float(sum(logp[len(prompt) - 1 + i, t] for i, t in enumerate(new)))


def test_beam_search_beats_greedy_on_the_trap():
    m = _trap_model()
    greedy = greedy_decode(m, torch.tensor([0]), 2).tolist()
    beam = beam_search(m, torch.tensor([0]), 2, beam_width=2)
    assert greedy == [1, 0]  # 0.6 * 0.25 = 0.15 (first of four ties)
    assert beam.tokens.tolist() == [2, 3]  # 0.4 * 0.9 = 0.36
    assert beam.logprob == pytest.approx(math.log(0.36), abs=1e-4)
    assert _logprob(m, [0], beam.tokens.tolist()) > _logprob(m, [0], greedy) + 0.8  # log(0.36/0.15) = 0.88


@pytest.mark.parametrize("model_kind", ["llama", "gpt", "bigram"])
def test_beam_width_one_is_greedy(model_kind):
    torch.manual_seed(1)
    if model_kind == "llama":
        m = _random_llama()
        ref = generate(m, torch.tensor([[3, 7, 1]]), 10)[0, 3:]
    elif model_kind == "gpt":
        m = GPT(GPTConfig(vocab_size=30, block_size=32, n_layer=2, n_head=2, d_model=16, d_ff=32)).eval()
        ref = m.generate(torch.tensor([[3, 7, 1]]), 10, temperature=0)[0, 3:]
    else:
        m = Bigram(torch.randn(30, 30) * 3)
        ref = greedy_decode(m, torch.tensor([3, 7, 1]), 10)
    hyp = beam_search(m, torch.tensor([3, 7, 1]), 10, beam_width=1)
    assert torch.equal(hyp.tokens, ref)
    # Beam search never finds a less probable sequence than greedy (without EOS, same length).
    wide = beam_search(m, torch.tensor([3, 7, 1]), 10, beam_width=4)
    assert wide.logprob >= hyp.logprob - 1e-5


def test_length_penalty_prefers_longer_hypothesis():
    # EOS (token 4) right away has probability 0.5; continuing with 1, 2 then EOS has 0.45 * 0.9 * 0.9 * 0.9.
    probs = torch.full((5, 5), 1e-9)
    probs[0] = torch.tensor([0.0, 0.45, 0.05, 0.0, 0.5])
    probs[1] = torch.tensor([0.0, 0.0, 0.9, 0.05, 0.05])
    probs[2] = torch.tensor([0.0, 0.0, 0.0, 0.9, 0.1])
    probs[3] = torch.tensor([0.0, 0.0, 0.0, 0.1, 0.9])
    probs[4] = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2])
    m = Bigram(torch.log(probs + 1e-12))
    short = beam_search(m, torch.tensor([0]), 6, beam_width=3, length_penalty=0.0, eos_id=4)
    assert short.tokens.tolist() == [4]
    lp = math.log(0.45 * 0.9 * 0.9 * 0.9)
    assert lp / length_penalty(4, 2.0) > math.log(0.5) / length_penalty(1, 2.0)  # the closed form says: long wins
    long = beam_search(m, torch.tensor([0]), 6, beam_width=3, length_penalty=2.0, eos_id=4)
    assert long.tokens.tolist() == [1, 2, 3, 4]
    assert long.score == pytest.approx(lp / length_penalty(4, 2.0), abs=1e-4)


def test_beam_search_bad_inputs():
    m = _trap_model()
    with pytest.raises(ValueError, match="beam_width"):
        beam_search(m, torch.tensor([0]), 2, beam_width=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        beam_search(m, torch.tensor([0]), 0, beam_width=2)
    with pytest.raises(TypeError, match="prompt_ids"):
        beam_search(m, [0], 2, beam_width=2)
    with pytest.raises(ValueError, match="prompt_ids"):
        beam_search(m, torch.zeros(2, 3, dtype=torch.long), 2, beam_width=2)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(m, torch.tensor([0]), 2, beam_width=2, length_penalty=float("nan"))
    with pytest.raises(ValueError, match="eos_id"):
        beam_search(m, torch.tensor([0]), 2, beam_width=2, eos_id=99)
    with pytest.raises(TypeError, match="model"):
        beam_search(object(), torch.tensor([0]), 2, beam_width=2)
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        beam_search(lambda ids: ids.float(), torch.tensor([0]), 2, beam_width=2)


# ----------------------------------------------------------------------------- logit processors


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("penalty", [0.7, 1.0, 1.3, 2.5])
def test_repetition_penalty_matches_transformers(seed, penalty):
    from transformers import RepetitionPenaltyLogitsProcessor

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 50, generator=g) * 4
    prev = torch.randint(0, 50, (3, 12), generator=g)
    ref = RepetitionPenaltyLogitsProcessor(penalty)(prev, logits.clone())
    ours = repetition_penalty(logits, prev, penalty)
    assert torch.equal(ours, ref)
    assert torch.equal(logits, logits.clone())  # input untouched


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("p", [0.0, 0.05, 0.1, 0.3, 0.9, 1.0])
def test_min_p_matches_transformers(seed, p):
    from transformers import MinPLogitsWarper

    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(4, 64, generator=g) * 3
    if p == 0.0:
        ours = min_p_filter(logits, p)
        assert torch.equal(ours, logits)
        return
    ref = MinPLogitsWarper(min_p=p)(torch.zeros(4, 1, dtype=torch.long), logits.clone())
    ours = min_p_filter(logits, p)
    assert torch.equal(torch.isfinite(ours), torch.isfinite(ref))
    assert torch.equal(ours[torch.isfinite(ours)], ref[torch.isfinite(ref)])
    assert torch.isfinite(ours).sum(-1).min() >= 1


def test_processors_bad_inputs():
    logits = torch.randn(2, 5)
    with pytest.raises(ValueError, match="penalty"):
        repetition_penalty(logits, torch.zeros(2, 1, dtype=torch.long), 0.0)
    with pytest.raises(ValueError, match="previous_ids"):
        repetition_penalty(logits, torch.zeros(3, 1, dtype=torch.long), 1.2)
    with pytest.raises(TypeError, match="previous_ids"):
        repetition_penalty(logits, torch.zeros(2, 1), 1.2)
    with pytest.raises(TypeError, match="logits"):
        repetition_penalty(torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 1, dtype=torch.long), 1.2)
    with pytest.raises(ValueError, match="p must"):
        min_p_filter(logits, 1.5)
    with pytest.raises(TypeError, match="logits"):
        min_p_filter([1.0, 2.0], 0.1)


# ----------------------------------------------------------------------------- speculative decoding


def test_speculative_greedy_equals_target_greedy_llama():
    target = _random_llama(0, n_layer=3)
    ids = torch.tensor([[5, 9, 2, 17]])
    ref = generate(target, ids, 30)[0, ids.shape[1]:]
    for draft in (truncated_draft(target, 1), _random_llama(7, n_layer=1), target):
        for k in (1, 3, 5):
            out = speculative_generate(target, draft, ids, 30, k=k, temperature=0)
            assert torch.equal(out.tokens, ref), (k, draft.__class__.__name__)
            assert 0 <= out.accepted <= out.proposed
    same = speculative_generate(target, target, ids, 30, k=4, temperature=0)
    assert same.acceptance_rate == 1.0 and same.target_calls == 6  # 5 tokens per round


def test_speculative_greedy_equals_target_greedy_callables():
    g = torch.Generator().manual_seed(3)
    target, draft = Bigram(torch.randn(20, 20, generator=g) * 2), Bigram(torch.randn(20, 20, generator=g) * 2)
    ref = greedy_decode(target, torch.tensor([4]), 25)
    out = speculative_generate(target, draft, torch.tensor([4]), 25, k=4, temperature=0)
    assert torch.equal(out.tokens, ref)


def _two_token_counts(target, draft, n: int, k: int, temperature: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    V = target.table.shape[0]
    counts = torch.zeros(V * V)
    for _ in range(n):
        t = speculative_generate(target, draft, torch.tensor([0]), 2, k=k, temperature=temperature, generator=g)
        counts[t.tokens[0] * V + t.tokens[1]] += 1
    return counts


@pytest.mark.parametrize("k", [1, 2])
def test_speculative_sampled_distribution_equals_target(k):
    """Chi-square test of the first two tokens' joint law against the target's exact one.

    Vocabulary of 3, draft far from the target (so rejections, residual draws and, with
    k = 2, bonus tokens all occur). 4000 samples, fixed seed; the test fails when the
    chi-square p-value is below 0.001 (for an exact sampler that happens once in 1000 seeds).
    """
    g = torch.Generator().manual_seed(11)
    target = Bigram(torch.randn(3, 3, generator=g) * 1.5)
    draft = Bigram(torch.randn(3, 3, generator=g) * 1.5)
    T = 0.8
    p = torch.softmax(target.table.double() / T, -1)
    expected = (p[0][:, None] * p).reshape(-1)  # P(x1, x2) = p(x1 | 0) p(x2 | x1)
    n = 4000
    counts = _two_token_counts(target, draft, n, k, T, seed=k)
    chi2, pval = stats.chisquare(counts.numpy(), (expected * n).numpy())
    assert pval > 1e-3, (counts, expected * n, pval)
    # The draft alone has a visibly different law: the same test rejects it.
    q = torch.softmax(draft.table.double() / T, -1)
    q_joint = (q[0][:, None] * q).reshape(-1)
    assert stats.chisquare(counts.numpy(), (q_joint * n).numpy()).pvalue < 1e-6


def test_speculative_acceptance_statistics():
    target = _random_llama(0, n_layer=2)
    out = speculative_generate(target, target, torch.tensor([[1, 2]]), 12, k=3, temperature=1.0,
                               generator=torch.Generator().manual_seed(0))
    assert out.accepted == out.proposed  # a draft equal to the target is always accepted (p / q = 1)
    assert out.tokens.shape == (12,)


def test_speculative_round_bookkeeping_exact():
    """A scripted greedy run: the draft is wrong after token 0 only, so every count is known by hand.

    Target: 0 -> 1 -> 2 -> 3 -> 0 ...; draft: the same cycle but 0 -> 3. From prompt [0] with k = 3:
    round 1 drafts 3, 0, 3 and the first is rejected (the target emits 1): (3 drafted, 0 accepted);
    rounds 2 and 3 start at 1, draft 2, 3, 0 correctly and add a bonus 1: (3, 3) each. 9 tokens.
    """
    nxt_t, nxt_d = [1, 2, 3, 0], [3, 2, 3, 0]
    target = Bigram(torch.nn.functional.one_hot(torch.tensor(nxt_t), 4).float() * 20)
    draft = Bigram(torch.nn.functional.one_hot(torch.tensor(nxt_d), 4).float() * 20)
    out = speculative_generate(target, draft, torch.tensor([0]), 9, k=3, temperature=0)
    assert out.tokens.tolist() == [1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert out.rounds == ((3, 0), (3, 3), (3, 3)) and out.target_calls == 3
    assert (out.proposed, out.accepted, out.rejected) == (9, 6, 1)
    assert out.acceptance_rate == 6 / 9           # the two untested drafts of round 1 count as misses
    assert out.per_token_acceptance == 6 / 7      # only tested drafts count


def _iid_acceptance_rounds(alpha: float, k: int, n_tokens: int, gen: torch.Generator):
    """Simulate speculative rounds whose tested drafts are accepted independently with probability alpha.

    Returns (drafted, accepted) per round, stopping (and drafting no further) at n_tokens, as the library does."""
    rounds, made = [], 0
    while made < n_tokens:
        kk = min(k, n_tokens - made)
        acc = 0
        while acc < kk and float(torch.rand(1, generator=gen)) < alpha:
            acc += 1
        rounds.append((kk, acc))
        made += acc + 1
    return rounds


def test_speculative_per_token_acceptance_matches_an_iid_simulation():
    """Unigram target and draft (no context): each tested draft is kept independently with
    alpha = sum_x min(p(x), q(x)) = 1 - TV(p, q). The library's per-token rate estimates alpha,
    and both rates agree with a simulation of independent acceptances at that alpha; accepted /
    proposed is biased low, and the tokens per pass match Leviathan et al.'s formula only with the
    per-token rate."""
    g = torch.Generator().manual_seed(5)
    V, k, n_tokens, runs = 6, 5, 200, 30
    p = torch.softmax(torch.randn(V, generator=g) * 1.5, -1)
    q = 0.7 * p + 0.3 * torch.softmax(torch.randn(V, generator=g) * 1.5, -1)
    alpha = float(torch.minimum(p, q).sum())
    assert 0.6 < alpha < 0.95
    target, draft = Bigram(p.log().expand(V, V).clone()), Bigram(q.log().expand(V, V).clone())
    outs = [speculative_generate(target, draft, torch.tensor([0]), n_tokens, k=k, generator=g) for _ in range(runs)]
    acc = sum(o.accepted for o in outs)
    tested = acc + sum(o.rejected for o in outs)
    per_token = acc / tested
    sd = math.sqrt(alpha * (1 - alpha) / tested)
    assert abs(per_token - alpha) < 4 * sd, (per_token, alpha, sd)
    assert all(o.per_token_acceptance == o.accepted / (o.accepted + o.rejected) for o in outs)
    sim = [r for _ in range(runs) for r in _iid_acceptance_rounds(alpha, k, n_tokens, g)]
    sim_acc, sim_drafted = sum(a for _, a in sim), sum(d for d, _ in sim)
    sim_tested = sim_acc + sum(a < d for d, a in sim)
    assert abs(per_token - sim_acc / sim_tested) < 6 * sd
    share, sim_share = acc / sum(o.proposed for o in outs), sim_acc / sim_drafted
    assert abs(share - sim_share) < 0.04 and share < alpha - 0.1   # accepted / proposed sits well below alpha
    per_pass = runs * n_tokens / sum(o.target_calls for o in outs)
    assert abs(per_pass - expected_tokens_per_round(alpha, k)) < 0.25
    assert per_pass - expected_tokens_per_round(share, k) > 0.5   # the biased rate underpredicts


def test_accept_reject_step():
    p = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    q = torch.tensor([[0.25, 0.75, 0.0], [0.6, 0.2, 0.2]])
    drafts = torch.tensor([0, 0])
    n, dist = accept_reject(p, q, drafts, torch.tensor([0.99, 0.5]))   # ratio 2 >= 1, then 1/3 < 0.5
    assert n == 1 and torch.allclose(dist, torch.tensor([0.0, 0.1, 0.3]) / 0.4)
    n, dist = accept_reject(p, q, drafts, torch.tensor([0.0, 0.0]))
    assert n == 2 and torch.equal(dist, p[2])                           # all kept: the bonus row
    with pytest.raises(ValueError, match="p must"):
        accept_reject(p[:2], q, drafts, torch.zeros(2))
    with pytest.raises(ValueError, match="u must"):
        accept_reject(p, q, drafts, torch.zeros(3))


def test_speculative_bad_inputs():
    target = Bigram(torch.randn(6, 6))
    with pytest.raises(ValueError, match="k must"):
        speculative_generate(target, target, torch.tensor([0]), 4, k=0)
    with pytest.raises(ValueError, match="k must"):
        speculative_generate(target, target, torch.tensor([0]), 4, k=-2)
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate(target, Bigram(torch.randn(6, 7)), torch.tensor([0]), 4, k=2)
    with pytest.raises(ValueError, match="temperature"):
        speculative_generate(target, target, torch.tensor([0]), 4, k=2, temperature=-1.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        speculative_generate(target, target, torch.tensor([0]), 0, k=2)
    with pytest.raises(TypeError, match="generator"):
        speculative_generate(target, target, torch.tensor([0]), 4, k=2, generator=0)


# ----------------------------------------------------------------------------- truncated draft


def test_truncated_draft_all_layers_is_the_model():
    m = _random_llama(4, n_layer=3)
    ids = torch.tensor([[1, 5, 9, 3, 3, 0]])
    with torch.no_grad():
        assert torch.equal(truncated_draft(m, 3)(ids), m(ids))
        # The first layer alone: embed -> block 0 -> norm -> head, computed by hand.
        x = m.embed_tokens(ids)
        cos, sin = m._rope_slice(0, ids.shape[1], x)
        by_hand = m.lm_head(m.norm(m.layers[0](x, cos, sin)))
        torch.testing.assert_close(truncated_draft(m, 1)(ids), by_hand, rtol=0, atol=0)
    d = truncated_draft(m, 2)
    assert d.config.n_layer == 2 and m.config.n_layer == 3
    assert d.lm_head.weight is m.lm_head.weight  # shared, not copied
    assert sum(p.numel() for p in d.parameters()) < m.num_parameters()


def test_truncated_draft_with_cache_matches_without():
    from llmbook.llama import KVCache

    m = _random_llama(5, n_layer=3)
    d = truncated_draft(m, 2)
    ids = torch.tensor([[1, 5, 9, 3, 3, 0]])
    cache = KVCache(d.config, 1, 16)
    with torch.no_grad():
        full = d(ids)
        a = d(ids[:, :4], kv_cache=cache)
        b = d(ids[:, 4:], kv_cache=cache)
    torch.testing.assert_close(torch.cat([a, b], 1), full, rtol=1e-5, atol=1e-5)


def test_truncated_draft_bad_inputs():
    m = _random_llama(0, n_layer=2)
    with pytest.raises(ValueError, match="n_layers"):
        truncated_draft(m, 3)
    with pytest.raises(ValueError, match="n_layers"):
        truncated_draft(m, 0)
    with pytest.raises(TypeError, match="llama_model"):
        truncated_draft(GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=1, d_model=8, d_ff=16)), 1)


# ----------------------------------------------------------------------------- n-gram draft


def test_ngram_draft_proposes_the_follower_of_the_latest_match():
    from llmbook.decoding import NGramDraft

    d = NGramDraft(vocab_size=10, max_ngram=2, fallback_id=9)
    assert d.propose(torch.tensor([[1, 2, 3, 1, 2, 4, 1, 2]])) == 4  # latest "1 2" was followed by 4
    assert d.propose(torch.tensor([[3, 5, 1, 6, 2, 8, 5]])) == 1  # unigram fallback: "5" -> 1
    assert d.propose(torch.tensor([[1, 2, 3]])) == 9  # no match: fallback_id
    full = d(torch.tensor([[1, 2, 1, 2]]))  # (1, 4, 10): the proposal after each prefix
    assert full.argmax(-1).tolist() == [[9, 9, 2, 1]]
    assert torch.isinf(full).sum() == 4 * 9


def test_ngram_draft_speculative_greedy_and_bad_inputs():
    from llmbook.decoding import NGramDraft

    g = torch.Generator().manual_seed(5)
    target = Bigram(torch.randn(8, 8, generator=g) * 2)
    d = NGramDraft(vocab_size=8)
    prompt = torch.tensor([1, 2, 3, 1, 2])
    out = speculative_generate(target, d, prompt, 20, k=3, temperature=0)
    assert torch.equal(out.tokens, greedy_decode(target, prompt, 20))
    with pytest.raises(ValueError, match="fallback_id"):
        NGramDraft(vocab_size=8, fallback_id=8)
    with pytest.raises(ValueError, match="max_ngram"):
        NGramDraft(vocab_size=8, max_ngram=0)


def test_expected_tokens_per_round_matches_a_simulation_and_the_perfect_draft():
    from llmbook.decoding import expected_tokens_per_round

    g = torch.Generator().manual_seed(0)
    for alpha, k in [(0.3, 2), (0.7, 4), (0.9, 6)]:
        accept = torch.rand(200_000, k, generator=g) < alpha
        prefix = accept.int().cumprod(dim=1).sum(dim=1)  # accepted drafted tokens before the first rejection
        assert (prefix + 1).double().mean().item() == pytest.approx(expected_tokens_per_round(alpha, k), rel=0.01)
    assert expected_tokens_per_round(1.0, 4) == 5.0 and expected_tokens_per_round(0.0, 3) == 1.0
    # with the target as its own draft every round yields k + 1 tokens
    target = _random_llama(0, n_layer=1)
    out = speculative_generate(target, target, torch.tensor([[1, 2]]), 20, k=4, temperature=0)
    assert out.target_calls == math.ceil(20 / expected_tokens_per_round(1.0, 4))
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens_per_round(1.5, 2)
    with pytest.raises(ValueError, match="k"):
        expected_tokens_per_round(0.5, 0)


# ----------------------------------------------------------------------------- beam search vs transformers


def _hf_twin(model: Llama):
    """transformers' LlamaForCausalLM holding the same weights as the book's ``Llama`` (no download)."""
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM

    c = model.config
    hf_cfg = HFConfig(vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff,
                      num_hidden_layers=c.n_layer, num_attention_heads=c.n_head, num_key_value_heads=c.n_kv_head,
                      max_position_embeddings=c.max_seq_len, rms_norm_eps=c.norm_eps,
                      rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
                      tie_word_embeddings=c.tie_embeddings)
    hf = LlamaForCausalLM(hf_cfg).eval()
    state = {("lm_head.weight" if k == "lm_head.weight" else "model." + k): v for k, v in model.state_dict().items()}
    state.setdefault("lm_head.weight", model.state_dict()["embed_tokens.weight"])
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    return hf


def _hf_beam(hf, ids: torch.Tensor, n: int, width: int, eos_id: int):
    """transformers' beam search with the book's conventions: raw log-probability (length_penalty=0)."""
    from transformers import GenerationConfig

    cfg = GenerationConfig(num_beams=width, do_sample=False, max_new_tokens=n, length_penalty=0.0,
                           early_stopping=False, eos_token_id=eos_id, pad_token_id=eos_id,
                           return_dict_in_generate=True, output_scores=True)
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), generation_config=cfg)
    new = out.sequences[0, ids.shape[1]:].tolist()
    if eos_id in new:
        new = new[:new.index(eos_id) + 1]  # the EOS belongs to the hypothesis; what follows is padding
    return new, float(out.sequences_scores[0])


@pytest.mark.parametrize("width", [2, 3, 5])
def test_beam_search_matches_transformers_random_llama(width):
    """Same sequence and score as transformers' generate(num_beams=k) on a random LLaMA, EOS included."""
    m = _random_llama(2, n_layer=2)
    hf = _hf_twin(m)
    eos, ended = 7, 0
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 40, (1, 5), generator=g)
        ours = beam_search(m, ids, 12, beam_width=width, eos_id=eos)
        ref, ref_score = _hf_beam(hf, ids, 12, width, eos)
        assert ours.tokens.tolist() == ref, (seed, ours.tokens.tolist(), ref)
        assert ours.score == pytest.approx(ref_score, abs=1e-4)
        ended += ref[-1] == eos
    assert 0 < ended < 6  # both kinds of ending occur: EOS and the length cap


@pytest.mark.slow
def test_beam_search_matches_transformers_smollm2():
    from llmbook.llama import load_gguf, load_tokenizer, smollm2_path

    p = smollm2_path()
    m, tok = load_gguf(p).eval(), load_tokenizer(p)
    hf = _hf_twin(m)
    for text, width in [("The capital of France is", 2), ("Once upon a time, in a small village,", 4)]:
        ids = torch.tensor([tok.encode(text)])
        ours = beam_search(m, ids, 10, beam_width=width, eos_id=tok.eos_token_id)
        ref, ref_score = _hf_beam(hf, ids, 10, width, tok.eos_token_id)
        assert ours.tokens.tolist() == ref
        assert ours.score == ours.logprob == pytest.approx(ref_score, abs=1e-4)


def test_beam_width_one_with_eos():
    """Width 1 is greedy up to the first EOS at alpha = 0; with alpha > 0 it may pass over that EOS."""
    probs = torch.full((5, 5), 1e-9)
    probs[0] = torch.tensor([0.0, 0.4, 0.0, 0.0, 0.6])  # EOS (4) is the argmax after the prompt
    probs[1] = torch.tensor([0.0, 0.0, 0.99, 0.0, 0.01])
    probs[2] = torch.tensor([0.0, 0.0, 0.0, 0.99, 0.01])
    probs[3] = torch.tensor([0.0, 0.0, 0.0, 0.01, 0.99])
    probs[4] = torch.full((5,), 0.2)
    m = Bigram(torch.log(probs + 1e-12))
    assert greedy_decode(m, torch.tensor([0]), 1).tolist() == [4]
    assert beam_search(m, torch.tensor([0]), 6, beam_width=1, eos_id=4).tokens.tolist() == [4]
    longer = beam_search(m, torch.tensor([0]), 6, beam_width=1, length_penalty=2.0, eos_id=4)
    assert longer.tokens.tolist() == [1, 2, 3, 4]  # log(0.4 * 0.99^3) / lp(4) = -0.42 > log(0.6) / lp(1) = -0.51
