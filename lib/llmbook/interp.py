"""Looking inside a Transformer: induction heads, the logit lens, attribution and patching.

Covers
------
- ``AttnOnlyTransformer``: token and position embeddings, ``n_layer`` causal attention layers
  added to the residual stream, an unembedding; no MLP and no norm, the toy models of Elhage et
  al. 2021 (*A Mathematical Framework for Transformer Circuits*) and Olsson et al. 2022
  (*In-context Learning and Induction Heads*).
- ``repeated_tokens``: random sequences whose last ``n`` tokens repeat the ``n`` before them,
  with ``n`` drawn per sequence, so no fixed offset gives the answer away.
- Head scores on such sequences: ``previous_token_score`` (attention from each token to the
  one before), ``prefix_matching_score`` (attention from a token of the second copy to the
  token after its earlier occurrence: Olsson et al.'s prefix matching), ``copying_score`` (the sum
  of the eigenvalues of a head's OV circuit W_U W_O W_V W_E over the sum of their absolute
  values: Elhage et al.'s copying measure, 1 for a head that only copies), and ``induction_score`` = prefix matching x copying: Olsson et al.
  call a head an induction head when it does both.
- ``logit_lens`` (nostalgebraist 2020, *interpreting GPT: the logit lens*): every layer's
  residual stream read through the final norm and the unembedding.
- ``head_outputs`` and ``direct_logit_attribution``: what each head writes to the residual
  stream, and how much of it reaches a logit direction directly, with the final norm's scale
  frozen at its value on the full residual (the usual linearisation).
- ``patch_residual_grid`` (activation patching, Meng et al. 2022; Wang et al. 2022): run a
  corrupted prompt with the clean run's residual stream pasted in at one (layer, position)
  at a time, and measure how much of the clean answer comes back.

Leaves out: attribution through the MLPs' non-linearities, path patching, attribution
patching (its gradient approximation), and sparse autoencoders.

All the model-side functions work on ``llmbook.gpt.GPT`` and ``llmbook.llama.Llama`` through
``llmbook.hooks``. Shape legend: B batch, T positions, L layers, H heads, C width, D head
size, V vocabulary.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attention import causal_mask
from .hooks import final_norm, run_blocks, run_with_cache, run_with_hooks, unembed
from .kv_cache import KVCache

__all__ = [
    "AttnOnlyTransformer", "repeated_tokens", "repeated_half_loss", "previous_token_score",
    "prefix_matching_score", "duplicate_token_score", "copying_score", "induction_score", "head_scores", "logit_lens",
    "head_outputs",
    "direct_logit_attribution", "logit_diff", "patch_residual_grid", "ablate_heads",
]


def _pos_int(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


# ----------------------------------------------------------------------------- the toy model
class AttnOnlyTransformer(nn.Module):
    """An attention-only Transformer: x = W_E[tok] + W_P[pos]; x += Attn_l(x) per layer; logits = x W_U^T.

    ``forward(idx, return_attention=False)`` returns logits (B, T, V), or ``(logits, patterns)``
    with one (B, H, T, T) tensor per layer.

    >>> m = AttnOnlyTransformer(vocab_size=10, block_size=8, n_layer=2, n_head=2, d_model=8)
    >>> logits, pats = m(torch.tensor([[1, 2, 3]]), return_attention=True); logits.shape, len(pats), pats[0].shape
    (torch.Size([1, 3, 10]), 2, torch.Size([1, 2, 3, 3]))
    """

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, d_model: int):
        super().__init__()
        for name, v in (("vocab_size", vocab_size), ("block_size", block_size), ("n_layer", n_layer),
                        ("n_head", n_head), ("d_model", d_model)):
            _pos_int(name, v)
        if d_model % n_head:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.vocab_size, self.block_size, self.n_head = vocab_size, block_size, n_head
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(block_size, d_model)
        self.qkv = nn.ModuleList(nn.Linear(d_model, 3 * d_model, bias=False) for _ in range(n_layer))
        self.out = nn.ModuleList(nn.Linear(d_model, d_model, bias=False) for _ in range(n_layer))
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, return_attention: bool = False,
                ablate: Sequence[tuple[int, int]] = ()):
        """Logits (B, T, V), and the patterns if asked; heads listed in ``ablate`` as (layer, head)
        write nothing (their output is set to zero before the output projection)."""
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.dtype not in (torch.long, torch.int32):
            raise ValueError(f"idx must be a (B, T) integer tensor, got {getattr(idx, 'shape', type(idx).__name__)}")
        B, T = idx.shape
        if not 1 <= T <= self.block_size:
            raise ValueError(f"idx has {T} positions; it needs 1 to block_size={self.block_size}")
        silenced = self._check_ablate(ablate)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, C)
        mask = causal_mask(T, device=idx.device)  # (T, T)
        patterns = []
        for layer, (qkv, out) in enumerate(zip(self.qkv, self.out)):
            q, k, v = qkv(x).view(B, T, 3, self.n_head, -1).permute(2, 0, 3, 1, 4)  # 3 x (B, H, T, D)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, T)
            p = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            patterns.append(p)
            y = p @ v  # (B, H, T, D)
            if silenced.get(layer):
                y = y.index_fill(1, torch.tensor(silenced[layer], device=y.device), 0.0)
            x = x + out(y.transpose(1, 2).reshape(B, T, -1))  # heads side by side, projected back
        logits = self.unembed(x)
        return (logits, patterns) if return_attention else logits

    def _check_ablate(self, ablate: Sequence[tuple[int, int]]) -> dict[int, list[int]]:
        by_layer: dict[int, list[int]] = {}
        for item in ablate:
            ok = isinstance(item, (tuple, list)) and len(item) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) for v in item)
            if not ok or not (0 <= item[0] < len(self.qkv) and 0 <= item[1] < self.n_head):
                raise ValueError(f"ablate must hold (layer, head) pairs with layer in [0, {len(self.qkv)}) and head in "
                                 f"[0, {self.n_head}), got {item!r}")
            by_layer.setdefault(item[0], []).append(item[1])
        return by_layer

    def ov_circuit(self, layer: int, head: int) -> torch.Tensor:
        """(V, V) matrix W_U W_O^h W_V^h W_E: the logits head ``head`` adds for a token it attends to."""
        C = self.wte.weight.shape[1]
        D = C // self.n_head
        sl = slice(head * D, (head + 1) * D)
        w_v = self.qkv[layer].weight[2 * C:][sl]  # (D, C): rows of W_V that belong to the head
        w_o = self.out[layer].weight[:, sl]  # (C, D)
        return self.unembed.weight @ w_o @ w_v @ self.wte.weight.T  # (V, V): [output token, attended token]


def repeated_tokens(batch: int, vocab_size: int, length: int, n_min: int, n_max: int,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences (batch, length) whose last n tokens repeat the n before them.

    n is drawn per sequence from [n_min, n_max] (2 n_max <= length); the first length - 2n
    tokens are random filler. Returns the tokens and n (batch,).

    >>> x, n = repeated_tokens(2, 50, 12, 3, 5, torch.Generator().manual_seed(0))
    >>> all(torch.equal(x[b, 12 - int(n[b]):], x[b, 12 - 2 * int(n[b]):12 - int(n[b])]) for b in range(2))
    True
    """
    for name, v in (("batch", batch), ("vocab_size", vocab_size), ("length", length), ("n_min", n_min), ("n_max", n_max)):
        _pos_int(name, v)
    if not n_min <= n_max or 2 * n_max > length:
        raise ValueError(f"need n_min <= n_max and 2 * n_max <= length, got n_min={n_min}, n_max={n_max}, length={length}")
    x = torch.randint(vocab_size, (batch, length), generator=generator)
    n = torch.randint(n_min, n_max + 1, (batch,), generator=generator)
    pos = torch.arange(length)
    second = pos[None, :] >= length - n[:, None]  # (batch, length): positions of the second copy
    src = (pos[None, :] - n[:, None]).clamp(min=0)  # the same token's position in the first copy
    x = torch.where(second, x.gather(1, src), x)
    return x, n


