"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

Covers
------
- ``TransformerConfig``: every size of the model, with the paper's base model as
  ``TransformerConfig.base()`` and small CPU presets ``.tiny()`` and ``.small()``.
- ``EncoderLayer``: X' = LN(X + MHA(X)); X_out = LN(X' + FFN(X')) (post-LN), or the
  pre-LN form X' = X + MHA(LN(X)); X_out = X' + FFN(LN(X')) with ``norm_first=True``.
- ``DecoderLayer``: masked self-attention, cross-attention whose keys and values are
  the encoder's last layer (the "memory"), and the FFN, each with residual + LayerNorm.
- ``Encoder``, ``Decoder``: N layers, plus an optional final LayerNorm (needed by pre-LN,
  always present in ``torch.nn.Transformer``).
- ``Transformer``: token embeddings scaled by sqrt(d_model) plus positions, the two
  stacks, and the pre-softmax projection. With ``share_embeddings`` one matrix serves as
  source embedding, target embedding and output projection (section 3.4 of the paper).
  ``return_attention=True`` returns every self- and cross-attention map;
  ``greedy_decode`` generates one token at a time.
- ``copy_from_torch``: load the weights of a ``torch.nn.Transformer`` so the two can be
  compared number for number (tests/test_transformer.py).

Leaves out
----------
Beam search (chapter 6c), label smoothing (the chapter-4 notebook writes it out, checks it
against ``F.cross_entropy(label_smoothing=...)`` and measures it over three seeds through
``toy_seq2seq.train_seq2seq(label_smoothing=...)``; the toy checkpoints train without it), the
learning-rate schedule (the chapter-4 notebook writes the paper's out), and a KV cache for
decoding (chapter 8).

Initialisation
--------------
The paper does not state one. The Annotated Transformer (Rush, 2018) and
``torch.nn.Transformer`` draw every weight matrix Xavier-uniform (Glorot & Bengio, 2010).
This module keeps PyTorch's default for its ``nn.Linear`` layers (Kaiming-uniform with
a = sqrt(5), which is U(-1/sqrt(fan_in), 1/sqrt(fan_in))) and draws the shared embedding
from N(0, 1/d_model); the chapter-4 notebook prints both spreads side by side. The toy
checkpoints were trained with this initialisation. ``xavier_init`` re-draws the weight
matrices the Xavier way; chapter 4 uses it to show that the initialisation decides whether
Post-LN's gradients grow towards the output at initialisation (Xiong et al., 2020,
Figure 3) and how much Post-LN lags Pre-LN in training. ``copy_from_torch`` copies
weights, so the equivalence tests do not depend on either.

Masks follow ``llmbook.attention``: a boolean ``mask`` is True where attention is
*allowed*; a ``*_key_padding_mask`` (B, T) is True at PADDING positions.
Shapes: B batch, S source length, T target length, D = d_model, V vocabulary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from .attention import MultiHeadAttention
from .device import check_index_range, check_on_device
from .layers import AddNorm, FeedForward, LayerNorm
from .positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

__all__ = ["TransformerConfig", "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "Transformer", "copy_from_torch",
           "xavier_init"]


@dataclass
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer."""

    src_vocab_size: int = 16  # tokens the encoder reads
    tgt_vocab_size: int = 16  # tokens the decoder writes (equal to src when sharing embeddings)
    d_model: int = 64  # width of every residual stream vector
    n_heads: int = 4  # attention heads per attention layer; d_model % n_heads == 0
    n_encoder_layers: int = 2  # N in the paper, encoder side
    n_decoder_layers: int = 2  # N in the paper, decoder side
    d_ff: int = 256  # hidden width of the position-wise FFN (widen, then narrow)
    dropout: float = 0.1  # on embeddings+positions, attention weights and every sub-layer output
    max_len: int = 64  # longest sequence the positional table covers
    activation: str = "relu"  # FFN non-linearity: "relu", "gelu" or "gelu_tanh"
    norm_first: bool = False  # False: post-LN (the paper); True: pre-LN (GPT-2)
    final_norm: bool | None = None  # LayerNorm after each stack; None means "= norm_first"
    positional: str = "sinusoidal"  # "sinusoidal" (fixed table) or "learned" (GPT-1 style)
    share_embeddings: bool = True  # one matrix for both embeddings and the pre-softmax layer
    layer_norm_eps: float = 1e-5  # eps inside every LayerNorm's square root
    pad_id: int = 0  # padding token: masked out as a key, ignored by the loss

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "max_len"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {self.positional!r}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"d_model must be even for sinusoidal positions, got {self.d_model}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs src_vocab_size == tgt_vocab_size, got {self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"pad_id must be a token id of both vocabularies, got {self.pad_id}")
        if self.final_norm is None:
            self.final_norm = self.norm_first

    @classmethod
    def base(cls, vocab_size: int = 37000, **overrides) -> "TransformerConfig":
        """The paper's base model: N=6, d_model=512, h=8, d_ff=2048, dropout 0.1, ~37k shared BPE vocabulary."""
        cfg = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=512, n_heads=8,
                   n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=512)
        return cls(**{**cfg, **overrides})

    @classmethod
    def small(cls, vocab_size: int = 16, **overrides) -> "TransformerConfig":
        """A CPU model for toy tasks: 2+2 layers, d_model=64, 4 heads (about 0.2M parameters)."""
        cfg = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=64, n_heads=4,
                   n_encoder_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.0, max_len=64)
        return cls(**{**cfg, **overrides})

    @classmethod
    def tiny(cls, vocab_size: int = 16, **overrides) -> "TransformerConfig":
        """The smallest useful model, for tests: 1+1 layers, d_model=32, 2 heads."""
        cfg = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=32, n_heads=2,
                   n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0, max_len=32)
        return cls(**{**cfg, **overrides})

    def replace(self, **changes) -> "TransformerConfig":
        """A copy with some fields changed (``final_norm`` re-derived unless given)."""
        if "final_norm" not in changes and "norm_first" in changes:
            changes["final_norm"] = None
        return replace(self, **changes)


