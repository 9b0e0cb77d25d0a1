"""The checkpoint comparer: one prompt, two post-training checkpoints side by side.

Chapter 9 makes several models from one base model (supervised fine-tuning, LoRA, DPO).
``checkpoint_render`` shows, for a prompt and two of them (the ``checkpoint`` and the one
it is compared ``against``): the next-token distribution after the prompt, the probability
of each whole candidate answer (normalised over the candidates; optional), and answers
sampled from each with the same seed. ``checkpoint_explorer`` wires a prompt menu, a free
prompt box, the two checkpoint selectors, a temperature slider and a seed to it.

The pure helpers take data: ``comparison_figure(probs, labels, names, answer_probs,
answers)`` draws probability vectors, never models. A model here is any causal LM whose
``model(ids)`` returns logits (B, T, V) or a tuple starting with them (the book's GPT
and Llama both qualify); a ``config.block_size`` crops the context.
"""

from __future__ import annotations

import reprlib
import html
from collections.abc import Callable, Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ..post_training import pad_batch, sequence_logprobs, sft_example
from ..sampling import sample_next
from .sampling import token_label
from .style import PALETTE
from .widget import Explorer

__all__ = ["next_token_probs", "answer_probs", "sample_answers", "comparison_figure", "checkpoint_render",
           "checkpoint_explorer"]


def _logits(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, V) of ``ids`` (B, T), cropped to the model's context if it has one."""
    block = getattr(getattr(model, "config", None), "block_size", None)
    if block:
        ids = ids[:, -block:]
    out = model(ids.to(next(model.parameters()).device))
    return (out[0] if isinstance(out, tuple) else out).float().cpu()


def _check_ids(prompt_ids: Sequence[int]) -> list[int]:
    ids = list(prompt_ids)
    if not ids:
        raise ValueError("prompt is empty: pick or type a prompt")
    return ids


@torch.no_grad()
def next_token_probs(model: torch.nn.Module, prompt_ids: Sequence[int]) -> torch.Tensor:
    """p(next token | prompt): a (V,) probability vector."""
    ids = torch.tensor([_check_ids(prompt_ids)])
    return torch.softmax(_logits(model, ids)[0, -1], dim=-1)


@torch.no_grad()
def answer_probs(model: torch.nn.Module, prompt_ids: Sequence[int], candidate_ids: Sequence[Sequence[int]]) -> torch.Tensor:
    """p(candidate | prompt) for each whole candidate answer, normalised to sum to 1 over them."""
    prompt = _check_ids(prompt_ids)
    if not candidate_ids or any(len(c) == 0 for c in candidate_ids):
        raise ValueError("candidate_ids must be a non-empty list of non-empty answers")
    block = getattr(getattr(model, "config", None), "block_size", None)
    if block:  # keep the whole answer and as much of the prompt as fits in the context
        longest = max(len(c) for c in candidate_ids)
        if longest >= block:
            raise ValueError(f"a candidate answer of {longest} tokens does not fit the model's context of {block}")
        prompt = prompt[-(block - longest):]
    x, y = pad_batch([sft_example(prompt, list(c)) for c in candidate_ids], 0, "cpu")
    return torch.softmax(sequence_logprobs(_logits(model, x), y), dim=0)


