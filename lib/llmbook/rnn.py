"""Pre-Transformer sequence models: embeddings, a fixed-window feed-forward model and RNNs.

Chapter 2 uses these as the building blocks of the three model families and as the
baselines that the chapter-6 GPT is compared against.

Covered
    * ``EmbedToken``: a lookup in an embedding matrix E of shape (|V|, d).
    * ``FeedForwardSequenceModel``: each position sees only the embeddings of the last
      ``n_context`` tokens, concatenated and passed through an MLP (Bengio et al. 2003,
      "A Neural Probabilistic Language Model"); an n-gram model with learned features.
    * ``SimpleRNN``: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh) (Elman 1990), written
      out step by step with ``torch.nn.RNN``'s parameter names, so its weights copy over
      (``from_torch``) and its outputs equal ``torch.nn.RNN``'s (tested).
    * ``LSTM`` (Hochreiter & Schmidhuber 1997, with the forget gate that Gers, Schmidhuber &
      Cummins added in 2000, "Learning to Forget") and ``GRU`` (Cho et al. 2014): also written
      out from scratch, one time step per loop iteration, with the gate layout and
      parameter names of ``torch.nn.LSTM`` / ``torch.nn.GRU`` (equal to them, tested).
      We chose from scratch over wrapping so the gates are readable; the price is speed
      (PyTorch's fused kernels are several times faster for long sequences).
    * ``BidirectionalSequenceRNN``: one RNN left to right, another right to left, outputs
      concatenated. ELMo (Peters et al. 2018) concatenates the states of a forward and a
      backward LSTM language model this way; ULMFiT (Howard & Ruder 2018) does not: it
      fine-tunes separate forward and backward models and averages their classifiers'
      predictions.
    * ``CharLM``: embedding -> one of the sequence models -> linear read-out over the
      vocabulary, with ``bits_per_char`` for the baseline table.

Left out: stacked layers inside one module (stack modules instead), packed sequences,
projection sizes (``proj_size``), dropout between layers.

All modules are batch first: inputs (B, T) of token ids or (B, T, d) of vectors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .device import check_index_range, check_on_device

__all__ = [
    "EmbedToken",
    "FeedForwardSequenceModel",
    "SimpleRNN",
    "LSTM",
    "GRU",
    "BidirectionalSequenceRNN",
    "CharLMConfig",
    "CharLM",
    "bits_per_char",
]


def _pos_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_ids(name: str, ids: object, vocab_size: int) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (B, T), got {tuple(ids.shape)}")
    check_index_range(name, ids, vocab_size)  # a clear error on the CPU, no host sync on a GPU
    return ids


def _check_seq(name: str, x: object, d: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch.Tensor")
    if x.dim() != 3 or x.shape[-1] != d:
        raise ValueError(f"{name} must have shape (B, T, input_size={d}), got {tuple(x.shape)}")
    return x


class EmbedToken(nn.Module):
    """Token ids (B, T) -> vectors (B, T, d) by looking up rows of E in R^{|V| x d}.

    >>> e = EmbedToken(5, 2); e(torch.tensor([[0, 4]])).shape
    torch.Size([1, 2, 2])
    """

    def __init__(self, vocab_size: int, d_embed: int):
        super().__init__()
        self.vocab_size = _pos_int("vocab_size", vocab_size)
        self.d_embed = _pos_int("d_embed", d_embed)
        self.E = nn.Parameter(torch.randn(vocab_size, d_embed) * 0.1)  # (|V|, d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _check_ids("ids", ids, self.vocab_size)
        return self.E[ids.long()]  # (B, T, d): row ids[b, t] of E


class FeedForwardSequenceModel(nn.Module):
    """Position t sees the embeddings of tokens t-n+1..t only (left-padded with zeros).

    ``forward(x)`` takes embeddings (B, T, d_embed) and returns (B, T, d_hidden):
    h_t = tanh(W [x_{t-n+1}; ...; x_t] + b). Like an n-gram model, nothing older than
    n tokens can influence the prediction.
    """

    def __init__(self, d_embed: int, d_hidden: int, n_context: int):
        super().__init__()
        self.d_embed = _pos_int("d_embed", d_embed)
        self.d_hidden = _pos_int("d_hidden", d_hidden)
        self.n_context = _pos_int("n_context", n_context)
        self.proj = nn.Linear(n_context * d_embed, d_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_seq("x", x, self.d_embed)
        B, T, d = x.shape
        n = self.n_context
        padded = F.pad(x, (0, 0, n - 1, 0))  # (B, n-1+T, d): zeros before the first token
        windows = padded.unfold(1, n, 1)  # (B, T, d, n): window t covers positions t-n+1..t
        windows = windows.transpose(2, 3).reshape(B, T, n * d)  # (B, T, n*d), oldest token first
        return torch.tanh(self.proj(windows))  # (B, T, d_hidden)


class _RecurrentBase(nn.Module):
    """Parameters in torch.nn.RNN/LSTM/GRU's layout: weight_ih_l0 (G*H, D), weight_hh_l0 (G*H, H), biases (G*H,)."""

    gates = 1  # G: how many H-sized blocks the input and hidden projections produce

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        self.input_size = _pos_int("input_size", input_size)
        self.hidden_size = _pos_int("hidden_size", hidden_size)
        G, H = self.gates, hidden_size
        bound = 1.0 / math.sqrt(H)  # PyTorch's initialisation: U(-1/sqrt(H), 1/sqrt(H))
        self.weight_ih_l0 = nn.Parameter(torch.empty(G * H, input_size).uniform_(-bound, bound))
        self.weight_hh_l0 = nn.Parameter(torch.empty(G * H, H).uniform_(-bound, bound))
        if bias:
            self.bias_ih_l0 = nn.Parameter(torch.empty(G * H).uniform_(-bound, bound))
            self.bias_hh_l0 = nn.Parameter(torch.empty(G * H).uniform_(-bound, bound))
        else:
            self.register_parameter("bias_ih_l0", None)
            self.register_parameter("bias_hh_l0", None)

    torch_class: type = nn.RNN

    @classmethod
    def from_torch(cls, module: nn.Module):
        """A copy of a one-layer, unidirectional, batch-first ``torch.nn`` RNN/LSTM/GRU."""
        if not isinstance(module, cls.torch_class):
            raise TypeError(f"module must be a torch.nn.{cls.torch_class.__name__}, got {type(module).__name__}")
        if module.num_layers != 1 or module.bidirectional or getattr(module, "proj_size", 0):
            raise ValueError("module must have num_layers=1, bidirectional=False (and no proj_size)")
        if isinstance(module, nn.RNN) and module.nonlinearity != "tanh":
            raise ValueError("only nonlinearity='tanh' is supported")
        new = cls(module.input_size, module.hidden_size, bias=module.bias)
        new.load_state_dict({k: v for k, v in module.state_dict().items() if k.endswith("_l0")})
        return new.to(module.weight_ih_l0.dtype)

    def _proj_input(self, x: torch.Tensor) -> torch.Tensor:
        # The input projection does not depend on h, so do it for all steps at once.
        return F.linear(x, self.weight_ih_l0, self.bias_ih_l0)  # (B, T, G*H)

    def _proj_hidden(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight_hh_l0, self.bias_hh_l0)  # (B, G*H)

    def _h0(self, x: torch.Tensor, h0: Optional[torch.Tensor], name: str = "h0") -> torch.Tensor:
        B = x.shape[0]
        if h0 is None:
            return x.new_zeros(B, self.hidden_size)
        if not isinstance(h0, torch.Tensor) or tuple(h0.shape) != (B, self.hidden_size):
            raise ValueError(f"{name} must have shape (B, hidden_size) = {(B, self.hidden_size)}")
        return h0


