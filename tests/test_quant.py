"""llmbook.quant: integer quantization within its error bound, GGUF blocks byte for byte as
``gguf.quants`` writes them (random tensors and SmolLM2's own), models with quantized weights,
and clear errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from llmbook import quant as Q
from llmbook.llama import Llama, LlamaConfig

gguf = pytest.importorskip("gguf")
GT = gguf.GGMLQuantizationType


def _rand(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


def _hard_tensors():
    """Random rows of many magnitudes, with outliers, blocks whose largest value is negative,
    a block of +0.0, a constant block and integer values (ties of the rounding)."""
    x = _rand(16, 128, seed=1) * torch.logspace(-4, 3, 16)[:, None]
    x[0, 5], x[1, 40] = 80.0, -95.0
    x[2, :32] = 0.0
    x[3, 32:64] = 1.5
    x[4] = torch.arange(128.0) - 63.0   # integers: x / d lands on halves in some blocks
    x[5, :32] = -x[5, :32].abs()         # all negative: Q4_0's signed maximum, Q4_1's negative minimum
    return [x, _rand(3, 5, 64, seed=2), _rand(1, 32, seed=3) * 1e-6, _rand(7, 96, seed=4) * 300]


# ----------------------------------------------------------------------- absmax and zero-point
@pytest.mark.parametrize("scheme", ["absmax", "zeropoint"])
@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("group_size", [None, 8, 32, 64])
@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.float32])
def test_error_within_half_a_step(scheme, bits, group_size, scale_dtype):
    x = _rand(6, 64, seed=bits) * torch.linspace(0.1, 5, 6)[:, None]
    x[0, 3] = 40.0                                                     # an outlier
    fn = Q.absmax_quantize if scheme == "absmax" else Q.zeropoint_quantize
    qx = fn(x, bits, group_size, scale_dtype)
    err = (qx.dequantize() - x).abs()
    g = x.shape[-1] if group_size is None else group_size
    step = qx.scale.float().reshape(-1, 1).expand(-1, x.numel() // qx.scale.numel()).reshape(x.shape) \
        if group_size is None else qx.scale.float().repeat_interleave(g, dim=-1)
    assert bool((err <= step / 2 * (1 + 1e-5) + 1e-7).all()), float((err - step / 2).max())
    if scheme == "absmax":
        qmax = 2 ** (bits - 1) - 1
        assert qx.q.dtype == torch.int8 and int(qx.q.abs().max()) <= qmax and qx.zero is None
    else:
        assert qx.q.dtype == torch.uint8 and int(qx.q.max()) <= 2 ** bits - 1
    assert qx.scale.dtype == scale_dtype and qx.dequantize().shape == x.shape


def test_absmax_by_hand_and_zero_stays_zero():
    x = torch.tensor([[0.5, -1.27, 0.0, 0.01]])
    qx = Q.absmax_quantize(x, 8, scale_dtype=torch.float32)
    assert qx.q.tolist() == [[50, -127, 0, 1]]
    torch.testing.assert_close(qx.scale, torch.tensor([1.27 / 127]))
    assert float(qx.dequantize()[0, 2]) == 0.0
    # zero-point: zeros are exact too, whatever the range
    y = torch.tensor([0.3, 0.0, 2.9, 1.1])
    assert float(Q.zeropoint_quantize(y, 4).dequantize()[1]) == 0.0


def test_float16_scales_are_rounded_up_so_nothing_clips():
    x = _rand(64, 32, seed=5)
    qx = Q.absmax_quantize(x, 4, group_size=32)
    exact = x.abs().amax(-1, keepdim=True) / 7                         # (64, 1): one group per row
    assert qx.scale.shape == exact.shape
    assert bool((qx.scale.float() >= exact).all())
    assert bool((qx.scale.float() <= exact * (1 + 2 ** -10)).all())  # at most one float16 step above


def test_absmax_wastes_codes_on_one_sided_data_and_zeropoint_does_not():
    x = _rand(4096, seed=6).abs()                                       # all positive (a ReLU's output)
    e_abs = (Q.fake_quantize(x, "absmax", 4) - x).pow(2).mean()
    e_zp = (Q.fake_quantize(x, "zeropoint", 4) - x).pow(2).mean()
    assert e_zp < e_abs / 3                                              # 15 steps over the range vs 7


def test_group_wise_survives_an_outlier_that_ruins_per_tensor():
    w = _rand(256, 256, seed=7) * 0.02
    w[17, 3] = 2.0                                                      # 100 standard deviations out
    zero_per_tensor = float((Q.absmax_quantize(w, 4).q == 0).float().mean())
    zero_grouped = float((Q.absmax_quantize(w, 4, group_size=32).q == 0).float().mean())
    assert zero_per_tensor > 0.99 and zero_grouped < 0.3


def test_bits_per_weight():
    w = _rand(4, 64)
    assert Q.absmax_quantize(w, 4, group_size=32).bits_per_weight == 4 + 16 / 32
    assert Q.zeropoint_quantize(w, 4, group_size=32).bits_per_weight == 4 + (16 + 4) / 32
    assert Q.absmax_quantize(w, 8).bits_per_weight == 8 + 16 / 256
    assert Q.absmax_quantize(w, 8, scale_dtype=torch.float32).bits_per_weight == 8 + 32 / 256
    assert {k: f.bits_per_weight for k, f in Q.GGUF_FORMATS.items()} == {"Q8_0": 8.5, "Q4_0": 4.5, "Q4_1": 5.0}


def test_fake_quantize_is_a_fixed_point_and_keeps_dtype():
    w = _rand(8, 64, seed=8)
    once = Q.fake_quantize(w, "absmax", 4, 32)
    assert torch.equal(Q.fake_quantize(once, "absmax", 4, 32), once)
    assert Q.fake_quantize(w.double(), "zeropoint", 8).dtype == torch.float64


# ----------------------------------------------------------------------- GGUF blocks
@pytest.mark.parametrize("fmt", ["Q8_0", "Q4_0", "Q4_1"])
def test_gguf_blocks_byte_identical_to_gguf_quants_on_random_tensors(fmt):
    for x in _hard_tensors():
        ours = Q.gguf_quantize(x, fmt)
        ref = gguf.quants.quantize(x.numpy(), GT[fmt])
        assert ours.dtype == torch.uint8 and ours.shape == ref.shape
        assert np.array_equal(ours.numpy(), ref), fmt
        back = Q.gguf_dequantize(torch.from_numpy(ref), fmt)
        assert np.array_equal(back.numpy(), gguf.quants.dequantize(ref, GT[fmt]))  # bit for bit


def test_q4_nibble_layout_and_header_by_hand():
    x = torch.arange(32.0)                                              # min 0, max 31
    b = Q.quantize_q4_1(x)
    d = np.frombuffer(b[:2].numpy().tobytes(), np.float16)[0]
    m = np.frombuffer(b[2:4].numpy().tobytes(), np.float16)[0]
    assert float(d) == pytest.approx(31 / 15, rel=1e-3) and float(m) == 0.0
    codes = torch.trunc(x / (31 / 15) + 0.5).to(torch.uint8)
    assert b[4:].tolist() == (codes[:16] | (codes[16:] << 4)).tolist()  # byte j: value j low, value j+16 high
    q0 = Q.quantize_q4_0(torch.cat([torch.tensor([-4.0]), torch.zeros(31)]))
    assert float(np.frombuffer(q0[:2].numpy().tobytes(), np.float16)[0]) == 0.5   # d = -4 / -8
    assert (q0[2] & 0x0F) == 0 and all(int(v) == 0x88 for v in q0[3:])              # -4 -> code 0; zeros -> 8


@pytest.mark.parametrize("fmt", ["Q8_0", "Q4_0", "Q4_1"])
def test_gguf_error_within_the_format_bound(fmt):
    x = _rand(64, 256, seed=9) * torch.rand(64, 1, generator=torch.Generator().manual_seed(9))
    blocks = x.reshape(-1, 32)
    err = (Q.gguf_dequantize(Q.gguf_quantize(x, fmt), fmt) - x).reshape(-1, 32).abs().amax(-1)
    amax = blocks.abs().amax(-1)
    if fmt == "Q8_0":   # half a step of d = max|x| / 127, plus 127 times d's float16 rounding
        d = amax / 127
        bound = d / 2 + 127 * (d.half().float() - d).abs()
    elif fmt == "Q4_1":  # half a step of (max - min) / 15, plus the float16 rounding of d and m
        lo, hi = blocks.amin(-1), blocks.amax(-1)
        d = (hi - lo) / 15
        bound = d / 2 + 15 * (d.half().float() - d).abs() + (lo.half().float() - lo).abs()
    else:               # the far end clips by a whole step d = max|x| / 8 (codes run -8..7)
        d = amax / 8
        bound = d + 8 * (d.half().float() - d).abs()
    assert bool((err <= bound * (1 + 1e-5)).all())


def test_q4_0_worst_case_is_a_whole_step():
    x = torch.cat([torch.tensor([2.0, -2.0]), torch.zeros(30)])
    err = (Q.dequantize_q4_0(Q.quantize_q4_0(x)) - x).abs().max()
    assert float(err) == pytest.approx(2.0 / 8)


def test_signed_zero_blocks_may_differ_only_in_the_sign_of_a_zero():
    """Known divergence: in a block whose minimum is a zero holding both -0.0 and +0.0, np.min's
    SIMD loop and torch.amin may pick different zeros; the values dequantise equal."""
    x = torch.zeros(32)
    x[7], x[0], x[3] = 1.0, -0.0, 0.0
    ours, ref = Q.quantize_q4_1(x), gguf.quants.quantize(x.numpy(), GT.Q4_1)
    diff = np.nonzero(ours.numpy() != ref)[0]
    assert set(diff.tolist()) <= {3}                                  # at most the sign byte of m
    assert np.array_equal(Q.dequantize_q4_1(ours).numpy(), gguf.quants.dequantize(ref, GT.Q4_1))


@pytest.mark.parametrize("fmt", ["Q4_0", "Q4_1", "Q8_0"])
def test_quantizing_the_dequantised_blocks_gives_the_same_bytes(fmt):
    x = _rand(32, 128, seed=10)
    b = Q.gguf_quantize(x, fmt)
    assert torch.equal(Q.gguf_quantize(Q.gguf_dequantize(b, fmt), fmt), b)


def test_converting_q4_0_to_q8_0_is_lossy():
    x = _rand(32, 128, seed=11)
    v4 = Q.dequantize_q4_0(Q.quantize_q4_0(x))
    assert not torch.equal(Q.dequantize_q8_0(Q.quantize_q8_0(v4)), v4)


def _smollm2_tensors(names=None):
    from llmbook.llama import smollm2_path
    reader = gguf.GGUFReader(smollm2_path())
    return [t for t in reader.tensors if t.tensor_type.name != "F32" and (names is None or t.name in names)]


SOME = {"token_embd.weight", "blk.0.attn_q.weight", "blk.27.ffn_gate.weight", "blk.29.ffn_down.weight"}


def _check_file_tensors(tensors, rows=None):
    """Each tensor's bytes (its first ``rows`` rows, or all): read, written back, and written in every format."""
    for t in tensors:
        data = t.data[:rows]
        raw = torch.from_numpy(np.array(data))
        w = Q.gguf_dequantize(raw, t.tensor_type.name)
        assert np.array_equal(w.numpy(), gguf.quants.dequantize(data, t.tensor_type)), t.name
        assert torch.equal(Q.gguf_quantize(w, t.tensor_type.name), raw), t.name   # the file's own bytes back
        for fmt in ("Q8_0", "Q4_0", "Q4_1"):
            ref = gguf.quants.quantize(w.numpy(), GT[fmt])
            assert np.array_equal(Q.gguf_quantize(w, fmt).numpy(), ref), (t.name, fmt)


