"""Checkers for the exercises of chapter 07, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import random

import torch

from ._core import _cases, _prediction, _register, _seeded, _tgen


@_register("07.1", "How many tokens does BERT replace by a random one?", "derive",
           "def random_fraction(mlm_probability, random_share):\n    return NotImplemented")
def _ex_07_1(answer, rng, ctx):
    # the exact expectation; tests/test_exercises.py checks it against mask_tokens' measured rate
    cases = [(round(rng.uniform(0.05, 0.4), 3), round(rng.uniform(0.05, 0.5), 3)) for _ in range(4)]
    return _cases(answer, lambda p, r: p * r, cases,
                  wrong=[(lambda p, r: r, "only the chosen mlm_probability of the tokens can be replaced at all"),
                         (lambda p, r: p * 0.8, "80 % of the chosen tokens become [MASK]; the random share is the other number"),
                         (lambda p, r: p, "that is every chosen token, [MASK] and unchanged ones included")],
                  show=lambda a: f"mlm_probability={a[0]}, random_share={a[1]}")


@_register("07.2", "Parameters of a BERT", "derive",
           "def bert_params(V, D, L, F, P):\n    return NotImplemented  # with 2 segments and the pooler")
def _ex_07_2(answer, rng, ctx):
    from ..bert import Bert, BertConfig
    def ref(V, D, L, F, P):
        return Bert(BertConfig(vocab_size=V, hidden_size=D, n_layers=L, n_heads=1, intermediate_size=F, max_position=P)).num_parameters()
    cases = [(rng.randint(100, 3000), 8 * rng.randint(1, 8), rng.randint(1, 3), 16 * rng.randint(1, 16), rng.choice([64, 128])) for _ in range(4)]
    def layer(D, F):
        return 4 * (D * D + D) + (D * F + F) + (F * D + D) + 4 * D
    return _cases(answer, ref, cases,
                  wrong=[(lambda V, D, L, F, P: (V + P + 2) * D + 2 * D + L * layer(D, F), "count the pooler (a D x D layer with a bias on [CLS])"),
                         (lambda V, D, L, F, P: (V + P) * D + 2 * D + L * layer(D, F) + D * D + D, "count the two segment embeddings (2 x D)"),
                         (lambda V, D, L, F, P: (V + P + 2) * D + L * layer(D, F) + D * D + D, "the embeddings have their own LayerNorm (2 D)")],
                  show=lambda a: f"V={a[0]}, D={a[1]}, L={a[2]}, F={a[3]}, P={a[4]}")


def _zh_sentence(rng: random.Random) -> str:
    return "".join(rng.choice(["北京", "的", "秋天", "是", "最美", "季节", "我", "爱", "天气", "很好", "，"]) for _ in range(rng.randint(3, 9)))


@_register("07.3", "What can a masked Chinese character see? (遮盖的字能看到什么)", "complete",
           "def n_visible(sentence, masked, model):\n    return NotImplemented  # model is 'gpt' or 'bert'")
def _ex_07_3(answer, rng, ctx):
    from ..gpt import causal_mask
    def ref(sentence, masked, model):
        T = len(sentence)  # one token per Chinese character
        mask = causal_mask(T, T) if model == "gpt" else torch.ones(T, T, dtype=torch.bool)
        return int(mask[masked].sum())
    cases = []
    for _ in range(6):
        s = _zh_sentence(rng)
        cases.append((s, rng.randrange(len(s)), rng.choice(["gpt", "bert"])))
    cases[0] = (cases[0][0], cases[0][1], "gpt")
    return _cases(answer, ref, cases,
                  wrong=[(lambda s, m, k: m if k == "gpt" else len(s), "a position also sees itself: count positions 0..masked"),
                         (lambda s, m, k: m + 1 if k == "gpt" else len(s) - 1, "BERT's masked position attends to every position, its own included"),
                         (lambda s, m, k: len(s.encode("utf-8")) if k == "bert" else m + 1, "one token per character, not per UTF-8 byte")],
                  show=lambda a: f"sentence {a[0]!r}, masked position {a[1]}, model {a[2]!r}")


def _tiny_bert(rng: random.Random, P: int = 512):
    from ..bert import Bert, BertConfig
    with _seeded(rng):
        return Bert(BertConfig(vocab_size=50, hidden_size=8, n_layers=1, n_heads=2, intermediate_size=16, max_position=P,
                               dropout=0.0, attention_dropout=0.0)).eval()


@_register("07.4", "Inputs longer than the position table", "predict",
           "answer = ...  # an int: the length of the output sequence (its size along T)")
def _ex_07_4(answer, rng, ctx):
    bert = _tiny_bert(rng)
    ids = torch.randint(1, 50, (1, 600), generator=_tgen(rng))
    with torch.no_grad():
        measured = int(bert(ids, truncate=True).last_hidden_state.shape[1])
    return _prediction(answer, measured, (ids,), what="a fresh BERT with MiniLM's position table",
                       wrong=[(600, "there is no position vector beyond the table: later tokens are cut off"),
                              (510, "truncation keeps the first 512 tokens, whatever they are")],
                       hint="how many rows does the position table have?")


@_register("07.5", "A segment id of 2", "predict",
           "answer = ...  # a string: an exception's name, or 'no error'")
def _ex_07_5(answer, rng, ctx):
    bert = _tiny_bert(rng, 64)
    T = rng.randint(3, 20)
    ids = torch.randint(1, 50, (1, T), generator=_tgen(rng))
    try:
        bert(ids, torch.full((1, T), 2))
        measured = "no error"
    except Exception as e:
        measured = type(e).__name__
    if isinstance(answer, str):
        answer = answer.strip()
    return _prediction(answer, measured.lower(), (ids,), what="a fresh BERT given segment ids of 2",
                       wrong=[("indexerror", "the book's models validate their inputs and name the bad argument, before the embedding lookup fails"),
                              ("no error", "there are only two segment embeddings, for 0 and 1")],
                       hint="answer with an exception name such as 'TypeError', or 'no error'")
