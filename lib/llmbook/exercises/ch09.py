"""Checkers for the exercises of chapter 09, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import math

import torch

from ._core import _call, _cases, _register, _seeded, _tgen


@_register("09.1", "Labels for supervised fine-tuning", "complete",
           "def sft_labels(prompt_ids, answer_ids):\n    return NotImplemented  # your code here")
def _ex_09_1(answer, rng, ctx):
    from ..post_training import sft_example
    cases = [([rng.randrange(1, 80) for _ in range(rng.randint(1, 12))],
              [rng.randrange(1, 80) for _ in range(rng.randint(1, 8))]) for _ in range(6)]
    return _cases(lambda p, a: list(_call(answer, list(p), list(a))), lambda p, a: sft_example(p, a)[1], cases,
                  wrong=[(lambda p, a: p + a, "the prompt's positions must carry no loss: -100 there"),
                         (lambda p, a: p + [-100] * len(a), "it is the other way round: the answer is learned, the prompt masked"),
                         (lambda p, a: [-100] * len(a), "one label per position of prompt + answer")],
                  hint="one label per token of prompt + answer: -100 where no loss is taken, the token id where it is",
                  show=lambda a: f"prompt_ids={a[0]}, answer_ids={a[1]}")


@_register("09.2", "Trainable numbers of one LoRA adapter", "derive",
           "def lora_trainable(d_in, d_out, r):\n    return NotImplemented  # your formula here")
def _ex_09_2(answer, rng, ctx):
    from torch import nn

    from ..lora import LoRALinear
    cases = [(rng.randint(1, 64), rng.randint(1, 64), rng.randint(1, 8)) for _ in range(5)]

    def ref(d_in, d_out, r):
        with _seeded(rng):
            layer = LoRALinear(nn.Linear(d_in, d_out), r=r)
        return sum(p.numel() for p in layer.parameters() if p.requires_grad)
    return _cases(answer, ref, cases,
                  wrong=[(lambda i, o, r: i * o, "that is the frozen weight W; LoRA trains two thin matrices instead"),
                         (lambda i, o, r: r * i * o, "A is r x d_in and B is d_out x r: add their sizes"),
                         (lambda i, o, r: r * (i + o) + o, "the bias stays frozen with W")],
                  hint="count the numbers of A and of B",
                  show=lambda a: f"d_in={a[0]}, d_out={a[1]}, r={a[2]}")


@_register("09.3", "The log-probability of an answer", "complete",
           "def answer_logprob(logits, labels):\n    return NotImplemented  # your code here")
def _ex_09_3(answer, rng, ctx):
    from ..post_training import IGNORE_INDEX, sequence_logprobs
    cases = []
    for _ in range(6):
        T, V = rng.randint(4, 10), rng.randint(5, 12)
        n_prompt = rng.randint(1, T - 2)
        logits = 2 * torch.randn(T, V, generator=_tgen(rng))
        labels = [IGNORE_INDEX] * n_prompt + [rng.randrange(V) for _ in range(T - n_prompt)]
        cases.append((logits, labels))

    def ref(logits, labels):
        return float(sequence_logprobs(logits[None], torch.tensor([labels]))[0])

    def unshifted(logits, labels):
        logp = logits.log_softmax(-1)
        return sum(float(logp[t, y]) for t, y in enumerate(labels) if y != IGNORE_INDEX)

    def mean(logits, labels):
        n = sum(y != IGNORE_INDEX for y in labels[1:])
        return ref(logits, labels) / n

    def raw(logits, labels):
        return sum(float(logits[t, y]) for t, y in enumerate(labels[1:]) if y != IGNORE_INDEX)
    return _cases(lambda lg, lb: float(_call(answer, lg.clone(), list(lb))), ref, cases, rel=1e-5,
                  wrong=[(unshifted, "position t predicts the next token: compare the logits at t with the label at t + 1"),
                         (lambda lg, lb: math.exp(ref(lg, lb)), "return the log-probability (a sum of logs), not the probability"),
                         (mean, "the answer's log-probability is the sum over its tokens, not the mean"),
                         (raw, "turn the logits into log-probabilities first (log_softmax over the vocabulary)")],
                  hint="log_softmax over the vocabulary, then add the entries of the labelled next tokens; skip -100",
                  show=lambda a: f"logits of shape {tuple(a[0].shape)}, labels={a[1]}")
