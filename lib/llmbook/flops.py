"""Parameters, compute and memory of a GPT, in closed form.

Covers: the exact parameter count of ``llmbook.gpt.GPT`` for any ``GPTConfig`` (checked
against the instantiated model in tests), training FLOPs per token (6N for the weights
plus the attention term 6 n_layer n_ctx d_model: three times the forward entry
2 n_layer n_ctx d_attn of Kaplan et al. 2020, Table 1, which is half of what a dense
implementation of the scores and the weighted sum computes; chapter 6b measures both), total
training compute (about 6 N D), model FLOPs utilisation (MFU), and the bytes of weights,
gradients and Adam state during training.

Leaves out: activation memory (it depends on batch size, recomputation and kernels),
the embedding lookups and softmax/LayerNorm FLOPs (a fraction of a percent), and the
cost of communication in parallel training.

Papers: Kaplan et al. 2020, *Scaling Laws for Neural Language Models*; Brown et al.
2020 (GPT-3: 3.14e23 FLOPs for 175B parameters and 300B tokens); Chowdhery et al. 2022
(PaLM, appendix B: MFU).
"""

from __future__ import annotations

from .gpt import GPTConfig

__all__ = ["param_count", "param_breakdown", "train_flops_per_token", "train_flops", "mfu", "training_memory_bytes"]


def _check_cfg(cfg: GPTConfig) -> None:
    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a GPTConfig, got {type(cfg).__name__}")


def param_breakdown(cfg: GPTConfig) -> dict[str, int]:
    """Parameters by part: token and position embeddings, attention, MLP, LayerNorms, output head.

    >>> param_breakdown(GPTConfig.baby())["attention"]
    264192
    """
    _check_cfg(cfg)
    d, f, L, b = cfg.d_model, cfg.d_ff, cfg.n_layer, int(cfg.bias)
    attn = L * (d * 3 * d + b * 3 * d + d * d + b * d)  # fused q,k,v projection and output projection
    mlp = L * (d * f + b * f + f * d + b * d)  # up and down projections
    ln = (1 + b) * d  # gain (and bias) of one LayerNorm
    norms = L * 2 * ln + (ln if cfg.final_norm else 0)
    return {
        "token_embedding": cfg.vocab_size * d,
        "position_embedding": cfg.block_size * d,
        "attention": attn,
        "mlp": mlp,
        "layernorm": norms,
        "lm_head": 0 if cfg.tie_weights else cfg.vocab_size * d,
    }


def param_count(cfg: GPTConfig, non_embedding: bool = False) -> int:
    """Exact parameter count of ``GPT(cfg)``; about 12 n_layer d_model^2 + V d_model for 4x FFNs.

    >>> param_count(GPTConfig.gpt2_small())
    124439808
    >>> round(param_count(GPTConfig.gpt3("175B")) / 1e9, 1)
    174.6
    """
    parts = param_breakdown(cfg)
    total = sum(parts.values())
    if non_embedding:
        total -= parts["token_embedding"] + parts["position_embedding"] + parts["lm_head"]
    return total


def train_flops_per_token(cfg: GPTConfig, n_ctx: int | None = None) -> float:
    """Training FLOPs per token: 6 N (non-embedding N plus the output layer) + 6 n_layer n_ctx d_model.

    Forward: 2 FLOPs (multiply + add) per weight per token, plus Kaplan et al.'s
    2 n_layer n_ctx d_model for attention over the context (2020, Table 1; a dense
    implementation of the scores and the weighted sum does twice that, 4 n_layer n_ctx
    d_model); backward is twice the forward.

    >>> f"{train_flops_per_token(GPTConfig.gpt3('175B')):.3e}"
    '1.062e+12'
    """
    _check_cfg(cfg)
    n_ctx = cfg.block_size if n_ctx is None else n_ctx
    if not isinstance(n_ctx, int) or n_ctx < 1:
        raise ValueError(f"n_ctx must be a positive int, got {n_ctx!r}")
    n = param_count(cfg, non_embedding=True) + cfg.vocab_size * cfg.d_model  # the output layer is a matmul too
    return 6.0 * n + 6.0 * cfg.n_layer * n_ctx * cfg.d_model


def train_flops(cfg: GPTConfig, tokens: float, n_ctx: int | None = None, simple: bool = False) -> float:
    """Total training FLOPs for ``tokens`` tokens; ``simple=True`` gives the rule of thumb 6 N D.

    >>> f"{train_flops(GPTConfig.gpt3('175B'), 300e9, simple=True):.2e}"
    '3.14e+23'
    """
    _check_cfg(cfg)
    if not tokens > 0:
        raise ValueError(f"tokens must be > 0, got {tokens}")
    if simple:
        return 6.0 * param_count(cfg) * tokens
    return train_flops_per_token(cfg, n_ctx) * tokens


def mfu(cfg: GPTConfig, tokens_per_second: float, peak_flops: float, n_ctx: int | None = None) -> float:
    """Model FLOPs utilisation: achieved training FLOP/s over the hardware's peak.

    >>> round(mfu(GPTConfig.gpt2_small(), 1e5, 1e15), 3)
    0.08
    """
    if not tokens_per_second > 0 or not peak_flops > 0:
        raise ValueError("tokens_per_second and peak_flops must be > 0")
    return train_flops_per_token(cfg, n_ctx) * tokens_per_second / peak_flops


def training_memory_bytes(n_params: int, weight_bytes: int = 4, grad_bytes: int = 4, adam_bytes: int = 8,
                          master_bytes: int = 0) -> dict[str, int]:
    """Bytes of weights, gradients and Adam moments (two per parameter) for ``n_params`` parameters.

    Defaults are fp32 training (4 + 4 + 8 = 16 bytes per parameter). Mixed precision
    keeps bf16 weights/grads (2 + 2) plus an fp32 master copy (``master_bytes=4``).

    >>> training_memory_bytes(1_000_000)["total"]
    16000000
    """
    if isinstance(n_params, bool) or not isinstance(n_params, int) or n_params < 0:
        raise ValueError(f"n_params must be a non-negative int, got {n_params!r}")
    out = {"weights": n_params * weight_bytes, "gradients": n_params * grad_bytes,
           "adam": n_params * adam_bytes, "master": n_params * master_bytes}
    out["total"] = sum(out.values())
    return out
