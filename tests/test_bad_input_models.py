"""Bad inputs to the models get clear errors naming the parameter (issue 17, items 1, 6, 9, 10).

One shared check (``llmbook.device.check_index_range``) guards token ids and labels in
every model; on the CPU it raises ``ValueError``, on CUDA it is a sync-free device assert
(tests/test_cuda.py). Also: the sync-free paths used off the CPU give the CPU's numbers.
"""

from __future__ import annotations

import pytest
import torch

import llmbook.attention as attention
import llmbook.moe as moe
from llmbook.attention import MultiHeadAttention
from llmbook.bert import BertConfig, BertForPreTraining
from llmbook.device import check_index_range
from llmbook.gpt import GPT, GPTConfig
from llmbook.llama import Llama, LlamaConfig
from llmbook.llama import generate as llama_generate
from llmbook.moe import MoEGPT


def gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32))


# ---------------------------------------------------------------------- token ids (item 1)
@pytest.mark.parametrize("bad", [-1, 64, 1000])
def test_llama_rejects_out_of_range_ids_in_forward_and_generate(bad):
    model = Llama(LlamaConfig.tiny())
    idx = torch.tensor([[1, bad, 2]])
    with pytest.raises(ValueError, match=r"idx must lie in \[0, 64\)"):
        model(idx)
    with pytest.raises(ValueError, match=r"idx must lie in \[0, 64\)"):
        llama_generate(model, idx, 2)


@pytest.mark.parametrize("make", [gpt, lambda: MoEGPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2,
                                                                 d_model=16, d_ff=32), n_experts=2, k=1)])
def test_gpt_family_rejects_out_of_range_ids(make):
    with pytest.raises(ValueError, match=r"idx must lie in \[0, 11\) \(token ids\); 2 values do not, ranging over \[-3, 11\]"):
        make()(torch.tensor([[0, -3, 11, 4]]))


def test_check_index_range_error_types():
    with pytest.raises(TypeError, match="labels must be an integer tensor"):
        check_index_range("labels", torch.tensor([1.0]), 3)
    check_index_range("labels", torch.tensor([-100, 2]), 3, ignore_index=-100)  # ignored positions pass
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\) .* \(or -100 to ignore a position\)"):
        check_index_range("labels", torch.tensor([-100, 3]), 3, ignore_index=-100)


# ---------------------------------------------------------------------- prompts (item 9)
@pytest.mark.parametrize("make, gen", [(gpt, lambda m, p: m.generate(p, 2)),
                                       (lambda: Llama(LlamaConfig.tiny()), lambda m, p: llama_generate(m, p, 2))],
                         ids=["gpt", "llama"])
def test_generate_with_a_1d_or_list_prompt_says_add_a_batch_dimension(make, gen):
    model = make()
    with pytest.raises(ValueError, match=r"idx must be a \(B, T\) integer tensor.*add a batch dimension"):
        gen(model, torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match=r"idx must be a \(B, T\) torch.Tensor.*got list.*torch.tensor\(\[ids\]\)"):
        gen(model, [1, 2, 3])


# ---------------------------------------------------------------------- targets and labels (item 6)
def test_gpt_targets_out_of_range_float_or_all_ignored():
    model, idx = gpt(), torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 11\).*or -1 to ignore"):
        model(idx, torch.tensor([[1, 11, 2]]))
    with pytest.raises(ValueError, match=r"targets must lie"):
        model(idx, torch.tensor([[1, -2, 2]]))
    with pytest.raises(TypeError, match="targets must be an integer tensor"):
        model(idx, torch.tensor([[1.0, 2.0, 3.0]]))
    with pytest.raises(ValueError, match=r"targets: every position is -1"):
        model(idx, torch.full((1, 3), -1))
    _, loss = model(idx, torch.tensor([[-1, 2, -1]]))  # some ignored: a finite loss
    assert torch.isfinite(loss)


