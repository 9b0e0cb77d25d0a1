"""Checkers for the exercises of chapter 08e (looking inside), registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import random

import torch

from ._core import _call, _cases, _Fail, _register, _Result, _tgen


def _tiny_gpt(rng: random.Random):
    from ..gpt import GPT, GPTConfig
    torch.manual_seed(rng.randint(0, 10**6))
    n_head = rng.choice([2, 4])
    return GPT(GPTConfig.baby(vocab_size=30, n_layer=2, n_head=n_head, d_model=8 * n_head, block_size=16)).eval()


@_register("08e.1", "A hook that silences one head", "complete",
           "def silence(head):\n    def hook(z, name):\n        return NotImplemented  # z: (B, T, H, D)\n    return hook")
def _ex_08e_1(answer, rng, ctx):
    from ..hooks import run_with_cache, run_with_hooks
    from ..interp import ablate_heads
    if not callable(answer):
        raise _Fail(f"expected a function, got {type(answer).__name__}", "define silence(head) and pass it (no parentheses)")
    drawn = []
    for _ in range(4):
        model = _tiny_gpt(rng)
        H = model.config.n_head
        layer, head = rng.randrange(2), rng.randrange(H)
        idx = torch.randint(0, 30, (2, rng.randint(3, 10)), generator=_tgen(rng))
        drawn.append((layer, head, H, tuple(idx.flatten().tolist())))
        hook = _call(answer, head)
        if not callable(hook):
            raise _Fail(f"silence({head}) returned {type(hook).__name__}, not a hook function",
                        "silence(head) builds and returns the inner function hook(z, name)")
        _, cache = run_with_cache(model, idx, [f"blocks.{layer}.attn.z"])
        z = cache[f"blocks.{layer}.attn.z"]
        before = z.clone()
        got_z = _call(hook, z, f"blocks.{layer}.attn.z")
        if not torch.equal(z, before):
            raise _Fail("your hook changed the tensor it was given in place",
                        "work on a copy (z = z.clone()) and return it: the cache and other hooks may hold the original")
        want = ablate_heads(model, idx, [(layer, head)])
        with torch.no_grad():
            got = run_with_hooks(model, idx, {f"blocks.{layer}.attn.z": answer(head)})
        if not torch.allclose(got, want, atol=1e-6):
            hint = "z is (batch, positions, heads, head size): the head is the third index, z[:, :, head]"
            if not isinstance(got_z, torch.Tensor) or got_z.shape != z.shape:
                hint = "return a tensor of the same shape as z (or None to leave it unchanged)"
            raise _Fail(f"with your hook on layer {layer}, head {head} of {H}, the logits differ from the model with that "
                        "head silenced", hint)
    return _Result("your hook silences the head: logits equal the library's ablate_heads on 4 fresh models", tuple(drawn))


@_register("08e.2", "The prefix-matching score", "complete",
           "def prefix_matching(pattern, n):\n    return NotImplemented  # (B, H, T, T), (B,) -> (H,)")
def _ex_08e_2(answer, rng, ctx):
    from ..interp import prefix_matching_score, repeated_tokens
    cases = []
    for _ in range(5):
        B, H, T = rng.randint(2, 5), rng.randint(1, 4), 2 * rng.randint(4, 8)
        g = _tgen(rng)
        _, n = repeated_tokens(B, 10, T, 2, T // 2, generator=g)
        scores = torch.randn(B, H, T, T, generator=g) * 3
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        cases.append((scores.masked_fill(~mask, float("-inf")).softmax(-1), n))

    def off_by_one(p, n):  # attends to the earlier occurrence of the current token itself
        T = p.shape[-1]
        pos = torch.arange(T)
        key = (pos[None] - n[:, None]).clamp(min=0)
        w = p.gather(-1, key[:, None, :, None].expand(*p.shape[:3], 1)).squeeze(-1)
        sel = (pos[None] >= T - n[:, None]).float()[:, None]
        return (w * sel).sum((0, 2)) / sel.sum((0, 2))

    def all_positions(p, n):
        T = p.shape[-1]
        pos = torch.arange(T)
        key = (pos[None] - n[:, None] + 1).clamp(min=0)
        return p.gather(-1, key[:, None, :, None].expand(*p.shape[:3], 1)).squeeze(-1).mean((0, 2))
    return _cases(answer, prefix_matching_score, cases, rel=1e-5,
                  wrong=[(off_by_one, "that is the weight on the earlier occurrence of the current token; the induction head "
                                      "looks one further, at the token that followed it (t - n + 1)"),
                         (all_positions, "average over the positions of the second copy only (t >= T - n), where there is "
                                         "an earlier occurrence")],
                  hint="for each position t >= T - n take pattern[b, h, t, t - n + 1], then average over those positions and the batch",
                  show=lambda a: f"pattern of shape {tuple(a[0].shape)}, n={a[1].tolist()}")


@_register("08e.3", "Patch one head", "complete",
           "def patch_head(z, clean, head):\n    return NotImplemented  # z, clean: (B, T, H, D); head: int")
def _ex_08e_3(answer, rng, ctx):
    cases = []
    for _ in range(5):
        B, T, H, D = rng.randint(1, 4), rng.randint(2, 7), rng.randint(2, 6), rng.randint(2, 5)
        g = _tgen(rng)
        cases.append((torch.randn(B, T, H, D, generator=g), torch.randn(B, T, H, D, generator=g), rng.randrange(H)))

    def ref(z, clean, head):
        out = z.clone()
        out[:, :, head] = clean[:, :, head]
        return out

    def guarded(z, clean, head):  # the reader's function must leave z as it was
        before = z.clone()
        out = _call(answer, z, clean, head)
        if not torch.equal(z, before):
            raise _Fail("your function changed z in place",
                        "copy first (z = z.clone()): in a hook, z may be held by a cache or by the next hook")
        return out

    def at(z, clean, head, axis):
        out = z.clone()
        if head < z.shape[axis]:
            out.select(axis, head).copy_(clean.select(axis, head))
        return out
    return _cases(guarded, ref, cases,
                  wrong=[(lambda z, c, h: c.clone(), "paste the one head only, not the whole clean output"),
                         (lambda z, c, h: at(z, c, h, 1), "heads are the third index: z[:, :, head], not z[:, head] (a position)"),
                         (lambda z, c, h: at(z, c, h, 3), "heads are the third index: z[:, :, head]; the last one is the head size")],
                  hint="return a copy of z whose head `head` (at every position, in every row) is taken from clean",
                  show=lambda a: f"z and clean of shape {tuple(a[0].shape)}, head={a[2]}")


@_register("08e.4", "What uniform attention scores", "derive",
           "def uniform_prefix_score(T, n):\n    return NotImplemented  # a float")
def _ex_08e_4(answer, rng, ctx):
    from ..interp import prefix_matching_score

    def ref(T, n):  # measured: the score of a head that spreads its weight evenly over what it may see
        pattern = torch.ones(T, T, dtype=torch.float64).tril()
        pattern = (pattern / pattern.sum(-1, keepdim=True))[None, None]
        return float(prefix_matching_score(pattern, torch.tensor([n]))[0])

    cases = [(2 * n, n) for n in (1, 4)] + [(T, rng.randint(1, T // 2)) for T in (rng.randint(6, 40) for _ in range(5))]
    return _cases(answer, ref, cases, rel=1e-9,
                  wrong=[(lambda T, n: 1.0 / T, "a causal head at position t spreads over t + 1 positions, not all T"),
                         (lambda T, n: sum(1.0 / t for t in range(T - n, T)) / n if T - n > 0 else 0.0,
                          "position t (counting from 0) sees t + 1 positions: itself and the t before it"),
                         (lambda T, n: 1.0 / n, "the weight at t is 1 / (t + 1), averaged over the n positions of the second copy")],
                  hint="the score averages, over the positions t = T - n .. T - 1 of the second copy, the weight "
                       "on position t - n + 1; uniform causal attention puts 1 / (t + 1) on every position it sees",
                  show=lambda a: f"T={a[0]}, n={a[1]}")
