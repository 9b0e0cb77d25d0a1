"""llmbook.interp: head scores on hand-built heads, the logit lens, attribution and patching on small models."""

import pytest
import torch

from llmbook.gpt import GPT, GPTConfig
from llmbook.hooks import run_with_cache, run_with_hooks
from llmbook.interp import (AttnOnlyTransformer, ablate_heads, copying_score, direct_logit_attribution,
                            induction_score, logit_diff, logit_lens, patch_residual_grid, prefix_matching_score,
                            previous_token_score, repeated_half_loss, repeated_tokens, seen_token_baseline,
                            train_induction)
from llmbook.llama import Llama, LlamaConfig


def _gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig.baby(vocab_size=40, n_layer=3, block_size=16)).eval()


def _llama():
    torch.manual_seed(0)
    return Llama(LlamaConfig.tiny()).eval()


MODELS = [pytest.param(_gpt, id="gpt"), pytest.param(_llama, id="llama")]


def _induction_pattern(x, n, H=1):
    """A perfect induction head: each token of the second copy attends to the token after its first occurrence."""
    B, T = x.shape
    p = torch.zeros(B, H, T, T)
    for b in range(B):
        for t in range(T):
            nb = int(n[b])
            p[b, :, t, t - nb + 1 if t >= T - nb else t] = 1.0
    return p


def test_repeated_tokens_repeat_and_vary():
    x, n = repeated_tokens(64, 20, 24, 4, 12, torch.Generator().manual_seed(0))
    assert x.shape == (64, 24) and int(n.min()) >= 4 and int(n.max()) <= 12 and len(set(n.tolist())) > 3
    for b in range(64):
        nb = int(n[b])
        assert torch.equal(x[b, 24 - nb:], x[b, 24 - 2 * nb:24 - nb])
    with pytest.raises(ValueError, match="2 \\* n_max <= length"):
        repeated_tokens(2, 10, 10, 3, 6)


def test_induction_score_of_a_hand_built_induction_head_is_one():
    x, n = repeated_tokens(8, 8, 16, 3, 8, torch.Generator().manual_seed(1))
    pattern = _induction_pattern(x, n)
    assert prefix_matching_score(pattern, n).item() == 1.0
    # its OV circuit copies: one-hot embeddings, W_V = W_O = identity, unembedding = identity
    m = AttnOnlyTransformer(vocab_size=8, block_size=16, n_layer=1, n_head=1, d_model=8)
    with torch.no_grad():
        m.wte.weight.copy_(torch.eye(8))
        m.qkv[0].weight.copy_(torch.cat([torch.zeros(16, 8), torch.eye(8)]))
        m.out[0].weight.copy_(torch.eye(8))
        m.unembed.weight.copy_(torch.eye(8))
    cop = copying_score(m.ov_circuit(0, 0))
    assert cop.item() == 1.0
    assert induction_score(pattern, n, cop.reshape(1)).item() == 1.0
    # a previous-token head scores 0 on prefix matching, an anti-copying head 0 on induction
    prev = torch.zeros_like(pattern)
    idx = torch.arange(16)
    prev[:, :, idx, (idx - 1).clamp(min=0)] = 1.0
    assert previous_token_score(prev).item() == 1.0
    assert prefix_matching_score(prev, n).item() == 0.0
    assert induction_score(pattern, n, torch.tensor([-1.0])).item() == 0.0


def test_score_bad_input():
    with pytest.raises(ValueError, match="pattern"):
        previous_token_score(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="n must be"):
        prefix_matching_score(torch.zeros(2, 1, 4, 4), torch.tensor([1]))
    with pytest.raises(ValueError, match="square"):
        copying_score(torch.zeros(2, 3))


def test_losses_and_baseline():
    x, n = repeated_tokens(16, 10, 20, 4, 10, torch.Generator().manual_seed(2))
    perfect = torch.full((16, 20, 10), -30.0)
    perfect.scatter_(2, torch.cat([x[:, 1:], x[:, :1]], 1)[..., None], 30.0)  # predicts every next token
    assert repeated_half_loss(perfect, x, n).item() < 1e-6
    assert abs(repeated_half_loss(torch.zeros(16, 20, 10), x, n).item() - torch.log(torch.tensor(10.0)).item()) < 1e-5
    assert 0 < seen_token_baseline(x, n) < torch.log(torch.tensor(10.0)).item()


def test_train_induction_records_every_score():
    h = train_induction(1, 0, steps=4, eval_every=2, n_eval=8)
    assert h["step"] == [0, 2, 4] and len(h["loss"]) == 3
    assert len(h["prefix"][0]) == 1 and len(h["prefix"][0][0]) == 4  # layers x heads


@pytest.mark.parametrize("make", MODELS)
def test_logit_lens_last_layer_equals_the_logits(make):
    model = make()
    idx = torch.randint(0, 40, (2, 7), generator=torch.Generator().manual_seed(3))
    lens = logit_lens(model, idx)
    out = model(idx)
    logits = out[0] if isinstance(out, tuple) else out
    assert lens.shape == (model.config.n_layer + 1,) + logits.shape
    assert torch.equal(lens[-1], logits)
    assert not torch.allclose(lens[0], logits)