def _check_stream(name: str, x: object, d_model: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name} must have shape (B, T, d_model={d_model}), got {tuple(x.shape)}")
    return x


class EncoderLayer(nn.Module):
    """Self-attention then FFN, each wrapped in residual + LayerNorm.

    Post-LN (paper):  X' = LN(X + MHA(X)),      X_out = LN(X' + FFN(X'))
    Pre-LN (GPT-2):   X' = X + MHA(LN(X)),      X_out = X' + FFN(LN(X'))
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, activation: str = "relu",
                 norm_first: bool = False, eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, activation=activation, dropout=dropout)
        # Each AddNorm holds the LayerNorm and the residual dropout of one sub-layer;
        # pre-LN uses the same two modules in a different order.
        self.addnorm1 = AddNorm(d_model, dropout=dropout, eps=eps)
        self.addnorm2 = AddNorm(d_model, dropout=dropout, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, key_padding_mask: torch.Tensor | None = None,
                return_attention: bool = False):
        _check_stream("x", x, self.d_model)
        kw = dict(mask=mask, key_padding_mask=key_padding_mask, return_attention=return_attention)
        if self.norm_first:
            out = self.self_attn(self.addnorm1.norm(x), **kw)
            a, w = out if return_attention else (out, None)
            x = x + self.addnorm1.dropout(a)
            x = x + self.addnorm2.dropout(self.ffn(self.addnorm2.norm(x)))
        else:
            out = self.self_attn(x, **kw)
            a, w = out if return_attention else (out, None)
            x = self.addnorm1(x, a)  # X' = LN(X + MHA(X))
            x = self.addnorm2(x, self.ffn(x))  # X_out = LN(X' + FFN(X'))
        return (x, w) if return_attention else x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder output, FFN; each with residual + LN.

    Post-LN:  Y' = LN(Y + MaskedMHA(Y)),  Y'' = LN(Y' + CrossMHA(Y', X_L)),  Y_out = LN(Y'' + FFN(Y''))
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, activation: str = "relu",
                 norm_first: bool = False, eps: float = 1e-5):
        super().__init__()
        self.d_model = d_model
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, activation=activation, dropout=dropout)
        self.addnorm1 = AddNorm(d_model, dropout=dropout, eps=eps)
        self.addnorm2 = AddNorm(d_model, dropout=dropout, eps=eps)
        self.addnorm3 = AddNorm(d_model, dropout=dropout, eps=eps)

    def forward(self, y: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                tgt_key_padding_mask: torch.Tensor | None = None, memory_key_padding_mask: torch.Tensor | None = None,
                is_causal: bool = True, return_attention: bool = False):
        """``y`` (B, T, D) the target stream; ``memory`` (B, S, D) the encoder's last layer.

        ``is_causal`` (default True) adds the causal mask to the self-attention, so
        position t sees only targets 0..t; ``tgt_mask`` can add further restrictions.
        """
        _check_stream("y", y, self.d_model)
        if isinstance(memory, torch.Tensor) and memory.dim() == 3 and memory.shape[-1] != self.d_model:
            raise ValueError(
                f"memory has width {memory.shape[-1]} but the decoder's d_model is {self.d_model}: "
                "the encoder and decoder must have the same d_model"
            )
        _check_stream("memory", memory, self.d_model)
        if memory.shape[0] != y.shape[0]:
            raise ValueError(f"memory and y must share the batch size, got {memory.shape[0]} and {y.shape[0]}")
        sa_kw = dict(mask=tgt_mask, key_padding_mask=tgt_key_padding_mask, is_causal=is_causal, return_attention=return_attention)
        ca_kw = dict(key_padding_mask=memory_key_padding_mask, return_attention=return_attention)

        def split(out):
            return out if return_attention else (out, None)

        if self.norm_first:
            a, w_self = split(self.self_attn(self.addnorm1.norm(y), **sa_kw))
            y = y + self.addnorm1.dropout(a)
            c, w_cross = split(self.cross_attn(self.addnorm2.norm(y), memory, memory, **ca_kw))
            y = y + self.addnorm2.dropout(c)
            y = y + self.addnorm3.dropout(self.ffn(self.addnorm3.norm(y)))
        else:
            a, w_self = split(self.self_attn(y, **sa_kw))
            y = self.addnorm1(y, a)  # Y' = LN(Y + MaskedMHA(Y))
            # queries from the decoder, keys and values from the encoder's last layer
            c, w_cross = split(self.cross_attn(y, memory, memory, **ca_kw))
            y = self.addnorm2(y, c)  # Y'' = LN(Y' + CrossMHA(Y', X_L))
            y = self.addnorm3(y, self.ffn(y))  # Y_out = LN(Y'' + FFN(Y''))
        return (y, w_self, w_cross) if return_attention else y


class Encoder(nn.Module):
    """N encoder layers and an optional final LayerNorm."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = config
        self.d_model = c.d_model
        self.layers = nn.ModuleList(
            EncoderLayer(c.d_model, c.n_heads, c.d_ff, c.dropout, c.activation, c.norm_first, c.layer_norm_eps)
            for _ in range(c.n_encoder_layers)
        )
        self.norm = LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.final_norm else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, key_padding_mask: torch.Tensor | None = None,
                return_attention: bool = False):
        maps = []
        for layer in self.layers:
            if return_attention:
                x, w = layer(x, mask=mask, key_padding_mask=key_padding_mask, return_attention=True)
                maps.append(w)
            else:
                x = layer(x, mask=mask, key_padding_mask=key_padding_mask)
        if self.norm is not None:
            x = self.norm(x)
        return (x, maps) if return_attention else x


