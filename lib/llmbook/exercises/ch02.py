"""Checkers for the exercises of chapter 02, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import torch

from ._core import _cases, _is_placeholder, _NotAttempted, _prediction, _register, _seeded, _tgen


@_register("02.1", "Parameters of a recurrent layer", "derive",
           "def rnn_params(G, D, H):\n    return NotImplemented")
def _ex_02_1(answer, rng, ctx):
    from torch import nn
    cls = {1: nn.RNN, 3: nn.GRU, 4: nn.LSTM}
    def ref(G, D, H):
        return sum(p.numel() for p in cls[G](D, H).parameters())
    cases = [(rng.choice([1, 3, 4]), rng.randint(1, 40), rng.randint(1, 40)) for _ in range(6)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda G, D, H: G * H * (D + H + 1), "PyTorch keeps two bias vectors per gate block (b_ih and b_hh)"),
                         (lambda G, D, H: G * H * (D + H), "count the biases too"),
                         (lambda G, D, H: H * (D + H + 2), "each of the G gate blocks has its own weights")],
                  show=lambda a: f"G={a[0]}, D={a[1]}, H={a[2]}")


@_register("02.2", "How far back can each model see?", "predict",
           "answer = {'ff': ..., 'rnn': ..., 'lstm': ...}  # True: the last prediction changes")
def _ex_02_2(answer, rng, ctx):
    from ..rnn import CharLM, CharLMConfig
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    T, back = rng.randint(24, 40), 20
    x0 = torch.randint(0, 10, (1, T), generator=_tgen(rng))
    x1 = x0.clone(); x1[0, -back] = (x1[0, -back] + 1) % 10
    measured = {}
    with torch.no_grad(), _seeded(rng):
        for kind in ("ff", "rnn", "lstm"):
            m = CharLM(CharLMConfig(10, kind=kind, d_embed=4, d_hidden=8, n_context=8)).eval()
            measured[kind] = bool((m(x1)[0, -1] - m(x0)[0, -1]).abs().max() > 0)
    return _prediction(answer, measured, (x0,), what="fresh untrained models (the property is in the equations, not the training)",
                       wrong=[({"ff": True, "rnn": True, "lstm": True}, "the feed-forward model sees only its window of 8 characters"),
                              ({"ff": False, "rnn": False, "lstm": False}, "a recurrent state carries every earlier character forward")],
                       hint="ask which models' last output is a function of character T-20")


@_register("02.3", "Why a bidirectional model cannot generate", "predict",
           "answer = {'forward_half': ..., 'backward_half': ...}  # True: position 0 changes")
def _ex_02_3(answer, rng, ctx):
    from ..rnn import BidirectionalSequenceRNN
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    H = rng.randint(3, 6)
    with _seeded(rng):
        bi = BidirectionalSequenceRNN(3, H, kind=rng.choice(["rnn", "gru", "lstm"]))
    seq = torch.randn(1, rng.randint(4, 8), 3, generator=_tgen(rng))
    seq2 = seq.clone(); seq2[0, -1] += 1.0
    with torch.no_grad():
        d = (bi(seq2) - bi(seq))[0, 0].abs()
    measured = {"forward_half": bool(d[:H].max() > 0), "backward_half": bool(d[H:].max() > 0)}
    return _prediction(answer, measured, (seq,), what="a fresh bidirectional RNN",
                       wrong=[({"forward_half": True, "backward_half": True}, "the forward RNN at position 0 has read only x_0"),
                              ({"forward_half": False, "backward_half": False}, "the backward RNN reaches position 0 last, after reading the whole sequence")],
                       hint="follow each direction's recurrence to position 0")
