"""llmbook.attention against PyTorch's references: F.scaled_dot_product_attention and nn.MultiheadAttention."""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from llmbook.attention import (
    AdditiveAttention,
    MultiHeadAttention,
    additive_attention,
    causal_mask,
    key_padding_to_mask,
    padding_mask,
    scaled_dot_product_attention,
)

TOL = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=1e-5, rtol=1e-5)}


def _qkv(dtype, B=2, H=3, Tq=5, Tk=7, d_k=8, d_v=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Tq, d_k, generator=g, dtype=dtype, requires_grad=True)
    k = torch.randn(B, H, Tk, d_k, generator=g, dtype=dtype, requires_grad=True)
    v = torch.randn(B, H, Tk, d_v, generator=g, dtype=dtype, requires_grad=True)
    return q, k, v


def _masks(B=2, H=3, Tq=5, Tk=7, dtype=torch.float64):
    g = torch.Generator().manual_seed(1)
    rand_bool = torch.rand(B, H, Tq, Tk, generator=g) > 0.3
    rand_bool[..., 0] = True  # keep every row alive so PyTorch and we agree without special cases
    lengths = torch.tensor([4, 7])
    pad = padding_mask(lengths, Tk)[:, None, None, :]  # (B, 1, 1, Tk)
    float_mask = torch.randn(Tq, Tk, generator=g, dtype=dtype)
    float_inf = float_mask.masked_fill(torch.rand(Tq, Tk, generator=g) > 0.6, float("-inf"))
    float_inf[:, 0] = 0.0
    square_causal = causal_mask(Tk)[-Tq:]  # any (Tq, Tk) lower-triangular pattern
    return {
        "none": None,
        "causal": square_causal,
        "padding": pad,
        "bool": rand_bool,
        "float": float_mask,
        "float_inf": float_inf,
    }


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("which", ["none", "causal", "padding", "bool", "float", "float_inf"])
def test_sdpa_matches_torch_values_and_grads(dtype, which):
    mask = _masks(dtype=dtype)[which]
    q, k, v = _qkv(dtype)
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    grad_out = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad_out)
    theirs = torch.autograd.grad(ref, (q, k, v), grad_out)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **TOL[dtype])
    # rows sum to one; masked positions get exactly zero weight
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), **TOL[dtype])
    if mask is not None:
        forbidden = ~mask if mask.dtype == torch.bool else torch.isneginf(mask)
        assert (w.detach()[forbidden.expand_as(w)] == 0).all()


def test_sdpa_is_causal_equivalent_and_custom_scale():
    q, k, v = _qkv(torch.float64, Tq=6, Tk=6)
    ours = scaled_dot_product_attention(q, k, v, mask=causal_mask(6), scale=0.3)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=1e-10)


def test_sdpa_gradcheck_float64():
    q, k, v = _qkv(torch.float64, B=1, H=2, Tq=3, Tk=4, d_k=3, d_v=2)
    mask = torch.tensor([[True, True, False, True], [True, False, False, False], [True, True, True, True]])
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, mask=mask), (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c), (q, k, v))


