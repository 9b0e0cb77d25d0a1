"""llmbook.positional: the sinusoidal table, its rotation property, learned tables, RoPE, ALiBi."""

import math

import pytest
import torch

from llmbook.positional import (
    LearnedPositionalEmbedding,
    RopeScaling,
    SinusoidalPositionalEncoding,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    half_to_interleaved,
    interleaved_to_half,
    rope,
    rope_angles,
    rope_cache,
    rope_inv_freq,
    scaled_rope_inv_freq,
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


# ---------------------------------------------------------------- RoPE at any shape and position (issue 32)


def test_rope_with_consecutive_positions_equals_the_bhtd_path():
    """rope(x, arange(T)) is bit for bit apply_rope(x, *rope_cache(T, hd)), in both layouts and dtypes."""
    torch.manual_seed(2)
    B, H, T, hd = 2, 3, 9, 16
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        x = torch.randn(B, H, T, hd).to(dtype)
        for interleaved in (False, True):
            cos, sin = rope_cache(T, hd, base=500.0, dtype=dtype, interleaved=interleaved)
            want = apply_rope(x, cos, sin, interleaved=interleaved)
            assert torch.equal(rope(x, torch.arange(T), base=500.0, interleaved=interleaved), want)
            # an offset: positions 7 .. 7+T-1, as during decoding with a cache
            cos, sin = rope_cache(T, hd, base=500.0, dtype=dtype, offset=7, interleaved=interleaved)
            assert torch.equal(rope(x, torch.arange(7, 7 + T), base=500.0, interleaved=interleaved),
                               apply_rope(x, cos, sin, interleaved=interleaved))


def test_rope_any_leading_shape_and_explicit_positions():
    """Each vector is rotated at its own position, whatever the layout of the batch."""
    torch.manual_seed(3)
    hd = 8
    x = torch.randn(2, 5, 4, hd)  # (B, T, H, hd): heads last, as before the transpose
    pos = torch.tensor([[0, 1, 2, 3, 4], [0, 1, 0, 1, 2]])  # two packed sequences in the second row
    out = rope(x, pos[:, :, None])  # (B, T, 1) broadcasts over heads
    for b in range(2):
        for t in range(5):
            cos, sin = rope_cache(1, hd, offset=int(pos[b, t]))
            one = apply_rope(x[b, t][None, :, None, :], cos, sin)[0, :, 0]  # (H, hd) through the (B, H, T, hd) path
            assert torch.equal(out[b, t], one)
    # per-example positions for (B, H, T, hd): (B, 1, T) equals apply_rope with (B, T, hd) tables
    xb = torch.randn(2, 3, 5, hd)
    cos, sin = rope_angles(pos, hd)
    assert torch.equal(rope(xb, pos[:, None, :]), apply_rope(xb, cos, sin))
    # a single vector, and a float position
    v = torch.randn(hd)
    assert torch.allclose(rope(v, torch.tensor(3.0)), rope(v[None], torch.tensor([3])).squeeze(0))
    assert torch.allclose(rope(v, torch.tensor(0)), v)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_scores_depend_on_distance_only(interleaved):
    torch.manual_seed(4)
    q, k = torch.randn(6, 16, dtype=torch.float64), torch.randn(6, 16, dtype=torch.float64)
    p = torch.tensor([0, 3, 3, 10, 11, 40])
    s = rope(q, p, interleaved=interleaved) @ rope(k, p, interleaved=interleaved).T
    s2 = rope(q, p + 1000, interleaved=interleaved) @ rope(k, p + 1000, interleaved=interleaved).T
    # the angles are float32 (as in Hugging Face's LLaMA), so cos/sin of ~1000 rad carry ~6e-5 of rounding
    torch.testing.assert_close(s, s2, rtol=0, atol=1e-3)
    assert not torch.allclose(s, rope(q, p, interleaved=interleaved) @ rope(k, p + 1, interleaved=interleaved).T, atol=1e-2)


def test_interleaved_layout_rotates_adjacent_pairs():
    """RoFormer's form: pair (x_2i, x_2i+1) turned by pos * base^(-2i/hd)."""
    x = torch.randn(3, 6, dtype=torch.float64)
    pos = torch.tensor([0, 1, 5])
    out = rope(x, pos, base=100.0, interleaved=True)
    for t in range(3):
        for i in range(3):
            a = float(pos[t]) * 100.0 ** (-2 * i / 6)
            x0, x1 = x[t, 2 * i], x[t, 2 * i + 1]
            torch.testing.assert_close(out[t, 2 * i], x0 * math.cos(a) - x1 * math.sin(a), atol=1e-6, rtol=0)
            torch.testing.assert_close(out[t, 2 * i + 1], x1 * math.cos(a) + x0 * math.sin(a), atol=1e-6, rtol=0)


def test_weight_permutation_between_layouts():
    """A query/key weight for the interleaved layout, permuted by interleaved_to_half, gives the
    same attention scores under rotate-half RoPE (and each head's rotated vector, reordered)."""
    torch.manual_seed(5)
    H, hd, D, T = 3, 8, 10, 7
    wq, wk = torch.randn(H * hd, D, dtype=torch.float64), torch.randn(H * hd, D, dtype=torch.float64)
    x = torch.randn(T, D, dtype=torch.float64)
    pos = torch.arange(T)

    def heads(w, interleaved):
        return rope((x @ w.T).view(T, H, hd).transpose(0, 1), pos, interleaved=interleaved)  # (H, T, hd)

    q_i, k_i = heads(wq, True), heads(wk, True)
    q_h, k_h = heads(interleaved_to_half(wq, H), False), heads(interleaved_to_half(wk, H), False)
    torch.testing.assert_close(q_h @ k_h.transpose(-1, -2), q_i @ k_i.transpose(-1, -2))
    order = interleaved_to_half(torch.arange(hd)[:, None], 1).flatten()  # rotate-half row r = interleaved row order[r]
    torch.testing.assert_close(q_h, q_i[..., order])
    assert torch.equal(half_to_interleaved(interleaved_to_half(wq, H), H), wq)
    # without the permutation, the scores differ
    q_x, k_x = heads(wq, False), heads(wk, False)
    assert not torch.allclose(q_x @ k_x.transpose(-1, -2), q_i @ k_i.transpose(-1, -2))


def test_llama_unpermute_is_the_layout_permutation():
    from llmbook.llama import unpermute_qk

    w = torch.randn(12, 5)
    assert torch.equal(unpermute_qk(w, 3), interleaved_to_half(w, 3))


def test_rope_any_shape_bad_input():
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"positions of shape \(3,\) must broadcast to x.shape\[:-1\] = \(2, 5\)"):
        rope(x, torch.arange(3))
    with pytest.raises(TypeError, match="positions must be a torch.Tensor"):
        rope(x, [0, 1, 2, 3, 4])
    with pytest.raises(TypeError, match="positions must be an integer or float tensor, got dtype torch.bool"):
        rope(x, torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="positions must be finite"):
        rope(x, torch.tensor([0.0, 1.0, float("nan"), 3.0, 4.0]))
    with pytest.raises(TypeError, match="x must be a float tensor"):
        rope(torch.ones(2, 8, dtype=torch.long), torch.arange(2))
    with pytest.raises(ValueError, match="head_dim must be even"):
        rope(torch.randn(4, 7), torch.arange(4))
    with pytest.raises(ValueError, match="base"):
        rope(x, torch.arange(5), base=float("nan"))
    with pytest.raises(TypeError, match="interleaved must be a bool"):
        rope(x, torch.arange(5), interleaved="yes")
    cos, sin = rope_angles(torch.arange(5), 6)
    with pytest.raises(ValueError, match="cos must end in head_dim = 8"):
        apply_rope(x, cos, sin)
    with pytest.raises(ValueError, match=r"w has 10 rows, not a multiple of 2 \* n_heads = 4"):
        interleaved_to_half(torch.randn(10, 3), 2)


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


