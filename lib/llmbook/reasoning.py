"""Reasoning with verifiable rewards: a checkable task, pass@k, voting, and the GRPO loss.

Covers three things chapter 10 builds on:

* A task whose answers a program can check: multi-digit addition as text (``Addition``),
  written either as the bare answer or with a scratchpad that adds column by column with
  carries (a chain of thought, Nye et al. 2021, *Show Your Work*; Wei et al. 2022), seeded
  train / validation / test sets that share no problem (``addition_splits``, ``a+b`` and
  ``b+a`` count as one problem), and a tolerant grader (``extract_answer``, ``grade``).
* Measuring a sampler: the unbiased pass@k estimator of Chen et al. 2021, *Evaluating Large
  Language Models Trained on Code* (``pass_at_k``), majority voting over sampled answers
  (self-consistency, Wang et al. 2022, ``majority_vote``) and best-of-N under a verifier
  (``best_of_n``).
* Group Relative Policy Optimization (GRPO; Shao et al. 2024, *DeepSeekMath*): rewards
  turned into advantages by normalising within each group of completions of one prompt
  (``group_advantages``; ``scale=False`` drops the division by the standard deviation, as
  Dr. GRPO does, Liu et al. 2025, *Understanding R1-Zero-Like Training*), the per-token
  clipped importance-ratio objective of PPO (Schulman et al. 2017), the KL penalty to a
  reference model with the "k3" estimator exp(r) - r - 1, r = log p_ref - log p (from
  Schulman's note *Approximating KL Divergence*, 2020) (``kl_k3``), and four ways to average
  the per-token loss (``grpo_loss``, ``LOSS_TYPES``), the ones trl's ``GRPOTrainer`` names.
  ``completion_logprobs`` and ``completion_mask`` give the per-token log-probabilities and
  the mask of sampled completions.

Leaves out: the sampling and training loop (the chapter and ``scripts/grpo_feasibility.py``
write it), process rewards and learned verifiers, sequence-level importance ratios (GSPO),
the clip-higher and dynamic-sampling parts of DAPO (Yu et al. 2025) other than its token
average, and anything distributed: ``"dapo"`` here is the token mean of one batch, which is
what trl computes on one process without gradient accumulation.

Shape legend: B completions in a batch (n_groups x group_size, a group's completions next
to each other), P prompt length, C completion length, V vocabulary.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Hashable, NamedTuple, Sequence, TypeVar

import torch

__all__ = ["Addition", "ADDITION_CHARS", "STOP", "addition_splits", "extract_answer", "grade", "pass_at_k",
           "majority_vote", "best_of_n", "group_advantages", "equal_reward_groups", "kl_k3", "completion_mask",
           "completion_logprobs", "LOSS_TYPES", "GRPOLoss", "grpo_loss"]

STOP = "\n"                            # a completion ends with it
ADDITION_CHARS = "\n+,0123456789=>"   # every character a prompt or a target uses (a char vocabulary)
LOSS_TYPES = ("grpo", "bnpo", "dapo", "dr_grpo")
T = TypeVar("T")


def _int(name: str, v: object, low: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return v


# ------------------------------------------------------------------ the task
@dataclass(frozen=True)
class Addition:
    """One problem ``a + b``; operands are written zero-padded to ``digits``, so a set's prompts share one length.

    >>> p = Addition(23, 58, digits=2)
    >>> p.prompt, p.answer, p.target(), p.target(scratchpad=True)
    ('23+58=', 81, '81\\n', '3+8+0=11,2+5+1=08>81\\n')
    """

    a: int  # first operand, 0 <= a < 10**digits
    b: int  # second operand, same range
    digits: int  # width of each operand: columns of the scratchpad

    def __post_init__(self) -> None:
        _int("digits", self.digits, 1)
        for name in ("a", "b"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 10 ** self.digits:
                raise ValueError(f"{name} must be an int in [0, 10**digits) = [0, {10 ** self.digits}), got {v!r}")

    @property
    def prompt(self) -> str:
        return f"{self.a:0{self.digits}d}+{self.b:0{self.digits}d}="

    @property
    def answer(self) -> int:
        return self.a + self.b

    def scratchpad(self) -> str:
        """Column by column from the right: ``x+y+carry=ss`` (two digits: carry out, digit), comma-separated."""
        steps, carry = [], 0
        for i in range(self.digits):
            x, y = self.a // 10 ** i % 10, self.b // 10 ** i % 10
            s = x + y + carry
            steps.append(f"{x}+{y}+{carry}={s:02d}")
            carry = s // 10
        return ",".join(steps)

    def target(self, scratchpad: bool = False) -> str:
        """What the model should write after the prompt: the answer (after the scratchpad and '>'), then STOP."""
        return (self.scratchpad() + ">" if scratchpad else "") + f"{self.answer}{STOP}"


def addition_splits(digits: int, sizes: dict[str, int], seed: int = 0) -> dict[str, list[Addition]]:
    """Random problems for each split, no problem in two splits (nor twice in one); a+b and b+a are one problem.

    >>> s = addition_splits(2, {"train": 5, "test": 3}, seed=0)
    >>> [len(v) for v in s.values()], s["test"][0].digits
    ([5, 3], 2)
    """
    _int("digits", digits, 1)
    if not isinstance(sizes, dict) or not sizes:
        raise ValueError(f"sizes must be a non-empty dict split -> count, got {sizes!r}")
    for k, v in sizes.items():
        _int(f"sizes[{k!r}]", v, 0)
    n = 10 ** digits
    pairs = n * (n + 1) // 2  # unordered pairs, a == b included
    total = sum(sizes.values())
    if total > pairs:
        raise ValueError(f"sizes ask for {total} problems; {digits}-digit addition has only {pairs} distinct ones")
    rng = random.Random(seed)
    if total > pairs // 2:  # most of them: shuffle the full list (rejection sampling would crawl)
        every = [(a, b) if rng.random() < 0.5 else (b, a) for a in range(n) for b in range(a, n)]
        rng.shuffle(every)
        draws = iter(every)
    else:
        def fresh():
            seen: set[tuple[int, int]] = set()
            while True:
                a, b = rng.randrange(n), rng.randrange(n)
                if (min(a, b), max(a, b)) not in seen:
                    seen.add((min(a, b), max(a, b)))
                    yield a, b
        draws = fresh()
    return {split: [Addition(*next(draws), digits) for _ in range(count)] for split, count in sizes.items()}


_NUMBER = re.compile(r"[+-]?\d+")


def extract_answer(text: str) -> int | None:
    """The integer a completion gives as its answer, or None when it gives none.

    Tolerant of surrounding whitespace, leading zeros, one trailing period and an
    ``answer: 81`` form; after a scratchpad it reads what follows the last '>'.

    >>> [extract_answer(t) for t in ["81", " 081.\\n", "Answer: 81", "3+8+0=11>81", "eighty", ""]]
    [81, 81, 81, 81, None, None]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    low = text.lower()
    if "answer:" in low:
        text = text[low.rindex("answer:") + len("answer:"):]
    elif ">" in text:
        text = text[text.rindex(">") + 1:]
    text = text.strip()
    if text.endswith("."):
        text = text[:-1].rstrip()
    return int(text) if _NUMBER.fullmatch(text) else None