def test_fully_masked_rows_are_zero_and_match_torch():
    q, k, v = _qkv(torch.float64, Tq=3, Tk=4)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert torch.isfinite(out).all() and (w[..., 1, :] == 0).all() and (out[..., 1, :] == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-10, rtol=1e-10)
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and (q.grad[..., 1, :] == 0).all()
    # same with a float mask of -inf
    fmask = torch.zeros(3, 4, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    out2 = scaled_dot_product_attention(q, k, v, mask=fmask)
    torch.testing.assert_close(out2, out)


def test_dropout_zero_p_is_identity_and_p_changes_output():
    q, k, v = _qkv(torch.float32)
    torch.manual_seed(0)
    a = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    b = scaled_dot_product_attention(q, k, v)
    assert not torch.allclose(a, b)


def test_mask_helpers():
    assert causal_mask(4).dtype == torch.bool and causal_mask(4).sum() == 10
    pm = padding_mask([2, 0, 3], 3)
    assert pm.tolist() == [[True, True, False], [False, False, False], [True, True, True]]
    kp = key_padding_to_mask(~pm)
    assert kp.shape == (3, 1, 1, 3) and torch.equal(kp[:, 0, 0], pm)


@pytest.mark.parametrize(
    "call, exc, word",
    [
        (lambda: causal_mask(0), ValueError, "n_query"),
        (lambda: causal_mask(2.0), TypeError, "n_query"),
        (lambda: padding_mask([5], 3), ValueError, "length"),
        (lambda: padding_mask([1.5], 3), TypeError, "lengths"),
        (lambda: key_padding_to_mask(torch.zeros(2, 3)), TypeError, "key_padding_mask"),
        (lambda: key_padding_to_mask(torch.zeros(3, dtype=torch.bool)), ValueError, "key_padding_mask"),
    ],
)
def test_mask_helpers_bad_input(call, exc, word):
    with pytest.raises(exc, match=word):
        call()


def test_sdpa_bad_input():
    q, k, v = _qkv(torch.float32)
    with pytest.raises(ValueError, match="d_k"):
        scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="Tk"):
        scaled_dot_product_attention(q, k, v[..., :2, :])
    with pytest.raises(ValueError, match="mask"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask"):
        scaled_dot_product_attention(q, k, v, mask=torch.ones(5, 7, dtype=torch.long))
    with pytest.raises(TypeError, match="mask"):
        scaled_dot_product_attention(q, k, v, mask=[[True]])
    with pytest.raises(TypeError, match="q"):
        scaled_dot_product_attention(q.detach().long(), k, v)
    with pytest.raises(TypeError, match="dtype"):
        scaled_dot_product_attention(q.double(), k, v)
    with pytest.raises(ValueError, match="dropout_p"):
        scaled_dot_product_attention(q, k, v, dropout_p=1.0)
    with pytest.raises(ValueError, match="scale"):
        scaled_dot_product_attention(q, k, v, scale=-1.0)
    with pytest.raises(TypeError, match="k"):
        scaled_dot_product_attention(q, None, v)


# ---------------------------------------------------------------- additive
def test_additive_attention_explicit_loop_and_module():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 6, generator=g), torch.randn(2, 5, 2, generator=g)
    Wq, Wk, w, b = (torch.randn(7, 4, generator=g), torch.randn(7, 6, generator=g), torch.randn(7, generator=g),
                    torch.randn(7, generator=g))
    out, att = additive_attention(q, k, v, Wq, Wk, w, return_weights=True, b=b)
    scores = torch.empty(2, 3, 5)
    for bi in range(2):
        for i in range(3):
            for j in range(5):
                scores[bi, i, j] = w @ torch.tanh(Wq @ q[bi, i] + Wk @ k[bi, j] + b)
    torch.testing.assert_close(att, scores.softmax(-1))
    torch.testing.assert_close(out, scores.softmax(-1) @ v)
    mod = AdditiveAttention(4, 6, 7)
    with torch.no_grad():
        mod.W_q.weight.copy_(Wq)
        mod.W_k.weight.copy_(Wk)
        mod.W_k.bias.copy_(b)
        mod.w.weight.copy_(w[None])
    torch.testing.assert_close(mod(q, k, v), out)
    # without the bias: the function's default, the module's bias=False
    nob = AdditiveAttention(4, 6, 7, bias=False)
    assert nob.W_k.bias is None
    with torch.no_grad():
        nob.W_q.weight.copy_(Wq), nob.W_k.weight.copy_(Wk), nob.w.weight.copy_(w[None])
    torch.testing.assert_close(nob(q, k, v), additive_attention(q, k, v, Wq, Wk, w))
    m = torch.ones(3, 5, dtype=torch.bool)
    m[:, 2] = False
    _, att_m = additive_attention(q, k, v, Wq, Wk, w, mask=m, return_weights=True)
    assert (att_m[..., 2] == 0).all()
    with pytest.raises(ValueError, match="W_q"):
        additive_attention(q, k, v, Wk, Wk, w)
    with pytest.raises(ValueError, match="b must"):
        additive_attention(q, k, v, Wq, Wk, w, b=torch.zeros(3))
    # gradients (the benchmark times forward + backward): checked in float64
    leaves = [x.double().requires_grad_() for x in (q, k, v, Wq, Wk, w, b)]
    assert torch.autograd.gradcheck(lambda q, k, v, Wq, Wk, w, b: additive_attention(q, k, v, Wq, Wk, w, b=b), leaves)