class Decoder(nn.Module):
    """N decoder layers (each attending to the same encoder output) and an optional final LayerNorm."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        c = config
        self.d_model = c.d_model
        self.layers = nn.ModuleList(
            DecoderLayer(c.d_model, c.n_heads, c.d_ff, c.dropout, c.activation, c.norm_first, c.layer_norm_eps)
            for _ in range(c.n_decoder_layers)
        )
        self.norm = LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.final_norm else None

    def forward(self, y: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
                tgt_key_padding_mask: torch.Tensor | None = None, memory_key_padding_mask: torch.Tensor | None = None,
                is_causal: bool = True, return_attention: bool = False):
        self_maps, cross_maps = [], []
        kw = dict(tgt_mask=tgt_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                  memory_key_padding_mask=memory_key_padding_mask, is_causal=is_causal)
        for layer in self.layers:
            if return_attention:
                y, ws, wc = layer(y, memory, return_attention=True, **kw)
                self_maps.append(ws)
                cross_maps.append(wc)
            else:
                y = layer(y, memory, **kw)
        if self.norm is not None:
            y = self.norm(y)
        return (y, self_maps, cross_maps) if return_attention else y


class Transformer(nn.Module):
    """Embeddings + positions, encoder, decoder, and the pre-softmax projection.

    ``forward(src, tgt_in)`` takes token ids src (B, S) and the decoder input tgt_in
    (B, T), which is the target shifted right (BOS first), and returns logits (B, T, V)
    for the next target token at every position. Padding (``config.pad_id``) is masked
    out as a key on both sides.

    >>> cfg = TransformerConfig.tiny(vocab_size=10)
    >>> model = Transformer(cfg)
    >>> model(torch.tensor([[3, 4, 5]]), torch.tensor([[1, 5]])).shape
    torch.Size([1, 2, 10])
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        c = self.config = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model)
        # Sharing: the target embedding and the output projection reuse the same Parameter.
        self.tgt_embed = self.src_embed if c.share_embeddings else nn.Embedding(c.tgt_vocab_size, c.d_model)
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            # std d^-1/2, so that after the sqrt(d_model) scaling each component has std 1,
            # the same size as the positional signal, and shared output logits start near std 1.
            nn.init.normal_(emb.weight, std=c.d_model**-0.5)
        self.lm_head = None if c.share_embeddings else nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.positional == "sinusoidal":
            self.src_pos = SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
            self.tgt_pos = SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        else:
            self.src_pos = LearnedPositionalEmbedding(c.d_model, c.max_len, c.dropout)
            self.tgt_pos = LearnedPositionalEmbedding(c.d_model, c.max_len, c.dropout)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)
        self.scale = math.sqrt(c.d_model)

    def _check_ids(self, name: str, ids: object, vocab: int) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"{name} must be an integer tensor of token ids (B, T)")
        if ids.dim() != 2:
            raise ValueError(f"{name} must have shape (B, T), got {tuple(ids.shape)}")
        check_on_device(name, ids, self.src_embed.weight.device)
        check_index_range(name, ids, vocab)  # a clear error on the CPU, no host sync on a GPU
        if ids.shape[1] > self.config.max_len:
            raise ValueError(f"{name} has length {ids.shape[1]} > max_len={self.config.max_len}")
        return ids

    def encode(self, src: torch.Tensor, return_attention: bool = False):
        """Token ids (B, S) -> memory (B, S, D) [and the encoder self-attention maps]."""
        self._check_ids("src", src, self.config.src_vocab_size)
        x = self.src_pos(self.src_embed(src) * self.scale)  # x_t = sqrt(d) v_t + p_t
        pad = src == self.config.pad_id  # (B, S) True at padding
        return self.encoder(x, key_padding_mask=pad, return_attention=return_attention)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor, return_attention: bool = False):
        """Decoder input ids (B, T) and memory -> logits (B, T, V) [and the decoder maps]."""
        self._check_ids("tgt_in", tgt_in, self.config.tgt_vocab_size)
        y = self.tgt_pos(self.tgt_embed(tgt_in) * self.scale)
        out = self.decoder(y, memory, tgt_key_padding_mask=tgt_in == self.config.pad_id,
                           memory_key_padding_mask=src == self.config.pad_id, is_causal=True,
                           return_attention=return_attention)
        h = out[0] if return_attention else out
        # O = W^L Y_L: with sharing, W^L is the embedding matrix itself.
        logits = h @ self.tgt_embed.weight.T if self.lm_head is None else self.lm_head(h)  # (B, T, V)
        return (logits, out[1], out[2]) if return_attention else logits

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, return_attention: bool = False):
        """Logits (B, T, V); with ``return_attention`` also a dict of per-layer maps
        ``{"encoder": [(B, H, S, S)], "decoder": [(B, H, T, T)], "cross": [(B, H, T, S)]}``."""
        if return_attention:
            memory, enc_maps = self.encode(src, return_attention=True)
            logits, dec_maps, cross_maps = self.decode(tgt_in, memory, src, return_attention=True)
            return logits, {"encoder": enc_maps, "decoder": dec_maps, "cross": cross_maps}
        return self.decode(tgt_in, self.encode(src), src)

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, bos_id: int, eos_id: int, max_new_tokens: int) -> torch.Tensor:
        """Generate by always taking the most likely next token; returns (B, <= max_new_tokens) ids.

        Encodes once, then re-runs the decoder on the growing prefix (no KV cache).
        After EOS a sequence is padded with ``pad_id``.
        """
        for name, v in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not isinstance(v, int) or not 0 <= v < self.config.tgt_vocab_size:
                raise ValueError(f"{name} must be a token id in [0, {self.config.tgt_vocab_size}), got {v!r}")
        if not isinstance(max_new_tokens, int) or not 0 < max_new_tokens < self.config.max_len:
            raise ValueError(f"max_new_tokens must be an int in [1, max_len={self.config.max_len}), got {max_new_tokens!r}")
        was_training = self.training
        self.eval()
        memory = self.encode(src)
        B = src.shape[0]
        ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        for _ in range(max_new_tokens):
            nxt = self.decode(ys, memory, src)[:, -1].argmax(-1)  # (B,)
            nxt = torch.where(done, torch.full_like(nxt, self.config.pad_id), nxt)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            done |= nxt == eos_id
            if bool(done.all()):
                break
        self.train(was_training)
        return ys[:, 1:]