def _second_copy(n: torch.Tensor, length: int) -> torch.Tensor:
    """(B, T) bool: positions t in the second copy, t >= T - n."""
    pos = torch.arange(length, device=n.device)
    return pos[None, :] >= length - n[:, None]


def repeated_half_loss(logits: torch.Tensor, idx: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Mean next-token loss (nats) on the predictions an induction head can make.

    That is predicting token t + 1 from position t for every t in the second copy except its
    last position: the first token of the second copy cannot be foreseen, the rest can.
    """
    B, T, V = logits.shape
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), idx[:, 1:].reshape(-1), reduction="none").view(B, T - 1)
    m = _second_copy(n, T)[:, :-1]
    return (loss * m).sum() / m.sum()


def previous_token_score(pattern: torch.Tensor) -> torch.Tensor:
    """(B, H, T, T) attention -> (H,) mean weight from each position t >= 1 to t - 1.

    >>> p = torch.zeros(1, 1, 3, 3); p[0, 0, 0, 0] = p[0, 0, 1, 0] = p[0, 0, 2, 1] = 1.0
    >>> previous_token_score(p)
    tensor([1.])
    """
    if not isinstance(pattern, torch.Tensor) or pattern.dim() != 4 or pattern.shape[-1] < 2:
        raise ValueError("pattern must be a (B, H, T, T) tensor with T >= 2")
    return pattern.diagonal(-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def _second_copy_attention(pattern: torch.Tensor, n: torch.Tensor, shift: int) -> torch.Tensor:
    """(H,) mean weight from each position t of the second copy to t - n + shift."""
    if not isinstance(pattern, torch.Tensor) or pattern.dim() != 4:
        raise ValueError("pattern must be a (B, H, T, T) tensor")
    B, H, T, _ = pattern.shape
    if not isinstance(n, torch.Tensor) or n.shape != (B,):
        raise ValueError(f"n must be a tensor of shape ({B},), one repeat length per sequence")
    pos = torch.arange(T, device=pattern.device)
    key = (pos[None, :] - n[:, None] + shift).clamp(min=0)  # (B, T)
    w = pattern.gather(-1, key[:, None, :, None].expand(B, H, T, 1)).squeeze(-1)  # (B, H, T)
    sel = _second_copy(n, T).to(pattern.dtype)[:, None, :]  # (B, 1, T)
    return (w * sel).sum(dim=(0, 2)) / sel.sum(dim=(0, 2))


def prefix_matching_score(pattern: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """(B, H, T, T) attention on ``repeated_tokens`` with repeat lengths n (B,) -> (H,) scores.

    The mean weight from each position t of the second copy to t - n + 1, the token that
    followed the current token's earlier occurrence (where an induction head looks).
    """
    return _second_copy_attention(pattern, n, 1)


def duplicate_token_score(pattern: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """(B, H, T, T) attention on ``repeated_tokens`` -> (H,) mean weight from each position t of the
    second copy to t - n, the earlier occurrence of the same token (a duplicate-token head)."""
    return _second_copy_attention(pattern, n, 0)


def copying_score(ov: torch.Tensor) -> torch.Tensor:
    """Sum of the eigenvalues of a square OV circuit over the sum of their moduli, in [-1, 1].

    Elhage et al. 2021: a head that copies the token it attends to raises that token's own
    logit, so its OV circuit has mostly positive eigenvalues (score near 1).

    >>> copying_score(torch.eye(4)).item(), copying_score(-torch.eye(4)).item()
    (1.0, -1.0)
    """
    if not isinstance(ov, torch.Tensor) or ov.dim() != 2 or ov.shape[0] != ov.shape[1]:
        raise ValueError("ov must be a square (V, V) matrix")
    ev = torch.linalg.eigvals(ov.detach().double())
    return (ev.real.sum() / ev.abs().sum()).float()


def induction_score(pattern: torch.Tensor, n: torch.Tensor, copying: torch.Tensor) -> torch.Tensor:
    """Prefix matching x copying (copying clipped at 0), per head: 1 for a perfect induction head."""
    return prefix_matching_score(pattern, n) * copying.clamp(min=0)


# ----------------------------------------------------------------------------- real models
def logit_lens(model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
    """(L + 1, B, T, V) logits read from the residual stream entering each block and after the last one.

    Row l is ``unembed(resid_pre of block l)`` for l < L (row 0: the embeddings alone) and row L
    the model's own logits.
    """
    L = len(getattr(model, "blocks", getattr(model, "layers", [])))
    names = [f"blocks.{i}.resid_pre" for i in range(L)] + [f"blocks.{L - 1}.resid_post"]
    with torch.no_grad():
        _, cache = run_with_cache(model, idx, names)
        return torch.stack([unembed(model, cache[n]) for n in names])


def head_outputs(model: nn.Module, z: torch.Tensor, layer: int) -> torch.Tensor:
    """(B, T, H, D) head outputs of ``layer`` -> (B, T, H, C): what each head adds to the residual stream.

    Head h's share of the output projection: z_h W_O[:, hD:(h+1)D]^T. Their sum over heads plus
    the projection's bias (GPT's) is the attention sub-layer's output.
    """
    proj = model.blocks[layer].attn.c_proj if hasattr(model, "blocks") else model.layers[layer].self_attn.o_proj
    B, T, H, D = z.shape
    w = proj.weight.view(proj.weight.shape[0], H, D)  # (C, H, D)
    return torch.einsum("bthd,chd->bthc", z, w)


def direct_logit_attribution(model: nn.Module, idx: torch.Tensor, direction: torch.Tensor,
                             pos: int = -1) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Each head's direct contribution to ``logits[:, pos] . direction`` (B, L, H), and the rest.

    ``direction`` is (V,) for every prompt or (B, V), one per prompt (for example +1 at the right
    answer and -1 at the wrong one: the logit difference).

    The final norm divides the residual by its root mean square (LayerNorm also centres it);
    that scale is frozen at its value on the full residual, which makes the norm linear, so the
    contributions of the embeddings, every head, the output projections' biases and the MLPs,
    plus the norm's own bias, add up to the model's logit difference exactly (up to rounding).
    Returns (per-head (B, L, H), parts: 'embed', 'attn_bias', 'mlp' (B, L), 'norm_bias' and
    'total' (B,)).
    """
    L = len(getattr(model, "blocks", getattr(model, "layers", [])))
    names = ["blocks.0.resid_pre", f"blocks.{L - 1}.resid_post"] + [f"blocks.{i}.{k}" for i in range(L)
                                                                     for k in ("attn.z", "attn_out", "mlp_out")]
    norm = final_norm(model)
    with torch.no_grad():
        logits, cache = run_with_cache(model, idx, names)
        final = cache[f"blocks.{L - 1}.resid_post"][:, pos]  # (B, C)
        if direction.dim() == 1:
            direction = direction.expand(idx.shape[0], -1)  # one direction for every prompt
        w_u = direction @ model.lm_head.weight  # (B, C): sum_v direction_v W_U[v], per prompt
        if isinstance(norm, nn.LayerNorm):
            scale = (final.var(-1, unbiased=False, keepdim=True) + norm.eps).rsqrt()  # (B, 1)
            centre = True
            gain, bias = norm.weight, norm.bias
        else:  # RMSNorm
            scale = (final.pow(2).mean(-1, keepdim=True) + norm.eps).rsqrt()
            centre = False
            gain, bias = norm.weight, None

        def read(v: torch.Tensor) -> torch.Tensor:  # (B, ..., C) at pos -> (B, ...)
            if centre:
                v = v - v.mean(-1, keepdim=True)
            shape = (v.shape[0],) + (1,) * (v.dim() - 2) + (-1,)
            return (v * scale.view(shape[:-1] + (1,)) * gain * w_u.view(shape)).sum(-1)

        per_head = torch.stack([read(head_outputs(model, cache[f"blocks.{i}.attn.z"], i)[:, pos])
                                for i in range(L)], dim=1)  # (B, L, H)
        heads_sum = torch.stack([head_outputs(model, cache[f"blocks.{i}.attn.z"], i)[:, pos].sum(-2) for i in range(L)], 1)
        attn_bias = read(torch.stack([cache[f"blocks.{i}.attn_out"][:, pos] for i in range(L)], 1) - heads_sum)
        parts = {
            "embed": read(cache["blocks.0.resid_pre"][:, pos]),
            "attn_bias": attn_bias,
            "mlp": read(torch.stack([cache[f"blocks.{i}.mlp_out"][:, pos] for i in range(L)], 1)),
            "norm_bias": w_u @ bias if bias is not None else torch.zeros(final.shape[0]),
            "total": (logits[:, pos] * direction).sum(-1),
        }
    return per_head, parts