@torch.no_grad()
def sample_answers(model: torch.nn.Module, prompt_ids: Sequence[int], n: int, temperature: float, seed: int,
                   max_new: int = 16, stop_ids: Sequence[int] = ()) -> list[list[int]]:
    """``n`` answers (token ids, stop token excluded) sampled one token at a time from ``seed``."""
    prompt = _check_ids(prompt_ids)
    for name, v in (("n", n), ("max_new", max_new)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {reprlib.repr(v)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {reprlib.repr(seed)}")
    g = torch.Generator().manual_seed(seed)
    stops, out = set(stop_ids), []
    for _ in range(n):
        ids, new = list(prompt), []
        for _ in range(max_new):
            nxt = int(sample_next(_logits(model, torch.tensor([ids]))[:, -1], temperature=temperature, generator=g)[0])
            if nxt in stops:
                break
            new.append(nxt)
            ids.append(nxt)
        out.append(new)
    return out


class _Labels(Sequence):
    """Token labels decoded on demand (a figure shows ten of a vocabulary of thousands)."""

    def __init__(self, decode: Callable[[list[int]], str], size: int):
        self.decode, self.size = decode, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i):
        return self.decode([int(i)])


def _vec(p) -> np.ndarray:
    return np.asarray(p.detach().cpu() if isinstance(p, torch.Tensor) else p, dtype=float)


def comparison_figure(probs: Sequence, labels: Sequence[str], names: Sequence[str],
                      answer_p: Sequence | None = None, answers: Sequence[str] | None = None,
                      top_n: int = 10) -> Figure:
    """Side-by-side bars: one column per model; next-token probabilities on top, whole answers below.

    ``probs``: one (V,) vector per model; ``labels``: V token labels; ``answer_p``: one
    vector over ``answers`` per model, or None for no second row. Each column shows that
    model's ``top_n`` most likely tokens (answers in their given order).
    """
    ps = [_vec(p) for p in probs]
    if len(ps) != len(names) or not ps:
        raise ValueError(f"probs ({len(ps)}) and names ({len(names)}) must have the same non-zero length")
    if any(p.ndim != 1 or len(p) != len(labels) for p in ps):
        raise ValueError(f"every probs vector must be 1-D with one entry per label ({len(labels)})")
    if not isinstance(top_n, int) or top_n < 1:
        raise ValueError(f"top_n must be a positive int, got {top_n!r}")
    rows = 1 if answer_p is None else 2
    if answer_p is not None:
        aps = [_vec(a) for a in answer_p]
        if answers is None or len(aps) != len(ps) or any(len(a) != len(answers) for a in aps):
            raise ValueError("answer_p needs one vector per model, each with one entry per answer in answers")
    fig, axes = plt.subplots(rows, len(ps), figsize=(4.6 * len(ps), 2.9 * rows), squeeze=False)
    for j, (p, name) in enumerate(zip(ps, names)):
        ax = axes[0, j]
        order = np.argsort(-p, kind="stable")[:top_n]
        ax.bar(range(len(order)), p[order], color=PALETTE[j % len(PALETTE)])
        ax.set_xticks(range(len(order)), [token_label(labels[i]) for i in order])
        ax.set_ylim(0, 1)
        ax.set_title(f"{name}: next token after the prompt", fontsize=10)
        ax.set_ylabel("probability" if j == 0 else "")
        if rows == 2:
            ax = axes[1, j]
            a = aps[j]
            ax.barh(range(len(a)), a, color=PALETTE[j % len(PALETTE)])
            ax.set_yticks(range(len(a)), [token_label(s.strip()) for s in answers], fontsize=8)
            ax.invert_yaxis()
            ax.set_xlim(0, 1)
            ax.set_title(f"{name}: whole answers", fontsize=10)
            ax.set_xlabel("probability among the candidates")
    return fig


def checkpoint_render(models: Mapping[str, torch.nn.Module], encode: Callable[[str], list[int]],
                      decode: Callable[[list[int]], str], prompt: str, checkpoint: str, against: str,
                      temperature: float, seed: int, custom: str = "", candidates: Sequence[str] | None = None,
                      n_samples: int = 3, max_new: int = 16, stop: str = "\n") -> list:
    """Figure (next-token and whole-answer distributions of two checkpoints) and an HTML table of sampled answers.

    ``custom``, when not blank, replaces ``prompt``. ``temperature = 0`` samples greedily.
    Raises ValueError naming the problem: an unknown checkpoint, an empty prompt, text the
    tokenizer cannot encode, a negative temperature.
    """
    for key, name in (("checkpoint", checkpoint), ("against", against)):
        if name not in models:
            raise ValueError(f"{key} must be one of {list(models)}, got {reprlib.repr(name)}")
    text = custom if custom and custom.strip() else prompt
    if not isinstance(text, str) or not text:
        raise ValueError("prompt is empty: pick or type a prompt")
    ids = encode(text)  # a tokenizer's ValueError (e.g. characters outside the vocabulary) reaches the reader
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0, got {reprlib.repr(temperature)}")
    stop_ids = encode(stop) if stop else []
    names = [checkpoint, against]
    probs = [next_token_probs(models[n], ids) for n in names]
    labels = _Labels(decode, len(probs[0]))
    a_p = None
    if candidates:
        cand_ids = [encode(c) for c in candidates]
        a_p = [answer_probs(models[n], ids, cand_ids) for n in names]
    samples = {n: sample_answers(models[n], ids, n_samples, float(temperature), seed, max_new, stop_ids) for n in names}
    fig = comparison_figure(probs, labels, names, a_p, list(candidates) if candidates else None)  # last: no figure left open on an error
    how = "greedy" if temperature == 0 else f"temperature {temperature:g}, seed {seed}"
    cell = 'style="font-family:monospace;padding:2px 10px;border-bottom:1px solid #eee"'
    head = "".join(f"<th {cell}>{html.escape(n)}</th>" for n in names)
    body = "".join("<tr>" + "".join(f"<td {cell}>{html.escape(repr(decode(samples[n][i])))}</td>" for n in names)
                   + "</tr>" for i in range(n_samples))
    table = (f'<div><b>prompt</b> <code>{html.escape(repr(text))}</code>; {n_samples} sampled answers ({how}):'
             f'<table style="border-collapse:collapse"><tr>{head}</tr>{body}</table></div>')
    return [fig, table]


def checkpoint_explorer(models: Mapping[str, torch.nn.Module], encode: Callable[[str], list[int]],
                        decode: Callable[[list[int]], str], prompts: Sequence[str], checkpoint: str | None = None,
                        against: str | None = None, temperature: float = 1.0, seed: int = 0,
                        candidates: Sequence[str] | None = None, n_samples: int = 3, max_new: int = 16,
                        stop: str = "\n") -> Explorer:
    """Explorer with controls ``prompt`` (menu), ``custom`` (free text), ``checkpoint``, ``against``,
    ``temperature`` and ``seed`` over ``models`` (name -> model, e.g. base / SFT / LoRA / DPO)."""
    if not isinstance(models, Mapping) or len(models) < 2:
        raise ValueError("models must map at least two names to models")
    names = list(models)
    if not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError("prompts must be a non-empty list of non-empty strings")
    checkpoint = names[1] if checkpoint is None else checkpoint
    against = names[0] if against is None else against
    for key, name in (("checkpoint", checkpoint), ("against", against)):
        if name not in models:
            raise ValueError(f"{key} must be one of {names}, got {reprlib.repr(name)}")
    wide = {"description_width": "110px"}
    controls = {
        "prompt": widgets.Dropdown(options=[(p.strip(), p) for p in prompts], value=prompts[0], description="prompt",
                                   style=wide, layout=widgets.Layout(width="640px")),
        "custom": widgets.Text(value="", description="or type one", placeholder="(empty: use the menu)", style=wide,
                               continuous_update=False, layout=widgets.Layout(width="640px")),
        "checkpoint": widgets.ToggleButtons(options=names, value=checkpoint, description="checkpoint", style=wide),
        "against": widgets.ToggleButtons(options=names, value=against, description="compared with", style=wide),
        "temperature": widgets.FloatSlider(value=temperature, min=0.0, max=2.0, step=0.1, description="temperature",
                                           style=wide, continuous_update=False),
        "seed": widgets.IntText(value=seed, description="seed", style=wide),
    }

    def render(**values):
        return checkpoint_render(models, encode, decode, candidates=candidates, n_samples=n_samples,
                                 max_new=max_new, stop=stop, **values)

    return Explorer(render, controls, title="Checkpoints side by side: next token, whole answers, samples")
