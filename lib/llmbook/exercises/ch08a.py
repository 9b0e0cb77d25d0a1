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


@_register("08a.2", "An MHA checkpoint turned into GQA by mean-pooling", "complete",
           "def mha_to_gqa(w, H, G):\n    return NotImplemented  # w: (H * head_dim, D) -> (G * head_dim, D)")
def _ex_08a_2(answer, rng, ctx):
    def ref(w, H, G):
        hd = w.shape[0] // H
        return w.reshape(G, H // G, hd, w.shape[1]).mean(1).reshape(G * hd, w.shape[1])
    cases = []
    for _ in range(4):
        g = _tgen(rng); G = rng.randint(1, 4); H = G * rng.randint(2, 4); hd = 2 * rng.randint(1, 4)
        cases.append((torch.randn(H * hd, rng.randint(2, 9), generator=g), H, G))
    def first_of_group(w, H, G):
        hd = w.shape[0] // H
        return w.reshape(G, H // G, hd, w.shape[1])[:, 0].reshape(G * hd, w.shape[1])
    def strided(w, H, G):
        hd = w.shape[0] // H
        return w.reshape(H // G, G, hd, w.shape[1]).mean(0).reshape(G * hd, w.shape[1])
    def summed(w, H, G):
        return ref(w, H, G) * (H // G)
    return _cases(answer, ref, cases, rel=1e-5,
                  wrong=[(first_of_group, "average the H / G heads of a group; keeping one head drops the others' keys"),
                         (strided, "a group is H / G consecutive heads (query head h reads key/value head h // (H / G)), not every G-th head"),
                         (summed, "mean-pool: divide the sum of a group's heads by H / G")],
                  show=lambda a: f"w of shape {tuple(a[0].shape)}, H={a[1]}, G={a[2]}")


@_register("08a.3", "LLaMA's feed-forward width, rounded", "derive",
           "def llama_ffn_width(D, multiple_of=256):\n    return NotImplemented")
def _ex_08a_3(answer, rng, ctx):
    def ref(D, m):
        f = int(2 * 4 * D / 3)
        return m * ((f + m - 1) // m)
    cases = [(64 * rng.randint(2, 200), rng.choice([32, 64, 128, 256])) for _ in range(5)]
    cases.append((rng.choice([3, 6, 9]) * 512, 256))  # 8D/3 an exact multiple: no rounding up
    return _cases(answer, ref, cases,
                  wrong=[(lambda D, m: int(8 * D / 3), "round up to a multiple of multiple_of"),
                         (lambda D, m: m * (int(8 * D / 3) // m), "round up, not down, to a multiple of multiple_of"),
                         (lambda D, m: m * ((4 * D + m - 1) // m), "start from two thirds of 4D (three matrices instead of two)")],
                  show=lambda a: f"D={a[0]}, multiple_of={a[1]}")


@_register("08a.4", "What share of a SmolLM2 block is the feed-forward layer?", "predict",
           "answer = ...  # SwiGLU weights / all weights of one block")
def _ex_08a_4(answer, rng, ctx):
    from ..llama import LlamaBlock, LlamaConfig
    c = LlamaConfig.smollm2_135m()
    with torch.device("meta"):
        block = LlamaBlock(c)
    ffn = sum(p.numel() for p in block.mlp.parameters())
    attn = sum(p.numel() for p in block.self_attn.parameters())
    total = sum(p.numel() for p in block.parameters())
    return _prediction(answer, ffn / total, (), what="the weights of a LlamaBlock of SmolLM2's configuration", rel=5e-3,
                       wrong=[(ffn / attn, "the share of the whole block: divide by every weight of the block, not by the attention's"),
                              (3 * c.d_ff / (3 * c.d_ff + 4 * c.d_model), "grouped-query attention: W_K and W_V have only G * head_dim rows, not D")],
                       hint="a block holds two RMSNorm gains, W_Q, W_K, W_V, W_O and three SwiGLU matrices")
