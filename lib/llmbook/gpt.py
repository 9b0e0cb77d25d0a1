"""GPT-1, GPT-2 and GPT-3 as presets of one decoder-only Transformer.

Covers: token + learned position embeddings, a stack of blocks of masked (causal)
multi-head self-attention and a GELU feed-forward network, Post-LN (GPT-1) or Pre-LN
with a final LayerNorm (GPT-2, GPT-3), GPT-3's alternating dense / locally banded
attention, GPT-2 style initialisation (N(0, 0.02), residual projections scaled by
1/sqrt(2 n_layer); ``scaled_residual_init=False`` for GPT-1's plain N(0, 0.02)), weight tying between the embedding and the output layer, attention
weights on request (``return_attention=True``), and generation with a key/value cache.
``load_hf_gpt2`` loads the weights of Hugging Face's ``GPT2LMHeadModel`` (a state dict)
into ``GPT``; ``gpt_config_from_hf`` translates its ``GPT2Config``.

Leaves out: GPT-3's exact strided sparse kernels (the banded layers here use a dense
masked kernel, which gives the same numbers at a higher cost), GPT-2's per-layer
parameter-free tricks such as the vocabulary-size padding, and tensor/pipeline
parallelism.

Papers: Radford et al. 2018, *Improving Language Understanding by Generative
Pre-Training* (GPT-1); Radford et al. 2019, *Language Models are Unsupervised Multitask
Learners* (GPT-2); Brown et al. 2020, *Language Models are Few-Shot Learners* (GPT-3);
Child et al. 2019, *Generating Long Sequences with Sparse Transformers* (banded
attention).

Shape legend: B batch, T new positions, S positions attended to (cache + new),
C = d_model, H = n_head, D = head_dim = C / H, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import causal_mask  # the book's one causal mask (re-exported here)
from .device import check_index_range, check_on_device, model_device, values_checkable
from .kv_cache import KVCache  # the book's one key/value cache (re-exported here)
from .sampling import sample_next

__all__ = ["GPTConfig", "GPT", "KVCache", "causal_mask", "GPT3_SIZES", "gpt_config_from_hf", "load_hf_gpt2"]


# name -> (n_layer, d_model, n_head) from Table 2.1 of the GPT-3 paper. The paper lists
# d_model = 5140 for 13B, which 40 heads of 128 do not divide, and 24 heads of 128 for XL,
# which is 3072, not 2048. We use 5120 = 40 x 128 and 16 x 128 = 2048: head counts do not
# change the parameter count, and the widths give the stated sizes.
GPT3_SIZES: dict[str, tuple[int, int, int]] = {
    "small": (12, 768, 12),
    "medium": (24, 1024, 16),
    "large": (24, 1536, 16),
    "xl": (24, 2048, 16),
    "2.7B": (32, 2560, 32),
    "6.7B": (32, 4096, 32),
    "13B": (40, 5120, 40),
    "175B": (96, 12288, 96),
}


@dataclass
class GPTConfig:
    """Every size and switch of the model; presets below name the published ones."""

    vocab_size: int = 50257  # tokens in the vocabulary (rows of the embedding)
    block_size: int = 1024  # context length: positions the model can see at once
    n_layer: int = 12  # number of Transformer blocks
    n_head: int = 12  # attention heads per block (must divide d_model)
    d_model: int = 768  # width of the residual stream
    d_ff: int = 3072  # inner width of the feed-forward network (4 d_model in all GPTs)
    dropout: float = 0.0  # residual, embedding and attention dropout (0.1 in GPT-1's paper, section 4.1; the GPT-2 and GPT-3 papers state no rate: the GPT-2 presets use Hugging Face's default 0.1, GPT-3's uses 0)
    bias: bool = True  # biases in Linear layers and LayerNorms (the GPTs all have them)
    pre_norm: bool = True  # True: Pre-LN (GPT-2/3); False: Post-LN (GPT-1)
    final_norm: bool = True  # an extra LayerNorm after the last block (added by GPT-2)
    tie_weights: bool = True  # output layer shares the token embedding matrix
    sparse_pattern: Optional[str] = None  # None: all dense; "alternating": odd layers locally banded (GPT-3)
    local_window: int = 256  # width of the band in banded layers (the GPT-3 paper does not give it)
    layer_norm_eps: float = 1e-5  # epsilon inside LayerNorm
    scaled_residual_init: bool = True  # GPT-2's init: residual projections get std 0.02/sqrt(2 n_layer) (GPT-1: plain 0.02)
    gelu: str = "tanh"  # "tanh": the approximation GPT-1/2 used; "exact": the erf form (nanoGPT's nn.GELU, BERT)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model", "d_ff", "local_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.d_model % self.n_head:
            raise ValueError(f"n_head={self.n_head} must divide d_model={self.d_model}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.sparse_pattern not in (None, "alternating"):
            raise ValueError(f"sparse_pattern must be None or 'alternating', got {self.sparse_pattern!r}")
        if self.gelu not in ("tanh", "exact"):
            raise ValueError(f"gelu must be 'tanh' or 'exact', got {self.gelu!r}")
        eps = self.layer_norm_eps  # `not 0 < eps` also catches NaN
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:
            raise ValueError(f"layer_norm_eps must be a finite number > 0, got {eps!r}")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def layer_is_banded(self, layer: int) -> bool:
        """GPT-3 alternates: even layers dense, odd layers locally banded."""
        return self.sparse_pattern == "alternating" and layer % 2 == 1

    # ------------------------------------------------------------------ presets
    @classmethod
    def gpt1(cls, **overrides) -> "GPTConfig":
        """GPT-1: 12 x 768, 12 heads, FFN 3072, 512 context, 40,478 BPE tokens, Post-LN, ~117M."""
        base = cls(vocab_size=40478, block_size=512, n_layer=12, n_head=12, d_model=768, d_ff=3072,
                   dropout=0.1, pre_norm=False, final_norm=False, tie_weights=True, scaled_residual_init=False)
        return replace(base, **overrides)

    @classmethod
    def _gpt2(cls, n_layer: int, d_model: int, n_head: int, overrides: dict) -> "GPTConfig":
        base = cls(vocab_size=50257, block_size=1024, n_layer=n_layer, n_head=n_head, d_model=d_model,
                   d_ff=4 * d_model, dropout=0.1, pre_norm=True, final_norm=True, tie_weights=True)
        return replace(base, **overrides)

    @classmethod
    def gpt2_small(cls, **overrides) -> "GPTConfig":
        """GPT-2 small: 12 x 768, 12 heads (124M)."""
        return cls._gpt2(12, 768, 12, overrides)

    @classmethod
    def gpt2_medium(cls, **overrides) -> "GPTConfig":
        """GPT-2 medium: 24 x 1024, 16 heads (355M)."""
        return cls._gpt2(24, 1024, 16, overrides)

    @classmethod
    def gpt2_large(cls, **overrides) -> "GPTConfig":
        """GPT-2 large: 36 x 1280, 20 heads (774M)."""
        return cls._gpt2(36, 1280, 20, overrides)

    @classmethod
    def gpt2_xl(cls, **overrides) -> "GPTConfig":
        """GPT-2 XL: 48 x 1600, 25 heads (1558M)."""
        return cls._gpt2(48, 1600, 25, overrides)

    @classmethod
    def gpt3(cls, name: str = "175B", **overrides) -> "GPTConfig":
        """One of the eight GPT-3 sizes (``GPT3_SIZES``): 2048 context, alternating sparse layers."""
        if name not in GPT3_SIZES:
            raise ValueError(f"name must be one of {', '.join(GPT3_SIZES)}, got {name!r}")
        n_layer, d_model, n_head = GPT3_SIZES[name]
        base = cls(vocab_size=50257, block_size=2048, n_layer=n_layer, n_head=n_head, d_model=d_model,
                   d_ff=4 * d_model, dropout=0.0, pre_norm=True, final_norm=True, tie_weights=True,
                   sparse_pattern="alternating", local_window=256)
        return replace(base, **overrides)

    @classmethod
    def baby(cls, vocab_size: int = 65, **overrides) -> "GPTConfig":
        """A reduced "baby GPT" for CPUs: 4 layers, 4 heads, 128 wide, 64 context (character level).

        These are the smaller settings nanoGPT's README suggests for training Shakespeare on a
        CPU; nanoGPT's own "baby GPT" (config/train_shakespeare_char.py) is 6 layers, 6 heads,
        384 wide, 256 context.
        """
        base = cls(vocab_size=vocab_size, block_size=64, n_layer=4, n_head=4, d_model=128, d_ff=512,
                   dropout=0.0, pre_norm=True, final_norm=True, tie_weights=True)
        return replace(base, **overrides)


class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention with an optional key/value cache."""

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.n_head, self.head_dim = config.n_head, config.head_dim
        self.layer = layer
        self.window = config.local_window if config.layer_is_banded(layer) else None
        self.c_attn = nn.Linear(config.d_model, 3 * config.d_model, bias=config.bias)  # q, k, v in one matmul
        self.c_proj = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.c_proj.residual_scaled = True  # GPT-2 init: std / sqrt(2 n_layer)
        self.dropout = config.dropout
        self.resid_drop = nn.Dropout(config.dropout)
        # A named place for llmbook.hooks to read or replace the weights (explicit path only); a no-op otherwise.
        self.hook_pattern = nn.Identity()

    def forward(self, x: torch.Tensor, kv_cache: KVCache | None = None,
                return_attention: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        offset = 0
        if kv_cache is not None:
            offset = kv_cache.length
            k, v = kv_cache.append(self.layer, k, v)  # (B, H, S, D), S = offset + T
        S = k.shape[2]
        p_drop = self.dropout if self.training else 0.0
        weights = None
        if return_attention:
            # The explicit path: the same arithmetic as the fused kernel, weights kept.
            mask = causal_mask(T, S, offset, self.window, device=x.device)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)  # (B, H, T, S)
            weights = self.hook_pattern(scores.masked_fill(~mask, float("-inf")).softmax(dim=-1))
            y = F.dropout(weights, p_drop, self.training) @ v  # (B, H, T, D)
        elif self.window is None and offset == 0:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop, is_causal=True)
        elif self.window is None and T == 1:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop)  # one new token sees all cached keys
        else:
            mask = causal_mask(T, S, offset, self.window, device=x.device)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C): heads side by side again
        return self.resid_drop(self.c_proj(y)), weights


