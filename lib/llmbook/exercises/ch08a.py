"""Checkers for the exercises of chapter 08a, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import torch

from ._core import _cases, _prediction, _register, _tgen


def _llama_cfg(V, D, L, H, G, F):
    from ..llama import LlamaConfig
    return LlamaConfig(vocab_size=V, d_model=D, n_layer=L, n_head=H, n_kv_head=G, d_ff=F)


@_register("08a.1", "LLaMA parameters by hand", "derive",
           "def llama_params(V, D, L, H, G, F):\n    return NotImplemented  # tied output layer, head_dim = D / H")
def _ex_08a_1(answer, rng, ctx):
    from ..llama import Llama
    def ref(V, D, L, H, G, F):
        return Llama(_llama_cfg(V, D, L, H, G, F)).num_parameters()
    cases = []
    for _ in range(4):
        G = rng.randint(1, 3); H = G * rng.randint(1, 3); hd = 2 * rng.randint(1, 6)
        cases.append((rng.randint(100, 3000), H * hd, rng.randint(1, 3), H, G, 8 * rng.randint(1, 16)))
    def per_layer(D, H, G, F, kv=None):
        kv = D // H * G if kv is None else kv
        return 2 * D + 2 * D * D + 2 * D * kv + 3 * D * F
    return _cases(answer, ref, cases,
                  wrong=[(lambda V, D, L, H, G, F: 2 * V * D + L * per_layer(D, H, G, F) + D, "the output layer is tied to the embedding: count it once"),
                         (lambda V, D, L, H, G, F: V * D + L * per_layer(D, H, G, F, D) + D, "W_K and W_V map D to G head_dim (grouped-query attention), not to D"),
                         (lambda V, D, L, H, G, F: V * D + L * (2 * D * D + 2 * D * (D // H * G) + 3 * D * F), "each layer has two RMSNorm gains, and the model a final one"),
                         (lambda V, D, L, H, G, F: V * D + L * (2 * D + 2 * D * D + 2 * D * (D // H * G) + 2 * D * F) + D, "SwiGLU has three matrices (gate, up, down)")],
                  show=lambda a: f"V={a[0]}, D={a[1]}, L={a[2]}, H={a[3]}, G={a[4]}, F={a[5]}")


@_register("08a.2", "KV-cache bytes per token", "derive",
           "def kv_bytes_per_token(L, G, head_dim):\n    return NotImplemented  # float32")
def _ex_08a_2(answer, rng, ctx):
    from ..llama import KVCache
    def ref(L, G, hd):
        cfg = _llama_cfg(100, 2 * G * hd, L, 2 * G, G, 8)
        n = 7
        return KVCache(cfg, 1, n, device="meta").nbytes() // n
    cases = [(rng.randint(1, 40), rng.randint(1, 8), 8 * rng.randint(1, 16)) for _ in range(5)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda L, G, hd: L * G * hd * 4, "the cache holds keys and values: a factor 2"),
                         (lambda L, G, hd: 2 * L * G * hd, "a float32 number takes 4 bytes"),
                         (lambda L, G, hd: 2 * G * hd * 4, "every layer keeps its own cache")],
                  show=lambda a: f"L={a[0]}, G={a[1]}, head_dim={a[2]}")


@_register("08a.3", "RMSNorm from scratch", "complete",
           "def rms_norm(x, weight, eps=1e-5):\n    return NotImplemented")
def _ex_08a_3(answer, rng, ctx):
    from ..llama import RMSNorm
    def ref(x, w, eps):
        n = RMSNorm(x.shape[-1], eps)
        with torch.no_grad():
            n.weight.copy_(w)
            return n(x)
    cases = []
    for _ in range(4):
        g = _tgen(rng); D = rng.randint(2, 16)
        cases.append((torch.randn(rng.randint(1, 3), rng.randint(1, 5), D, generator=g) * 2 + 0.5,
                      torch.rand(D, generator=g) + 0.5, rng.choice([1e-5, 1e-2, 0.5])))
    def centred(x, w, eps):
        xc = x - x.mean(-1, keepdim=True)
        return w * xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps)
    def no_sqrt(x, w, eps):
        return w * x / (x.pow(2).mean(-1, keepdim=True) + eps)
    def no_weight(x, w, eps):
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return _cases(answer, ref, cases, rel=1e-5,
                  wrong=[(centred, "RMSNorm does not subtract the mean: that is LayerNorm"),
                         (no_sqrt, "divide by the root of the mean square: sqrt(mean(x^2) + eps)"),
                         (no_weight, "multiply by the learned gain (weight) at the end")],
                  show=lambda a: f"x of shape {tuple(a[0].shape)}, eps={a[2]}")


@_register("08a.4", "How much smaller is SmolLM2's cache with GQA?", "predict",
           "answer = ...  # cache bytes with G = H, divided by cache bytes with SmolLM2's G")
def _ex_08a_4(answer, rng, ctx):
    import dataclasses
    from ..llama import KVCache, LlamaConfig
    c = LlamaConfig()  # SmolLM2-135M's configuration
    n = rng.randint(1, 4096)
    measured = KVCache(dataclasses.replace(c, n_kv_head=c.n_head), 1, n, device="meta").nbytes() / KVCache(c, 1, n, device="meta").nbytes()
    return _prediction(answer, measured, (n,), what=f"KVCache.nbytes() for a fresh length of {n} tokens",
                       wrong=[(1 / measured, "multi-head attention caches more, so the ratio is above 1"),
                              (c.n_head, "the ratio is H / G: count the key/value heads of each model")],
                       hint="the cache stores G key heads and G value heads per layer")
