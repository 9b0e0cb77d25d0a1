"""llmbook.positional: the sinusoidal table, its rotation property, learned tables, RoPE, ALiBi."""

import math

import pytest
import torch

from llmbook.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_cache,
    sinusoidal_encoding,
)


def test_sinusoidal_closed_form():
    P, d = 50, 16
    pe = sinusoidal_encoding(P, d)
    for pos in range(P):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert abs(pe[pos, 2 * i].item() - math.sin(angle)) < 1e-6
            assert abs(pe[pos, 2 * i + 1].item() - math.cos(angle)) < 1e-6


def test_sinusoidal_wavelengths():
    d = 64
    pe = sinusoidal_encoding(2, d)
    omega = torch.atan2(pe[1, 0::2].double(), pe[1, 1::2].double())  # angle at pos 1 = omega
    expected = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    torch.testing.assert_close(omega, expected, atol=1e-7, rtol=1e-6)
    wavelengths = 2 * math.pi / expected
    assert wavelengths[0] == pytest.approx(2 * math.pi)
    # the last of d/2 wavelengths is 2*pi*10000^((d-2)/d), approaching 10000*2*pi as d grows
    assert wavelengths[-1] == pytest.approx(2 * math.pi * 10000 ** ((d - 2) / d))
    ratios = wavelengths[1:] / wavelengths[:-1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, 10000 ** (2 / d)))


@pytest.mark.parametrize("k", [1, 3, 17, 40])
def test_rotation_property(k):
    """PE(pos + k) = M_k PE(pos) for all pos, with M_k block-diagonal 2x2 rotations."""
    P, d = 100, 32
    pe = sinusoidal_encoding(P + k, d).double()
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    M = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        # [sin(a+b), cos(a+b)] = [[cos b, sin b], [-sin b, cos b]] [sin a, cos a]
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
    torch.testing.assert_close(pe[:P] @ M.T, pe[k : P + k], atol=1e-6, rtol=0)


def test_dot_product_depends_on_distance_only():
    pe = sinusoidal_encoding(200, 64).double()
    gram = pe @ pe.T
    for k in (0, 1, 5, 30):
        diag = torch.diagonal(gram, offset=k)
        assert (diag.max() - diag.min()).item() < 1e-5


def test_sinusoidal_module_and_errors():
    m = SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.randn(2, 4, 8)
    torch.testing.assert_close(m(x), x + sinusoidal_encoding(4, 8))
    with pytest.raises(ValueError, match="max_len"):
        m(torch.randn(1, 11, 8))
    with pytest.raises(ValueError, match="d_model"):
        sinusoidal_encoding(10, 7)
    with pytest.raises(ValueError, match="d_model"):
        SinusoidalPositionalEncoding(7)
    with pytest.raises(ValueError, match="base"):
        sinusoidal_encoding(10, 8, base=1.0)
    with pytest.raises(TypeError, match="n_positions"):
        sinusoidal_encoding("10", 8)


def test_learned_table():
    m = LearnedPositionalEmbedding(4, max_len=6)
    x = torch.zeros(1, 6, 4)
    torch.testing.assert_close(m(x)[0], m.weight.detach())
    with pytest.raises(ValueError, match="max_len"):
        m(torch.zeros(1, 7, 4))


def test_rope_matches_transformers():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    torch.manual_seed(0)
    B, H, T, hd = 2, 3, 11, 64
    q, k = torch.randn(B, H, T, hd), torch.randn(B, H, T, hd)
    for base in (10000.0, 100000.0):
        cos, sin = rope_cache(T, hd, base=base)
        q_ref, k_ref = apply_rotary_pos_emb(q, k, cos[None], sin[None])
        assert torch.equal(apply_rope(q, cos, sin), q_ref)
        assert torch.equal(apply_rope(k, cos, sin), k_ref)


