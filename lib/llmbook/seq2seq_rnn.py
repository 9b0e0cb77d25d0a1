"""An RNN encoder-decoder with additive attention: why attention was invented.

Bahdanau, Cho & Bengio (2015), "Neural Machine Translation by Jointly Learning to Align
and Translate", added attention to the RNN encoder-decoder of Cho et al. (2014), "Learning
Phrase Representations using RNN Encoder-Decoder for Statistical Machine Translation".
Without attention the decoder sees the source only through ONE fixed vector c (the
encoder's final states): a bottleneck that long sources overflow. With attention, each
output step i builds its own context c_i from all the encoder's annotations h_j:

    e_ij = v^T tanh(W s_{i-1} + U h_j + b)    (additive / "concat" score)
    alpha_ij = softmax_j(e_ij)                (the alignment: weights over source positions)
    c_i = sum_j alpha_ij h_j

Chapter 3's query/key/value attention is the same recipe with s_{i-1} as the query, h_j as
key and value, and a dot product in place of the small MLP score.

Covers
------
- ``Seq2SeqRNNConfig`` / ``Seq2SeqRNN``: a bidirectional GRU encoder (annotations
  h_j = [forward h_j; backward h_j]), a GRU decoder fed [embedding of y_{i-1}; c_i], and a
  linear read-out of [s_i; c_i; embedding of y_{i-1}]. The score is the book's one
  ``llmbook.attention.AdditiveAttention`` (W, U, b, v above are its ``W_q``, ``W_k`` with
  its bias, and ``w``), called once per decoder step. ``attention=False`` gives a
  fixed-context model with the same encoder and decoder (c_i = c for every i): the
  bidirectional encoder is Bahdanau et al.'s; Cho et al.'s encoder was unidirectional.
  ``forward(src, tgt_in)`` -> logits (teacher forcing; ``return_attention=True`` adds the
  (B, T, S) alignment); ``greedy_decode(src, bos, eos, n)`` fits ``toy_seq2seq``'s
  ``train_seq2seq`` and ``exact_match``.

Leaves out: the paper's maxout read-out (a linear layer here), beam search (see
``llmbook.decoding``), multi-layer RNNs and dropout. Padding (id ``pad_id``) may only
follow the real tokens of a row; every row needs at least one real token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from .attention import AdditiveAttention
from .device import check_index_range

__all__ = ["Seq2SeqRNNConfig", "Seq2SeqRNN"]


def _pos_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


@dataclass
class Seq2SeqRNNConfig:
    vocab_size: int = 13  # shared source/target vocabulary (toy_seq2seq's digits: 13)
    d_embed: int = 32  # token embedding size
    d_hidden: int = 64  # GRU state size per direction (annotations are 2 * d_hidden)
    d_attn: int = 64  # hidden size of the additive score's MLP
    attention: bool = True  # False: one fixed context vector, as in Cho et al. (2014) (their encoder: one direction)
    pad_id: int = 0  # padding id (ignored by the encoder and the attention)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_embed", "d_hidden", "d_attn"):
            _pos_int(name, getattr(self, name))
        if not isinstance(self.attention, bool):
            raise TypeError(f"attention must be True or False, got {self.attention!r}")
        if isinstance(self.pad_id, bool) or not isinstance(self.pad_id, int) or not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id must be an id in [0, vocab_size={self.vocab_size}), got {self.pad_id!r}")


class Seq2SeqRNN(nn.Module):
    """Bidirectional-GRU encoder, GRU decoder, with (Bahdanau 2015) or without attention (one fixed c, as in Cho 2014)."""

    def __init__(self, config: Seq2SeqRNNConfig):
        super().__init__()
        if not isinstance(config, Seq2SeqRNNConfig):
            raise TypeError(f"config must be a Seq2SeqRNNConfig, got {type(config).__name__}")
        self.config = c = config
        H = c.d_hidden
        self.embed = nn.Embedding(c.vocab_size, c.d_embed)  # shared by source and target
        self.enc_fwd = nn.GRU(c.d_embed, H, batch_first=True)  # left to right
        self.enc_bwd = nn.GRU(c.d_embed, H, batch_first=True)  # right to left (on each row's reversal)
        self.init_state = nn.Linear(2 * H, H)  # s_0 = tanh(W_s [h_fwd_last; h_bwd_first])
        self.attn = AdditiveAttention(H, 2 * H, c.d_attn) if c.attention else None
        self.cell = nn.GRUCell(c.d_embed + 2 * H, H)  # input: [E y_{i-1}; c_i]
        self.out = nn.Linear(H + 2 * H + c.d_embed, c.vocab_size)  # read-out of [s_i; c_i; E y_{i-1}]

    # ------------------------------------------------------------------ encoder
    def _check_src(self, src: torch.Tensor) -> None:
        if not isinstance(src, torch.Tensor) or src.dim() != 2 or src.shape[1] == 0:
            raise ValueError(f"src must be a tensor (B, S) of token ids with S >= 1, got "
                             f"{tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__}")
        check_index_range("src", src, self.config.vocab_size)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Annotations (B, S, 2H), padding mask (B, S) (True = real token), summary (B, 2H)."""
        self._check_src(src)
        mask = src != self.config.pad_id  # (B, S)
        S = src.shape[1]
        lengths = mask.sum(1)  # (B,) real tokens per row (padding only at the end)
        j = torch.arange(S, device=src.device)[None, :]  # (1, S)
        # Each row reversed within its own length (padding stays at the end), as index maps:
        # rev[b, k] = lengths[b] - 1 - k on real positions. No host sync, no packing.
        rev = torch.where(j < lengths[:, None], lengths[:, None] - 1 - j, j)  # (B, S)
        x = self.embed(src)  # (B, S, E)
        h_fwd, _ = self.enc_fwd(x)  # (B, S, H); outputs on padding are never used
        h_bwd_rev, _ = self.enc_bwd(x.gather(1, rev[..., None].expand_as(x)))  # (B, S, H) in reversed order
        h_bwd = h_bwd_rev.gather(1, rev[..., None].expand_as(h_bwd_rev))  # back to source order
        annotations = torch.cat([h_fwd, h_bwd], dim=-1)  # (B, S, 2H): h_j = [fwd h_j; bwd h_j]
        last = (lengths - 1).clamp(min=0)[:, None, None].expand(-1, 1, h_fwd.shape[-1])  # (B, 1, H)
        summary = torch.cat([h_fwd.gather(1, last).squeeze(1), h_bwd[:, 0]], dim=-1)  # (B, 2H)
        return annotations, mask, summary

    # ------------------------------------------------------------------ decoder
    def _step(self, y_prev, s, annotations, mask, projected, summary):
        """One decoder step: (logits (B, V), new state (B, H), weights (B, S) or None)."""
        e = self.embed(y_prev)  # (B, E)
        if self.attn is not None:
            ctx, w = self.attn(s, annotations, mask=mask, return_weights=True,
                               projected_keys=projected)  # query s_{i-1}: (B, 2H), (B, S)
        else:
            ctx, w = summary, None  # the one fixed vector, every step
        s = self.cell(torch.cat([e, ctx], dim=-1), s)  # (B, H)
        return self.out(torch.cat([s, ctx, e], dim=-1)), s, w

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, return_attention: bool = False):
        """Teacher-forced logits (B, T, V); with ``return_attention`` also the alignment (B, T, S)."""
        if not isinstance(tgt_in, torch.Tensor) or tgt_in.dim() != 2 or tgt_in.shape[1] == 0:
            raise ValueError(f"tgt_in must be a tensor (B, T) of token ids with T >= 1, got "
                             f"{tuple(tgt_in.shape) if isinstance(tgt_in, torch.Tensor) else type(tgt_in).__name__}")
        if not isinstance(src, torch.Tensor) or tgt_in.shape[0] != src.shape[0]:
            raise ValueError("src and tgt_in must have the same batch size")
        if not isinstance(return_attention, bool):
            raise TypeError(f"return_attention must be True or False, got {return_attention!r}")
        check_index_range("tgt_in", tgt_in, self.config.vocab_size)
        annotations, mask, summary = self.encode(src)
        projected = self.attn.project_keys(annotations) if self.attn is not None else None
        s = torch.tanh(self.init_state(summary))  # s_0 (B, H)
        logits, weights = [], []
        for i in range(tgt_in.shape[1]):
            lg, s, w = self._step(tgt_in[:, i], s, annotations, mask, projected, summary)
            logits.append(lg)
            weights.append(w)
        logits = torch.stack(logits, dim=1)  # (B, T, V)
        if not return_attention:
            return logits
        if self.attn is None:
            raise ValueError("return_attention=True needs a model built with attention=True")
        return logits, torch.stack(weights, dim=1)  # (B, T, S)

    @torch.no_grad()
    def greedy_decode(self, src: torch.Tensor, bos_id: int, eos_id: int, max_new_tokens: int,
                      return_attention: bool = False):
        """Most likely token at each step; (B, max_new_tokens) ids, ``pad_id`` after EOS.

        Runs exactly ``max_new_tokens`` steps (no early stop: that would need a host sync).
        With ``return_attention`` (attention models only) also the alignment (B, n, S).
        """
        V = self.config.vocab_size
        for name, v in (("bos_id", bos_id), ("eos_id", eos_id)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < V:
                raise ValueError(f"{name} must be a token id in [0, {V}), got {v!r}")
        _pos_int("max_new_tokens", max_new_tokens)
        if return_attention and self.attn is None:
            raise ValueError("return_attention=True needs a model built with attention=True")
        was_training = self.training
        self.eval()
        annotations, mask, summary = self.encode(src)
        projected = self.attn.project_keys(annotations) if self.attn is not None else None
        s = torch.tanh(self.init_state(summary))
        y = torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros_like(y, dtype=torch.bool)
        out, weights = [], []
        for _ in range(max_new_tokens):
            lg, s, w = self._step(y, s, annotations, mask, projected, summary)
            y = lg.argmax(-1)  # (B,)
            out.append(torch.where(done, torch.full_like(y, self.config.pad_id), y))
            weights.append(w)
            done = done | (y == eos_id)
        self.train(was_training)
        ids = torch.stack(out, dim=1)  # (B, n)
        return (ids, torch.stack(weights, dim=1)) if return_attention else ids