def test_gguf_blocks_byte_identical_on_smollm2_tensors():
    tensors = _smollm2_tensors(SOME)
    assert len(tensors) == len(SOME) and {t.tensor_type.name for t in tensors} == {"Q8_0", "Q4_1"}
    _check_file_tensors(tensors, rows=256)   # the first 256 rows of each (every row in the slow test)


@pytest.mark.slow
def test_gguf_blocks_byte_identical_on_every_smollm2_tensor():
    tensors = _smollm2_tensors()
    assert len(tensors) == 211
    _check_file_tensors(tensors)


# ----------------------------------------------------------------------- models
def _tiny_llama(seed=0):
    torch.manual_seed(seed)
    return Llama(LlamaConfig.tiny()).eval()


def test_quantizable_linears_skip_the_tied_output_layer():
    m = _tiny_llama()
    names = [n for n, _ in Q.quantizable_linears(m)]
    assert len(names) == 7 * m.config.n_layer and "lm_head" not in names
    untied = Llama(LlamaConfig(**{**LlamaConfig.tiny().__dict__, "tie_embeddings": False}))
    assert "lm_head" in [n for n, _ in Q.quantizable_linears(untied)]


def test_fake_quantized_replaces_then_restores():
    m = _tiny_llama()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    idx = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        plain = m(idx)
        with Q.fake_quantized(m, lambda w: Q.gguf_dequantize(Q.gguf_quantize(w, "Q4_0"), "Q4_0")) as info:
            quantized = m(idx)
            w = m.layers[0].mlp.up_proj.weight
            assert torch.equal(w, Q.dequantize_q4_0(Q.quantize_q4_0(before["layers.0.mlp.up_proj.weight"])))
    assert info == {"matrices": 14, "weights": sum(lin.weight.numel() for _, lin in Q.quantizable_linears(m))}
    assert not torch.equal(plain, quantized)
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())
    with pytest.raises(ValueError, match="fn must return"):
        with Q.fake_quantized(m, lambda w: w[:1]):
            pass
    assert all(torch.equal(before[k], v) for k, v in m.state_dict().items())   # restored after the error