class MLP(nn.Module):
    """Position-wise feed-forward network: Linear -> GELU -> Linear."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.c_proj = nn.Linear(config.d_ff, config.d_model, bias=config.bias)
        self.c_proj.residual_scaled = True
        self.drop = nn.Dropout(config.dropout)
        # GPT-1 and GPT-2 used the tanh approximation of GELU; the exact (erf) form differs by < 1e-3.
        self.approximate = "tanh" if config.gelu == "tanh" else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate)))


class Block(nn.Module):
    """One Transformer block, Pre-LN (GPT-2/3) or Post-LN (GPT-1)."""

    def __init__(self, config: GPTConfig, layer: int):
        super().__init__()
        self.pre_norm = config.pre_norm
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
        self.attn = CausalSelfAttention(config, layer)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, kv_cache: KVCache | None = None,
                return_attention: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.pre_norm:
            a, w = self.attn(self.ln_1(x), kv_cache, return_attention)
            x = x + a
            x = x + self.mlp(self.ln_2(x))
        else:  # GPT-1: normalise after each residual addition
            a, w = self.attn(x, kv_cache, return_attention)
            x = self.ln_1(x + a)
            x = self.ln_2(x + self.mlp(x))
        return x, w


class GPT(nn.Module):
    """Decoder-only Transformer language model.

    ``forward(idx, targets=None)`` returns ``(logits, loss)``; with
    ``return_attention=True`` it returns ``(logits, loss, attentions)`` where
    ``attentions`` is a list with one ``(B, H, T, S)`` tensor per layer. ``loss`` is the
    mean cross-entropy in nats per token when ``targets`` is given, else ``None``.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.block_size, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layer))
        self.ln_f = (nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
                     if config.final_norm else nn.Identity())
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_weights:
            self.lm_head.weight = self.wte.weight  # one matrix reads tokens in and writes them out
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            std = 0.02
            if self.config.scaled_residual_init and getattr(module, "residual_scaled", False):
                # Each block adds two outputs to the residual stream; scaling keeps its variance flat with depth.
                std = 0.02 / math.sqrt(2 * self.config.n_layer)
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Number of distinct parameters (tied matrices counted once); optionally without embeddings."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wpe.weight.numel() + self.wte.weight.numel()
            if not self.config.tie_weights:
                n -= self.lm_head.weight.numel()
        return n

    def _check_idx(self, idx: torch.Tensor, offset: int) -> None:
        """Shape, dtype, device and id range of ``idx``: one cheap pass, no host sync off the CPU."""
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"idx must be a (B, T) torch.Tensor of token ids, got {type(idx).__name__}"
                            + ("; wrap it as torch.tensor([ids]) (a batch of one)" if isinstance(idx, (list, tuple)) else ""))
        if idx.dim() != 2 or idx.dtype not in (torch.long, torch.int32):
            hint = "; add a batch dimension: idx.unsqueeze(0) or idx[None]" if idx.dim() == 1 else ""
            raise ValueError(f"idx must be a (B, T) integer tensor, got shape {tuple(idx.shape)} dtype {idx.dtype}{hint}")
        if idx.shape[1] < 1:
            raise ValueError("idx is empty: give at least one token")
        if offset + idx.shape[1] > self.config.block_size:
            raise ValueError(f"sequence of {offset + idx.shape[1]} positions is longer than block_size="
                             f"{self.config.block_size}; crop it (generate() crops prompts for you)")
        check_on_device("idx", idx, self.wte.weight.device)
        check_index_range("idx", idx, self.config.vocab_size)

    def _check_targets(self, targets: torch.Tensor, idx: torch.Tensor) -> None:
        """Targets: ids in [0, vocab_size) or -1 (ignored), same shape as idx, not all ignored."""
        if not isinstance(targets, torch.Tensor) or targets.shape != idx.shape:
            raise ValueError(f"targets must be a tensor of shape {tuple(idx.shape)} (that of idx), "
                             f"got {tuple(getattr(targets, 'shape', ())) or type(targets).__name__}")
        check_on_device("targets", targets, idx.device)
        if values_checkable(targets) and targets.dtype in (torch.int64, torch.int32) and targets.numel():
            lo, hi = (int(v) for v in torch.aminmax(targets))  # the training hot path: one pass
            if lo >= 0 and hi < self.config.vocab_size:
                return
            check_index_range("targets", targets, self.config.vocab_size, ignore_index=-1)
            if hi == -1:  # every value is -1 once the range holds
                raise ValueError("targets: every position is -1 (ignored), so there is no loss to compute")
            return
        check_index_range("targets", targets, self.config.vocab_size, ignore_index=-1)
        if targets.device.type == "cuda" and not torch.compiler.is_compiling():
            torch._assert_async((targets != -1).any(), "targets: every position is -1 (ignored)")

    def hidden_states(self, idx: torch.Tensor, kv_cache: KVCache | None = None,
                      return_attention: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Final hidden states (B, T, C) after the last block (and final LayerNorm), plus attentions."""
        offset = kv_cache.length if kv_cache is not None else 0
        self._check_idx(idx, offset)
        T = idx.shape[1]
        pos = torch.arange(offset, offset + T, device=idx.device)  # (T,) absolute positions
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        attentions = []
        for block in self.blocks:
            x, w = block(x, kv_cache, return_attention)
            if return_attention:
                attentions.append(w)
        if kv_cache is not None:
            kv_cache.length += T
        return self.ln_f(x), attentions

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_attention: bool = False,
                kv_cache: KVCache | None = None):
        x, attentions = self.hidden_states(idx, kv_cache, return_attention)
        logits = self.lm_head(x)  # (B, T, V)
        loss = None
        if targets is not None:
            self._check_targets(targets, idx)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1), ignore_index=-1)
        if return_attention:
            return logits, loss, attentions
        return logits, loss

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, generator: torch.Generator | None = None,
                 use_cache: bool = True) -> torch.Tensor:
        """Extend ``idx`` (B, T) by ``max_new_tokens`` tokens; returns (B, T + max_new_tokens).

        ``idx`` is moved to the model's device first (the result lives there too).

        A prompt longer than ``block_size`` is cropped to its last ``block_size`` tokens
        before the first step (the model cannot see further back); the returned tensor
        still starts with the full prompt. ``temperature=0`` is greedy decoding. With
        ``use_cache`` the keys and values of earlier positions are kept, so each step runs
        the model on one new token; the result is the same as without the cache.
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
        sample_next(torch.zeros(1), temperature, top_k, top_p)  # validates the sampling arguments early
        if isinstance(idx, torch.Tensor) and idx.dim() == 2:
            idx = idx.to(model_device(self))  # a prompt made on the CPU follows the model
        self._check_idx(idx if not isinstance(idx, torch.Tensor) or idx.dim() != 2 else idx[:, -self.config.block_size:], 0)
        was_training = self.training
        self.eval()
        bs = self.config.block_size
        cache = None
        if use_cache:
            cache = KVCache(self.config, idx.shape[0], device=idx.device, dtype=self.wte.weight.dtype)
            logits, _ = self(idx[:, -bs:], kv_cache=cache)
        for step in range(max_new_tokens):
            if cache is None:
                logits, _ = self(idx[:, -bs:])
            next_id = sample_next(logits[:, -1, :], temperature, top_k, top_p, generator)  # (B,)
            idx = torch.cat([idx, next_id.unsqueeze(1)], dim=1)
            if cache is not None and step + 1 < max_new_tokens:
                if cache.length < bs:
                    logits, _ = self(idx[:, -1:], kv_cache=cache)
                else:  # window full: recompute the last block_size tokens, as the uncached model does
                    cache.reset()
                    logits, _ = self(idx[:, -bs:], kv_cache=cache)
        self.train(was_training)
        return idx


# ---------------------------------------------------------------- Hugging Face's GPT-2
# transformers' GPT-2 stores its four projections as ``Conv1D`` modules, whose weight is
# (in_features, out_features): the transpose of ``nn.Linear``'s (out, in).
_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
# Buffers some transformers versions keep in the state dict: the causal mask ``attn.bias``
# (1, 1, n_positions, n_positions) and ``attn.masked_bias``. They hold no learned numbers.
_HF_BUFFERS = ("attn.bias", "attn.masked_bias")


def gpt_config_from_hf(hf_config, **overrides) -> GPTConfig:
    """The ``GPTConfig`` of a transformers ``GPT2Config`` (sizes, LayerNorm epsilon, GELU form).

    ``dropout`` defaults to GPT-2's ``resid_pdrop`` (the three GPT-2 rates must then be equal:
    the book's model has one); pass ``dropout=0.0`` in ``overrides`` to ignore them. Raises
    ``ValueError`` for GPT-2 options the book's model does not have (cross-attention,
    ``scale_attn_by_inverse_layer_idx``, ``reorder_and_upcast_attn``, unscaled attention).
    """
    for name in ("n_embd", "n_layer", "n_head", "n_positions", "vocab_size"):
        if not hasattr(hf_config, name):
            raise TypeError(f"hf_config must be a transformers GPT2Config (no attribute {name!r}), "
                            f"got {type(hf_config).__name__}")
    unsupported = {"add_cross_attention": False, "scale_attn_by_inverse_layer_idx": False,
                   "reorder_and_upcast_attn": False, "scale_attn_weights": True}
    for name, wanted in unsupported.items():
        if getattr(hf_config, name, wanted) != wanted:
            raise ValueError(f"hf_config.{name}={getattr(hf_config, name)!r} is not supported by llmbook's GPT "
                             f"(it needs {wanted})")
    gelu = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "exact"}.get(hf_config.activation_function)
    if gelu is None:
        raise ValueError(f"hf_config.activation_function={hf_config.activation_function!r} is not supported "
                         "(llmbook's GPT has 'gelu_new'/'gelu_pytorch_tanh' (tanh) and 'gelu' (exact))")
    if "dropout" not in overrides:
        rates = {hf_config.resid_pdrop, hf_config.embd_pdrop, hf_config.attn_pdrop}
        if len(rates) != 1:
            raise ValueError(f"hf_config has different dropout rates {sorted(rates)} (resid, embd, attn) and "
                             "llmbook's GPT has one: pass dropout=... explicitly")
        overrides["dropout"] = rates.pop()
    n_inner = hf_config.n_inner if hf_config.n_inner is not None else 4 * hf_config.n_embd
    base = GPTConfig(vocab_size=hf_config.vocab_size, block_size=hf_config.n_positions, n_layer=hf_config.n_layer,
                     n_head=hf_config.n_head, d_model=hf_config.n_embd, d_ff=n_inner, bias=True,
                     pre_norm=True, final_norm=True, tie_weights=bool(getattr(hf_config, "tie_word_embeddings", True)),
                     layer_norm_eps=float(hf_config.layer_norm_epsilon), gelu=gelu)
    return replace(base, **overrides)