# ---------------------------------------------------------------- RoPE scaling (PI, NTK-aware, YaRN)


def _hf_rope_params(kind, hd, base, L, s, **extra):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if kind == "dynamic":  # NTK-aware scaling is transformers' "dynamic" type with factor 1, read at length s * L
        params = {"rope_type": kind, "rope_theta": base, "factor": 1.0}
    else:
        params = {"rope_type": kind, "rope_theta": base, "factor": s, **extra}
    if kind == "yarn":
        params["original_max_position_embeddings"] = L
    cfg = LlamaConfig(hidden_size=4 * hd, num_attention_heads=4, max_position_embeddings=L, rope_parameters=params)
    return ROPE_INIT_FUNCTIONS[kind](cfg, None, seq_len=round(s * L)) if kind == "dynamic" else ROPE_INIT_FUNCTIONS[kind](cfg, None)


@pytest.mark.parametrize("hd, base, L", [(16, 10000.0, 32), (64, 10000.0, 4096), (128, 500000.0, 8192), (8, 100.0, 20)])
@pytest.mark.parametrize("s", [1.5, 2.0, 4.0, 16.0])
def test_rope_scaling_matches_transformers(hd, base, L, s):
    cases = [(RopeScaling("linear", s), ("linear", {})),
             (RopeScaling("ntk", s), ("dynamic", {})),
             (RopeScaling("yarn", s, original_length=L), ("yarn", {})),
             (RopeScaling("yarn", s, original_length=L, beta_fast=16.0, beta_slow=2.0), ("yarn", {"beta_fast": 16.0, "beta_slow": 2.0})),
             (RopeScaling("yarn", s, original_length=L, attention_factor=1.0), ("yarn", {"attention_factor": 1.0}))]
    for scaling, (kind, extra) in cases:
        ref_inv, ref_att = _hf_rope_params(kind, hd, base, L, s, **extra)
        inv, att = scaled_rope_inv_freq(hd, base, scaling)
        assert torch.equal(inv, ref_inv), (scaling, inv, ref_inv)
        assert att == pytest.approx(ref_att, rel=1e-12, abs=0), scaling


