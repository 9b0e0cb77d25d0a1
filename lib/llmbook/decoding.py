"""Decoding beyond one-token sampling: beam search, logit processors, speculative decoding.

``llmbook.sampling`` turns one logits vector into one token. This module holds the rules
that look further ahead or reshape the logits with the history in mind:

* ``beam_search``: keep the ``beam_width`` most probable partial sequences, ranked at
  the end with GNMT's length normalisation ``lp(Y) = ((5 + |Y|) / 6) ** alpha``
  (Wu et al. 2016, *Google's Neural Machine Translation System*, eq. 14): raw
  log-probability favours short hypotheses, dividing by ``lp`` evens that out.
* ``repetition_penalty``: CTRL's penalty (Keskar et al. 2019, *CTRL: A Conditional
  Transformer Language Model*): the logit of every token already generated is divided by
  ``penalty`` when positive and multiplied by it when negative (Hugging Face's
  ``RepetitionPenaltyLogitsProcessor``).
* ``min_p_filter``: keep the tokens whose probability is at least ``p`` times the top
  token's (Nguyen et al. 2024, *Turning Up the Heat: Min-p Sampling*; Hugging Face's
  ``MinPLogitsWarper``), beside top-k / top-p in ``llmbook.sampling``.
* ``speculative_generate``: a cheap draft model proposes ``k`` tokens, the target scores
  them in one forward pass, and the rejection-sampling rule of Leviathan et al. 2023
  (*Fast Inference from Transformers via Speculative Decoding*) and Chen et al. 2023
  (*Accelerating Large Language Model Decoding with Speculative Sampling*) keeps a prefix:
  token ``x ~ q`` is accepted with probability ``min(1, p(x) / q(x))``; on rejection a
  token is drawn from ``norm(max(0, p - q))``; when all ``k`` are accepted a bonus token
  is drawn from the target's next distribution. Every emitted token is distributed
  exactly as the target alone would sample it.
* ``NGramDraft``: a draft with no parameters, "prompt lookup" (Saxena 2023, *Prompt
  Lookup Decoding*): find the latest earlier occurrence of the last n tokens in the
  context and propose the token that followed it. Free to run, and good exactly where
  the output copies the input (summaries, edits, quoting, code).
* ``truncated_draft``: the draft made of the target's first ``n_layers`` blocks plus its
  final norm and (shared) head, no weights copied (the "self-speculative" / early-exit
  draft of Elhoushi et al. 2024, *LayerSkip*, without its training).

The model protocol. Every function takes ``model`` as either the book's ``Llama`` or
``GPT``, a ``TruncatedLlama`` or any callable ``f(ids) -> logits`` where ``ids`` is a
``(B, T)`` long tensor and ``logits`` is ``(B, T, V)``: the next-token logits after every
prefix (a tuple is allowed; its first element is taken, as ``GPT.forward`` returns
``(logits, loss)``). For the ``Llama`` family the KV cache (``llmbook.kv_cache.KVCache``) is
used and rolled back after rejected drafts (``cache.truncate``); other models
recompute the whole prefix each step (correct, slower).

Devices and host syncs. Prompts follow the model's device; the logits, log-probs,
top-k selections and acceptance tests run there. The bookkeeping that decides the
control flow (which beams finished, how many drafted tokens were accepted) is on the
host: one small device-to-host copy per step, which selecting beams or a variable
number of accepted tokens needs by nature.

Left out: batched beam search and batched speculative decoding (batch size 1 only),
diverse beam search, tree-structured drafts (Medusa, SpecInfer), KV-cache reuse across
beams.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple

import torch
import torch.nn as nn

from llmbook.device import model_device

__all__ = [
    "beam_search", "BeamHypothesis", "greedy_decode", "length_penalty", "repetition_penalty", "min_p_filter",
    "speculative_generate", "SpeculativeResult", "expected_tokens_per_round", "TruncatedLlama", "truncated_draft", "NGramDraft",
]


# ----------------------------------------------------------------------------- model protocol


def _check_int(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def _is_llama_like(model: object) -> bool:
    from llmbook.llama import Llama

    return isinstance(model, (Llama, TruncatedLlama))


def _logits_fn(name: str, model: object) -> Callable[[torch.Tensor], torch.Tensor]:
    """The model as ``ids (B, T) -> logits (B, T, V)`` (see the module docstring)."""
    from llmbook.gpt import GPT

    if isinstance(model, GPT):
        block = model.config.block_size
        return lambda ids: model(ids[:, -block:])[0]
    if not callable(model):
        raise TypeError(f"{name} must be a Llama, a GPT or a callable ids (B, T) -> logits (B, T, V), "
                        f"got {type(model).__name__}")

    def fn(ids: torch.Tensor) -> torch.Tensor:
        out = model(ids)
        if isinstance(out, tuple):
            out = out[0]
        if not isinstance(out, torch.Tensor) or out.dim() != 3 or out.shape[:2] != ids.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"{name} must return logits of shape (B, T, V) = ({ids.shape[0]}, {ids.shape[1]}, V) "
                             f"for ids of shape {tuple(ids.shape)}, got {got}")
        return out

    return fn


def _device_of(model: object, fallback: torch.device) -> torch.device:
    return model_device(model) if isinstance(model, nn.Module) else fallback


def _check_prompt(prompt: object) -> torch.Tensor:
    """A prompt as a (1, T) long tensor (a 1-D tensor gets a batch dimension)."""
    if not isinstance(prompt, torch.Tensor):
        raise TypeError(f"prompt_ids must be a torch.Tensor of token ids, got {type(prompt).__name__}")
    if prompt.dim() == 1:
        prompt = prompt[None]
    if prompt.dim() != 2 or prompt.shape[0] != 1:
        raise ValueError(f"prompt_ids must have shape (T,) or (1, T) (batch size 1), got {tuple(prompt.shape)}")
    if prompt.dtype not in (torch.long, torch.int32):
        raise TypeError(f"prompt_ids must hold integer token ids, got dtype {prompt.dtype}")
    if prompt.shape[1] == 0:
        raise ValueError("prompt_ids is empty: give at least one token")
    return prompt.long()


class _Stepper:
    """Feeds new tokens to a model and returns their logits; can forget the last positions.

    Llama-like models keep a ``KVCache`` and rolling back is ``cache.truncate(n)``; any
    other model keeps the token sequence and recomputes the whole prefix.
    """

    def __init__(self, name: str, model: object, max_len: int, device: torch.device):
        self.model, self.seen = model, torch.zeros(1, 0, dtype=torch.long, device=device)
        self.cache = None
        self.next_only = callable(getattr(model, "next_token_logits", None))
        if _is_llama_like(model):
            from llmbook.kv_cache import KVCache

            self.cache = KVCache(model.config, 1, max_len, device=device, dtype=next(model.parameters()).dtype)
        elif not self.next_only:
            self.fn = _logits_fn(name, model)

    @property
    def length(self) -> int:
        return self.seen.shape[1]

    def feed(self, ids: torch.Tensor) -> torch.Tensor:
        """Append ids (1, t); return the logits after each of them, (t, V)."""
        t = ids.shape[1]
        self.seen = torch.cat([self.seen, ids], dim=1)
        if self.cache is not None:
            return self.model(ids, kv_cache=self.cache)[0]
        if self.next_only:
            return self.model.next_token_logits(self.seen)[None]  # (1, V): the last position only
        return self.fn(self.seen)[0, -t:]

    def truncate(self, n: int) -> None:
        """Forget every position from ``n`` on (the cached keys there are overwritten later)."""
        self.seen = self.seen[:, :n]
        if self.cache is not None:
            self.cache.truncate(n)


# ----------------------------------------------------------------------------- beam search


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's length normalisation ``((5 + length) / 6) ** alpha`` (Wu et al. 2016, eq. 14).

    >>> length_penalty(1, 0.6), round(length_penalty(7, 1.0), 3)
    (1.0, 2.0)
    """
    return ((5.0 + length) / 6.0) ** alpha