def load_hf_gpt2(state_dict, config: GPTConfig) -> GPT:
    """A ``GPT`` holding the weights of a transformers ``GPT2LMHeadModel`` state dict.

    What changes on the way: the ``transformer.`` prefix goes, ``h.{i}`` becomes
    ``blocks.{i}``, the four ``Conv1D`` weights (``c_attn``, ``c_proj``, ``c_fc``,
    ``mlp.c_proj``; stored as (in, out)) are transposed to ``nn.Linear``'s (out, in), and
    the causal-mask buffers (``attn.bias``, ``attn.masked_bias``) are dropped. With tied
    weights ``lm_head.weight`` must equal ``wte.weight`` (it is the same matrix). The model
    takes the dtype and device of the state dict and is returned in eval mode.

    ``config`` gives the sizes (``gpt_config_from_hf(hf_model.config)``, or a preset such as
    ``GPTConfig.gpt2_small(dropout=0.0)``). Any missing, unexpected or mis-shaped weight
    raises ``ValueError`` naming it. A reader whose Hugging Face cache holds ``gpt2``::

        hf = GPT2LMHeadModel.from_pretrained("gpt2")
        model = load_hf_gpt2(hf.state_dict(), gpt_config_from_hf(hf.config, dropout=0.0))
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    if not hasattr(state_dict, "items"):
        raise TypeError(f"state_dict must be a mapping of names to tensors (model.state_dict()), "
                        f"got {type(state_dict).__name__}")
    if not (config.pre_norm and config.final_norm and config.bias and config.sparse_pattern is None):
        raise ValueError("config must describe a GPT-2 (pre_norm, final_norm, bias, no sparse_pattern)")
    mapped: dict[str, torch.Tensor] = {}
    for name, tensor in state_dict.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"state_dict[{name!r}] must be a torch.Tensor, got {type(tensor).__name__}")
        key = name.removeprefix("transformer.")
        if key.startswith("h."):  # h.{i}.<rest> -> blocks.{i}.<rest>
            _, layer, rest = key.split(".", 2)
            if rest in _HF_BUFFERS:
                continue  # the causal mask: GPT builds its own
            if rest in _CONV1D:
                tensor = tensor.t()  # Conv1D (in, out) -> Linear (out, in)
            key = f"blocks.{layer}.{rest}"
        mapped[key] = tensor
    if "wte.weight" not in mapped:
        raise ValueError("state_dict has no transformer.wte.weight: is it a GPT2LMHeadModel's state dict?")
    wte = mapped["wte.weight"]
    if config.tie_weights:
        head = mapped.setdefault("lm_head.weight", wte)
        if head.shape != wte.shape or not torch.equal(head, wte):
            raise ValueError("config.tie_weights is True but state_dict's lm_head.weight differs from wte.weight")
    model = GPT(config).to(device=wte.device, dtype=wte.dtype)
    own = model.state_dict()
    missing = sorted(set(own) - set(mapped))
    unexpected = sorted(set(mapped) - set(own))
    if missing or unexpected:
        raise ValueError(f"state_dict does not fit config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for key, tensor in mapped.items():
        if tuple(tensor.shape) != tuple(own[key].shape):
            raise ValueError(f"state_dict[{key!r}] has shape {tuple(tensor.shape)}, config needs "
                             f"{tuple(own[key].shape)}")
    model.load_state_dict(mapped)
    return model.eval()
