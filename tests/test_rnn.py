"""llmbook.rnn against torch.nn.RNN / LSTM / GRU with copied weights, plus shapes and bad input."""

import pytest
import torch
import torch.nn as nn

from llmbook.rnn import (
    GRU,
    LSTM,
    BidirectionalSequenceRNN,
    CharLM,
    CharLMConfig,
    EmbedToken,
    FeedForwardSequenceModel,
    SimpleRNN,
    bits_per_char,
)

TOL = dict(atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("ours_cls, torch_cls", [(SimpleRNN, nn.RNN), (LSTM, nn.LSTM), (GRU, nn.GRU)])
@pytest.mark.parametrize("bias", [True, False])
def test_recurrent_equals_torch(ours_cls, torch_cls, bias):
    torch.manual_seed(0)
    ref = torch_cls(5, 7, batch_first=True, bias=bias).double()
    ours = ours_cls.from_torch(ref)
    x = torch.randn(3, 11, 5, dtype=torch.float64, requires_grad=True)
    if torch_cls is nn.LSTM:
        h0, c0 = torch.randn(1, 3, 7, dtype=torch.float64), torch.randn(1, 3, 7, dtype=torch.float64)
        ref_out, (ref_h, ref_c) = ref(x, (h0, c0))
        out, (h, c) = ours(x, (h0[0], c0[0]))
        torch.testing.assert_close(c, ref_c[0], **TOL)
    else:
        h0 = torch.randn(1, 3, 7, dtype=torch.float64)
        ref_out, ref_h = ref(x, h0)
        out, h = ours(x, h0[0])
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(h, ref_h[0], **TOL)
    g_ours = torch.autograd.grad(out.sum(), (x, ours.weight_hh_l0))
    g_ref = torch.autograd.grad(ref_out.sum(), (x, ref.weight_hh_l0))
    for a, b in zip(g_ours, g_ref):
        torch.testing.assert_close(a, b, **TOL)


def test_simple_rnn_is_the_elman_formula():
    torch.manual_seed(1)
    rnn = SimpleRNN(3, 4)
    x = torch.randn(1, 2, 3)
    h1 = torch.tanh(rnn.weight_ih_l0 @ x[0, 0] + rnn.bias_ih_l0 + rnn.bias_hh_l0)
    h2 = torch.tanh(rnn.weight_ih_l0 @ x[0, 1] + rnn.bias_ih_l0 + rnn.weight_hh_l0 @ h1 + rnn.bias_hh_l0)
    out, h = rnn(x)
    torch.testing.assert_close(out[0], torch.stack([h1, h2]))


@pytest.mark.parametrize("torch_cls", [nn.RNN, nn.LSTM, nn.GRU])
def test_bidirectional_equals_torch(torch_cls):
    torch.manual_seed(0)
    ref = torch_cls(4, 6, batch_first=True, bidirectional=True).double()
    ours = BidirectionalSequenceRNN.from_torch(ref)
    x = torch.randn(2, 9, 4, dtype=torch.float64)
    torch.testing.assert_close(ours(x), ref(x)[0], **TOL)


def test_feedforward_window_only_sees_last_n():
    torch.manual_seed(0)
    ff = FeedForwardSequenceModel(d_embed=3, d_hidden=5, n_context=3)
    x = torch.randn(1, 10, 3)
    y = ff(x)
    assert y.shape == (1, 10, 5)
    x2 = x.clone()
    x2[0, 2] += 1.0  # changes positions 2, 3, 4 only
    changed = (ff(x2) - y).abs().sum(-1)[0] > 0
    assert changed.tolist() == [False, False, True, True, True] + [False] * 5
    # explicit window at t = 5: tokens 3, 4, 5, oldest first
    h5 = torch.tanh(ff.proj(torch.cat([x[0, 3], x[0, 4], x[0, 5]])))
    torch.testing.assert_close(y[0, 5], h5)


def test_embed_token_is_row_lookup():
    e = EmbedToken(6, 3)
    ids = torch.tensor([[5, 0, 5]])
    torch.testing.assert_close(e(ids)[0], e.E[[5, 0, 5]])


@pytest.mark.parametrize("kind", ["ff", "rnn", "lstm", "gru"])
def test_char_lm_shapes_and_learns(kind):
    torch.manual_seed(0)
    m = CharLM(CharLMConfig(vocab_size=5, kind=kind, d_embed=8, d_hidden=16, n_context=2))
    seq = torch.tensor([[0, 1, 2, 3, 4] * 4])  # a deterministic cycle: learnable to ~0 bits
    ids, tgt = seq[:, :-1], seq[:, 1:]
    assert m(ids).shape == (1, 19, 5)
    before = bits_per_char(m, ids, tgt)
    opt = torch.optim.Adam(m.parameters(), lr=0.05)
    for _ in range(60):
        opt.zero_grad()
        m.loss(ids, tgt).backward()
        opt.step()
    assert bits_per_char(m, ids, tgt) < 0.2 < before


def test_bad_input():
    with pytest.raises(ValueError, match="hidden_size"):
        SimpleRNN(3, 0)
    with pytest.raises(ValueError, match="x"):
        SimpleRNN(3, 4)(torch.randn(2, 5, 2))
    with pytest.raises(TypeError, match="x"):
        LSTM(3, 4)(torch.zeros(2, 5, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="h0"):
        GRU(3, 4)(torch.randn(2, 5, 3), torch.zeros(3, 4))
    with pytest.raises(TypeError, match="module"):
        SimpleRNN.from_torch(nn.LSTM(3, 4))
    with pytest.raises(ValueError, match="num_layers"):
        LSTM.from_torch(nn.LSTM(3, 4, num_layers=2))
    with pytest.raises(ValueError, match="kind"):
        BidirectionalSequenceRNN(3, 4, kind="transformer")
    with pytest.raises(ValueError, match="ids"):
        EmbedToken(4, 2)(torch.tensor([[4]]))
    with pytest.raises(TypeError, match="ids"):
        EmbedToken(4, 2)(torch.tensor([[0.5]]))
    with pytest.raises(ValueError, match="n_context"):
        FeedForwardSequenceModel(2, 3, 0)
    with pytest.raises(ValueError, match="kind"):
        CharLM(CharLMConfig(vocab_size=4, kind="cnn"))
    with pytest.raises(TypeError, match="config"):
        CharLM({"vocab_size": 4})
