"""Hooks: read and overwrite a model's inner activations by name, without editing the model.

Covers: the book's GPT (``llmbook.gpt.GPT``) and LLaMA (``llmbook.llama.Llama``), with one set of
names for both. For layer ``i``:

===========================  ================  ==============================================
name                         shape             what it is
===========================  ================  ==============================================
``blocks.i.resid_pre``       (B, T, C)         the residual stream entering block i
``blocks.i.attn.pattern``    (B, H, T, S)      attention weights (softmax over the keys)
``blocks.i.attn.z``          (B, T, H, D)      each head's output, before the output projection
``blocks.i.attn_out``        (B, T, C)         the attention sub-layer's output (all heads)
``blocks.i.mlp_out``         (B, T, C)         the feed-forward sub-layer's output
``blocks.i.resid_post``      (B, T, C)         the residual stream leaving block i
``ln_final``                 (B, T, C)         the final norm's output, the unembedding's input
===========================  ================  ==============================================

A hook is a function ``fn(tensor, name)``: it may read the tensor (store it, take a statistic)
and returns ``None`` to leave it as it is, or a tensor of the same shape to replace it from that
point of the forward pass on. The hooks are PyTorch forward hooks and pre-hooks on the model's
own modules (the blocks, the attention and MLP sub-layers, the output projection whose input is
the heads' outputs side by side), so the model's code is untouched. Only attention patterns need
a place inside the attention: each attention module has an ``nn.Identity`` named
``hook_pattern`` on the path that computes weights explicitly (``return_attention=True``). The
fused kernel never forms the weights, so a pattern hook needs that path, which
``run_with_hooks`` and ``run_with_cache`` choose for you; a plain ``model(idx)`` under a
pattern hook raises an error rather than ignore the hook silently.

Nothing here reads a value back to the host (no ``.item()``, no Python ``if`` on a tensor):
hooks add no GPU synchronisation of their own. Hooks that return ``None`` leave the output
bit-identical to the plain forward pass (``tests/test_hooks.py``).

Leaves out: key/value caches (hooks are for one full forward pass), the queries and keys
themselves, and gradients (wrap your own code in ``torch.no_grad()`` or not, as you need).
TransformerLens (Nanda & Bloom, 2022) popularised the names; its ``HookPoint`` modules are the
same idea as ``hook_pattern``.

Shape legend: B batch, T positions, S keys, C width of the residual stream, H heads,
D = C / H head size.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Mapping, Sequence, Union

import torch
from torch import nn

__all__ = ["HookFn", "hook_names", "hooks", "run_with_hooks", "run_with_cache", "run_blocks", "final_norm", "unembed"]

HookFn = Callable[[torch.Tensor, str], Union[torch.Tensor, None]]
_KINDS = ("resid_pre", "attn.pattern", "attn.z", "attn_out", "mlp_out", "resid_post")
_NAME = re.compile(r"^blocks\.(\d+)\.(resid_pre|attn\.pattern|attn\.z|attn_out|mlp_out|resid_post)$")


def _parts(model: nn.Module):
    """(blocks, attention of block i, MLP of block i, output projection of block i, final norm, family)."""
    from .gpt import GPT
    from .llama import Llama

    if isinstance(model, GPT):
        return (model.blocks, lambda b: b.attn, lambda b: b.mlp, lambda b: b.attn.c_proj, model.ln_f,
                model.config.n_head, "gpt")
    if isinstance(model, Llama):
        return (model.layers, lambda b: b.self_attn, lambda b: b.mlp, lambda b: b.self_attn.o_proj, model.norm,
                model.config.n_head, "llama")
    raise TypeError(f"model must be an llmbook GPT or Llama, got {type(model).__name__}")


def hook_names(model: nn.Module) -> list[str]:
    """Every name a hook can attach to, in the order the forward pass reaches them.

    >>> from llmbook.gpt import GPT, GPTConfig
    >>> hook_names(GPT(GPTConfig.baby(n_layer=1)))
    ['blocks.0.resid_pre', 'blocks.0.attn.pattern', 'blocks.0.attn.z', 'blocks.0.attn_out', 'blocks.0.mlp_out', 'blocks.0.resid_post', 'ln_final']
    """
    blocks = _parts(model)[0]
    return [f"blocks.{i}.{k}" for i in range(len(blocks)) for k in _KINDS] + ["ln_final"]


def _check_name(model: nn.Module, name: object) -> tuple[int, str]:
    if not isinstance(name, str):
        raise TypeError(f"hook name must be a str, got {type(name).__name__}")
    if name == "ln_final":
        return -1, name
    m = _NAME.match(name)
    n_layer = len(_parts(model)[0])
    if not m or int(m.group(1)) >= n_layer:
        raise ValueError(f"unknown hook name {name!r}: names are 'blocks.<i>.<kind>' with i in [0, {n_layer}) and "
                         f"kind one of {', '.join(_KINDS)}, or 'ln_final'")
    return int(m.group(1)), m.group(2)


def _as_pairs(fwd_hooks: Union[Mapping[str, HookFn], Iterable[tuple[str, HookFn]]]) -> list[tuple[str, HookFn]]:
    pairs = list(fwd_hooks.items()) if isinstance(fwd_hooks, Mapping) else list(fwd_hooks)
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and callable(pair[1])):
            raise TypeError("hooks must be a dict {name: fn} or a list of (name, fn) pairs with callable fn, "
                            f"got an item {pair!r}")
    return pairs


def _checked(name: str, old: torch.Tensor, new: object) -> torch.Tensor:
    """A hook's replacement must keep the activation's shape (a wrong shape would fail far away)."""
    if not isinstance(new, torch.Tensor):
        raise TypeError(f"hook on {name!r} must return None or a tensor, got {type(new).__name__}")
    if new.shape != old.shape:
        raise ValueError(f"hook on {name!r} returned shape {tuple(new.shape)}, expected {tuple(old.shape)}")
    return new


def _apply(fn: HookFn, name: str, x: torch.Tensor) -> torch.Tensor | None:
    out = fn(x, name)
    return None if out is None else _checked(name, x, out)


def _attach(model: nn.Module, name: str, fn: HookFn, fired: dict[str, int]):
    """Register one hook on the module that produces ``name``; returns its handle."""
    blocks, attn, mlp, proj, norm, n_head, family = _parts(model)
    layer, kind = _check_name(model, name)

    def count():
        fired[name] = fired.get(name, 0) + 1  # a Python counter: no tensor is read

    if kind == "ln_final":
        def post(module, args, output):
            count()
            return _apply(fn, name, output)
        return norm.register_forward_hook(post)
    block = blocks[layer]
    if kind == "resid_pre":
        def pre(module, args):
            count()
            new = _apply(fn, name, args[0])
            return None if new is None else (new,) + tuple(args[1:])
        return block.register_forward_pre_hook(pre)
    if kind == "resid_post" or kind == "attn_out":
        target = block if kind == "resid_post" else attn(block)

        def post(module, args, output):  # GPT's modules return (x, weights); LLaMA's x or (x, weights)
            count()
            x = output[0] if isinstance(output, tuple) else output
            new = _apply(fn, name, x)
            if new is None:
                return None
            return (new,) + tuple(output[1:]) if isinstance(output, tuple) else new
        return target.register_forward_hook(post)
    if kind == "mlp_out":
        def post(module, args, output):
            count()
            return _apply(fn, name, output)
        return mlp(block).register_forward_hook(post)
    if kind == "attn.z":
        def pre(module, args):
            count()
            y = args[0]  # (B, T, H * D): the heads' outputs side by side
            z = y.unflatten(-1, (n_head, y.shape[-1] // n_head))  # (B, T, H, D), a view
            new = _apply(fn, name, z)
            return None if new is None else (new.flatten(-2),) + tuple(args[1:])
        return proj(block).register_forward_pre_hook(pre)
    # attn.pattern
    def post(module, args, output):
        count()
        return _apply(fn, name, output)
    return attn(block).hook_pattern.register_forward_hook(post)


@contextmanager
def hooks(model: nn.Module, fwd_hooks: Union[Mapping[str, HookFn], Iterable[tuple[str, HookFn]]]) -> Iterator[dict]:
    """Attach hooks for the duration of a ``with`` block; they are removed on exit, even after an error.

    Yields a dict that counts how often each name's hook ran. Several hooks may share a name
    (they run in the order given). A pattern hook needs the model called with
    ``return_attention=True``; if one did not run by the end of the block, that raises.
    """
    pairs = _as_pairs(fwd_hooks)
    fired: dict[str, int] = {}
    handles = []
    try:
        for name, fn in pairs:
            handles.append(_attach(model, name, fn, fired))
        yield fired
    finally:
        for h in handles:
            h.remove()
    idle = sorted({n for n, _ in pairs if n.endswith("attn.pattern") and not fired.get(n)})
    if idle:
        raise RuntimeError(f"pattern hooks {idle} never ran: the fused attention kernel forms no weights; call the "
                           "model with return_attention=True (run_with_hooks and run_with_cache do)")


def _forward(model: nn.Module, idx: torch.Tensor, need_pattern: bool, kv_cache=None) -> torch.Tensor:
    """Logits (B, T, V) of either model family, on the explicit attention path if ``need_pattern``."""
    family = _parts(model)[-1]
    kw = {} if kv_cache is None else {"kv_cache": kv_cache}
    out = model(idx, return_attention=True, **kw) if need_pattern else model(idx, **kw)
    if family == "gpt":
        return out[0]  # (logits, loss) or (logits, loss, attentions)
    return out[0] if need_pattern else out


def run_with_hooks(model: nn.Module, idx: torch.Tensor,
                   fwd_hooks: Union[Mapping[str, HookFn], Iterable[tuple[str, HookFn]]],
                   kv_cache=None) -> torch.Tensor:
    """One forward pass of ``idx`` (B, T) with the hooks attached; returns the logits (B, T, V).

    With a ``kv_cache`` (``llmbook.kv_cache.KVCache``) holding ``kv_cache.length`` earlier
    positions, ``idx`` continues them, as in generation: the hooks then see only the new
    positions (``llmbook.interp.patch_residual_grid`` runs only the positions a patch can change
    this way).

    >>> import torch
    >>> from llmbook.gpt import GPT, GPTConfig
    >>> m = GPT(GPTConfig.baby(n_layer=2)).eval(); idx = torch.tensor([[1, 2, 3]])
    >>> zero_head = lambda z, name: z.index_fill(2, torch.tensor([0]), 0.0)   # head 0 silenced
    >>> run_with_hooks(m, idx, {"blocks.1.attn.z": zero_head}).shape
    torch.Size([1, 3, 65])
    """
    pairs = _as_pairs(fwd_hooks)
    with hooks(model, pairs):
        return _forward(model, idx, any(n.endswith("attn.pattern") for n, _ in pairs), kv_cache)


def run_with_cache(model: nn.Module, idx: torch.Tensor, names: Sequence[str] | None = None,
                   fwd_hooks: Union[Mapping[str, HookFn], Iterable[tuple[str, HookFn]]] = (),
                   kv_cache=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Logits and a dict of the activations named (default: every name of ``hook_names``).

    The cache holds the tensors as the forward pass made them (after any edit by ``fwd_hooks``,
    which run first), detached from the graph. Patterns are cached only when asked for (they
    are the largest tensors and need the explicit attention path). A ``kv_cache`` is passed to
    the model as in ``run_with_hooks`` (it also keeps the run's keys and values).
    """
    if names is None:
        names = [n for n in hook_names(model) if not n.endswith("attn.pattern")]
    names = list(names)
    for n in names:
        _check_name(model, n)
    cache: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, name: str) -> None:
        cache[name] = x.detach()

    pairs = _as_pairs(fwd_hooks) + [(n, keep) for n in names]
    with hooks(model, pairs):
        logits = _forward(model, idx, any(n.endswith("attn.pattern") for n, _ in pairs), kv_cache)
    return logits, cache