def test_additive_module_one_query_per_row_is_many_queries_with_tq_1():
    # chapter 2b's decoder step (query (B, d)) and chapter 3's batch of queries (B, Tq, d): one computation
    torch.manual_seed(0)
    att = AdditiveAttention(5, 6, 7)
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(4, 5, generator=g), torch.randn(4, 9, 6, generator=g), torch.randn(4, 9, 3, generator=g)
    mask = torch.arange(9)[None, :] < torch.tensor([[9], [1], [4], [7]])
    out, w = att(q, k, v, mask=mask, return_weights=True)
    out3, w3 = att(q[:, None], k, v, mask=mask[:, None], return_weights=True)
    assert out.shape == (4, 3) and w.shape == (4, 9)
    torch.testing.assert_close((out, w), (out3[:, 0], w3[:, 0]))
    torch.testing.assert_close(att(q, k), att(q, k, k))  # values default to the keys


def _unit_attention() -> AdditiveAttention:
    """d_query = d_key = d_attn = 1 with W = 2, U = 1, bias 0.5, v = 3: a score we can do by hand."""
    att = AdditiveAttention(1, 1, 1)
    with torch.no_grad():
        att.W_q.weight.fill_(2.0)  # chapter 2b's W
        att.W_k.weight.fill_(1.0)  # U
        att.W_k.bias.fill_(0.5)  # b
        att.w.weight.fill_(3.0)  # v
    return att


