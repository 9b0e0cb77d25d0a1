"""Bahdanau's RNN encoder-decoder (llmbook.seq2seq_rnn): closed forms, masking, learning, bad input."""

import pytest
import torch

import llmbook.attention as attention
import llmbook.seq2seq_rnn as seq2seq_rnn
from llmbook.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from llmbook.toy_seq2seq import BOS, EOS, PAD, DigitTask, exact_match, make_batch, train_seq2seq


def test_the_score_is_the_books_one_additive_attention():
    # one class for the idea (issue 24): chapter 2b's decoder and chapter 3's timing use the same module
    assert not hasattr(seq2seq_rnn, "AdditiveAttention") or seq2seq_rnn.AdditiveAttention is attention.AdditiveAttention
    assert type(_model().attn) is attention.AdditiveAttention


def _model(attention=True, seed=0):
    torch.manual_seed(seed)
    return Seq2SeqRNN(Seq2SeqRNNConfig(d_embed=8, d_hidden=12, d_attn=10, attention=attention)).eval()


def test_encoder_ignores_padding_and_each_direction_reads_its_side():
    m = _model()
    src = torch.tensor([[5, 7, 3, 9]])
    padded = torch.tensor([[5, 7, 3, 9, PAD, PAD, PAD]])
    a, mask, s = m.encode(src)
    a_p, mask_p, s_p = m.encode(padded)
    torch.testing.assert_close(a_p[:, :4], a)  # both directions, every real position
    torch.testing.assert_close(s_p, s)
    assert mask_p.tolist() == [[True] * 4 + [False] * 3]
    # changing the first token changes the forward half everywhere, the backward half only at j = 0
    a2, _, _ = m.encode(torch.tensor([[6, 7, 3, 9]]))
    H = m.config.d_hidden
    assert (a2[0, :, :H] - a[0, :, :H]).abs().amax(-1).min() > 0
    torch.testing.assert_close(a2[0, 1:, H:], a[0, 1:, H:])
    assert (a2[0, 0, H:] - a[0, 0, H:]).abs().max() > 0
    # a batch with rows of different lengths equals each row alone
    batch = torch.tensor([[5, 7, 3, 9], [8, 4, PAD, PAD]])
    a_b, _, s_b = m.encode(batch)
    a_1, _, s_1 = m.encode(torch.tensor([[8, 4]]))
    torch.testing.assert_close(a_b[1, :2], a_1[0])
    torch.testing.assert_close(s_b[1], s_1[0])


def test_forward_shapes_alignment_and_greedy_pads_after_eos():
    m = _model()
    src, tgt_in, tgt_out = make_batch(DigitTask("reverse", 2, 6), 5, torch.Generator().manual_seed(1))
    logits, align = m(src, tgt_in, return_attention=True)
    assert logits.shape == (5, tgt_in.shape[1], 13) and align.shape == (5, tgt_in.shape[1], src.shape[1])
    torch.testing.assert_close(align.sum(-1), torch.ones(5, tgt_in.shape[1]))
    assert (align.masked_select((src == PAD)[:, None, :].expand_as(align)) == 0).all()
    torch.testing.assert_close(m(src, tgt_in), logits)
    ids, al = m.greedy_decode(src, BOS, EOS, 7, return_attention=True)
    assert ids.shape == (5, 7) and al.shape == (5, 7, src.shape[1])
    for row in ids.tolist():  # after the first EOS only padding
        if EOS in row:
            assert all(t == PAD for t in row[row.index(EOS) + 1:])
    # the fixed-context model: same interface, the decoder sees one vector
    m0 = _model(attention=False)
    assert m0(src, tgt_in).shape == logits.shape and m0.greedy_decode(src, BOS, EOS, 7).shape == (5, 7)
    assert sum(p.numel() for p in m0.parameters()) < sum(p.numel() for p in m.parameters())


def test_short_training_learns_the_anti_diagonal_alignment():
    torch.set_num_threads(1)
    task = DigitTask("reverse", 5, 5)
    torch.manual_seed(0)
    m = Seq2SeqRNN(Seq2SeqRNNConfig(d_embed=16, d_hidden=32, d_attn=32))
    train_seq2seq(m, task, 250, batch_size=64, lr=3e-3, warmup=20, seed=0, progress=False)
    src, tgt_in, tgt_out = make_batch(task, 200, torch.Generator().manual_seed(99))
    assert exact_match(m, src, tgt_out) > 0.9
    with torch.no_grad():
        _, align = m(src, tgt_in, return_attention=True)  # (B, 6, 5): output i (before EOS) reads source 4 - i
    hits = (align[:, :5].argmax(-1) == torch.arange(4, -1, -1)).float().mean()
    assert hits > 0.9, f"only {hits:.2f} of output steps attend most to the mirrored source position"
    assert align[:, :5].diagonal(dim1=1, dim2=2).mean() < align[:, :5].flip(-1).diagonal(dim1=1, dim2=2).mean()


@pytest.mark.parametrize("kwargs, word", [
    (dict(vocab_size=0), "vocab_size"), (dict(d_hidden=-1), "d_hidden"), (dict(d_attn=2.5), "d_attn"),
    (dict(attention="yes"), "attention"), (dict(pad_id=13), "pad_id"), (dict(d_embed=True), "d_embed"),
])
def test_bad_config(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=word):
        Seq2SeqRNNConfig(**kwargs)


def test_bad_inputs_name_the_parameter():
    m, m0 = _model(), _model(attention=False)
    src, tgt = torch.tensor([[4, 5]]), torch.tensor([[BOS, 5, 4]])
    with pytest.raises(TypeError, match="config"):
        Seq2SeqRNN({"vocab_size": 13})
    with pytest.raises(ValueError, match="src"):
        m(torch.tensor([4, 5]), tgt)
    with pytest.raises(ValueError, match="src"):
        m(torch.tensor([[4, 13]]), tgt)
    with pytest.raises(TypeError, match="src"):
        m(torch.tensor([[4.0, 5.0]]), tgt)
    with pytest.raises(ValueError, match="tgt_in"):
        m(src, torch.tensor([[BOS, 99]]))
    with pytest.raises(ValueError, match="tgt_in"):
        m(src, torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="batch size"):
        m(src, torch.tensor([[BOS], [BOS]]))
    with pytest.raises(ValueError, match="attention=True"):
        m0(src, tgt, return_attention=True)
    with pytest.raises(ValueError, match="attention=True"):
        m0.greedy_decode(src, BOS, EOS, 3, return_attention=True)
    with pytest.raises(ValueError, match="eos_id"):
        m.greedy_decode(src, BOS, 13, 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        m.greedy_decode(src, BOS, EOS, 0)
