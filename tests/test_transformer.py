"""llmbook.transformer: equal to torch.nn.Transformer with copied weights; presets; bad input; toy task."""

import pytest
import torch
from torch import nn

from llmbook.transformer import DecoderLayer, Transformer, TransformerConfig, copy_from_torch


def _pair(norm_first: bool, dtype=torch.float32, activation="relu"):
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=3, d_ff=64, dropout=0.0,
                            norm_first=norm_first, final_norm=True, activation=activation)
    ours = Transformer(cfg).to(dtype).eval()
    ref = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=64,
                         dropout=0.0, batch_first=True, norm_first=norm_first, activation=activation).to(dtype).eval()
    copy_from_torch(ours, ref)
    return ours, ref


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_equals_torch_transformer(norm_first, dtype, tol):
    ours, ref = _pair(norm_first, dtype)
    torch.manual_seed(1)
    B, S, T = 3, 7, 5
    src, tgt = torch.randn(B, S, 32, dtype=dtype), torch.randn(B, T, 32, dtype=dtype)
    src_pad = torch.zeros(B, S, dtype=torch.bool)
    src_pad[0, 5:] = True  # example 0 has 5 real source tokens
    src_pad[2, 3:] = True
    tgt_pad = torch.zeros(B, T, dtype=torch.bool)
    tgt_pad[1, 4:] = True
    causal_blocked = nn.Transformer.generate_square_subsequent_mask(T, dtype=dtype)  # float, -inf above diagonal
    with torch.no_grad():
        expected = ref(src, tgt, tgt_mask=causal_blocked, src_key_padding_mask=src_pad,
                       tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, tgt_is_causal=True)
        memory = ours.encoder(src, key_padding_mask=src_pad)
        got = ours.decoder(tgt, memory, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad, is_causal=True)
        # The explicit path that returns attention maps gives the same numbers.
        memory2, enc_maps = ours.encoder(src, key_padding_mask=src_pad, return_attention=True)
        got2, self_maps, cross_maps = ours.decoder(tgt, memory2, tgt_key_padding_mask=tgt_pad,
                                                   memory_key_padding_mask=src_pad, return_attention=True)
    torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
    torch.testing.assert_close(got2, expected, atol=tol, rtol=tol)
    assert len(enc_maps) == 2 and len(self_maps) == 3 and len(cross_maps) == 3
    assert cross_maps[0].shape == (B, 4, T, S)
    # padding gets no attention, the future gets no attention, rows sum to 1
    assert cross_maps[0][0, :, :, 5:].abs().max() == 0
    assert torch.triu(self_maps[0][0, 0], diagonal=1).abs().max() == 0
    torch.testing.assert_close(cross_maps[-1].sum(-1), torch.ones(B, 4, T, dtype=dtype))


def test_equals_torch_with_bool_mask_and_gelu():
    ours, ref = _pair(False, torch.float64, activation="gelu")
    src, tgt = torch.randn(2, 6, 32, dtype=torch.float64), torch.randn(2, 4, 32, dtype=torch.float64)
    blocked = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)  # torch: True = NOT allowed
    with torch.no_grad():
        expected = ref(src, tgt, tgt_mask=blocked)
        got = ours.decoder(tgt, ours.encoder(src), tgt_mask=~blocked, is_causal=False)  # ours: True = allowed
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


def test_base_preset_parameter_count():
    cfg = TransformerConfig.base()
    assert (cfg.n_encoder_layers, cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.dropout) == (6, 512, 8, 2048, 0.1)
    with torch.device("meta"):
        model = Transformer(cfg)
    n = sum(p.numel() for p in model.parameters())
    # the paper reports 65M for the base model (its table 3); shared 37k vocabulary
    assert 60e6 < n < 66e6, n
    assert model.src_embed.weight is model.tgt_embed.weight


def test_shared_weights_and_scaling():
    torch.manual_seed(0)
    cfg = TransformerConfig.tiny(vocab_size=11)
    model = Transformer(cfg).eval()
    src, tgt = torch.tensor([[3, 4, 5, 0]]), torch.tensor([[1, 5, 4]])
    logits = model(src, tgt)
    h = model.decoder(model.tgt_pos(model.tgt_embed(tgt) * cfg.d_model**0.5), model.encode(src),
                      tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0)
    torch.testing.assert_close(logits, h @ model.src_embed.weight.T)
    # padding in the source changes nothing for the real tokens
    torch.testing.assert_close(model(src[:, :3], tgt), logits, atol=1e-5, rtol=1e-5)


def test_decoder_is_causal():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(vocab_size=11)).eval()
    src = torch.tensor([[3, 4, 5]])
    a = model(src, torch.tensor([[1, 5, 4, 7]]))
    b = model(src, torch.tensor([[1, 5, 9, 9]]))
    torch.testing.assert_close(a[:, :2], b[:, :2])


def test_return_attention_dict():
    model = Transformer(TransformerConfig.tiny(vocab_size=11)).eval()
    logits, maps = model(torch.tensor([[3, 4, 5]]), torch.tensor([[1, 5]]), return_attention=True)
    assert set(maps) == {"encoder", "decoder", "cross"}
    assert maps["cross"][0].shape == (1, 2, 2, 3)
    torch.testing.assert_close(logits, model(torch.tensor([[3, 4, 5]]), torch.tensor([[1, 5]])))


def test_bad_input():
    with pytest.raises(ValueError, match="n_heads"):
        TransformerConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="d_model"):
        TransformerConfig(d_model=15, n_heads=3)  # odd width: no sine/cosine pairs
    with pytest.raises(ValueError, match="share_embeddings"):
        TransformerConfig(src_vocab_size=10, tgt_vocab_size=12)
    with pytest.raises(ValueError, match="positional"):
        TransformerConfig(positional="rotary")
    layer = DecoderLayer(32, 4, 64)
    with pytest.raises(ValueError, match="memory.*d_model"):
        layer(torch.randn(1, 3, 32), torch.randn(1, 5, 48))  # encoder 48 wide, decoder 32
    model = Transformer(TransformerConfig.tiny(vocab_size=11, positional="learned", max_len=8))
    with pytest.raises(ValueError, match="max_len"):
        model(torch.randint(3, 11, (1, 9)), torch.tensor([[1]]))
    with pytest.raises(ValueError, match="src"):
        model(torch.tensor([[3, 40]]), torch.tensor([[1]]))
    with pytest.raises(TypeError, match="tgt_in"):
        model(torch.tensor([[3, 4]]), torch.tensor([[1.0]]))
    with pytest.raises(ValueError, match="final_norm"):
        copy_from_torch(model, nn.Transformer(d_model=32, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                              dim_feedforward=64, batch_first=True))
