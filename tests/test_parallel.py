"""Tensor-parallel Linear layers equal the full matmul; pipeline stages and bubbles; device counts."""

import pytest
import torch

from llmbook.gpt import GPT, GPTConfig
from llmbook.parallel import (column_parallel_linear, devices_needed, pipeline_bubble_fraction, pipeline_stages,
                              row_parallel_linear)


@pytest.mark.parametrize("n_shards", [1, 2, 4])
@pytest.mark.parametrize("bias", [True, False])
def test_split_linear_equals_full(n_shards, bias):
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 12, bias=bias)
    x = torch.randn(2, 5, 8)
    b = lin.bias if bias else None
    with torch.no_grad():
        torch.testing.assert_close(column_parallel_linear(x, lin.weight, b, n_shards), lin(x))
        torch.testing.assert_close(row_parallel_linear(x, lin.weight, b, n_shards), lin(x))


def test_megatron_mlp_column_then_row():
    """Megatron's MLP: first Linear split by columns, GELU per shard, second by rows, one sum at the end."""
    torch.manual_seed(0)
    model = GPT(GPTConfig.baby(vocab_size=10, n_layer=1, d_model=16, n_head=2, d_ff=64, block_size=8))
    mlp = model.blocks[0].mlp
    x = torch.randn(3, 16)
    with torch.no_grad():
        full = mlp(x)
        P = 2
        w1, b1 = mlp.c_fc.weight.chunk(P, 0), mlp.c_fc.bias.chunk(P)
        w2 = mlp.c_proj.weight.chunk(P, 1)
        partial = [torch.nn.functional.gelu(x @ w1[k].T + b1[k], approximate="tanh") @ w2[k].T for k in range(P)]
        torch.testing.assert_close(sum(partial) + mlp.c_proj.bias, full, rtol=1e-5, atol=1e-6)


def test_pipeline_stages_cover_layers():
    for n_layer in (1, 5, 12, 96):
        for n_stages in range(1, min(n_layer, 9) + 1):
            stages = pipeline_stages(n_layer, n_stages)
            assert [i for s in stages for i in s] == list(range(n_layer))
            sizes = [len(s) for s in stages]
            assert max(sizes) - min(sizes) <= 1


def test_pipeline_of_gpt_blocks_equals_full_model():
    torch.manual_seed(0)
    model = GPT(GPTConfig.baby(vocab_size=10, n_layer=6, d_model=16, n_head=2, d_ff=32, block_size=8)).eval()
    idx = torch.randint(10, (2, 8))
    with torch.no_grad():
        full, _ = model(idx)
        h = model.wte(idx) + model.wpe(torch.arange(8))
        for stage in pipeline_stages(6, 3):  # each stage would live on its own device
            for i in stage:
                h, _ = model.blocks[i](h)
        torch.testing.assert_close(model.lm_head(model.ln_f(h)), full)


def test_bubble_and_devices():
    assert pipeline_bubble_fraction(1, 1) == 0
    assert pipeline_bubble_fraction(8, 8) == pytest.approx(7 / 15)
    assert pipeline_bubble_fraction(4, 100) < 0.03
    assert devices_needed(0, 80e9) == 1
    assert devices_needed(160e9, 80e9) == 2 and devices_needed(160e9 + 1, 80e9) == 3


@pytest.mark.parametrize("call, name", [
    (lambda: column_parallel_linear(torch.randn(2, 4), torch.randn(6, 4), n_shards=4), "n_shards"),
    (lambda: row_parallel_linear(torch.randn(2, 4), torch.randn(6, 4), n_shards=3), "n_shards"),
    (lambda: column_parallel_linear(torch.randn(2, 5), torch.randn(6, 4)), "features"),
    (lambda: column_parallel_linear(torch.randn(2, 4), torch.randn(6, 4), torch.randn(5)), "bias"),
    (lambda: column_parallel_linear(torch.randn(2, 4), torch.randn(6, 4), n_shards=0), "n_shards"),
    (lambda: pipeline_stages(2, 3), "n_stages"),
    (lambda: pipeline_stages(0, 1), "n_layer"),
    (lambda: pipeline_bubble_fraction(2, 0), "n_micro"),
    (lambda: devices_needed(1e9, 0), "device_bytes"),
    (lambda: devices_needed(-1, 1e9), "total_bytes"),
])
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
