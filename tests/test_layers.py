"""llmbook.layers: LayerNorm equals torch.nn.LayerNorm; FeedForward and AddNorm; bad input."""

import pytest
import torch
import torch.nn.functional as F

from llmbook.layers import AddNorm, FeedForward, LayerNorm


@pytest.mark.parametrize("bias", [True, False])
def test_layernorm_equals_torch(bias):
    torch.manual_seed(0)
    ours = LayerNorm(16, eps=1e-5, bias=bias)
    ref = torch.nn.LayerNorm(16, eps=1e-5, bias=bias)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(16))
        ref.weight.copy_(ours.weight)
        if bias:
            ours.bias.copy_(torch.randn(16))
            ref.bias.copy_(ours.bias)
    x = torch.randn(3, 7, 16) * 5 + 2
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)
    # float64: equal to round-off
    torch.testing.assert_close(ours.double()(x.double()), ref.double()(x.double()), atol=1e-12, rtol=1e-12)


def test_layernorm_independent_of_batch():
    ln = LayerNorm(8)
    x = torch.randn(10, 8)
    torch.testing.assert_close(ln(x)[:3], ln(x[:3]))


def test_layernorm_state_dict_matches_torch_names():
    assert set(LayerNorm(4).state_dict()) == set(torch.nn.LayerNorm(4).state_dict())


@pytest.mark.parametrize("act,ref", [("relu", F.relu), ("gelu", F.gelu), ("gelu_tanh", lambda h: F.gelu(h, approximate="tanh"))])
def test_feedforward_formula(act, ref):
    torch.manual_seed(0)
    ffn = FeedForward(6, 24, activation=act)
    x = torch.randn(2, 5, 6)
    expected = ref(x @ ffn.linear1.weight.T + ffn.linear1.bias) @ ffn.linear2.weight.T + ffn.linear2.bias
    torch.testing.assert_close(ffn(x), expected)


def test_feedforward_positionwise():
    ffn = FeedForward(4, 8)
    x = torch.randn(1, 6, 4)
    full = ffn(x)
    for t in range(6):
        torch.testing.assert_close(full[:, t], ffn(x[:, t : t + 1])[:, 0])


def test_addnorm():
    an = AddNorm(5)
    x, s = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    torch.testing.assert_close(an(x, s), F.layer_norm(x + s, (5,)), atol=1e-6, rtol=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="d_model"):
        LayerNorm(0)
    with pytest.raises(TypeError, match="d_model"):
        LayerNorm(4.0)
    with pytest.raises(ValueError, match="activation"):
        FeedForward(4, 8, activation="swish")
    with pytest.raises(ValueError, match="d_ff"):
        FeedForward(4, -1)
    with pytest.raises(ValueError, match="dropout"):
        FeedForward(4, 8, dropout=1.5)
    with pytest.raises(ValueError, match="features"):
        LayerNorm(4)(torch.randn(2, 5))
    with pytest.raises(ValueError, match="sublayer_out"):
        AddNorm(4)(torch.randn(2, 4), torch.randn(3, 4))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_layernorm_half_precision_in_float32(dtype):
    # Half-precision inputs are normalised in float32 and returned in their own dtype,
    # as torch.nn.LayerNorm does; an offset of 300 makes bfloat16 statistics useless.
    torch.manual_seed(0)
    x = (torch.randn(4, 256) + 300.0).to(dtype)
    ln = LayerNorm(256).to(dtype)
    y = ln(x)
    assert y.dtype == dtype
    expected = F.layer_norm(x.float(), (256,)).to(dtype)
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(y, torch.nn.LayerNorm(256).to(dtype)(x))
