"""LLaMA building blocks against closed forms, KV-cache decoding, and the GGUF loader's checks.

The full SmolLM2-vs-transformers logits comparison (max difference 0.0 measured) is
marked slow: loading both models takes minutes on a busy 2-core machine.
"""

import shutil

import pytest
import torch
import torch.nn.functional as F

from llmbook.llama import (
    Llama, LlamaConfig, RMSNorm, SwiGLU, generate, load_gguf, read_gguf_config,
    smollm2_path, unpermute_qk, expected_gguf_tensors,
)


def test_rmsnorm_closed_form():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8)
    n = RMSNorm(8, eps=1e-5)
    with torch.no_grad():
        n.weight.copy_(torch.linspace(0.5, 2.0, 8))
    want = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-5) * n.weight
    torch.testing.assert_close(n(x), want)


def test_swiglu_closed_form():
    torch.manual_seed(0)
    m = SwiGLU(6, 10)
    x = torch.randn(2, 4, 6)
    a, b = x @ m.gate_proj.weight.T, x @ m.up_proj.weight.T
    want = (a * torch.sigmoid(a) * b) @ m.down_proj.weight.T
    torch.testing.assert_close(m(x), want)


def test_cached_equals_uncached_generation_and_attention_path():
    torch.manual_seed(0)
    m = Llama(LlamaConfig.tiny()).eval()
    idx = torch.tensor([[1, 5, 9, 3]])
    a = generate(m, idx, 12)
    b = generate(m, idx, 12, use_cache=False)
    assert torch.equal(a, b)
    with torch.no_grad():
        l1 = m(idx)
        l2, atts = m(idx, return_attention=True)
    torch.testing.assert_close(l1, l2)
    assert len(atts) == 2 and atts[0].shape == (1, 4, 4, 4)
    torch.testing.assert_close(atts[0].sum(-1), torch.ones(1, 4, 4))
    assert float(atts[0][0, 0].triu(1).abs().max()) == 0.0  # causal


def test_unpermute_inverts_llama_cpp_permute():
    w = torch.randn(12, 5)
    n_head = 2
    # llama.cpp's convert script: reshape(n_head, 2, hd/2, ...).swapaxes(1, 2)
    permuted = w.reshape(n_head, 2, 3, 5).transpose(1, 2).reshape(12, 5)
    torch.testing.assert_close(unpermute_qk(permuted, n_head), w)


def test_bad_config_and_input():
    with pytest.raises(ValueError, match="n_kv_head"):
        LlamaConfig(n_head=9, n_kv_head=2)
    with pytest.raises(ValueError, match="idx"):
        Llama(LlamaConfig.tiny())(torch.zeros(3))


def test_preset_matches_gguf_header():
    assert read_gguf_config(smollm2_path()) == LlamaConfig.smollm2_135m()
    assert len(expected_gguf_tensors(LlamaConfig.smollm2_135m())) == 272


def test_truncated_gguf_is_rejected(tmp_path):
    src = smollm2_path()
    bad = tmp_path / "cut.gguf"
    with open(src, "rb") as f, open(bad, "wb") as g:
        g.write(f.read(20_000_000))
    with pytest.raises(ValueError, match="truncated|corrupt"):
        load_gguf(bad)
    with pytest.raises(FileNotFoundError):
        load_gguf(tmp_path / "missing.gguf")


@pytest.mark.slow
def test_smollm2_logits_match_transformers():
    from transformers import LlamaForCausalLM

    p = smollm2_path()
    ours = load_gguf(p)
    hf = LlamaForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, torch_dtype=torch.float32).eval()
    ids = torch.tensor([[1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308]])
    with torch.no_grad():
        a, b = ours(ids), hf(ids).logits
    assert float((a - b).abs().max() / b.abs().max()) < 1e-4