@torch.no_grad()
def xavier_init(model: nn.Module) -> nn.Module:
    """Re-draw the weight of every ``nn.Linear`` in ``model`` Xavier-uniform; returns ``model``.

    U(-a, a) with a = sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010), the choice of
    ``torch.nn.Transformer`` and the Annotated Transformer. Biases, LayerNorms and the
    embeddings (N(0, 1/d_model), scaled by sqrt(d_model) in ``forward``) are left alone.
    Uses the global random generator, so seed it first for a reproducible draw.

    >>> lin = xavier_init(nn.Sequential(nn.Linear(512, 2048)))[0]
    >>> bool(lin.weight.abs().max() <= (6 / (512 + 2048)) ** 0.5)
    True
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
    return model


@torch.no_grad()
def copy_from_torch(model: "Transformer | nn.Module", ref: nn.Transformer):
    """Copy the encoder and decoder weights of ``torch.nn.Transformer`` ``ref`` into ``model``.

    ``model`` is a ``Transformer`` (its ``.encoder``/``.decoder`` receive the weights) or
    an ``Encoder``/``Decoder`` pair holder. ``nn.Transformer`` always ends each stack with
    a LayerNorm, so ``model`` must have been built with ``final_norm=True``. Returns ``model``.
    """
    if not isinstance(ref, nn.Transformer):
        raise TypeError(f"ref must be a torch.nn.Transformer, got {type(ref).__name__}")
    enc, dec = model.encoder, model.decoder
    if ref.d_model != enc.d_model:
        raise ValueError(f"ref has d_model={ref.d_model}, model has d_model={enc.d_model}")
    if len(ref.encoder.layers) != len(enc.layers) or len(ref.decoder.layers) != len(dec.layers):
        raise ValueError("ref and model must have the same numbers of encoder and decoder layers")
    if enc.norm is None or dec.norm is None:
        raise ValueError("model must have final_norm=True: torch.nn.Transformer ends both stacks with a LayerNorm")

    def ln(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
        if ours.eps != theirs.eps:
            raise ValueError(f"LayerNorm eps differ: {ours.eps} vs {theirs.eps}")
        ours.weight.copy_(theirs.weight)
        ours.bias.copy_(theirs.bias)

    def ffn(ours: FeedForward, layer: nn.Module) -> None:
        for a, b in ((ours.linear1, layer.linear1), (ours.linear2, layer.linear2)):
            a.weight.copy_(b.weight)
            a.bias.copy_(b.bias)

    for ours, theirs in zip(enc.layers, ref.encoder.layers):
        if ours.norm_first != theirs.norm_first:
            raise ValueError(f"norm_first differs: model {ours.norm_first}, ref {theirs.norm_first}")
        ours.self_attn.load_from_torch(theirs.self_attn)
        ffn(ours.ffn, theirs)
        ln(ours.addnorm1.norm, theirs.norm1)
        ln(ours.addnorm2.norm, theirs.norm2)
    for ours, theirs in zip(dec.layers, ref.decoder.layers):
        if ours.norm_first != theirs.norm_first:
            raise ValueError(f"norm_first differs: model {ours.norm_first}, ref {theirs.norm_first}")
        ours.self_attn.load_from_torch(theirs.self_attn)
        ours.cross_attn.load_from_torch(theirs.multihead_attn)
        ffn(ours.ffn, theirs)
        ln(ours.addnorm1.norm, theirs.norm1)
        ln(ours.addnorm2.norm, theirs.norm2)
        ln(ours.addnorm3.norm, theirs.norm3)
    ln(enc.norm, ref.encoder.norm)
    ln(dec.norm, ref.decoder.norm)
    return model