class BeamHypothesis(NamedTuple):
    """A finished beam: the new tokens (n,), their total log-probability and the normalised score."""

    tokens: torch.Tensor
    logprob: float
    score: float


@torch.no_grad()
def beam_search(model, prompt_ids: torch.Tensor, max_new_tokens: int, beam_width: int,
                length_penalty: float = 0.0, eos_id: int | None = None) -> BeamHypothesis:
    """The most probable continuation found by beam search, ranked by ``logprob / lp(len)``.

    Each step extends every live beam by every token, scores the extensions by total
    log-probability and keeps the ``beam_width`` best (live beams all have the same length,
    so length normalisation does not change their order). A beam that emits ``eos_id``
    leaves the search as a finished hypothesis (the EOS counted in its length). The search
    stops after ``max_new_tokens`` steps or once ``beam_width`` hypotheses have finished;
    the finished and still-live hypotheses are then ranked by
    ``logprob / ((5 + len) / 6) ** length_penalty`` (Wu et al. 2016), ``length_penalty``
    being GNMT's alpha (0: raw log-probability; they used 0.6 to 0.7). ``beam_width=1``
    is greedy decoding.

    ``model``: see the module's protocol. ``prompt_ids``: (T,) or (1, T). Returns a
    ``BeamHypothesis`` whose ``tokens`` (new ids only) are on the model's device. Beam
    bookkeeping (which beams ended in EOS) is read on the host once per step.
    """
    prompt = _check_prompt(prompt_ids)
    _check_int("max_new_tokens", max_new_tokens, 1)
    _check_int("beam_width", beam_width, 1)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) or not (
            math.isfinite(length_penalty) and length_penalty >= 0):
        raise ValueError(f"length_penalty must be a finite number >= 0 (GNMT's alpha), got {length_penalty!r}")
    alpha = float(length_penalty)
    fn = _logits_fn("model", model)
    device = _device_of(model, prompt.device)
    beams = prompt.to(device)  # (W, T0 + step): live beams, starting with the prompt alone
    scores = torch.zeros(1, device=device)  # (W,) total log-probability of each live beam's new tokens
    finished: list[BeamHypothesis] = []
    T0 = prompt.shape[1]
    norm = globals()["length_penalty"]
    for step in range(1, max_new_tokens + 1):
        logp = torch.log_softmax(fn(beams)[:, -1].float(), dim=-1)  # (W, V)
        V = logp.shape[-1]
        if eos_id is not None and not 0 <= eos_id < V:
            raise ValueError(f"eos_id must lie in [0, {V}), got {eos_id}")
        cand = (scores[:, None] + logp).reshape(-1)  # (W * V,)
        # Take up to 2W candidates so that W live beams remain after removing EOS endings.
        top, idx = torch.topk(cand, min(2 * beam_width if eos_id is not None else beam_width, cand.numel()))
        src, tok = idx // V, idx % V
        seqs = torch.cat([beams[src], tok[:, None]], dim=1)  # (C, T0 + step)
        if eos_id is None:
            beams, scores = seqs[:beam_width], top[:beam_width]
            continue
        is_eos = (tok == eos_id).tolist()  # host: which candidates finish (one small copy per step)
        live = [i for i, e in enumerate(is_eos) if not e][:beam_width]
        for i, e in enumerate(is_eos):
            # An EOS candidate counts only if it ranks among the W best of this step.
            if e and i < beam_width:
                lp = float(top[i])
                finished.append(BeamHypothesis(seqs[i, T0:], lp, lp / norm(step, alpha)))
        finished = sorted(finished, key=lambda h: -h.score)[:beam_width]  # the W best so far
        if not live:
            beams = beams[:0]
            break
        keep = torch.tensor(live, device=device)
        beams, scores = seqs[keep], top[keep]
        if len(finished) == beam_width:
            # Log-probabilities only fall as a beam grows, so no live beam can end above
            # best_live / lp(max length): stop once that bound cannot beat the worst finished one.
            bound = float(scores[0]) / norm(max_new_tokens, alpha)
            if bound <= finished[-1].score:
                break
    if beams.shape[0] == scores.shape[0] and beams.shape[1] > T0:
        # Live beams (cut at max_new_tokens) compete too; after an early stop they cannot win.
        n_new = beams.shape[1] - T0
        finished += [BeamHypothesis(beams[i, T0:], lp, lp / norm(n_new, alpha)) for i, lp in
                     enumerate(scores.tolist())]
    return max(finished, key=lambda h: h.score)