def test_additive_attention_equals_the_hand_computation():
    att = _unit_attention()
    q, keys = 0.25, [-1.0, 0.0, 2.0]
    ctx, w = att(torch.tensor([[q]]), torch.tensor([[[k] for k in keys]]), return_weights=True)
    scores = [3.0 * math.tanh(2.0 * q + 1.0 * k + 0.5) for k in keys]  # e_j = v tanh(W q + U k_j + b)
    z = sum(math.exp(s) for s in scores)
    expected = [math.exp(s) / z for s in scores]
    torch.testing.assert_close(w[0], torch.tensor(expected), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(ctx[0, 0], torch.tensor(sum(a * k for a, k in zip(expected, keys))), rtol=1e-6, atol=1e-7)
    # a masked key gets weight 0; the others share the mass in the same ratio
    ctx_m, w_m = att(torch.tensor([[q]]), torch.tensor([[[k] for k in keys]]), mask=torch.tensor([[True, True, False]]),
                     return_weights=True)
    z2 = math.exp(scores[0]) + math.exp(scores[1])
    torch.testing.assert_close(w_m[0], torch.tensor([math.exp(scores[0]) / z2, math.exp(scores[1]) / z2, 0.0]))
    torch.testing.assert_close(ctx_m[0, 0], torch.tensor(-math.exp(scores[0]) / z2))


def test_weights_sum_to_one_and_projected_keys_agree():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    att = AdditiveAttention(5, 6, 7)
    q, k = torch.randn(4, 5, generator=g), torch.randn(4, 9, 6, generator=g)
    mask = torch.arange(9)[None, :] < torch.tensor([[9], [1], [4], [7]])
    ctx, w = att(q, k, mask=mask, return_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(4))
    assert (w[~mask] == 0).all() and (w[mask] > 0).all()
    ctx2, w2 = att(q, k, mask=mask, return_weights=True, projected_keys=att.project_keys(k))
    torch.testing.assert_close((ctx2, w2), (ctx, w))
    torch.testing.assert_close(ctx, torch.einsum("bs,bsd->bd", w, k))


def test_additive_module_bad_input():
    att = AdditiveAttention(2, 3, 4)
    with pytest.raises(ValueError, match="query"):
        att(torch.randn(2, 3), torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match="keys"):
        att(torch.randn(2, 2), torch.randn(2, 5, 2))
    with pytest.raises(ValueError, match="mask"):
        att(torch.randn(2, 2), torch.randn(2, 5, 3), mask=torch.ones(2, 5))
    with pytest.raises(ValueError, match="d_attn"):
        AdditiveAttention(2, 3, 0)
    with pytest.raises(ValueError, match="values"):
        att(torch.randn(2, 2), torch.randn(2, 5, 3), torch.randn(2, 4, 3))
    with pytest.raises(TypeError, match="bias"):
        AdditiveAttention(2, 3, 4, bias=1)
    with pytest.raises(TypeError, match="keys"):
        att(torch.randn(2, 2), None)


# ---------------------------------------------------------------- multi-head
def _pair(D=16, H=4, bias=True, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    ref = nn.MultiheadAttention(D, H, bias=bias, batch_first=True).to(dtype).eval()
    # nn.MultiheadAttention initialises biases to zero: randomise them so the copy is tested.
    with torch.no_grad():
        if bias:
            ref.in_proj_bias.normal_()
            ref.out_proj.bias.normal_()
    ours = MultiHeadAttention.from_torch(ref).eval()
    return ref, ours


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", ["self", "cross", "self_padding", "self_causal", "cross_padding", "causal_padding", "float_mask", "no_bias"])
def test_mha_matches_torch(dtype, case):
    ref, ours = _pair(bias=case != "no_bias", dtype=dtype)
    g = torch.Generator().manual_seed(3)
    B, Tq, Tk, D = 3, 6, 6 if "cross" not in case else 9, 16
    x = torch.randn(B, Tq, D, generator=g, dtype=dtype)
    mem = torch.randn(B, Tk, D, generator=g, dtype=dtype) if "cross" in case else x
    kpm = None
    mask = None
    if "padding" in case:
        kpm = ~padding_mask([Tk, Tk - 2, 3], Tk)  # True = padding
    if "causal" in case:
        mask = causal_mask(Tq)
    if case == "float_mask":
        mask = torch.randn(Tq, Tk, generator=g, dtype=dtype)
    ref_mask = None if mask is None else (~mask if mask.dtype == torch.bool else mask)  # torch: True = forbidden
    ref_out, ref_w = ref(x, mem, mem, key_padding_mask=kpm, attn_mask=ref_mask, need_weights=True, average_attn_weights=False)
    out, w = ours(x, mem, mem, mask=mask, key_padding_mask=kpm, return_attention=True)
    fast = ours(x, mem, mem, mask=mask, key_padding_mask=kpm)
    torch.testing.assert_close(out, ref_out, **TOL[dtype])
    torch.testing.assert_close(w, ref_w, **TOL[dtype])
    torch.testing.assert_close(fast, out, **TOL[dtype])
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)), **TOL[dtype])
    if "causal" in case:
        torch.testing.assert_close(ours(x, is_causal=True, key_padding_mask=kpm), fast, **TOL[dtype])
        torch.testing.assert_close(ours(x, is_causal=True, key_padding_mask=kpm, return_attention=True)[1], w, **TOL[dtype])


def test_mha_gradients_match_torch_and_paths_agree():
    ref, ours = _pair()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    ref(x, x, x, need_weights=False, attn_mask=~causal_mask(5))[0].pow(2).sum().backward()
    ours(x, is_causal=True).pow(2).sum().backward()
    torch.testing.assert_close(ours.q_proj.weight.grad, ref.in_proj_weight.grad[:16], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ours.v_proj.bias.grad, ref.in_proj_bias.grad[32:], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ours.out_proj.weight.grad, ref.out_proj.weight.grad, atol=1e-10, rtol=1e-10)
    g_fast = torch.autograd.grad(ours(x, is_causal=True).sum(), ours.k_proj.weight)[0]
    g_expl = torch.autograd.grad(ours(x, is_causal=True, return_attention=True)[0].sum(), ours.k_proj.weight)[0]
    torch.testing.assert_close(g_fast, g_expl, atol=1e-10, rtol=1e-10)


def test_mha_masks_3d_4d_and_fully_masked_rows():
    _, ours = _pair()
    x = torch.randn(2, 4, 16, dtype=torch.float64)
    m3 = torch.rand(2, 4, 4) > 0.5
    m3[..., 0] = True
    a = ours(x, mask=m3, return_attention=True)
    b = ours(x, mask=m3[:, None].expand(2, 4, 4, 4))
    torch.testing.assert_close(a[0], b)
    assert (a[1][~m3[:, None].expand(2, 4, 4, 4)] == 0).all()
    dead = torch.ones(4, 4, dtype=torch.bool)
    dead[2] = False
    out, w = ours(x, mask=dead, return_attention=True)
    assert torch.isfinite(out).all() and (w[:, :, 2] == 0).all()
    torch.testing.assert_close(ours(x, mask=dead), out)
    # a fully masked query row outputs out_proj(0) = out_proj.bias
    torch.testing.assert_close(out[:, 2], ours.out_proj.bias.expand(2, 16))


