"""Mixture of experts: routing, gates, the balancing loss, equality with the dense MLP, MoEGPT."""

import pytest
import torch

from llmbook.gpt import GPT, MLP, GPTConfig
from llmbook.moe import MoEFeedForward, MoEGPT, Router, count_parameters, load_balancing_loss


def tiny(**kw) -> GPTConfig:
    return GPTConfig.baby(vocab_size=11, n_layer=2, n_head=2, d_model=16, d_ff=32, block_size=12, **kw)


@pytest.mark.parametrize("n_experts,k", [(1, 1), (4, 1), (4, 2), (6, 3), (5, 5)])
def test_router_sends_each_token_to_exactly_k_experts(n_experts, k):
    torch.manual_seed(0)
    router = Router(16, n_experts, k)
    r = router(torch.randn(50, 16))
    assert r.indices.shape == (50, k) and r.gates.shape == (50, k) and r.probs.shape == (50, n_experts)
    for row in r.indices.tolist():
        assert len(set(row)) == k  # k different experts, none twice
    assert int(r.counts.sum()) == 50 * k
    assert torch.equal(r.counts, torch.bincount(r.indices.flatten(), minlength=n_experts))
    torch.testing.assert_close(r.gates.sum(-1), torch.ones(50))  # renormalised over the k
    assert bool((r.gates > 0).all())
    # the chosen experts are the k most probable ones, most probable first
    torch.testing.assert_close(r.probs.gather(1, r.indices), r.probs.sort(-1, descending=True).values[:, :k])
    torch.testing.assert_close(r.gates, r.probs.gather(1, r.indices) / r.probs.gather(1, r.indices).sum(-1, keepdim=True))


def test_unnormalised_gates_are_the_raw_probabilities():
    torch.manual_seed(0)
    router = Router(8, 4, 1, normalize=False)
    r = router(torch.randn(10, 8))
    torch.testing.assert_close(r.gates[:, 0], r.probs.max(-1).values)


def test_balancing_loss_is_one_for_uniform_routing_and_larger_when_skewed():
    E, N = 4, 64
    uniform = load_balancing_loss(torch.full((N, E), 1 / E), torch.arange(N).remainder(E).unsqueeze(1), E)
    assert float(uniform) == pytest.approx(1.0, abs=1e-6)
    # all tokens to expert 0 with the router sure of it: the worst case, E
    worst = load_balancing_loss(torch.eye(E)[torch.zeros(N, dtype=torch.long)], torch.zeros(N, 1, dtype=torch.long), E)
    assert float(worst) == pytest.approx(E)
    skewed = torch.tensor([0.55, 0.15, 0.15, 0.15]).repeat(N, 1)
    assert float(load_balancing_loss(skewed, torch.zeros(N, 1, dtype=torch.long), E)) > 1.5
    # when the usage equals the probabilities the loss is E * sum f^2 >= 1, equal only if uniform
    torch.manual_seed(0)
    for _ in range(20):
        f = torch.distributions.Dirichlet(torch.ones(E)).sample()
        counts = torch.round(f * 1000).long()
        idx = torch.repeat_interleave(torch.arange(E), counts).unsqueeze(1)
        probs = (counts.float() / counts.sum()).repeat(len(idx), 1)
        assert float(load_balancing_loss(probs, idx, E)) >= 1.0 - 1e-6


def test_balancing_loss_gradient_pushes_probability_away_from_the_busy_expert():
    logits = torch.zeros(8, 4, requires_grad=True)
    idx = torch.zeros(8, 1, dtype=torch.long)  # every token went to expert 0
    load_balancing_loss(logits.softmax(-1), idx, 4).backward()
    assert bool((logits.grad[:, 0] > 0).all()) and bool((logits.grad[:, 1:] < 0).all())


def test_one_expert_top1_equals_the_dense_mlp():
    torch.manual_seed(0)
    cfg = tiny()
    dense, moe = MLP(cfg), MoEFeedForward(cfg, n_experts=1, k=1)
    moe.experts[0].load_state_dict(dense.state_dict())
    x = torch.randn(3, 7, cfg.d_model)
    torch.testing.assert_close(moe(x), dense(x), rtol=0, atol=0)