@pytest.mark.parametrize("fmt", ["Q8_0", "Q4_1"])
def test_quant_linear_equals_the_dequantised_weight_and_saves_memory(fmt):
    lin = torch.nn.Linear(64, 48)
    ql = Q.QuantLinear.from_linear(lin, fmt)
    x = _rand(5, 64, seed=12)
    w = Q.gguf_dequantize(Q.gguf_quantize(lin.weight.detach(), fmt), fmt)
    torch.testing.assert_close(ql(x), F.linear(x, w, lin.bias), rtol=0, atol=0)
    assert ql.blocks.numel() == 48 * 64 // 32 * Q.GGUF_FORMATS[fmt].block_bytes
    m = _tiny_llama()
    fp32 = Q.model_nbytes(m)
    idx = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.no_grad(), Q.fake_quantized(m, lambda v: Q.gguf_dequantize(Q.gguf_quantize(v, fmt), fmt)):
        want = m(idx)
    Q.quantize_linears(m, fmt)
    with torch.no_grad():
        torch.testing.assert_close(m(idx), want, rtol=0, atol=0)
    n = sum(lin.in_features * lin.out_features for _, lin in Q.quantizable_linears(_tiny_llama()))
    assert fp32 - Q.model_nbytes(m) == n * 4 - n // 32 * Q.GGUF_FORMATS[fmt].block_bytes