def test_rope_cache_matches_llama_rotary_embedding():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = LlamaConfig(hidden_size=576, num_attention_heads=9, rope_theta=100000.0, max_position_embeddings=256)
    try:
        cfg.rope_parameters = {"rope_type": "default", "rope_theta": 100000.0}
    except Exception:
        pass
    rot = LlamaRotaryEmbedding(cfg)
    T, hd = 37, 64
    x = torch.zeros(1, T, 576)
    cos_ref, sin_ref = rot(x, torch.arange(T)[None])
    cos, sin = rope_cache(T, hd, base=100000.0)
    torch.testing.assert_close(cos, cos_ref[0], atol=0, rtol=0)
    torch.testing.assert_close(sin, sin_ref[0], atol=0, rtol=0)
    # an offset gives the later rows of a longer table
    cos_o, _ = rope_cache(5, hd, base=100000.0, offset=32)
    torch.testing.assert_close(cos_o, cos_ref[0, 32:37], atol=0, rtol=0)


def test_rope_relative_position():
    """q_m . k_n after rotation depends only on m - n."""
    torch.manual_seed(1)
    hd, T = 16, 40
    q, k = torch.randn(hd, dtype=torch.float64), torch.randn(hd, dtype=torch.float64)
    cos, sin = rope_cache(T, hd)
    cos, sin = cos.double(), sin.double()
    Q = apply_rope(q.expand(1, 1, T, hd), cos, sin)[0, 0]  # same q at every position
    K = apply_rope(k.expand(1, 1, T, hd), cos, sin)[0, 0]
    scores = Q @ K.T  # (T, T): scores[m, n] = q_m . k_n
    for d in range(-10, 11):
        diag = torch.diagonal(scores, offset=-d)  # entries with m - n = d
        assert (diag.max() - diag.min()).item() < 1e-4, d


def test_rope_bad_input():
    with pytest.raises(ValueError, match="head_dim"):
        rope_cache(4, 7)
    cos, sin = rope_cache(4, 8)
    with pytest.raises(ValueError, match="cos"):
        apply_rope(torch.randn(1, 2, 5, 8), cos, sin)
    with pytest.raises(ValueError, match="x"):
        apply_rope(torch.randn(2, 5, 8), cos, sin)


@pytest.mark.parametrize("n_heads", [1, 2, 3, 4, 6, 8, 12, 16, 20])
def test_alibi_slopes_match_bloom(n_heads):
    # BLOOM's build_alibi_tensor computes the slopes with float32 powers, ours in float64
    # (as the paper's reference code): equal up to float32 rounding, and exactly when every
    # slope is a power of two (n divides 8).
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    ref = build_alibi_tensor(torch.ones(1, 2), n_heads, torch.float32)[:, 0, 1]  # slope x position 1
    torch.testing.assert_close(alibi_slopes(n_heads), ref, atol=0, rtol=1e-6)
    if 8 % n_heads == 0:
        assert torch.equal(alibi_slopes(n_heads), ref)


def test_alibi_bias_values():
    T, H = 7, 4
    bias = alibi_bias(T, H)
    m = alibi_slopes(H)
    assert bias.shape == (H, T, T)
    for h in range(H):
        for i in range(T):
            for j in range(T):
                expected = -m[h].item() * (i - j) if j <= i else float("-inf")
                assert bias[h, i, j].item() == pytest.approx(expected)
    sym = alibi_bias(T, H, causal=False)
    torch.testing.assert_close(sym, sym.transpose(1, 2))
    torch.testing.assert_close(torch.tril(sym), torch.tril(bias.nan_to_num(neginf=0.0)))
    # the softmax only sees differences: adding m_h * j (BLOOM's form) changes nothing
    scores = torch.randn(H, T, T)
    bloom_form = (m[:, None, None] * torch.arange(T)[None, None, :]).expand(H, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    torch.testing.assert_close((scores + bias).softmax(-1),
                               (scores + bloom_form).masked_fill(~causal, float("-inf")).softmax(-1))


def test_alibi_bad_input():
    with pytest.raises(ValueError, match="n_heads"):
        alibi_slopes(0)
    with pytest.raises(TypeError, match="n_heads"):
        alibi_slopes(4.0)
    with pytest.raises(ValueError, match="T"):
        alibi_bias(0, 4)