class SimpleRNN(_RecurrentBase):
    """Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh).

    ``forward(x (B, T, D), h0=None (B, H))`` -> ``(outputs (B, T, H), h_T (B, H))``.
    """

    gates = 1
    torch_class = nn.RNN

    def forward(self, x: torch.Tensor, h0: Optional[torch.Tensor] = None):
        _check_seq("x", x, self.input_size)
        h = self._h0(x, h0)
        xs = self._proj_input(x)  # (B, T, H)
        outs = []
        for t in range(x.shape[1]):
            h = torch.tanh(xs[:, t] + self._proj_hidden(h))  # (B, H)
            outs.append(h)
        return torch.stack(outs, dim=1), h  # (B, T, H), (B, H)


class LSTM(_RecurrentBase):
    """LSTM with PyTorch's gate order (input i, forget f, cell candidate g, output o).

    c_t = f * c_{t-1} + i * g;  h_t = o * tanh(c_t).
    ``forward(x, state=None)`` with state = (h0, c0) -> ``(outputs (B, T, H), (h_T, c_T))``.
    """

    gates = 4
    torch_class = nn.LSTM

    def forward(self, x: torch.Tensor, state: Optional[tuple] = None):
        _check_seq("x", x, self.input_size)
        if state is not None and (not isinstance(state, (tuple, list)) or len(state) != 2):
            raise TypeError("state must be a pair (h0, c0)")
        h = self._h0(x, None if state is None else state[0], "state[0] (h0)")
        c = self._h0(x, None if state is None else state[1], "state[1] (c0)")
        xs = self._proj_input(x)  # (B, T, 4H)
        outs = []
        for t in range(x.shape[1]):
            i, f, g, o = (xs[:, t] + self._proj_hidden(h)).chunk(4, dim=-1)  # 4 x (B, H)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs, dim=1), (h, c)