def logit_diff(logits: torch.Tensor, good: torch.Tensor, bad: torch.Tensor, pos: int = -1) -> torch.Tensor:
    """(B,) logit of the right answer minus the wrong one at position ``pos``; good, bad (B,) token ids."""
    row = logits[:, pos]
    return row.gather(1, good[:, None]).squeeze(1) - row.gather(1, bad[:, None]).squeeze(1)


def patch_residual_grid(model: nn.Module, clean: torch.Tensor, corrupt: torch.Tensor, good: torch.Tensor,
                        bad: torch.Tensor, per_pair: bool = False) -> torch.Tensor:
    """Activation patching of the residual stream: (L, T) share of the clean logit difference restored.

    For every layer l and position t: run the corrupted prompt with the residual stream entering
    block l at position t replaced by the clean run's, and score
    (patched - corrupted) / (clean - corrupted) of the logit difference at the last position, per
    prompt pair (clean, corrupt: (B, T) of equal length; good, bad: (B,) token ids). Returns the
    mean over the pairs (L, T), or every pair's grid (B, L, T) with ``per_pair=True``.

    Only what a patch can change is computed. Positions before the first token where the two
    prompts differ hold the same residual stream in both runs (attention is causal), so their
    entries are 0 without a run. A patch at (l, t) changes nothing in blocks before l, nor at
    positions before t in any block, so those keep the corrupted run's values: its residual
    stream and its keys and values, kept from one run with a key/value cache. Each patched run
    starts at block l (``llmbook.hooks.run_blocks``) with positions t..T-1 only, and reads only
    the two logits it needs, at the last position. The result equals one full forward pass per (layer,
    position) up to float rounding (``tests/test_interp.py`` compares the two).
    """
    if not (isinstance(clean, torch.Tensor) and isinstance(corrupt, torch.Tensor)) or clean.shape != corrupt.shape \
            or clean.dim() != 2:
        raise ValueError(f"clean and corrupt must be (B, T) tensors of one shape, got {getattr(clean, 'shape', clean)} "
                         f"and {getattr(corrupt, 'shape', corrupt)}")
    differ = (clean != corrupt).any(0).nonzero()
    if len(differ) == 0:
        raise ValueError("clean and corrupt are the same prompts: there is nothing to patch")
    L = len(getattr(model, "blocks", getattr(model, "layers", [])))
    B, T = clean.shape
    start = int(differ[0])
    names = [f"blocks.{i}.resid_pre" for i in range(L)]
    with torch.no_grad():
        clean_logits, clean_cache = run_with_cache(model, clean, names)
        prefix = KVCache(model.config, B, max_len=T)  # the corrupted run's keys and values, every block
        corrupt_logits, corrupt_cache = run_with_cache(model, corrupt, names, kv_cache=prefix)
        d_clean, d_corrupt = logit_diff(clean_logits, good, bad), logit_diff(corrupt_logits, good, bad)
        w_diff = model.lm_head.weight[good] - model.lm_head.weight[bad]  # (B, C): W_U[good] - W_U[bad] (no bias)
        out = torch.zeros(B, L, T)
        for t in range(start, T):
            kv = KVCache(model.config, B, max_len=T)
            kv.allocate(prefix.k[0].device, prefix.k[0].dtype)
            for i in range(L):  # positions 0..t-1 as the corrupted run left them
                kv.k[i][:, :, :t], kv.v[i][:, :, :t] = prefix.k[i][:, :, :t], prefix.v[i][:, :, :t]
            for layer, name in enumerate(names):
                x = corrupt_cache[name][:, t:].clone()  # (B, T - t, C): the corrupted stream from position t on
                x[:, 0] = clean_cache[name][:, t]  # the patch
                kv.length = t  # forget what the previous layer's run appended
                final = final_norm(model)(run_blocks(model, x, layer, kv_cache=kv)[:, -1])  # (B, C)
                d = (final * w_diff).sum(-1)  # logit(good) - logit(bad), without the other V - 2 logits
                out[:, layer, t] = (d - d_corrupt) / (d_clean - d_corrupt)
    return out if per_pair else out.mean(0)