def test_model_nbytes_counts_a_tied_tensor_once():
    m = _tiny_llama()
    c = m.config
    assert Q.model_nbytes(m) == 4 * m.num_parameters()
    untied = Llama(LlamaConfig(**{**c.__dict__, "tie_embeddings": False}))
    assert Q.model_nbytes(untied) - Q.model_nbytes(m) == 4 * c.vocab_size * c.d_model  # one table, not two


def test_kv_fake_quantized_rounds_keys_and_values_per_token_and_head():
    m = _tiny_llama()
    idx = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    seen = {}
    h = m.layers[1].self_attn.k_proj.register_forward_hook(lambda mod, a, out: seen.__setitem__("k", (a[0], out)))
    with torch.no_grad():
        plain = m(idx)
        with Q.kv_fake_quantized(m, bits=8) as n:
            quantized = m(idx)
        after = m(idx)
    h.remove()
    assert n == m.config.n_layer
    x, k = seen["k"]                                      # the last run with the hooks is `after`: plain again
    assert torch.equal(after, plain) and not torch.equal(quantized, plain)
    raw = m.layers[1].self_attn.k_proj(x)
    hd = m.config.head_dim
    want = Q.fake_quantize(raw, "absmax", 8, group_size=hd)
    assert not torch.equal(want, raw)
    with torch.no_grad(), Q.kv_fake_quantized(m, bits=8):
        torch.testing.assert_close(m.layers[1].self_attn.k_proj(x), want, rtol=0, atol=0)
    assert float((quantized - plain).abs().max()) < 0.05 * float(plain.abs().max())


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, exc, name", [
    (lambda: Q.absmax_quantize(torch.arange(4), 8), TypeError, "x must be a floating"),
    (lambda: Q.absmax_quantize([1.0, 2.0], 8), TypeError, "x must be a floating"),
    (lambda: Q.absmax_quantize(torch.tensor([1.0, float("nan")]), 8), ValueError, "x holds NaN"),
    (lambda: Q.absmax_quantize(torch.ones(4), 9), ValueError, "bits must be"),
    (lambda: Q.zeropoint_quantize(torch.ones(4), 1), ValueError, "bits must be"),
    (lambda: Q.absmax_quantize(torch.ones(4), 4.0), ValueError, "bits must be"),
    (lambda: Q.absmax_quantize(torch.ones(2, 6), 4, group_size=4), ValueError, "group_size=4 must divide"),
    (lambda: Q.absmax_quantize(torch.ones(2, 6), 4, group_size=0), ValueError, "group_size must be"),
    (lambda: Q.absmax_quantize(torch.ones(4), 4, scale_dtype=torch.bfloat16), ValueError, "scale_dtype"),
    (lambda: Q.absmax_quantize(torch.full((4,), 1e6), 4), ValueError, "too large for a float16 scale"),
    (lambda: Q.absmax_quantize(torch.empty(0), 4), ValueError, "x is empty"),
    (lambda: Q.fake_quantize(torch.ones(4), "minmax"), ValueError, "scheme must be one of"),
    (lambda: Q.gguf_quantize(torch.ones(2, 40), "Q4_1"), ValueError, "multiple of 32"),
    (lambda: Q.gguf_quantize(torch.ones(32), "Q4_K"), ValueError, "fmt must be one of"),
    (lambda: Q.gguf_dequantize(torch.ones(20), "Q4_1"), TypeError, "blocks must be a torch.uint8"),
    (lambda: Q.gguf_dequantize(torch.zeros(21, dtype=torch.uint8), "Q4_1"), ValueError, "multiple of 20"),
    (lambda: Q.QuantLinear(torch.ones(4, 32, 1)), ValueError, "weight must be a 2-D"),
    (lambda: Q.QuantLinear(torch.ones(4, 32), "Q4_1", bias=torch.ones(5)), ValueError, "bias must be"),
    (lambda: Q.QuantLinear.from_linear(torch.nn.Conv1d(2, 2, 1)), TypeError, "linear must be"),
    (lambda: Q.quantize_linears(torch.nn.Linear(32, 32), "int4"), ValueError, "fmt must be one of"),
    (lambda: Q.quantizable_linears("model"), TypeError, "model must be"),
    (lambda: Q.model_nbytes(None), TypeError, "model must be"),
])
def test_bad_input_names_the_parameter(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_bad_input_of_the_context_managers():
    with pytest.raises(TypeError, match="fn must be a function"):
        with Q.fake_quantized(torch.nn.Linear(32, 32), "Q4_1"):
            pass
    with pytest.raises(TypeError, match="model must be an llmbook.llama.Llama"):
        with Q.kv_fake_quantized(torch.nn.Linear(32, 32)):
            pass
    with pytest.raises(ValueError, match="bits must be"):
        with Q.kv_fake_quantized(_tiny_llama(), bits=16):
            pass