def grade(completion: str, answer: int) -> float:
    """The verifiable reward: 1.0 when ``completion`` states ``answer``, else 0.0.

    >>> grade(" 0081. ", 81), grade("18", 81)
    (1.0, 0.0)
    """
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise TypeError(f"answer must be an int, got {type(answer).__name__}")
    return 1.0 if extract_answer(completion) == answer else 0.0


# ------------------------------------------------------------------ measuring samplers
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k samples is right) from n samples of which c are right.

    1 - C(n-c, k) / C(n, k), computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) (Chen et al. 2021),
    which needs no huge binomials.

    >>> round(pass_at_k(10, 3, 1), 4), round(pass_at_k(10, 3, 2), 4), pass_at_k(10, 9, 2)
    (0.3, 0.5333, 1.0)
    """
    _int("n", n, 1)
    _int("c", c, 0)
    _int("k", k, 1)
    if c > n:
        raise ValueError(f"c (right samples, {c}) must be <= n (samples, {n})")
    if k > n:
        raise ValueError(f"k ({k}) must be <= n ({n}): pass@k needs at least k samples")
    if n - c < k:  # every k-subset holds a right sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def majority_vote(answers: Sequence[Hashable | None]) -> Hashable | None:
    """The most frequent answer, None answers (unparseable) ignored; a tie goes to the one seen first.

    >>> majority_vote([81, None, 18, 81, 18]), majority_vote([None, None])
    (81, None)
    """
    if isinstance(answers, (str, bytes)) or not isinstance(answers, Sequence):
        raise TypeError(f"answers must be a sequence of answers, got {type(answers).__name__}")
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    return max(counts, key=counts.__getitem__)  # Counter keeps first-seen order; max keeps the first of ties


def best_of_n(candidates: Sequence[T], verifier: Callable[[T], float]) -> T:
    """The candidate the verifier scores highest (the first of ties).

    >>> best_of_n(["18", "81", "80"], lambda s: -abs(int(s) - 81))
    '81'
    """
    if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
        raise TypeError(f"candidates must be a sequence, got {type(candidates).__name__}")
    if not candidates:
        raise ValueError("candidates is empty")
    if not callable(verifier):
        raise TypeError(f"verifier must be callable, got {type(verifier).__name__}")
    scores = [float(verifier(c)) for c in candidates]
    if any(math.isnan(s) for s in scores):
        raise ValueError(f"verifier returned NaN for candidate {scores.index(next(s for s in scores if s != s))}")
    return candidates[max(range(len(scores)), key=scores.__getitem__)]


# ------------------------------------------------------------------ GRPO
def _check_rewards(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if not isinstance(rewards, torch.Tensor):
        raise TypeError(f"rewards must be a torch.Tensor, got {type(rewards).__name__}")
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (B,), got shape {tuple(rewards.shape)}")
    if rewards.numel() == 0:
        raise ValueError("rewards is empty: no group to normalise")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"group_size must be an int >= 2 (a group of one has no baseline to compare with), "
                         f"got {group_size!r}")
    if rewards.numel() % group_size:
        raise ValueError(f"rewards has {rewards.numel()} entries, not a multiple of group_size={group_size}")
    if not rewards.is_floating_point():
        rewards = rewards.float()
    if rewards.device.type == "cpu" and not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or inf: give a failed or unparseable completion reward 0")
    return rewards.view(-1, group_size)  # (n_groups, G)


def group_advantages(rewards: torch.Tensor, group_size: int, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """GRPO's advantages: each reward minus its group's mean, divided by the group's std (+ eps) if ``scale``.

    ``rewards`` is (B,) with each group's completions consecutive. The std is the sample
    standard deviation (Bessel's n - 1) and eps = 1e-4, as in trl; ``scale=False`` is Dr. GRPO.
    A group whose rewards are all equal gets advantage 0 everywhere: it teaches nothing.

    >>> group_advantages(torch.tensor([1., 0., 0., 0., 1., 1.]), group_size=3, scale=False)
    tensor([ 0.6667, -0.3333, -0.3333, -0.6667,  0.3333,  0.3333])
    """
    r = _check_rewards(rewards, group_size)  # (n_groups, G)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps < math.inf:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    adv = r - r.mean(dim=1, keepdim=True)
    if scale:
        adv = adv / (r.std(dim=1, keepdim=True) + eps)
    return adv.reshape(-1)  # (B,)


def equal_reward_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(n_groups,) bool: True where every completion of the group got the same reward (zero advantage).

    >>> equal_reward_groups(torch.tensor([1., 1., 0., 1.]), group_size=2)
    tensor([ True, False])
    """
    r = _check_rewards(rewards, group_size)
    return (r == r[:, :1]).all(dim=1)


def kl_k3(logps: torch.Tensor, ref_logps: torch.Tensor) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from sampled tokens: exp(r) - r - 1, r = ref - logp.

    Never negative, zero where the two agree, and unbiased when the tokens are sampled from the policy.

    >>> kl_k3(torch.tensor([-1.0, -2.0]), torch.tensor([-1.0, -1.0]))
    tensor([0.0000, 0.7183])
    """
    _check_same("ref_logps", ref_logps, logps)
    r = ref_logps - logps
    return torch.exp(r) - r - 1


def completion_mask(completion_ids: torch.Tensor, stop_id: int) -> torch.Tensor:
    """(B, C) float mask: 1 up to and including each row's first ``stop_id``, 0 after (all 1 if it never stops).

    >>> completion_mask(torch.tensor([[5, 0, 7, 0], [5, 6, 7, 8]]), stop_id=0)
    tensor([[1., 1., 0., 0.],
            [1., 1., 1., 1.]])
    """
    if not isinstance(completion_ids, torch.Tensor) or completion_ids.dim() != 2:
        raise ValueError(f"completion_ids must be a (B, C) tensor, got "
                         f"{tuple(completion_ids.shape) if isinstance(completion_ids, torch.Tensor) else type(completion_ids).__name__}")
    _int("stop_id", stop_id, 0)
    is_stop = (completion_ids == stop_id).long()
    after = (is_stop.cumsum(1) - is_stop) > 0  # a stop earlier in the row
    return (~after).float()


def completion_logprobs(model: torch.nn.Module, prompt_ids: torch.Tensor, completion_ids: torch.Tensor) -> torch.Tensor:
    """(B, C) log-probabilities the model gives each completion token after its prompt and earlier tokens.

    ``model(ids)`` returns logits (B, T, V), or a tuple whose first item they are (the book's GPT).
    """
    for name, t in (("prompt_ids", prompt_ids), ("completion_ids", completion_ids)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.shape[1] == 0:
            raise ValueError(f"{name} must be a non-empty (B, length) tensor of token ids, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
    if prompt_ids.shape[0] != completion_ids.shape[0]:
        raise ValueError(f"prompt_ids ({prompt_ids.shape[0]} rows) and completion_ids ({completion_ids.shape[0]} "
                         "rows) must have one row per completion")
    P = prompt_ids.shape[1]
    out = model(torch.cat([prompt_ids, completion_ids], dim=1))  # (B, P + C)
    logits = out[0] if isinstance(out, tuple) else out  # (B, P + C, V)
    logp = logits[:, P - 1:-1].float().log_softmax(-1)  # (B, C, V): position t predicts token t + 1
    return logp.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)  # (B, C)


def _check_same(name: str, t: object, like: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.shape != like.shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)}, but logps has {tuple(like.shape)}: one value per "
                         "completion token")


class GRPOLoss(NamedTuple):
    loss: torch.Tensor           # scalar to minimise
    kl: torch.Tensor             # mean k3 KL over the completion tokens (0 when beta = 0), detached
    clip_fraction: torch.Tensor  # share of completion tokens whose ratio the clip holds back, detached


def grpo_loss(logps: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, old_logps: torch.Tensor | None = None,
              ref_logps: torch.Tensor | None = None, beta: float = 0.0, epsilon: float = 0.2,
              epsilon_high: float | None = None, loss_type: str = "grpo",
              max_completion_length: int | None = None) -> GRPOLoss:
    """GRPO's loss for a batch of completions.

    Per token: -min(ratio * A, clip(ratio, 1 - epsilon, 1 + epsilon_high) * A) + beta * k3 KL,
    ratio = exp(logp - old_logp); ``old_logps=None`` means on-policy (old = logps detached, so
    ratio = 1 but the gradient is that of logp). ``loss_type`` says how tokens are averaged:
    ``"grpo"``: mean over each completion's tokens, then over completions (the DeepSeekMath
    paper); ``"bnpo"`` and ``"dapo"``: mean over every token of the batch; ``"dr_grpo"``: sum
    over the batch divided by B * ``max_completion_length`` (default C), a constant, so long
    completions are not down-weighted.
    """
    if not isinstance(logps, torch.Tensor) or logps.dim() != 2 or not logps.is_floating_point():
        raise ValueError(f"logps must be a floating (B, C) tensor, got "
                         f"{tuple(logps.shape) if isinstance(logps, torch.Tensor) else type(logps).__name__}")
    if logps.numel() == 0:
        raise ValueError(f"logps is empty (shape {tuple(logps.shape)}): no completion token to learn from")
    _check_same("mask", mask, logps)
    if not isinstance(advantages, torch.Tensor) or advantages.shape != logps.shape[:1]:
        raise ValueError(f"advantages must be a (B,) tensor with B = {logps.shape[0]} (one per completion), got "
                         f"{tuple(advantages.shape) if isinstance(advantages, torch.Tensor) else type(advantages).__name__}")
    if advantages.device.type == "cpu" and not torch.isfinite(advantages).all():
        raise ValueError("advantages contain NaN or inf (check the rewards)")
    if old_logps is not None:
        _check_same("old_logps", old_logps, logps)
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 <= beta < math.inf:
        raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
    if beta > 0:
        if ref_logps is None:
            raise ValueError("ref_logps is needed when beta > 0 (the KL penalty is to the reference model)")
        _check_same("ref_logps", ref_logps, logps)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon < 1:
        raise ValueError(f"epsilon must be a number in (0, 1), got {epsilon!r}")
    eps_high = epsilon if epsilon_high is None else epsilon_high
    if isinstance(eps_high, bool) or not isinstance(eps_high, (int, float)) or not 0 < eps_high < math.inf:
        raise ValueError(f"epsilon_high must be None or a finite number > 0, got {epsilon_high!r}")
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    B, C = logps.shape
    L = C if max_completion_length is None else _int("max_completion_length", max_completion_length, 1)

    mask = mask.to(logps.dtype)
    old = logps.detach() if old_logps is None else old_logps
    A = advantages.to(logps.dtype).unsqueeze(1)  # (B, 1)
    ratio = torch.exp(logps - old)  # (B, C)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + eps_high)
    per_token = -torch.min(ratio * A, clipped * A)  # (B, C)
    kl = torch.zeros((), dtype=logps.dtype, device=logps.device)
    if beta > 0:
        per_token_kl = kl_k3(logps, ref_logps)
        per_token = per_token + beta * per_token_kl
        kl = (per_token_kl * mask).sum().detach() / mask.sum().clamp(min=1.0)

    if loss_type == "grpo":
        loss = ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)).mean()
    elif loss_type in ("bnpo", "dapo"):
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    else:  # dr_grpo
        loss = (per_token * mask).sum() / (B * L)
    held = ((ratio < 1 - epsilon) & (A < 0)) | ((ratio > 1 + eps_high) & (A > 0))
    clip_fraction = (held.to(mask.dtype) * mask).sum().detach() / mask.sum().clamp(min=1.0)
    return GRPOLoss(loss, kl, clip_fraction)