def ablate_heads(model: nn.Module, idx: torch.Tensor, heads: Sequence[tuple[int, int]],
                 replacement: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
    """Logits with the heads (layer, head) silenced: their outputs z set to 0, or to ``replacement[layer]``.

    ``replacement[layer]`` is a (T, H, D) tensor, for example each head's mean output over a
    reference set of prompts (mean ablation); heads not listed keep their own outputs.
    """
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(int(layer), []).append(int(head))

    def make(layer: int, hs: list[int]):
        sel = torch.tensor(hs)

        def fn(z: torch.Tensor, _name: str) -> torch.Tensor:
            z = z.clone()
            if replacement is None:
                z[:, :, sel] = 0.0
            else:
                z[:, :, sel] = replacement[layer][None, :, sel].to(z.dtype)
            return z
        return fn
    with torch.no_grad():
        return run_with_hooks(model, idx, [(f"blocks.{l}.attn.z", make(l, hs)) for l, hs in by_layer.items()])


# ----------------------------------------------------------------------------- training the toy model
INDUCTION_TASK = dict(vocab_size=32, length=32, n_min=8, n_max=16)  # the chapter's sequences
INDUCTION_MODEL = dict(n_head=4, d_model=64)  # and its model, with n_layer 1 or 2


def head_scores(model: AttnOnlyTransformer, idx: torch.Tensor, n: torch.Tensor,
                ablate: Sequence[tuple[int, int]] = ()) -> dict:
    """Every score of section 1 for one model on ``repeated_tokens`` (idx, n), as plain lists.

    Returns 'loss' (the repeated-half loss, a float) and, per layer and head ([layer][head]),
    'prev', 'duplicate', 'prefix', 'copying' and 'induction'. With ``ablate`` the listed heads
    (layer, head) write nothing, so the scores say what the rest of the model does without them
    (the copying score is a property of the weights and does not change).
    """
    with torch.no_grad():
        logits, pats = model(idx, return_attention=True, ablate=ablate)
        cop = [[copying_score(model.ov_circuit(l, h)).item() for h in range(model.n_head)] for l in range(len(pats))]
        return {
            "loss": repeated_half_loss(logits, idx, n).item(),
            "prev": [previous_token_score(p).tolist() for p in pats],
            "duplicate": [duplicate_token_score(p, n).tolist() for p in pats],
            "prefix": [prefix_matching_score(p, n).tolist() for p in pats],
            "copying": cop,
            "induction": [induction_score(p, n, torch.tensor(c)).tolist() for p, c in zip(pats, cop)],
        }


def train_induction(n_layer: int, seed: int, steps: int = 2000, batch: int = 64, lr: float = 3e-3,
                    eval_every: int = 50, n_eval: int = 256) -> dict:
    """Train an ``AttnOnlyTransformer`` on ``repeated_tokens`` (next-token loss on every position).

    Every ``eval_every`` updates it records, on one fixed batch of ``n_eval`` sequences: the loss
    on the repeated half (``repeated_half_loss``) and, per layer and head, the previous-token,
    prefix-matching, copying and induction scores. AdamW, constant rate, no weight decay.
    Returns a dict of plain lists (JSON-ready) and the model under the key 'model'.
    """
    _pos_int("n_layer", n_layer)
    _pos_int("steps", steps)
    task = INDUCTION_TASK
    torch.manual_seed(seed)
    model = AttnOnlyTransformer(task["vocab_size"], task["length"], n_layer, **INDUCTION_MODEL)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    data = torch.Generator().manual_seed(1000 + seed)
    x_val, n_val = repeated_tokens(n_eval, generator=torch.Generator().manual_seed(999), **task)
    hist: dict = {"step": [], "loss": [], "prev": [], "duplicate": [], "prefix": [], "copying": [], "induction": []}
    for step in range(steps + 1):
        if step % eval_every == 0:
            model.eval()
            hist["step"].append(step)
            for key, value in head_scores(model, x_val, n_val).items():
                hist[key].append(value)
            model.train()
        if step == steps:
            break
        x, _ = repeated_tokens(batch, generator=data, **task)
        logits = model(x)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, task["vocab_size"]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    hist["model"] = model.eval()
    return hist


def seen_token_baseline(idx: torch.Tensor, n: torch.Tensor) -> float:
    """Loss (nats) on the repeated half of a predictor uniform over the distinct tokens seen so far.

    The best a model can do that knows which tokens occurred but not in which order.
    """
    B, T = idx.shape
    total, count = 0.0, 0
    for b in range(B):
        for t in range(T - int(n[b]), T - 1):
            seen = len(set(idx[b, : t + 1].tolist()))
            total += math.log(seen) if idx[b, t + 1].item() in set(idx[b, : t + 1].tolist()) else math.inf
            count += 1
    return total / count