def run_blocks(model: nn.Module, resid: torch.Tensor, start: int, kv_cache=None) -> torch.Tensor:
    """The rest of a forward pass: ``resid`` (B, T, C) enters block ``start``; returns the residual
    stream leaving the last block (``blocks.{L-1}.resid_post``), before the final norm.

    ``unembed`` of the result gives the logits. Blocks before ``start`` are not run, which is the
    point: given ``blocks.{start}.resid_pre`` of a prompt, the result equals the full forward
    pass's. With a ``kv_cache`` holding ``kv_cache.length`` earlier positions, ``resid`` holds the
    positions after them (as in generation); only blocks from ``start`` on read and extend the
    cache. Hooks attached with ``hooks`` run on those blocks as usual.

    >>> from llmbook.gpt import GPT, GPTConfig
    >>> m = GPT(GPTConfig.baby(n_layer=3)).eval(); idx = torch.tensor([[1, 2, 3]])
    >>> logits, cache = run_with_cache(m, idx, ["blocks.2.resid_pre"])
    >>> torch.allclose(unembed(m, run_blocks(m, cache["blocks.2.resid_pre"], 2)), logits)
    True
    """
    blocks, family = _parts(model)[0], _parts(model)[-1]
    L = len(blocks)
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < L:
        raise ValueError(f"start must be an int in [0, {L}), got {start!r}")
    width = model.config.d_model
    if not isinstance(resid, torch.Tensor) or resid.dim() != 3 or resid.shape[-1] != width:
        raise ValueError(f"resid must be a (B, T, {width}) tensor, got {getattr(resid, 'shape', type(resid).__name__)}")
    x, T = resid, resid.shape[1]
    if family == "gpt":  # positions were added to the embeddings; the attention reads the offset from the cache
        for block in blocks[start:]:
            x, _ = block(x, kv_cache)
    else:  # RoPE rotates queries and keys inside every block: it needs the absolute positions
        offset = kv_cache.length if kv_cache is not None else 0
        cos, sin = model._rope_slice(offset, T, x)
        for i in range(start, L):
            x = blocks[i](x, cos, sin, kv_cache, i)
    if kv_cache is not None:
        kv_cache.length += T
    return x


def final_norm(model: nn.Module) -> nn.Module:
    """The model's last norm before the unembedding (GPT's ``ln_f``, LLaMA's ``norm``)."""
    return _parts(model)[4]


def unembed(model: nn.Module, resid: torch.Tensor) -> torch.Tensor:
    """Logits of any residual-stream vector (..., C): the final norm, then the output layer.

    Applied to ``blocks.{L-1}.resid_post`` it gives the model's own logits; applied to an earlier
    layer's residual it is the logit lens (``llmbook.interp.logit_lens``).
    """
    if not isinstance(resid, torch.Tensor):
        raise TypeError(f"resid must be a tensor, got {type(resid).__name__}")
    return model.lm_head(final_norm(model)(resid))
