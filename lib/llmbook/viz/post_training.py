"""The checkpoint comparer: one prompt, two post-training checkpoints side by side.

Chapter 9 makes several models from one base model (supervised fine-tuning, LoRA, DPO).
``checkpoint_render`` shows, for a prompt and two of them (the ``checkpoint`` and the one
it is compared ``against``): the next-token distribution after the prompt, the probability
of each whole candidate answer (normalised over the candidates; optional), and answers
sampled from each with the same seed. The candidates are fixed, or a function of the prompt
(chapter 9's candidates are the words of the line a question asks about). ``checkpoint_explorer`` wires a prompt menu, a free
prompt box, the two checkpoint selectors, a temperature slider and a seed to it, and draws
in the browser (``llmbook.viz.frontend``, a ``panels`` view): ``checkpoint_data`` computes
the numbers once, ``checkpoint_spec`` packs them, ``checkpoint_render`` draws the same with
matplotlib (the static picture). The explorer keeps what it computed in a small cache: the
next-token and whole-answer distributions per (prompt, checkpoint), the samples per (prompt,
checkpoint, temperature, seed), so a temperature or seed change runs only the sampling, and
switching back to a checkpoint runs nothing. The models are taken as fixed once the explorer
is built (train one further and build a new explorer).

The pure helpers take data: ``comparison_figure(probs, labels, names, answer_probs,
answers)`` draws probability vectors, never models. A model here is any causal LM whose
``model(ids)`` returns logits (B, T, V) or a tuple starting with them (the book's GPT
and Llama both qualify); a ``config.block_size`` crops the context.
"""

from __future__ import annotations

import html
import inspect
import reprlib
from collections.abc import Callable, Mapping, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from ..kv_cache import KVCache
from ..post_training import pad_batch, sequence_logprobs, sft_example
from ..sampling import sample_next
from .frontend import FrontView, ResultMemo, bar_panel, panels_spec
from .sampling import token_label
from .style import PALETTE
from .widget import Explorer

__all__ = ["next_token_probs", "answer_probs", "sample_answers", "comparison_figure", "format_typed", "checkpoint_data",
           "checkpoint_spec", "checkpoint_render", "checkpoint_explorer"]

TOP_N = 10  # next tokens shown per checkpoint
Candidates = Sequence[str] | Callable[[str], Sequence[str]] | None  # whole answers: fixed, per prompt, or none


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


def _cached_step(model: torch.nn.Module, prompt_len: int, rows: int, max_new: int):
    """``step(ids) -> logits (rows, V)`` of the last position, keeping keys and values in a
    ``KVCache`` so each new token costs one position; None when the model cannot take one
    (no ``kv_cache`` argument, no n_layer/n_head/head_dim) or the answer would outgrow its context."""
    cfg = getattr(model, "config", None)
    limit = getattr(cfg, "block_size", None) or getattr(cfg, "max_seq_len", None)
    if (not limit or prompt_len + max_new > limit or not all(hasattr(cfg, a) for a in ("n_layer", "n_head", "head_dim"))
            or "kv_cache" not in inspect.signature(model.forward).parameters):
        return None
    weight = next(model.parameters())
    cache = KVCache(cfg, rows, max_len=prompt_len + max_new, device=weight.device, dtype=weight.dtype)

    def step(ids: torch.Tensor) -> torch.Tensor:
        out = model(ids.to(weight.device), kv_cache=cache)
        return (out[0] if isinstance(out, tuple) else out)[:, -1].float().cpu()

    return step