@torch.no_grad()
def greedy_decode(model, prompt_ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """Argmax decoding of ``max_new_tokens`` tokens with any model of the protocol; returns (n,).

    For the book's ``Llama`` this is ``llmbook.llama.generate(..., temperature=0)`` (with its
    KV cache); this version exists so that beam search and speculative decoding can be
    compared with greedy on any callable.
    """
    prompt = _check_prompt(prompt_ids)
    _check_int("max_new_tokens", max_new_tokens, 1)
    device = _device_of(model, prompt.device)
    step = _Stepper("model", model, prompt.shape[1] + max_new_tokens, device)
    logits = step.feed(prompt.to(device))[-1]
    out = []
    for i in range(max_new_tokens):
        nxt = logits.argmax(-1).reshape(1, 1)
        out.append(nxt)
        if i + 1 < max_new_tokens:
            logits = step.feed(nxt)[-1]
    return torch.cat(out, dim=1)[0]


# ----------------------------------------------------------------------------- logit processors


def _check_logits(logits: object) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise TypeError(f"logits must be a floating-point torch.Tensor, got "
                        f"{logits.dtype if isinstance(logits, torch.Tensor) else type(logits).__name__}")
    if logits.dim() < 1 or logits.shape[-1] < 1:
        raise ValueError(f"logits must have shape (..., V) with V >= 1, got {tuple(logits.shape)}")
    return logits


def repetition_penalty(logits: torch.Tensor, previous_ids: torch.Tensor, penalty: float) -> torch.Tensor:
    """CTRL's repetition penalty: the logits of tokens in ``previous_ids`` shrink towards "less likely".

    ``logits`` (..., V); ``previous_ids`` (..., T) integer ids with the same leading
    shape. A positive logit is divided by ``penalty``, a negative one multiplied by it,
    so ``penalty > 1`` always lowers a seen token's probability (Keskar et al. 2019;
    Hugging Face's ``RepetitionPenaltyLogitsProcessor`` does the same). A token seen
    several times is penalised once.

    >>> repetition_penalty(torch.tensor([2.0, -1.0, 3.0]), torch.tensor([0, 1, 1]), 2.0)
    tensor([ 1., -2.,  3.])
    """
    _check_logits(logits)
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not (
            math.isfinite(penalty) and penalty > 0):
        raise ValueError(f"penalty must be a finite number > 0 (1 means no penalty), got {penalty!r}")
    if not isinstance(previous_ids, torch.Tensor) or previous_ids.is_floating_point() or previous_ids.dtype == torch.bool:
        raise TypeError("previous_ids must be an integer torch.Tensor of token ids")
    if previous_ids.shape[:-1] != logits.shape[:-1] or previous_ids.dim() != logits.dim():
        raise ValueError(f"previous_ids must have shape (..., T) with the leading shape of logits "
                         f"{tuple(logits.shape[:-1])}, got {tuple(previous_ids.shape)}")
    if previous_ids.shape[-1] == 0:
        return logits.clone()
    previous_ids = previous_ids.long()
    seen = logits.gather(-1, previous_ids)
    seen = torch.where(seen < 0, seen * penalty, seen / penalty)
    return logits.scatter(-1, previous_ids, seen)


def min_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Min-p: keep the tokens whose probability is at least ``p`` times the most probable token's.

    The others become -inf; the top token always survives. Unlike top-p the cut-off
    scales with the model's confidence: a peaked distribution keeps few tokens, a flat
    one many (Nguyen et al. 2024; Hugging Face's ``MinPLogitsWarper``).

    >>> probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    >>> min_p_filter(probs.log(), 0.2).exp()
    tensor([0.5000, 0.3000, 0.1500, 0.0000])
    """
    _check_logits(logits)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be a number in [0, 1], got {p!r}")
    probs = torch.softmax(logits, dim=-1)
    top = probs.amax(dim=-1, keepdim=True)
    return logits.masked_fill(probs < p * top, float("-inf"))


# ----------------------------------------------------------------------------- speculative decoding


class SpeculativeResult(NamedTuple):
    """``tokens`` (n,) the new ids; ``proposed`` and ``accepted`` count drafted tokens;
    ``target_calls`` counts the target's forward passes (one per round, the first with the prompt)."""

    tokens: torch.Tensor
    proposed: int
    accepted: int
    target_calls: int

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed drafted tokens (nan when nothing was drafted)."""
        return self.accepted / self.proposed if self.proposed else float("nan")


def _probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Softmax at ``temperature``; temperature 0 gives the one-hot of the argmax."""
    if temperature == 0.0:
        return torch.zeros_like(logits, dtype=torch.float32).scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    return torch.softmax(logits.float() / temperature, dim=-1)


def _draw(probs: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """One id from each row of probs (..., V) as a (..., 1) tensor; argmax at temperature 0."""
    if temperature == 0.0:
        return probs.argmax(-1, keepdim=True)
    gen_dev = generator.device if generator is not None else probs.device
    ids = torch.multinomial(probs.reshape(-1, probs.shape[-1]).to(gen_dev), 1, generator=generator)
    return ids.to(probs.device).reshape(*probs.shape[:-1], 1)


def expected_tokens_per_round(alpha: float, k: int) -> float:
    """Mean tokens one round of speculative decoding yields: (1 - alpha^(k+1)) / (1 - alpha).

    If each drafted token is accepted independently with probability ``alpha``, a round
    yields the accepted prefix plus one target token (the replacement or the bonus):
    ``1 + alpha + ... + alpha^k`` tokens on average (Leviathan et al. 2023, equation 1);
    ``k + 1`` when ``alpha = 1``.

    >>> expected_tokens_per_round(0.0, 4), expected_tokens_per_round(1.0, 4), round(expected_tokens_per_round(0.5, 2), 3)
    (1.0, 5.0, 1.75)
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be a probability in [0, 1], got {alpha!r}")
    _check_int("k", k, 1)
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


@torch.no_grad()
def speculative_generate(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int = 4,
                         temperature: float = 1.0, generator: torch.Generator | None = None) -> SpeculativeResult:
    """Sample ``max_new_tokens`` tokens from ``target``, drafting ``k`` at a time with ``draft``.

    One round: the draft proposes ``d_1 .. d_k`` autoregressively (``d_i ~ q_i``); the
    target runs once on all of them, giving ``p_1 .. p_{k+1}``. Going left to right,
    ``d_i`` is accepted with probability ``min(1, p_i(d_i) / q_i(d_i))``; at the first
    rejection a replacement is drawn from ``norm(max(0, p_i - q_i))`` and the round ends;
    if all ``k`` are accepted, a bonus token is drawn from ``p_{k+1}``. Each round costs
    ``k`` draft steps and one target pass and yields 1 to ``k + 1`` tokens, each
    distributed exactly as under the target alone (Leviathan et al. 2023, Theorem 1;
    Chen et al. 2023). ``temperature=0`` makes p and q one-hot at their argmax: a draft
    token is kept iff it is the target's argmax, so the output is the target's greedy
    output.

    ``target``, ``draft``: models of the module's protocol with the same vocabulary; the
    draft may instead offer ``next_token_logits(ids (1, T)) -> (V,)`` (the next position
    only), as ``NGramDraft`` does.
    ``prompt``: (T,) or (1, T). ``generator`` seeds the draws (the acceptance uniforms,
    the draft's and the residual samples). Returns a ``SpeculativeResult`` (tokens on the
    target's device, the acceptance statistics). Which tokens were accepted is read on the
    host once per round.
    """
    prompt = _check_prompt(prompt)
    _check_int("max_new_tokens", max_new_tokens, 1)
    _check_int("k", k, 1)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
            math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    temperature = float(temperature)
    device = _device_of(target, prompt.device)
    if isinstance(draft, nn.Module) and model_device(draft) != device and any(True for _ in draft.parameters()):
        raise ValueError(f"draft is on {model_device(draft)} but target is on {device}; put both on one device")
    prompt = prompt.to(device)
    max_len = prompt.shape[1] + max_new_tokens + k + 1
    tgt = _Stepper("target", target, max_len, device)
    drf = _Stepper("draft", draft, max_len, device)
    seq = prompt  # (1, n): prompt and every emitted token
    T0 = prompt.shape[1]
    calls, proposed, accepted = 0, 0, 0
    while seq.shape[1] - T0 < max_new_tokens:
        n = seq.shape[1]
        kk = min(k, max_new_tokens - (n - T0))  # never draft past the end
        # Draft phase: feed what the draft has not seen, then k - 1 of its own tokens.
        drafts, qs = [], []
        q_logits = drf.feed(seq[:, drf.length:])[-1:]
        for i in range(kk):
            q = _probs(q_logits, temperature)  # (1, V)
            d = _draw(q, temperature, generator)  # (1, 1)
            drafts.append(d)
            qs.append(q)
            if i + 1 < kk:
                q_logits = drf.feed(d)[-1:]
        d = torch.cat(drafts, dim=1)  # (1, kk)
        q = torch.cat(qs, dim=0)  # (kk, V)
        # Verify phase: one target pass over its unseen tokens and the drafts gives p_1 .. p_{kk+1}.
        p_logits = tgt.feed(torch.cat([seq[:, tgt.length:], d], dim=1))[-(kk + 1):]  # (kk + 1, V)
        calls += 1
        if p_logits.shape[-1] != q.shape[-1]:
            raise ValueError(f"draft and target must share a vocabulary: draft gives {q.shape[-1]} logits, "
                             f"target {p_logits.shape[-1]}")
        p = _probs(p_logits, temperature)  # (kk + 1, V)
        dd = d[0]
        p_d = p[:kk].gather(-1, dd[:, None])[:, 0]  # (kk,)
        q_d = q.gather(-1, dd[:, None])[:, 0]
        if temperature == 0.0:
            ok = p_d > 0  # one-hot p: accepted iff the draft token is the target's argmax
        else:
            u = torch.rand(kk, generator=generator, device=generator.device if generator is not None else device)
            ok = u.to(device) < (p_d / q_d)  # accept with probability min(1, p/q)
        n_acc = int(torch.cumprod(ok.long(), 0).sum())  # host: accepted prefix length
        proposed += kk
        accepted += n_acc
        if n_acc == kk:
            new = _draw(p[kk:kk + 1], temperature, generator)  # bonus token from p_{kk+1}
        else:
            residual = torch.clamp(p[n_acc] - q[n_acc], min=0.0)
            if temperature == 0.0 or float(residual.sum()) <= 0.0:
                residual = p[n_acc]  # p == q on the support: the rejection cannot happen; guard rounding
            new = _draw((residual / residual.sum())[None], temperature, generator)
        seq = torch.cat([seq, dd[None, :n_acc], new], dim=1)
        # Roll back: the target keeps positions up to the last accepted draft token.
        tgt.truncate(n + n_acc)
        drf.truncate(min(drf.length, n + n_acc))
    tokens = seq[0, T0:T0 + max_new_tokens]
    return SpeculativeResult(tokens, proposed, accepted, calls)


# ----------------------------------------------------------------------------- truncated draft


class TruncatedLlama(nn.Module):
    """The first ``n_layers`` blocks of a ``Llama`` followed by its final norm and head.

    Shares every parameter with the full model (nothing is copied), so it costs no
    memory; its ``config`` is the full one with ``n_layer = n_layers`` so that a
    ``llmbook.kv_cache.KVCache`` built from it holds only those layers. ``forward(idx,
    kv_cache=None)`` mirrors ``Llama.forward`` (logits (B, T, V)). It reads the full
    model's RoPE table through ``Llama._rope_slice`` (an internal method: the one place
    this class depends on the Llama's internals).
    """

    def __init__(self, model, n_layers: int):
        super().__init__()
        from llmbook.llama import Llama

        if not isinstance(model, Llama):
            raise TypeError(f"llama_model must be a llmbook.llama.Llama, got {type(model).__name__}")
        _check_int("n_layers", n_layers, 1)
        if n_layers > model.config.n_layer:
            raise ValueError(f"n_layers must be <= the model's n_layer ({model.config.n_layer}), got {n_layers}")
        self.full = [model]  # a list, so the full model is not registered as a submodule twice
        self.layers = model.layers[:n_layers]
        self.embed_tokens, self.norm, self.lm_head = model.embed_tokens, model.norm, model.lm_head
        self.config = dataclasses.replace(model.config, n_layer=n_layers)

    def forward(self, idx: torch.Tensor, kv_cache=None) -> torch.Tensor:
        from llmbook.llama import _check_idx_shape

        _check_idx_shape(idx)
        B, T = idx.shape
        start = kv_cache.length if kv_cache is not None else 0
        x = self.embed_tokens(idx)  # (B, T, D)
        cos, sin = self.full[0]._rope_slice(start, T, x)
        for i, block in enumerate(self.layers):
            x = block(x, cos, sin, kv_cache, i)
        if kv_cache is not None:
            kv_cache.length += T
        return self.lm_head(self.norm(x))  # (B, T, V)


def truncated_draft(llama_model, n_layers: int) -> TruncatedLlama:
    """A draft for ``speculative_generate``: the model's first ``n_layers`` blocks + final norm + head.

    >>> from llmbook.llama import Llama, LlamaConfig
    >>> m = Llama(LlamaConfig.tiny()); ids = torch.tensor([[1, 2, 3]])
    >>> torch.equal(truncated_draft(m, m.config.n_layer)(ids), m(ids))
    True
    """
    return TruncatedLlama(llama_model, n_layers)


# ----------------------------------------------------------------------------- n-gram draft


class NGramDraft:
    """Prompt-lookup draft: the token that followed the latest earlier match of the context's suffix.

    For ``n = max_ngram .. 1``, the last ``n`` tokens are searched for in the rest of
    the sequence (prompt and generated tokens); at the latest match, the token right
    after it is proposed. Without a match it proposes ``fallback_id``. The proposal is a
    point mass (logits 0 there, -inf elsewhere, so ``q`` is one-hot at any temperature and
    the acceptance probability is the target's ``p(x)``).

    >>> d = NGramDraft(vocab_size=10)
    >>> int(d.next_token_logits(torch.tensor([[5, 6, 7, 1, 5, 6]])).argmax())  # ... 5 6 -> 7
    7
    """

    def __init__(self, vocab_size: int, max_ngram: int = 3, fallback_id: int = 0):
        self.vocab_size = _check_int("vocab_size", vocab_size, 1)
        self.max_ngram = _check_int("max_ngram", max_ngram, 1)
        _check_int("fallback_id", fallback_id, 0)
        if fallback_id >= vocab_size:
            raise ValueError(f"fallback_id must be < vocab_size ({vocab_size}), got {fallback_id}")
        self.fallback_id = fallback_id

    def propose(self, ids: torch.Tensor) -> int:
        seq = ids.reshape(-1)
        L = seq.numel()
        for n in range(min(self.max_ngram, L - 1), 0, -1):
            windows = seq.unfold(0, n, 1)[:-1]  # (L - n, n): every earlier window, the suffix itself excluded
            hits = (windows == seq[L - n:]).all(dim=1).nonzero()
            if hits.numel():
                return int(seq[int(hits[-1]) + n])  # host: the draft's bookkeeping is on the host
        return self.fallback_id

    def next_token_logits(self, ids: torch.Tensor) -> torch.Tensor:
        """(V,) logits: 0 at the proposed token, -inf elsewhere."""
        out = torch.full((self.vocab_size,), float("-inf"), device=ids.device)
        out[self.propose(ids)] = 0.0
        return out

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """The protocol's full form, (B, T, V): the proposal after every prefix (slow; for checks)."""
        B, T = ids.shape
        return torch.stack([torch.stack([self.next_token_logits(ids[b, :t + 1]) for t in range(T)])
                            for b in range(B)])