class GRU(_RecurrentBase):
    """GRU with PyTorch's layout (reset r, update z, new n).

    n_t = tanh(W_in x + b_in + r * (W_hn h + b_hn));  h_t = (1 - z) * n_t + z * h_{t-1}.
    ``forward(x, h0=None)`` -> ``(outputs (B, T, H), h_T)``.
    """

    gates = 3
    torch_class = nn.GRU

    def forward(self, x: torch.Tensor, h0: Optional[torch.Tensor] = None):
        _check_seq("x", x, self.input_size)
        h = self._h0(x, h0)
        xs = self._proj_input(x)  # (B, T, 3H)
        outs = []
        for t in range(x.shape[1]):
            x_r, x_z, x_n = xs[:, t].chunk(3, dim=-1)
            h_r, h_z, h_n = self._proj_hidden(h).chunk(3, dim=-1)
            r = torch.sigmoid(x_r + h_r)
            z = torch.sigmoid(x_z + h_z)
            n = torch.tanh(x_n + r * h_n)  # the reset gate scales only the hidden part
            h = (1 - z) * n + z * h
            outs.append(h)
        return torch.stack(outs, dim=1), h


_KINDS = {"rnn": SimpleRNN, "lstm": LSTM, "gru": GRU}


class BidirectionalSequenceRNN(nn.Module):
    """Two RNNs of one kind, one reading left to right and one right to left; outputs concatenated.

    ``forward(x (B, T, D))`` -> (B, T, 2H): position t sees the whole sequence, the left
    part through the forward RNN and the right part through the backward one.
    """

    def __init__(self, input_size: int, hidden_size: int, kind: str = "rnn", bias: bool = True):
        super().__init__()
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
        self.kind = kind
        self.forward_rnn = _KINDS[kind](input_size, hidden_size, bias=bias)
        self.backward_rnn = _KINDS[kind](input_size, hidden_size, bias=bias)

    @classmethod
    def from_torch(cls, module: nn.Module) -> "BidirectionalSequenceRNN":
        """Copy a one-layer, bidirectional ``torch.nn.RNN/LSTM/GRU``."""
        kinds = {nn.RNN: "rnn", nn.LSTM: "lstm", nn.GRU: "gru"}
        if type(module) not in kinds:
            raise TypeError(f"module must be torch.nn.RNN, LSTM or GRU, got {type(module).__name__}")
        if module.num_layers != 1 or not module.bidirectional:
            raise ValueError("module must have num_layers=1 and bidirectional=True")
        new = cls(module.input_size, module.hidden_size, kinds[type(module)], bias=module.bias)
        sd = module.state_dict()
        new.forward_rnn.load_state_dict({k: v for k, v in sd.items() if k.endswith("_l0")})
        new.backward_rnn.load_state_dict({k[: -len("_reverse")]: v for k, v in sd.items() if k.endswith("_l0_reverse")})
        return new.to(module.weight_ih_l0.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fwd, _ = self.forward_rnn(x)  # (B, T, H)
        bwd, _ = self.backward_rnn(x.flip(1))  # (B, T, H), in reversed time
        return torch.cat([fwd, bwd.flip(1)], dim=-1)  # (B, T, 2H)


@dataclass
class CharLMConfig:
    """A character language model of the baseline table."""

    vocab_size: int  # number of distinct characters
    kind: str = "lstm"  # "ff" (fixed window), "rnn", "lstm" or "gru"
    d_embed: int = 32  # size of each character embedding
    d_hidden: int = 128  # hidden size of the sequence model
    n_context: int = 8  # window of the "ff" model (ignored by RNNs)

    @classmethod
    def tiny(cls, vocab_size: int, kind: str = "lstm") -> "CharLMConfig":
        """Small enough for chapter 2's live run on a CPU (the notebook prints its training time)."""
        return cls(vocab_size=vocab_size, kind=kind, d_embed=24, d_hidden=96, n_context=8)


class CharLM(nn.Module):
    """Embed -> sequence model -> linear read-out to next-character logits (B, T, |V|)."""

    def __init__(self, config: CharLMConfig):
        super().__init__()
        if not isinstance(config, CharLMConfig):
            raise TypeError(f"config must be a CharLMConfig, got {type(config).__name__}")
        if config.kind not in ("ff", *_KINDS):
            raise ValueError(f"config.kind must be 'ff', 'rnn', 'lstm' or 'gru', got {config.kind!r}")
        self.config = config
        self.embed = EmbedToken(config.vocab_size, config.d_embed)
        if config.kind == "ff":
            self.seq = FeedForwardSequenceModel(config.d_embed, config.d_hidden, config.n_context)
        else:
            self.seq = _KINDS[config.kind](config.d_embed, config.d_hidden)
        self.head = nn.Linear(config.d_hidden, config.vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if isinstance(ids, torch.Tensor):
            check_on_device("ids", ids, self.head.weight.device)
        x = self.embed(ids)  # (B, T, d_embed)
        h = self.seq(x)
        h = h[0] if isinstance(h, tuple) else h  # RNNs return (outputs, final state)
        return self.head(h)  # (B, T, |V|)

    def loss(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy in nats of predicting targets[b, t] from ids[b, :t+1]."""
        logits = self(ids)
        if targets.shape != ids.shape:
            raise ValueError(f"targets must have the shape of ids {tuple(ids.shape)}, got {tuple(targets.shape)}")
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long())


@torch.no_grad()
def bits_per_char(model: CharLM, ids: torch.Tensor, targets: torch.Tensor) -> float:
    """Average cross-entropy in bits per character (nats / ln 2) on (B, T) ids and targets.

    A model that predicts uniformly over |V| characters scores log2 |V|.

    >>> m = CharLM(CharLMConfig(vocab_size=4, kind="ff", d_embed=2, d_hidden=3, n_context=2))
    >>> for p in m.head.parameters(): _ = p.data.zero_()
    >>> round(bits_per_char(m, torch.tensor([[0, 1, 2]]), torch.tensor([[1, 2, 3]])), 6)
    2.0
    """
    if not isinstance(model, CharLM):
        raise TypeError(f"model must be a CharLM, got {type(model).__name__}")
    was_training = model.training
    model.eval()
    try:
        nats = model.loss(ids, targets).item()
    finally:
        model.train(was_training)
    return nats / math.log(2)