def test_moe_output_matches_a_token_by_token_sum():
    torch.manual_seed(0)
    cfg = tiny()
    moe = MoEFeedForward(cfg, n_experts=5, k=2, expert_d_ff=8)
    x = torch.randn(2, 6, cfg.d_model)
    y = moe(x)
    r = moe.routing
    flat = x.reshape(-1, cfg.d_model)
    for t in range(flat.shape[0]):
        want = sum(r.gates[t, j] * moe.experts[int(r.indices[t, j])](flat[t:t + 1])[0] for j in range(2))
        torch.testing.assert_close(y.reshape(-1, cfg.d_model)[t], want, rtol=1e-5, atol=1e-6)


def test_moe_gpt_losses_counts_and_parameters():
    torch.manual_seed(0)
    cfg = tiny()
    model = MoEGPT(cfg, n_experts=4, k=2, expert_d_ff=16, aux_loss_weight=0.5)
    x = torch.randint(0, cfg.vocab_size, (3, cfg.block_size))
    y = torch.randint(0, cfg.vocab_size, (3, cfg.block_size))
    model.train()
    logits, train_loss = model(x, y)
    aux = model.aux_loss()
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
    torch.testing.assert_close(train_loss, ce + 0.5 * aux)
    assert float(aux.detach()) >= 0
    counts = model.expert_counts()
    assert counts.shape == (cfg.n_layer, 4) and bool((counts.sum(1) == 3 * cfg.block_size * 2).all())
    model.eval()
    logits_eval, eval_loss = model(x, y)
    torch.testing.assert_close(eval_loss, ce)  # eval: plain cross-entropy, comparable with a dense GPT
    # the router learns from both the language-modelling loss and the balancing loss
    model.train()
    model(x, y)[1].backward()
    assert all(float(m.router.proj.weight.grad.abs().sum()) > 0 for m in model.moe_modules())
    # parameters: 4 experts of 16 total, 2 active, per layer
    p = count_parameters(model)
    per_expert = 2 * cfg.d_model * 16 + 16 + cfg.d_model
    assert p["total"] - p["active"] == cfg.n_layer * 2 * per_expert
    assert count_parameters(GPT(cfg))["total"] == GPT(cfg).num_parameters()
    out = model.generate(x[:1, :3], 5, temperature=0)
    assert out.shape == (1, 8)


def test_moe_every_other_layer():
    cfg = GPTConfig.baby(11, n_layer=4, n_head=2, d_model=16, d_ff=32, block_size=8)
    model = MoEGPT(cfg, n_experts=3, k=1, moe_every=2)
    assert model.moe_layers == [0, 2]
    assert isinstance(model.blocks[1].mlp, MLP) and isinstance(model.blocks[2].mlp, MoEFeedForward)


def test_errors_name_the_parameter():
    cfg = tiny()
    with pytest.raises(ValueError, match="k=3 must be <= n_experts=2"):
        MoEFeedForward(cfg, n_experts=2, k=3)
    with pytest.raises(ValueError, match="k must be >= 1"):
        Router(16, 4, 0)
    with pytest.raises(ValueError, match="n_experts must be >= 1"):
        MoEGPT(cfg, n_experts=0, k=1)
    with pytest.raises(TypeError, match="k must be an int"):
        Router(16, 4, 1.5)
    with pytest.raises(ValueError, match="expert_d_ff"):
        MoEFeedForward(cfg, 2, 1, expert_d_ff=0)
    with pytest.raises(ValueError, match="aux_loss_weight"):
        MoEGPT(cfg, 2, 1, aux_loss_weight=-1)
    with pytest.raises(ValueError, match=r"d_model=16"):
        MoEFeedForward(cfg, 2, 1)(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match=r"x must be an \(N, d_model=16\)"):
        Router(16, 4, 1)(torch.randn(3, 15))
    with pytest.raises(ValueError, match="probs must be"):
        load_balancing_loss(torch.rand(5, 3), torch.zeros(5, 1, dtype=torch.long), 4)
    with pytest.raises(ValueError, match="indices must be"):
        load_balancing_loss(torch.rand(5, 4), torch.zeros(6, 1, dtype=torch.long), 4)
    with pytest.raises(ValueError, match="indices must lie"):
        load_balancing_loss(torch.rand(5, 4), torch.full((5, 1), 4), 4)
    with pytest.raises(RuntimeError, match="no forward pass"):
        MoEGPT(cfg, 2, 1).expert_counts()
    with pytest.raises(TypeError, match="config must be a GPTConfig"):
        MoEFeedForward({"d_model": 16}, 2, 1)