def test_mha_dropout_only_in_training():
    ours = MultiHeadAttention(16, 4, dropout=0.5)
    x = torch.randn(2, 5, 16)
    ours.eval()
    torch.testing.assert_close(ours(x), ours(x))
    ours.train()
    assert not torch.allclose(ours(x), ours(x))


def test_mha_bad_input():
    with pytest.raises(ValueError, match="divisible by n_heads"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="n_heads"):
        MultiHeadAttention(10, 0)
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention(8, 2, dropout=1.5)
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match="query"):
        mha(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="key"):
        mha(x, torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match="key and value"):
        mha(x, torch.randn(2, 4, 8), torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match="batch"):
        mha(x, torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match="mask"):
        mha(x, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="mask"):
        mha(x, mask=torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="key_padding_mask"):
        mha(x, key_padding_mask=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="key_padding_mask"):
        mha(x, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="is_causal"):
        mha(x, torch.randn(2, 4, 8), is_causal=True)
    with pytest.raises(TypeError, match="mha"):
        MultiHeadAttention.from_torch(nn.Linear(8, 8))
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(8, 4).load_from_torch(nn.MultiheadAttention(8, 2))


def test_from_torch_keeps_dtype_and_copies_independently():
    ref = nn.MultiheadAttention(8, 2, batch_first=True).double()
    ours = MultiHeadAttention.from_torch(ref)
    assert ours.q_proj.weight.dtype == torch.float64
    with torch.no_grad():
        ref.in_proj_weight.zero_()
    assert ours.q_proj.weight.abs().sum() > 0
    assert math.isclose(ours.dropout, 0.0)


def test_float_mask_gradient_flows_like_torch():
    # A learned additive bias (e.g. relative positions) receives the same gradient as in PyTorch.
    q, k, v = _qkv(torch.float64)
    bias = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)  # (H, Tq, Tk), broadcast over B
    out = scaled_dot_product_attention(q, k, v, mask=bias)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    g = torch.randn_like(out)
    (gb,) = torch.autograd.grad(out, bias, g)
    (gb_ref,) = torch.autograd.grad(ref, bias, g)
    torch.testing.assert_close(gb, gb_ref, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("T", [256, 301])
def test_explicit_causal_path_in_halves_equals_one_call(T):
    """From CAUSAL_SPLIT_MIN_T tokens the explicit causal path skips the masked quarter: same numbers."""
    from llmbook.attention import CAUSAL_SPLIT_MIN_T, _causal_attention_in_halves, causal_mask

    assert T >= CAUSAL_SPLIT_MIN_T
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, T, 8, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    out1, w1 = scaled_dot_product_attention(q, k, v, mask=causal_mask(T), return_weights=True)
    out2, w2 = _causal_attention_in_halves(q, k, v)
    torch.testing.assert_close(out2, out1, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w2, w1, rtol=1e-12, atol=1e-12)
    assert torch.all(w2.triu(1) == 0)
    loss1 = (out1 ** 2).sum() + (w1 * torch.arange(T, dtype=w1.dtype)).sum()
    loss2 = (out2 ** 2).sum() + (w2 * torch.arange(T, dtype=w2.dtype)).sum()
    for a, b in zip(torch.autograd.grad(loss1, (q, k, v)), torch.autograd.grad(loss2, (q, k, v))):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)
    # through the module: weights requested (split path) vs the fused kernel
    mha = MultiHeadAttention(24, 3).double()
    x = torch.randn(2, T, 24, generator=g, dtype=torch.float64)
    out, attn = mha(x, is_causal=True, return_attention=True)
    torch.testing.assert_close(out, mha(x, is_causal=True), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(attn.sum(-1), torch.ones(2, 3, T, dtype=torch.float64))
