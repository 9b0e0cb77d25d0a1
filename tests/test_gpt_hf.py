"""llmbook's GPT against Hugging Face's GPT2LMHeadModel: same weights, same logits.

No download: transformers builds a GPT-2 from a small ``GPT2Config`` with random weights,
``load_hf_gpt2`` copies them into the book's ``GPT``, and both run the same tokens in
float64. The only differences are the order of floating-point operations, so the logits
agree to ~1e-13; the test allows 1e-6 absolute (the issue's bound) and 0 relative.
"""

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from llmbook.gpt import GPT, GPTConfig, gpt_config_from_hf, load_hf_gpt2  # noqa: E402


def hf_gpt2(seed: int = 0, **kw) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=97, n_positions=32, n_embd=48, n_layer=3, n_head=4, bos_token_id=0, eos_token_id=0)
    cfg.update(kw)
    model = GPT2LMHeadModel(GPT2Config(**cfg)).double().eval()
    with torch.no_grad():  # GPT-2 initialises biases and LayerNorms to 0 and 1: randomise them too
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("kw", [{}, {"activation_function": "gelu", "layer_norm_epsilon": 1e-3, "n_inner": 80}])
def test_logits_equal_transformers_gpt2(kw):
    hf = hf_gpt2(**kw)
    model = load_hf_gpt2(hf.state_dict(), gpt_config_from_hf(hf.config, dropout=0.0))
    assert model.wte.weight.dtype == torch.float64 and model.lm_head.weight is model.wte.weight
    idx = torch.randint(0, hf.config.vocab_size, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(idx).logits
        ours, _ = model(idx)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
    assert (ours - ref).abs().max().item() < 1e-10  # in float64 the gap is rounding only
    # The key/value cache path sees the same weights: generation agrees with transformers' greedy search.
    prompt = idx[:1, :5]
    with torch.no_grad():
        hf_out = hf.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(model.generate(prompt, 8, temperature=0.0), hf_out)


def test_config_translation_and_preset():
    hf = hf_gpt2()
    cfg = gpt_config_from_hf(hf.config)
    assert (cfg.d_model, cfg.n_layer, cfg.n_head, cfg.block_size, cfg.vocab_size, cfg.d_ff) == (48, 3, 4, 32, 97, 192)
    assert cfg.gelu == "tanh" and cfg.layer_norm_eps == 1e-5 and cfg.dropout == 0.1 and cfg.tie_weights
    # GPT-2 small's published config equals the book's preset
    small = gpt_config_from_hf(GPT2Config())
    assert small == GPTConfig.gpt2_small()


def test_old_causal_mask_buffers_are_ignored():
    hf = hf_gpt2()
    sd = dict(hf.state_dict())
    n = hf.config.n_positions
    for i in range(hf.config.n_layer):  # what transformers < 4.4x kept in the state dict
        sd[f"transformer.h.{i}.attn.bias"] = torch.tril(torch.ones(n, n, dtype=torch.bool))[None, None]
        sd[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    model = load_hf_gpt2(sd, gpt_config_from_hf(hf.config, dropout=0.0))
    idx = torch.arange(10)[None]
    with torch.no_grad():
        torch.testing.assert_close(model(idx)[0], hf(idx).logits, rtol=0, atol=1e-6)


def test_bad_input():
    hf = hf_gpt2()
    cfg = gpt_config_from_hf(hf.config, dropout=0.0)
    sd = hf.state_dict()
    with pytest.raises(TypeError, match="config"):
        load_hf_gpt2(sd, hf.config)
    with pytest.raises(TypeError, match="state_dict"):
        load_hf_gpt2(hf, cfg)
    with pytest.raises(ValueError, match="shape"):
        load_hf_gpt2(sd, GPTConfig(**{**cfg.__dict__, "d_ff": 100}))
    with pytest.raises(ValueError, match="missing"):
        load_hf_gpt2({k: v for k, v in sd.items() if "ln_f" not in k}, cfg)
    with pytest.raises(ValueError, match="missing|unexpected"):
        load_hf_gpt2(sd, GPTConfig(**{**cfg.__dict__, "n_layer": 2}))
    untied = dict(sd)
    untied["lm_head.weight"] = sd["lm_head.weight"] + 1
    with pytest.raises(ValueError, match="lm_head"):
        load_hf_gpt2(untied, cfg)
    with pytest.raises(ValueError, match="activation_function"):
        gpt_config_from_hf(GPT2Config(activation_function="relu"))
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        gpt_config_from_hf(GPT2Config(scale_attn_by_inverse_layer_idx=True))
    with pytest.raises(ValueError, match="dropout"):
        gpt_config_from_hf(GPT2Config(attn_pdrop=0.0))
    with pytest.raises(TypeError, match="GPT2Config"):
        gpt_config_from_hf(object())
    with pytest.raises(ValueError, match="pre_norm"):
        load_hf_gpt2(sd, GPTConfig(**{**cfg.__dict__, "pre_norm": False}))
    assert isinstance(load_hf_gpt2(sd, cfg), GPT)
