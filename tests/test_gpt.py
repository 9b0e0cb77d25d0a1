"""GPT model: parameter counts of the published presets, KV cache, attention, bad input."""

import pytest
import torch

from llmbook.charvocab import CharVocab
from llmbook.flops import param_count
from llmbook.gpt import GPT, GPT3_SIZES, GPTConfig, KVCache, causal_mask

# Published sizes. GPT-2: OpenAI's released model names (the paper's table says 117M,
# 345M, 762M, 1542M; the released checkpoints were renamed 124M, 355M, 774M, 1558M).
PUBLISHED = {
    "gpt1": (GPTConfig.gpt1(), 117e6),
    "gpt2_small": (GPTConfig.gpt2_small(), 124e6),
    "gpt2_medium": (GPTConfig.gpt2_medium(), 355e6),
    "gpt2_large": (GPTConfig.gpt2_large(), 774e6),
    "gpt2_xl": (GPTConfig.gpt2_xl(), 1558e6),
    **{f"gpt3_{n}": (GPTConfig.gpt3(n), p) for n, p in zip(
        GPT3_SIZES, (125e6, 350e6, 760e6, 1.3e9, 2.7e9, 6.7e9, 13e9, 175e9))},
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_param_formula_matches_model_and_paper(name):
    cfg, published = PUBLISHED[name]
    with torch.device("meta"):  # nothing is allocated, even for 175B
        model = GPT(cfg)
    n = model.num_parameters()
    assert param_count(cfg) == n
    assert abs(n - published) / published < 0.02, (name, n, published)


def small(**kw):
    base = dict(vocab_size=37, block_size=24, n_layer=3, n_head=4, d_model=32, d_ff=64)
    base.update(kw)
    return GPTConfig(**base)


@pytest.mark.parametrize("cfg", [small(), small(pre_norm=False, final_norm=False),
                                 small(sparse_pattern="alternating", local_window=5), small(tie_weights=False)])
def test_kv_cache_matches_no_cache(cfg):
    torch.manual_seed(0)
    model = GPT(cfg).eval()
    idx = torch.randint(0, cfg.vocab_size, (2, 9))
    full, _ = model(idx)
    cache = KVCache(cfg, 2)
    parts = [model(idx[:, :4], kv_cache=cache)[0]]
    for t in range(4, 9):
        parts.append(model(idx[:, t:t + 1], kv_cache=cache)[0])
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-5, atol=1e-5)
    # greedy tokens identical, also past block_size (cache refilled as the window slides)
    a = model.generate(idx, 30, temperature=0, use_cache=True)
    b = model.generate(idx, 30, temperature=0, use_cache=False)
    assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(model.generate(idx, 12, top_k=5, generator=g1), model.generate(idx, 12, top_k=5, generator=g2, use_cache=False))


def test_attention_weights_are_causal_and_match_fused_path():
    torch.manual_seed(0)
    cfg = small(sparse_pattern="alternating", local_window=4)
    model = GPT(cfg).eval()
    idx = torch.randint(0, cfg.vocab_size, (1, 10))
    logits, _ = model(idx)
    logits2, _, att = model(idx, return_attention=True)
    torch.testing.assert_close(logits, logits2, rtol=1e-5, atol=1e-5)
    assert len(att) == cfg.n_layer and att[0].shape == (1, cfg.n_head, 10, 10)
    torch.testing.assert_close(att[0].sum(-1), torch.ones(1, cfg.n_head, 10))
    assert (att[0].triu(1) == 0).all()
    assert (att[1][..., ~causal_mask(10, 10, window=4)] == 0).all()  # banded layer


def test_init_scales_residual_projections_and_ties_weights():
    torch.manual_seed(0)
    cfg = small(n_layer=8, d_model=128, d_ff=512)
    model = GPT(cfg)
    assert model.lm_head.weight is model.wte.weight
    std_proj = model.blocks[0].attn.c_proj.weight.std().item()
    assert abs(std_proj - 0.02 / 4) < 0.001  # 0.02 / sqrt(2 * 8)
    assert abs(model.blocks[0].attn.c_attn.weight.std().item() - 0.02) < 0.002



def test_gpt1_preset_uses_plain_init_and_gpt2_3_the_scaled_one():
    # GPT-1 initialised every weight N(0, 0.02); the 1/sqrt(2 n_layer) residual scaling is GPT-2's.
    assert GPTConfig.gpt1().scaled_residual_init is False
    assert GPTConfig.gpt2_small().scaled_residual_init and GPTConfig.gpt3("small").scaled_residual_init
    torch.manual_seed(0)
    plain = GPT(small(n_layer=8, d_model=128, d_ff=512, scaled_residual_init=False))
    for proj in (plain.blocks[0].attn.c_proj, plain.blocks[0].mlp.c_proj):
        assert abs(proj.weight.std().item() - 0.02) < 0.002


def test_loss_at_init_is_near_log_vocab():
    torch.manual_seed(0)
    model = GPT(small())
    idx, targets = torch.randint(0, 37, (2, 4, 24))
    _, loss = model(idx, targets)
    assert abs(loss.item() - torch.log(torch.tensor(37.0)).item()) < 0.1


def test_bad_input():
    model = GPT(small()).eval()
    idx = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(idx, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="top_p"):
        model.generate(idx, 2, top_p=0.0)
    with pytest.raises(ValueError, match="top_p"):
        model.generate(idx, 2, top_p=1.5)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(idx, 2, top_k=0)
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 25, dtype=torch.long))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.full((1, 3), 37))
    with pytest.raises(ValueError, match="n_head"):
        GPTConfig(d_model=10, n_head=3)
    vocab = CharVocab.from_text("abc \n")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        vocab.encode("abz")


def test_long_prompt_is_cropped_to_block_size():
    torch.manual_seed(0)
    model = GPT(small()).eval()
    long = torch.randint(0, 37, (1, 40))  # longer than block_size=24
    out = model.generate(long, 5, temperature=0)
    assert out.shape == (1, 45) and torch.equal(out[:, :40], long)
    cropped = model.generate(long[:, -24:], 5, temperature=0)
    assert torch.equal(out[:, 40:], cropped[:, 24:])  # only the last block_size tokens matter
