"""Speed and quality of llmbook.gpt against a reference built from torch.nn, in one process.

Prints, last, one ``name=value`` per line:

    train_tokens_per_s_cpu=     training throughput at nanoGPT's baby config (batch 12)
    train_ratio_vs_reference=   our step time / a GPT assembled from nn.TransformerEncoderLayer
                                with the same sizes (target <= 1.0)
    kv_cache_speedup=           time to generate 500 tokens without / with the KV cache (target >= 6)
    val_loss_after_180s_cpu=    character-level validation loss after 180 s of training
                                (target <= 1.9; skip with --skip-quality)

On a GPU (``--device cuda --dtype bfloat16 --compile``) it reports GPT-2 small training
tokens/s and MFU instead of the CPU lines: ``gpu_tokens_per_s=`` and ``mfu=``.

    python benchmarks/bench_gpt.py [--skip-quality] [--steps 30]
    python benchmarks/bench_gpt.py --device cuda --dtype bfloat16 --compile
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
sys.path.insert(0, str(ROOT / "scripts"))

from llmbook.flops import mfu, train_flops_per_token  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.train import TrainConfig, configure_optimizer, random_windows, train  # noqa: E402


class ReferenceGPT(nn.Module):
    """A plain GPT from torch.nn building blocks (Pre-LN encoder layers with a causal mask)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_head, cfg.d_ff, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, cfg.n_layer, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        x = self.ln_f(self.blocks(x, mask=mask, is_causal=True))
        logits = self.head(x)
        return logits, nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def step_times(model: nn.Module, batches, steps: int) -> list[float]:
    opt = configure_optimizer(model, TrainConfig())
    times = []
    for i in range(steps):
        x, y = batches[i % len(batches)]
        t0 = time.perf_counter()
        _, loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return times


def bench_cpu_train(steps: int) -> tuple[float, float]:
    cfg = GPTConfig.baby(vocab_size=65)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 65, (12, 64), generator=g), torch.randint(0, 65, (12, 64), generator=g))
               for _ in range(4)]
    torch.manual_seed(0)
    ours, ref = GPT(cfg), ReferenceGPT(cfg)
    step_times(ours, batches, 3), step_times(ref, batches, 3)  # warm-up
    t_ours, t_ref = [], []
    for _ in range(3):  # interleave, so that load from other processes hits both alike
        t_ours += step_times(ours, batches, steps // 3)
        t_ref += step_times(ref, batches, steps // 3)
    m_ours, m_ref = statistics.median(t_ours), statistics.median(t_ref)
    return 12 * 64 / m_ours, m_ours / m_ref


@torch.no_grad()
def bench_kv_cache(n_new: int = 500) -> float:
    torch.manual_seed(0)
    # The baby GPT with a context long enough for 500 tokens (untrained: speed does not depend on the weights).
    model = GPT(GPTConfig.baby(vocab_size=65, block_size=1024)).eval()
    prompt = torch.zeros(1, 1, dtype=torch.long)
    t0 = time.perf_counter()
    a = model.generate(prompt, n_new, temperature=0, use_cache=True)
    t_cache = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = model.generate(prompt, n_new, temperature=0, use_cache=False)
    t_plain = time.perf_counter() - t0
    assert torch.equal(a, b), "cached and uncached greedy outputs differ"
    return t_plain / t_cache


def bench_quality(seconds: float) -> float:
    from train_gpt import shakespeare_chars

    vocab, tr, va = shakespeare_chars()
    torch.manual_seed(1337)
    model = GPT(GPTConfig.baby(len(vocab)))
    gb = random_windows(tr, va, 64, 12)
    # nanoGPT's recipe, with the cosine decay spread over the time budget instead of 2000 updates:
    # a slower machine then still finishes its decay (llmbook.train.lr_at_time)
    cfg = TrainConfig.baby_shakespeare(max_steps=10**6, max_seconds=seconds, schedule_by_time=True,
                                       eval_interval=10**6, eval_batches=50, progress=False)
    res = train(model, gb, cfg)
    print(f"quality run: {res.step} updates in {res.seconds:.0f} s, last lr {res.last_lr:.1e}", flush=True)
    return res.last_val


def bench_gpu(compile_: bool, dtype: str, steps: int, peak: float) -> tuple[float, float]:
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = GPTConfig.gpt2_small(dropout=0.0)
    torch.manual_seed(0)
    model = GPT(cfg).cuda()
    opt = configure_optimizer(model, TrainConfig())
    net = torch.compile(model) if compile_ else model
    B, T = 16, cfg.block_size
    x = torch.randint(0, cfg.vocab_size, (B, T), device="cuda")
    y = torch.randint(0, cfg.vocab_size, (B, T), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
            _, loss = net(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    tps = B * T * steps / (time.perf_counter() - t0)
    return tps, mfu(cfg, tps, peak)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--compile", action="store_true")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip-quality", action="store_true", help="skip the 180 s training run")
    p.add_argument("--seconds", type=float, default=180.0)
    p.add_argument("--peak-flops", type=float, default=989e12, help="GPU peak (H100 SXM bf16 dense: 989e12)")
    args = p.parse_args()
    if args.device.startswith("cuda"):
        tps, util = bench_gpu(args.compile, args.dtype, max(args.steps, 20), args.peak_flops)
        print(f"gpt2_small_flops_per_token={train_flops_per_token(GPTConfig.gpt2_small()):.3e}")
        print(f"gpu_tokens_per_s={tps:.0f}")
        print(f"mfu={util:.3f}")
        return 0
    tps, ratio = bench_cpu_train(args.steps)
    speedup = bench_kv_cache()
    val = None if args.skip_quality else bench_quality(args.seconds)
    print(f"train_tokens_per_s_cpu={tps:.0f}")
    print(f"train_ratio_vs_reference={ratio:.3f}")
    print(f"kv_cache_speedup={speedup:.1f}")
    if val is not None:
        print(f"val_loss_after_{int(args.seconds)}s_cpu={val:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