def test_rope_cache_with_yarn_matches_llama_rotary_embedding():
    """The whole table, attention factor included, as LLaMA's rotary embedding builds it."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    hd, T = 16, 130
    for params, scaling in [({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32},
                             RopeScaling("yarn", 4.0, original_length=32)),
                            ({"rope_type": "linear", "factor": 2.0}, RopeScaling("linear", 2.0))]:
        cfg = LlamaConfig(hidden_size=4 * hd, num_attention_heads=4, max_position_embeddings=128,
                          rope_parameters={"rope_theta": 10000.0, **params})
        cos_ref, sin_ref = LlamaRotaryEmbedding(cfg)(torch.zeros(1, T, 4 * hd), torch.arange(T)[None])
        cos, sin = rope_cache(T, hd, scaling=scaling)
        torch.testing.assert_close(cos, cos_ref[0], atol=0, rtol=0)
        torch.testing.assert_close(sin, sin_ref[0], atol=0, rtol=0)


def test_position_interpolation_reads_position_m_as_m_over_s():
    x = torch.randn(2, 40, 16, dtype=torch.float64)
    pos = torch.arange(40)
    for s in (2.0, 4.0, 3.5):
        torch.testing.assert_close(rope(x, pos, scaling=RopeScaling("linear", s)), rope(x, pos / s), atol=1e-5, rtol=0)
    # angles at s * m are the unscaled angles at m
    c4, s4 = rope_cache(4 * 8, 16, scaling=RopeScaling("linear", 4.0))
    c1, s1 = rope_cache(8, 16)
    torch.testing.assert_close(c4[::4], c1, atol=1e-6, rtol=0)
    torch.testing.assert_close(s4[::4], s1, atol=1e-6, rtol=0)


def test_ntk_and_yarn_keep_fast_planes_and_interpolate_slow_ones():
    hd, base, L, s = 64, 10000.0, 4096, 8.0
    orig = rope_inv_freq(hd, base).double()
    ntk, _ = scaled_rope_inv_freq(hd, base, RopeScaling("ntk", s))
    assert ntk[0] == orig[0]  # the fastest plane is untouched ...
    assert ntk[-1].item() == pytest.approx(orig[-1].item() / s, rel=1e-5)  # ... the slowest interpolated by s
    assert bool((ntk.double() <= orig * (1 + 1e-6)).all() and (ntk.double() >= orig / s * (1 - 1e-6)).all())
    yarn, att = scaled_rope_inv_freq(hd, base, RopeScaling("yarn", s, original_length=L))
    turns = L * orig / (2 * math.pi)  # full turns of each plane over the trained length
    fast, slow = turns > 32, turns < 1
    assert fast.any() and slow.any()
    torch.testing.assert_close(yarn.double()[fast], orig[fast], rtol=1e-6, atol=0)
    torch.testing.assert_close(yarn.double()[slow], orig[slow] / s, rtol=1e-6, atol=0)
    assert att == pytest.approx(0.1 * math.log(s) + 1)


def test_rope_scaling_with_factor_one_changes_nothing_and_keeps_relative_positions():
    hd = 16
    for method in ("linear", "ntk", "yarn"):
        inv, att = scaled_rope_inv_freq(hd, 10000.0, RopeScaling(method, 1.0, original_length=32))
        torch.testing.assert_close(inv, rope_inv_freq(hd), rtol=1e-6, atol=0)
        assert att == 1.0
    q, k = torch.randn(30, hd, dtype=torch.float64), torch.randn(30, hd, dtype=torch.float64)
    p = torch.arange(30)
    for scaling in (RopeScaling("linear", 4.0), RopeScaling("ntk", 4.0), RopeScaling("yarn", 4.0, original_length=8)):
        s1 = rope(q, p, scaling=scaling) @ rope(k, p, scaling=scaling).T
        s2 = rope(q, p + 500, scaling=scaling) @ rope(k, p + 500, scaling=scaling).T
        torch.testing.assert_close(s1, s2, atol=1e-3, rtol=1e-4)  # still only m - n (float32 angles)
    # YaRN's factor multiplies every logit by its square
    y = RopeScaling("yarn", 4.0, original_length=8)
    y1 = RopeScaling("yarn", 4.0, original_length=8, attention_factor=1.0)
    torch.testing.assert_close(rope(q, p, scaling=y) @ rope(k, p, scaling=y).T,
                               (0.1 * math.log(4.0) + 1) ** 2 * (rope(q, p, scaling=y1) @ rope(k, p, scaling=y1).T),
                               rtol=1e-5, atol=1e-5)  # cos and sin are scaled in float32


def test_rope_scaling_bad_input():
    with pytest.raises(ValueError, match="method must be one of"):
        RopeScaling("dynamic", 2.0)
    for bad in (0.5, float("nan"), float("inf"), True, "2"):
        with pytest.raises(ValueError, match="factor must be"):
            RopeScaling("linear", bad)
    with pytest.raises(ValueError, match="original_length"):
        RopeScaling("yarn", 2.0)
    with pytest.raises(ValueError, match="original_length"):
        RopeScaling("yarn", 2.0, original_length=0)
    with pytest.raises(ValueError, match="beta_fast must exceed beta_slow"):
        RopeScaling("yarn", 2.0, original_length=32, beta_fast=1.0, beta_slow=2.0)
    with pytest.raises(ValueError, match="beta_slow must be"):
        RopeScaling("yarn", 2.0, original_length=32, beta_slow=0.0)
    with pytest.raises(ValueError, match="attention_factor is YaRN's"):
        RopeScaling("ntk", 2.0, attention_factor=1.2)
    with pytest.raises(ValueError, match="attention_factor must be"):
        RopeScaling("yarn", 2.0, original_length=32, attention_factor=-1.0)
    with pytest.raises(TypeError, match="scaling must be a RopeScaling"):
        scaled_rope_inv_freq(16, 10000.0, {"rope_type": "linear", "factor": 2.0})
    with pytest.raises(TypeError, match="scaling must be a RopeScaling"):
        rope_cache(4, 16, scaling="linear")
    with pytest.raises(ValueError, match="head_dim >= 4"):
        scaled_rope_inv_freq(2, 10000.0, RopeScaling("ntk", 2.0))


def _rope_extension_script():
    import importlib.util
    import sys
    from pathlib import Path

    scripts = Path(__file__).resolve().parents[1] / "scripts"
    sys.path.insert(0, str(scripts))  # the script imports extrapolation_05 from its own folder
    try:
        spec = importlib.util.spec_from_file_location("rope_extension_05", scripts / "rope_extension_05.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(scripts))
    return mod


@pytest.mark.parametrize("far", [None, True, False])
def test_passkey_batch_places_mark_key_and_query(far):
    """scripts/rope_extension_05.py's passkey task: one mark, the key right after it, the query last, filler elsewhere."""
    rx = _rope_extension_script()
    length = 64
    x, key = rx.passkey_batch(200, length, torch.Generator().manual_seed(3), far=far)
    assert x.shape == (200, length) and key.shape == (200,)
    assert (x[:, -1] == rx.PK_QUERY).all() and ((x == rx.PK_QUERY).sum(1) == 1).all()
    assert ((x == rx.PK_MARK).sum(1) == 1).all()
    pos = (x == rx.PK_MARK).int().argmax(1)
    assert torch.equal(x[torch.arange(200), pos + 1], key)
    assert ((key >= 0) & (key < rx.PK_FILLER)).all()          # the key is drawn from the filler alphabet
    assert set(key.tolist()) == set(range(rx.PK_FILLER))       # ... and covers all of it
    assert ((x < rx.PK_FILLER) | (x == rx.PK_MARK) | (x == rx.PK_QUERY)).all()   # every other symbol is filler
    # so the key has no class of its own: a rule that reads symbols but not the mark's position is near chance
    counts = (x[:, :, None] == torch.arange(rx.PK_FILLER)).sum(1)   # (200, filler): how often each symbol occurs
    for rule in (counts.argmax(1), counts.masked_fill(counts == 0, length).argmin(1)):   # most, least frequent
        assert (rule == key).double().mean() < 0.25
    if far is True:
        assert (pos < 4).all()
    elif far is False:
        assert (pos >= length - 12).all()
    else:
        assert pos.min() < 8 and pos.max() > length - 12        # anywhere
