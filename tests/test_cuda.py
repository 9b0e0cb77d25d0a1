"""The book on a CUDA GPU: the same numbers as the CPU, the cache, bf16 training, NCCL.

Every test is marked ``cuda`` and skipped when torch sees no CUDA device, so ``make test``
(``make test-unit``) runs them exactly when a GPU is present. Tolerances: float32 matmuls
on a GPU sum in another order than on the CPU, and TF32 is left off here (PyTorch's
default for matmuls), so logits agree to about 1e-4 relative; the limits below are
2e-4 relative and 2e-4 absolute on logits of size ~1, and 1e-3 for the
MiniLM-sized BERT, which has six layers of post-LayerNorm to amplify rounding.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from llmbook.bert import Bert, BertConfig
from llmbook.gpt import GPT, GPTConfig
from llmbook.llama import Llama, LlamaConfig
from llmbook.llama import generate as llama_generate
from llmbook.moe import MoEGPT
from llmbook.train import TrainConfig, random_windows, train

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
ROOT = Path(__file__).resolve().parents[1]
RTOL = ATOL = 2e-4


@pytest.fixture(autouse=True)
def no_tf32():
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(old)


def ids(vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(0))


def gpt_config() -> GPTConfig:
    return GPTConfig(vocab_size=65, block_size=32, n_layer=2, n_head=4, d_model=64, d_ff=256)


@pytest.mark.parametrize("make", [lambda: GPT(gpt_config()), lambda: MoEGPT(gpt_config(), n_experts=4, k=2),
                                  lambda: GPT(GPTConfig.gpt3("small", vocab_size=65, block_size=32, n_layer=2,
                                                             n_head=4, d_model=64, d_ff=256, local_window=8))],
                         ids=["gpt", "moe", "gpt3-banded"])
def test_gpt_family_cpu_equals_cuda(make):
    torch.manual_seed(0)
    cpu = make().eval()
    x, y = ids(65, 3, 32), ids(65, 3, 32)
    ref_logits, ref_loss = cpu(x, y)
    gpu = cpu.to("cuda")
    logits, loss = gpu(x.cuda(), y.cuda())
    torch.testing.assert_close(logits.cpu(), ref_logits, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(loss.cpu(), ref_loss, rtol=RTOL, atol=ATOL)


def test_llama_cpu_equals_cuda():
    torch.manual_seed(0)
    cpu = Llama(LlamaConfig.tiny()).eval()
    x = ids(cpu.config.vocab_size, 2, 12)
    ref = cpu(x)
    torch.testing.assert_close(cpu.to("cuda")(x.cuda()).cpu(), ref, rtol=RTOL, atol=ATOL)


def test_bert_cpu_equals_cuda():
    torch.manual_seed(0)
    cpu = Bert(BertConfig.minilm()).eval()
    x = ids(cpu.config.vocab_size, 2, 20)
    mask = torch.ones(2, 20, dtype=torch.long)
    mask[1, 13:] = 0
    ref = cpu(x, attention_mask=mask).last_hidden_state
    out = cpu.to("cuda")(x.cuda(), attention_mask=mask.cuda()).last_hidden_state
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-3, atol=1e-3)


def test_gpt_cached_equals_uncached_generation_on_cuda():
    torch.manual_seed(0)
    model = GPT(gpt_config()).cuda()
    prompt = ids(65, 2, 5).cuda()
    a = model.generate(prompt, 40, temperature=0.0, use_cache=True)  # runs past block_size=32
    b = model.generate(prompt, 40, temperature=0.0, use_cache=False)
    assert torch.equal(a, b)


def test_llama_cached_equals_uncached_generation_on_cuda():
    torch.manual_seed(0)
    model = Llama(LlamaConfig.tiny()).cuda()
    prompt = ids(model.config.vocab_size, 2, 5).cuda()
    a = llama_generate(model, prompt, 20, use_cache=True)
    b = llama_generate(model, prompt, 20, use_cache=False)
    assert torch.equal(a, b)


def test_out_of_range_id_is_caught_on_cuda():
    """On CUDA the id check is an asynchronous device assert: it fires at the next sync."""
    model = GPT(gpt_config()).cuda()
    code = ("import torch; from llmbook.gpt import GPT, GPTConfig; "
            "m = GPT(GPTConfig(vocab_size=65, block_size=32, n_layer=1, n_head=4, d_model=64, d_ff=256)).cuda(); "
            "m(torch.tensor([[1, 65]], device='cuda')); torch.cuda.synchronize()")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0  # a device-side assert cannot be recovered in-process, hence the subprocess
    assert model(ids(65, 1, 4).cuda())[0].shape == (1, 4, 65)


def test_baby_gpt_50_bf16_steps_lower_the_loss():
    torch.manual_seed(0)
    text_ids = torch.randint(0, 65, (20_000,), generator=torch.Generator().manual_seed(1))
    text_ids = torch.cumsum(text_ids % 3, 0) % 65  # a learnable stream: each id is the last plus 0..2
    model = GPT(GPTConfig.baby(65)).cuda()
    get_batch = random_windows(text_ids[:18_000], text_ids[18_000:], block_size=64, batch_size=32)
    cfg = TrainConfig.for_device("cuda", max_steps=50, warmup_steps=5, lr=3e-3, eval_interval=50,
                                 eval_batches=4, progress=False, compile=False)
    assert cfg.dtype == "bfloat16" and cfg.tf32
    result = train(model, get_batch, cfg)
    first, last = sum(result.train_losses[:5]) / 5, sum(result.train_losses[-5:]) / 5
    assert last < first - 1.0, (first, last)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_torchrun_nccl_two_gpus_equal_one(tmp_path):
    from safetensors.torch import load_file

    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib"), "LLMBOOK_DDP_BACKEND": "nccl"}
    single, ddp = tmp_path / "single.safetensors", tmp_path / "ddp.safetensors"
    for cmd in ([sys.executable, "tests/ddp_accum_worker.py", str(single)],
                [torchrun, "--standalone", "--nproc_per_node=2", "tests/ddp_accum_worker.py", str(ddp)]):
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
    a, b = load_file(str(single)), load_file(str(ddp))
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5, msg=name)