@pytest.mark.parametrize("make", MODELS)
def test_direct_logit_attribution_adds_up(make):
    model = make()
    idx = torch.randint(0, 40, (3, 6), generator=torch.Generator().manual_seed(4))
    direction = torch.zeros(model.config.vocab_size)
    direction[5], direction[7] = 1.0, -1.0
    per_head, parts = direct_logit_attribution(model, idx, direction)
    L, H = model.config.n_layer, model.config.n_head
    assert per_head.shape == (3, L, H)
    total = per_head.sum((1, 2)) + parts["embed"] + parts["attn_bias"].sum(1) + parts["mlp"].sum(1) + parts["norm_bias"]
    torch.testing.assert_close(total, parts["total"], rtol=1e-4, atol=1e-4)
    logits = model(idx)
    logits = logits[0] if isinstance(logits, tuple) else logits
    torch.testing.assert_close(parts["total"], logits[:, -1, 5] - logits[:, -1, 7])
    rows = torch.zeros(3, model.config.vocab_size)
    rows[torch.arange(3), torch.tensor([1, 2, 3])] = 1.0  # a different direction per prompt
    per_row, parts_row = direct_logit_attribution(model, idx, rows)
    torch.testing.assert_close(parts_row["total"], logits[:, -1, [1, 2, 3]].diagonal())
    torch.testing.assert_close(per_row[1], direct_logit_attribution(model, idx[1:2], rows[1])[0][0])


@pytest.mark.parametrize("make", MODELS)
def test_patching(make):
    model = make()
    g = torch.Generator().manual_seed(5)
    clean = torch.randint(0, 40, (2, 8), generator=g)
    corrupt = clean.clone()
    corrupt[:, 3] = (clean[:, 3] + 1) % 40  # one token differs
    good, bad = torch.tensor([1, 2]), torch.tensor([3, 4])
    clean_logits, cache = run_with_cache(model, clean)
    # pasting the whole clean residual stream into the corrupted run restores the clean logits exactly
    for i in range(model.config.n_layer):
        name = f"blocks.{i}.resid_pre"
        assert torch.equal(run_with_hooks(model, corrupt, {name: lambda x, n: cache[name]}), clean_logits)
    grid = patch_residual_grid(model, clean, corrupt, good, bad)
    assert grid.shape == (model.config.n_layer, 8)
    assert torch.all(grid[:, :3] == 0)  # before the differing token nothing changes
    # at the first block the differing token is the only difference: pasting it there restores everything
    torch.testing.assert_close(grid[0, 3], torch.tensor(1.0), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="nothing to patch"):
        patch_residual_grid(model, clean, clean, good, bad)


def _naive_grid(model, clean, corrupt, good, bad):
    """One full forward pass of the corrupted prompts per (layer, position): the definition, written plainly."""
    L, (B, T) = model.config.n_layer, clean.shape
    clean_logits, cache = run_with_cache(model, clean)
    d_clean, d_corrupt = logit_diff(clean_logits, good, bad), logit_diff(run_with_hooks(model, corrupt, {}), good, bad)
    out = torch.zeros(B, L, T)
    for layer in range(L):
        name = f"blocks.{layer}.resid_pre"
        for t in range(T):
            def paste(x, n, t=t):
                x = x.clone()
                x[:, t] = cache[name][:, t]
                return x
            d = logit_diff(run_with_hooks(model, corrupt, {name: paste}), good, bad)
            out[:, layer, t] = (d - d_corrupt) / (d_clean - d_corrupt)
    return out


@pytest.mark.parametrize("make", MODELS)
def test_patching_with_the_cached_prefix_equals_one_run_per_cell(make):
    model = make()
    g = torch.Generator().manual_seed(7)
    clean = torch.randint(0, 40, (3, 9), generator=g)
    corrupt = clean.clone()
    corrupt[:, 2] = (clean[:, 2] + 3) % 40  # one token differs ...
    corrupt[1, 5] = (clean[1, 5] + 1) % 40  # ... and, in one pair, a second one later
    good, bad = torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])
    want = _naive_grid(model, clean, corrupt, good, bad)
    got = patch_residual_grid(model, clean, corrupt, good, bad, per_pair=True)
    assert got.shape == (3, model.config.n_layer, 9)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert want[:, :, 2:].abs().max() > 0.05  # the grid is not trivially zero
    torch.testing.assert_close(patch_residual_grid(model, clean, corrupt, good, bad), want.mean(0), rtol=1e-4, atol=1e-4)


def test_ablate_heads():
    model = _gpt()
    idx = torch.randint(0, 40, (2, 5), generator=torch.Generator().manual_seed(6))
    plain = model(idx)[0]
    assert torch.equal(ablate_heads(model, idx, []), plain)
    zero = ablate_heads(model, idx, [(0, 1), (2, 3)])
    assert not torch.allclose(zero, plain)
    _, cache = run_with_cache(model, idx, ["blocks.0.attn.z", "blocks.2.attn.z"])
    # replacing heads by their own outputs changes nothing
    own = {0: cache["blocks.0.attn.z"][0], 2: cache["blocks.2.attn.z"][0]}
    torch.testing.assert_close(ablate_heads(model, idx[:1], [(0, 1), (2, 3)], own), plain[:1])
    assert logit_diff(plain, torch.tensor([1, 1]), torch.tensor([1, 1])).abs().max() == 0
