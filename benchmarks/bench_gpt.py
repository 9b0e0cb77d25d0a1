"""Speed and quality of llmbook.gpt against references built from torch.nn, in one process.

Prints, last, one ``name=value`` per line (then each metric's spread and goal status):

    train_tokens_per_s_cpu=     training throughput at the baby config (batch 12 x 64 tokens)
    train_ratio_vs_reference=   our step time / a GPT assembled from nn.TransformerEncoderLayer
                                with the same sizes (target <= 1.0)
    train_ratio_vs_lean=        our step time / the leanest plain-PyTorch GPT of the same size
                                (fused qkv, SDPA with is_causal=True, nn.LayerNorm, exact GELU,
                                no checks; target <= 1.0)
    train_ratio_vs_lean_tanh=   the book's default model (GPT-2's tanh GELU) / the lean GPT with
                                the same tanh GELU (no goal: the same operations, a tie)
    gelu_tanh_cost_vs_exact=    the book's step with tanh GELU / with exact GELU

The two references use the exact GELU, so in the first two ratios "our step" is the book's
GPT built with ``GPTConfig(gelu="exact")``: each ratio compares one model written two ways,
not two activations. The last line says what GPT-2's tanh approximation costs on this CPU.
    kv_cache_speedup=           time to generate 500 tokens without / with the KV cache (target >= 6)
    val_loss_after_180s_cpu=    character-level validation loss after 180 s of training
                                (target <= 1.9; skip with --skip-quality, as ``make bench`` does)

Every time comes from ``benchmarks/_timing.py``: warm-up, then repeats with the models
alternating (A B B A ...), medians and interquartile ranges, ratios from paired medians.
A training sample is ``--steps-per-sample`` optimizer steps (forward, backward, AdamW).
``--quick`` (or ``BENCH_QUICK=1``) shrinks everything to a smoke test.

On a GPU (``--device cuda --dtype bfloat16 --compile``) it reports GPT-2 small training
tokens/s and MFU instead of the CPU lines: ``gpu_tokens_per_s=`` and ``mfu=``.

    python benchmarks/bench_gpt.py [--skip-quality] [--repeats 7] [--quick]
    python benchmarks/bench_gpt.py --device cuda --dtype bfloat16 --compile
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _timing import Results, measure, print_machine, quick_mode, ratio, set_threads, throughput  # noqa: E402

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
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class LeanBlock(nn.Module):
    """The least a Pre-LN GPT block can do: fused qkv, SDPA with is_causal=True, exact GELU, no checks."""

    def __init__(self, d: int, n_head: int, d_ff: int, gelu: str = "none"):
        super().__init__()
        self.n_head, self.gelu = n_head, gelu
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hd)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x)), approximate=self.gelu))


class LeanGPT(nn.Module):
    """The leanest plain-PyTorch GPT of a config's size (tied embeddings, as the book's).

    ``gelu="none"`` is the exact GELU (the reference of ``train_ratio_vs_lean``); ``"tanh"``
    is GPT-2's approximation, which the book's model uses and which costs more on a CPU.
    """

    def __init__(self, cfg: GPTConfig, gelu: str = "none"):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.Sequential(*[LeanBlock(cfg.d_model, cfg.n_head, cfg.d_ff, gelu) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        logits = self.head(self.ln_f(self.blocks(x)))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def make_step(model: nn.Module, batches, steps: int):
    """A callable that runs ``steps`` optimizer steps (forward, backward, AdamW) on the batches in turn."""
    opt = configure_optimizer(model, TrainConfig())
    state = {"i": 0}

    def run():
        for _ in range(steps):
            x, y = batches[state["i"] % len(batches)]
            state["i"] += 1
            _, loss = model(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    return run


def bench_cpu_train(res: Results, repeats: int, steps_per_sample: int) -> None:
    cfg = GPTConfig.baby(vocab_size=65)
    B, T = 12, cfg.block_size
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 65, (B, T), generator=g), torch.randint(0, 65, (B, T), generator=g))
               for _ in range(4)]
    torch.manual_seed(0)
    # "book" is the book's model as the chapters train it (GPT-2's tanh GELU); "book_exact" is the
    # same code with GPTConfig(gelu="exact"), the activation of the lean and encoder-layer
    # references, so that each ratio below compares one model with itself, written two ways.
    models = {"book": GPT(cfg), "book_exact": GPT(replace(cfg, gelu="exact")), "lean": LeanGPT(cfg),
              "lean_tanh": LeanGPT(cfg, gelu="tanh"), "encoder_layer": ReferenceGPT(cfg)}
    n = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    assert len(set(n.values())) == 1, f"the models differ in size: {n}"
    print(f"training step, baby GPT ({n['book']:,} parameters), batch {B} x {T}, "
          f"{steps_per_sample} steps per sample, {repeats} samples each, alternating", flush=True)
    t = measure({name: make_step(m, batches, steps_per_sample) for name, m in models.items()},
                repeats=repeats, warmup=1)
    for timing in t.values():
        print(f"  {timing}", flush=True)
    res.add("train_tokens_per_s_cpu", throughput(B * T * steps_per_sample, t["book"]), unit="tokens/s",
            higher_is_better=True, digits=4, description="baby GPT training throughput (forward, backward, AdamW)")
    res.add("train_ratio_vs_reference", ratio(t["book_exact"], t["encoder_layer"]), goal="<= 1.0",
            reference="nn.TransformerEncoderLayer GPT", higher_is_better=False,
            description="training step time (GPTConfig(gelu='exact')) / a GPT built from nn.TransformerEncoderLayer")
    res.add("train_ratio_vs_lean", ratio(t["book_exact"], t["lean"]), goal="<= 1.0", reference="lean plain-PyTorch GPT",
            higher_is_better=False,
            description="training step time (GPTConfig(gelu='exact')) / the leanest plain-PyTorch GPT (fused qkv, "
                        "SDPA is_causal, exact GELU, no checks)")
    res.add("train_ratio_vs_lean_tanh", ratio(t["book"], t["lean_tanh"]),
            reference="lean GPT with tanh GELU", higher_is_better=False,
            description="the book's default model (GPT-2's tanh GELU) / the lean model with the same GELU")
    res.add("gelu_tanh_cost_vs_exact", ratio(t["book"], t["book_exact"]), reference="the book's GPT with exact GELU",
            higher_is_better=False,
            description="the book's step with GPT-2's tanh GELU / with the exact GELU (what the approximation costs "
                        "on this CPU)")


def bench_kv_cache(res: Results, n_new: int, repeats: int) -> None:
    torch.manual_seed(0)
    # The baby GPT with a context long enough for n_new tokens (untrained: speed does not depend on the weights).
    model = GPT(GPTConfig.baby(vocab_size=65, block_size=1024)).eval()
    prompt = torch.zeros(1, 1, dtype=torch.long)
    out = {}

    def gen(use_cache: bool, n: int = n_new):
        def run():
            out[use_cache] = model.generate(prompt, n, temperature=0, use_cache=use_cache)
        return run

    # warm-up on a shorter run (the uncached one is the slow side; its first 100 steps warm every kernel)
    gen(True, 100)(), gen(False, 100)()
    print(f"greedy generation of {n_new} tokens, baby GPT with block_size 1024, {repeats} samples each, "
          f"alternating", flush=True)
    t = measure({"cached": gen(True), "uncached": gen(False)}, repeats=repeats, warmup=0)
    assert torch.equal(out[True], out[False]), "cached and uncached greedy outputs differ"
    for timing in t.values():
        print(f"  {timing}", flush=True)
    res.add("kv_cache_speedup", ratio(t["uncached"], t["cached"]), goal=">= 6", reference="generate without cache",
            higher_is_better=True, digits=3,
            description=f"time to generate {n_new} tokens without / with the KV cache")


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
    r = train(model, gb, cfg)
    print(f"quality run: {r.step} updates in {r.seconds:.0f} s, last lr {r.last_lr:.1e}", flush=True)
    return r.last_val


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
    p.add_argument("--steps", type=int, default=30, help="timed steps on a GPU")
    p.add_argument("--repeats", type=int, default=9, help="timed samples per model (CPU)")
    p.add_argument("--steps-per-sample", type=int, default=8,
                   help="training steps in one timed sample (CPU): 8 steps of ~40 ms average out the noise of one")
    p.add_argument("--tokens", type=int, default=500, help="tokens generated in the KV-cache benchmark")
    p.add_argument("--skip-quality", action="store_true", help="skip the 180 s training run")
    p.add_argument("--seconds", type=float, default=180.0)
    p.add_argument("--peak-flops", type=float, default=989e12, help="GPU peak (H100 SXM bf16 dense: 989e12)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test (also BENCH_QUICK=1)")
    args = p.parse_args()
    if args.device.startswith("cuda"):
        tps, util = bench_gpu(args.compile, args.dtype, max(args.steps, 20), args.peak_flops)
        print(f"gpt2_small_flops_per_token={train_flops_per_token(GPTConfig.gpt2_small()):.3e}")
        print(f"gpu_tokens_per_s={tps:.0f}")
        print(f"mfu={util:.3f}")
        return 0
    quick = quick_mode()
    if quick:
        args.repeats, args.steps_per_sample, args.tokens, args.skip_quality = 3, 1, 60, True
    set_threads()
    print_machine()
    res = Results("bench_gpt", quick=quick)
    bench_cpu_train(res, args.repeats, args.steps_per_sample)
    bench_kv_cache(res, args.tokens, max(5, args.repeats - 2) if not quick else 3)
    if not args.skip_quality:
        val = bench_quality(args.seconds)
        res.add(f"val_loss_after_{int(args.seconds)}s_cpu", val, goal="<= 1.9", unit="nats/char",
                higher_is_better=False, description=f"validation loss after {args.seconds:.0f} s of training")
    res.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