def test_bert_labels_out_of_range_float_and_all_ignored():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.tiny(vocab_size=30, max_position=8))
    ids = torch.tensor([[1, 5, 6, 2]])
    with pytest.raises(ValueError, match=r"mlm_labels must lie in \[0, 30\)"):
        model(ids, mlm_labels=torch.tensor([[-100, 30, -100, -100]]))
    with pytest.raises(TypeError, match="mlm_labels must be an integer tensor"):
        model(ids, mlm_labels=torch.tensor([[-100.0, 3.0, -100.0, -100.0]]))
    with pytest.raises(ValueError, match=r"nsp_labels must lie in \[0, 2\)"):
        model(ids, nsp_labels=torch.tensor([2]))
    with pytest.raises(TypeError, match="nsp_labels must be an integer tensor"):
        model(ids, nsp_labels=torch.tensor([1.0]))
    with pytest.raises(ValueError, match=r"nsp_labels must be a tensor of shape \(1,\)"):
        model(ids, nsp_labels=torch.tensor([1, 0]))
    out = model(ids, mlm_labels=torch.full((1, 4), -100))  # nothing masked: a documented 0, not NaN
    assert out.mlm_loss.item() == 0.0


# ---------------------------------------------------------------------- devices
def test_inputs_on_another_device_than_the_model_are_named():
    model = gpt().to("meta")
    with pytest.raises(ValueError, match=r"idx is on cpu but the model is on meta; move it with idx.to\('meta'\)"):
        model(torch.tensor([[1, 2]]))
    model = gpt()
    with pytest.raises(ValueError, match=r"targets is on meta but the model is on cpu"):
        model(torch.tensor([[1, 2]]), torch.zeros(1, 2, dtype=torch.long, device="meta"))


# ---------------------------------------------------------------------- MultiHeadAttention (item 10)
def test_mha_mismatched_dtypes_are_named():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    with pytest.raises(TypeError, match=r"key has dtype torch.float64 but the module's weights are torch.float32"):
        mha(x, x.double(), x)
    with pytest.raises(TypeError, match=r"query has dtype torch.float16"):
        mha(x.half())


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_mha_nan_or_inf_input_is_named_on_cpu(bad):
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    y = x.clone()
    y[0, 1, 2] = bad
    with pytest.raises(ValueError, match="value contains NaN or infinite values"):
        mha(x, x, y)


# ---------------------------------------------------------------------- sync-free paths agree
def test_dead_row_softmax_without_host_check_matches(monkeypatch):
    """Off the CPU the masked softmax always takes the dead-row path; same numbers and gradients."""
    q, k, v = (torch.randn(2, 4, 8, requires_grad=True) for _ in range(3))
    for mask in (torch.rand(2, 4, 4) > 0.3, torch.ones(4, 4, dtype=torch.bool).tril()):
        mask = mask.clone()
        mask[..., 0, :] = False  # one dead row
        ref = attention.scaled_dot_product_attention(q, k, v, mask=mask)
        g_ref = torch.autograd.grad(ref.sum(), (q, k, v))
        monkeypatch.setattr(attention, "values_checkable", lambda t: False)
        out = attention.scaled_dot_product_attention(q, k, v, mask=mask)
        g = torch.autograd.grad(out.sum(), (q, k, v))
        monkeypatch.undo()
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
        for a, b in zip(g, g_ref):
            torch.testing.assert_close(a, b)


def test_moe_dense_dispatch_matches_sparse(monkeypatch):
    """The GPU/compile path (every expert on every token, zero gates) gives the CPU path's output."""
    torch.manual_seed(0)
    layer = moe.MoEFeedForward(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32),
                               n_experts=4, k=2)
    x = torch.randn(3, 5, 16)
    ref = layer(x)
    monkeypatch.setattr(moe, "values_checkable", lambda t: False)
    torch.testing.assert_close(layer(x), ref, rtol=1e-5, atol=1e-6)


def test_mha_finite_check_is_exact_when_the_sum_overflows():
    """The one-reduction NaN/inf check falls back to the element-wise test when the sum overflows."""
    from llmbook.attention import _all_finite

    big = torch.full((4, 8), 3e38)  # every element finite, the float32 sum is not
    assert _all_finite(big)
    for bad in (float("nan"), float("inf"), float("-inf")):
        y = big.clone()
        y[1, 2] = bad
        assert not _all_finite(y)
    assert _all_finite(torch.arange(5))  # integers are always finite


def test_mha_self_attention_nan_is_named_once_checked():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    x[0, 2, 1] = float("nan")
    with pytest.raises(ValueError, match="query contains NaN or infinite values"):
        mha(x)  # self-attention: query, key and value are one tensor