@torch.no_grad()
def sample_answers(model: torch.nn.Module, prompt_ids: Sequence[int], n: int, temperature: float, seed: int,
                   max_new: int = 16, stop_ids: Sequence[int] = (), use_cache: bool = True) -> list[list[int]]:
    """``n`` answers (token ids, stop token excluded) sampled one token at a time from ``seed``.

    The ``n`` answers are drawn together, as one batch of ``n`` rows (one forward pass per new
    token for all of them); an answer ends at its first stop token, and the batch stops once
    every answer has ended or after ``max_new`` tokens. At temperature 0 (greedy) the answers
    are all the same one, computed once. With ``use_cache`` (and a model that takes a
    ``kv_cache``, as the book's GPT and Llama do, with room in its context) each new token
    runs the model on that token only (the logits are those of the uncached loop, up to rounding).
    """
    prompt = _check_ids(prompt_ids)
    for name, v in (("n", n), ("max_new", max_new)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {reprlib.repr(v)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {reprlib.repr(seed)}")
    g = torch.Generator().manual_seed(seed)
    stops = torch.tensor(sorted(set(int(t) for t in stop_ids)), dtype=torch.long)
    rows = 1 if temperature == 0 else n                   # greedy: n copies of one answer
    ids = torch.tensor([prompt] * rows)                   # (rows, T): every answer starts from the prompt
    ended = torch.zeros(rows, dtype=torch.bool)
    step = _cached_step(model, len(prompt), rows, max_new) if use_cache else None
    logits = step(ids) if step else _logits(model, ids)[:, -1]
    new = []
    for _ in range(max_new):
        nxt = sample_next(logits, temperature=temperature, generator=g)  # (rows,)
        new.append(nxt)
        ended |= torch.isin(nxt, stops)
        if bool(ended.all()) or len(new) == max_new:
            break
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        logits = step(nxt[:, None]) if step else _logits(model, ids)[:, -1]
    stop_set, out = set(stops.tolist()), []
    for row in torch.stack(new, dim=1).tolist():
        cut = next((i for i, t in enumerate(row) if t in stop_set), len(row))
        out.append(row[:cut])
    return [list(out[0]) for _ in range(n)] if rows < n else out


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


def format_typed(text: str, prompts: Sequence[str]) -> str:
    r"""A typed question formatted as the menu's prompts are: the ending every menu prompt shares
    (the new line that ends a question, say, which a one-line text box cannot hold) is added
    when the typed text lacks it, and spaces around the question are dropped.

    >>> format_typed("Who says: Put out the light? ", ["Who says: Et tu, Brute?\n", "Who says: I am not what I am?\n"])
    'Who says: Put out the light?\n'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    ends = [p[len(p.rstrip()):] for p in prompts]  # the whitespace each menu prompt ends with
    end = ends[0] if ends and all(e == ends[0] for e in ends) else ""
    core = text.strip() if end else text
    return core + end if core and not core.endswith(end) else core


def checkpoint_data(models: Mapping[str, torch.nn.Module], encode: Callable[[str], list[int]],
                    decode: Callable[[list[int]], str], prompt: str, checkpoint: str, against: str,
                    temperature: float, seed: int, custom: str = "", candidates: Candidates = None,
                    n_samples: int = 3, max_new: int = 16, stop: str = "\n", cache: ResultMemo | None = None,
                    prompts: Sequence[str] = ()) -> dict:
    """What the comparer shows, computed once: for ``names = [checkpoint, against]``, the
    next-token distributions ``probs`` (one (V,) vector each), the whole-answer distributions
    ``answer_p`` (None without candidates) and the decoded ``samples`` (``n_samples`` each).

    ``candidates`` is a list of answers, a function ``prompt text -> list of answers`` (called
    with the prompt shown; an empty list means no whole-answer row for that prompt), or None.

    ``custom``, when not blank, replaces ``prompt``, formatted as the menu's ``prompts`` are
    (``format_typed``): a typed question gets the new line the menu's questions end with, so
    the models read it as they read those. ``temperature = 0`` samples greedily.
    With a ``cache``, a distribution already computed for (prompt, checkpoint) and samples
    already drawn for (prompt, checkpoint, temperature, seed) are reused, not recomputed.
    Raises ValueError naming the problem: an unknown checkpoint, an empty prompt, text the
    tokenizer cannot encode, a negative temperature, a seed that is not an int.
    """
    for key, name in (("checkpoint", checkpoint), ("against", against)):
        if name not in models:
            raise ValueError(f"{key} must be one of {list(models)}, got {reprlib.repr(name)}")
    if checkpoint == against:
        raise ValueError(f"checkpoint and against are both {checkpoint!r}: pick another checkpoint to compare with")
    text = format_typed(custom, prompts) if custom and custom.strip() else prompt
    if not isinstance(text, str) or not text:
        raise ValueError("prompt is empty: pick or type a prompt")
    ids = encode(text)  # a tokenizer's ValueError (e.g. characters outside the vocabulary) reaches the reader
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0, got {reprlib.repr(temperature)}")
    if isinstance(seed, bool) or not isinstance(seed, int):  # checked here: True would find seed 1's samples
        raise ValueError(f"seed must be an int, got {reprlib.repr(seed)}")
    stop_ids = encode(stop) if stop else []
    if callable(candidates):
        candidates = list(candidates(text))
        if not all(isinstance(c, str) and c for c in candidates):
            raise ValueError("candidates(prompt) must return a list of non-empty strings")
    cand_ids = [encode(c) for c in candidates] if candidates else None
    cache = cache if cache is not None else ResultMemo()
    key = tuple(_check_ids(ids))
    names = [checkpoint, against]
    probs = [cache.get(("next", key, n), lambda n=n: next_token_probs(models[n], ids)) for n in names]
    a_p = None
    if cand_ids:
        a_key = tuple(tuple(c) for c in cand_ids)
        a_p = [cache.get(("answers", key, n, a_key), lambda n=n: answer_probs(models[n], ids, cand_ids)) for n in names]
    t = float(temperature)
    s_key = (t, seed, n_samples, max_new, tuple(stop_ids))
    samples = [cache.get(("samples", key, n, s_key),
                         lambda n=n: [decode(s) for s in sample_answers(models[n], ids, n_samples, t, seed, max_new, stop_ids)])
               for n in names]
    return {"text": text, "names": names, "probs": probs, "answer_p": a_p,
            "candidates": list(candidates) if candidates else None, "samples": samples,
            "how": "greedy" if temperature == 0 else f"temperature {temperature:g}, seed {seed}"}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def checkpoint_spec(data: dict, decode: Callable[[list[int]], str], top_n: int = TOP_N) -> dict:
    """The browser view of ``checkpoint_data``: a ``bar_grid`` of the ``top_n`` next tokens of
    each checkpoint (top row), the whole answers (second row), and the samples as a table."""
    names, panels = data["names"], []
    for j, (name, p) in enumerate(zip(names, data["probs"])):
        top = torch.topk(p.detach().float().cpu(), min(top_n, p.numel()))
        labels = [token_label(decode([int(i)])) for i in top.indices.tolist()]
        panels.append(bar_panel(labels, top.values.tolist(), f"{name}: next token after the prompt", "v", j % len(PALETTE),
                                ylabel="probability" if j == 0 else "", vmax=1.0, height=110, width=260))
    if data["answer_p"] is not None:
        answers = [token_label(s.strip()) for s in data["candidates"]]
        for j, (name, a) in enumerate(zip(names, data["answer_p"])):
            panels.append(bar_panel(answers, _vec(a).tolist(), f"{name}: whole answers", "h", j % len(PALETTE),
                                    xlabel="probability among the candidates", vmax=1.0, width=260))
    n = len(data["samples"][0])
    rows = [[repr(data["samples"][j][i]) for j in range(len(names))] for i in range(n)]
    table = {"caption": f"{n} sampled answers ({data['how']}):", "header": names, "rows": rows}
    # the prompt as the reader sees it in the menu: its closing new line drawn as ↵, not as a literal \n
    shown = _clip(data["text"].rstrip("\n").replace("\n", "\u21b5"), 80)
    title = f"{names[0]} compared with {names[1]}, prompt \u201c{shown}\u201d"
    if data["text"].endswith("\n"):
        title += " + \u21b5"
    # the samples first: temperature and seed change only them, so they sit next to those controls
    return panels_spec(panels, title=title, columns=len(names), table=table, table_first=True)


def checkpoint_render(models: Mapping[str, torch.nn.Module], encode: Callable[[str], list[int]],
                      decode: Callable[[list[int]], str], prompt: str, checkpoint: str, against: str,
                      temperature: float, seed: int, custom: str = "", candidates: Candidates = None,
                      n_samples: int = 3, max_new: int = 16, stop: str = "\n", cache: ResultMemo | None = None,
                      prompts: Sequence[str] = ()) -> list:
    """Figure (next-token and whole-answer distributions of two checkpoints) and an HTML table of sampled answers.

    The arguments and errors are those of :func:`checkpoint_data`.
    """
    data = checkpoint_data(models, encode, decode, prompt, checkpoint, against, temperature, seed, custom, candidates,
                           n_samples, max_new, stop, cache, prompts)
    names, text = data["names"], data["text"]
    labels = _Labels(decode, len(data["probs"][0]))
    fig = comparison_figure(data["probs"], labels, names, data["answer_p"], data["candidates"])  # last: no figure left open on an error
    cell = 'style="font-family:monospace;padding:2px 10px;border-bottom:1px solid #eee"'
    head = "".join(f"<th {cell}>{html.escape(n)}</th>" for n in names)
    body = "".join("<tr>" + "".join(f"<td {cell}>{html.escape(repr(data['samples'][j][i]))}</td>" for j in range(len(names)))
                   + "</tr>" for i in range(n_samples))
    table = (f'<div><b>prompt</b> <code>{html.escape(repr(text))}</code>; {n_samples} sampled answers ({data["how"]}):'
             f'<table style="border-collapse:collapse"><tr>{head}</tr>{body}</table></div>')
    return [fig, table]


def checkpoint_explorer(models: Mapping[str, torch.nn.Module], encode: Callable[[str], list[int]],
                        decode: Callable[[list[int]], str], prompts: Sequence[str], checkpoint: str | None = None,
                        against: str | None = None, temperature: float = 1.0, seed: int = 0,
                        candidates: Candidates = None, n_samples: int = 3, max_new: int = 16,
                        stop: str = "\n") -> Explorer:
    """Explorer with controls ``prompt`` (menu), ``custom`` (free text), ``checkpoint``, ``against``,
    ``temperature`` and ``seed`` over ``models`` (name -> model, e.g. base / SFT / LoRA / DPO).

    The picture is drawn in the browser from ``checkpoint_spec``; ``explorer.cache`` (a
    :class:`ResultMemo`) keeps the distributions and samples already computed.
    """
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
    buttons = {"description_width": "110px", "button_width": "72px"}
    controls = {
        "prompt": widgets.Dropdown(options=[(p.strip(), p) for p in prompts], value=prompts[0], description="prompt",
                                   style=wide, layout=widgets.Layout(width="640px", max_width="100%")),
        "custom": widgets.Text(value="", description="or type one", placeholder="(empty: use the menu)", style=wide,
                               continuous_update=False, layout=widgets.Layout(width="640px", max_width="100%")),
        "checkpoint": widgets.ToggleButtons(options=names, value=checkpoint, description="checkpoint", style=buttons),
        "against": widgets.ToggleButtons(options=names, value=against, description="compared with", style=buttons),
        "temperature": widgets.FloatSlider(value=temperature, min=0.0, max=2.0, step=0.1, description="temperature",
                                           style=wide, continuous_update=False),
        "seed": widgets.IntText(value=seed, description="seed", style=wide),
    }

    cache = ResultMemo(size=64)
    fixed = dict(candidates=candidates, n_samples=n_samples, max_new=max_new, stop=stop, cache=cache, prompts=list(prompts))

    def render(**values):
        return checkpoint_render(models, encode, decode, **fixed, **values)

    def spec(**values):
        return checkpoint_spec(checkpoint_data(models, encode, decode, **fixed, **values), decode)

    explorer = Explorer(render, controls, title="Checkpoints side by side: next token, whole answers, samples",
                        front=FrontView(), spec=spec)
    explorer.cache = cache  # what was computed, per (prompt, checkpoint) and per (..., temperature, seed)
    return explorer
