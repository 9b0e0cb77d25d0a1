"""Post-training: supervised fine-tuning data (masked labels, padding, packing) and DPO.

Covers, for supervised fine-tuning (SFT, the step that turns a base model into an
instruction follower; Ouyang et al. 2022, *Training language models to follow
instructions with human feedback*): labels that are ``IGNORE_INDEX`` (-100) on the
prompt, the chat template's role markers and padding, so the loss is taken only on the
answer (``sft_example``, ``chat_segments``, ``segment_labels``); the shifted causal-LM
loss on such labels (``causal_lm_loss``); batching by padding (``pad_batch``) or by
packing examples end to end (``pack_examples``). For preference optimisation: the
per-sequence log-probability of the labelled tokens (``sequence_logprobs``), the DPO loss
(``dpo_loss``) derived from the Bradley-Terry model (``bradley_terry``) with a reference
policy (Rafailov et al. 2023, *Direct Preference Optimization: Your Language Model is
Secretly a Reward Model*), and the KL divergence to the reference (``token_kl``).

Leaves out: RLHF with a learned reward model and PPO (Schulman et al. 2017; the DPO paper
shows that its loss optimises the same KL-regularised objective without sampling or a
reward model), attention masks that stop packed examples from seeing each other
(packed sequences here attend across example boundaries, as in most pre-training
pipelines), and DPO variants (IPO, KTO, label smoothing).

Label convention: ``labels`` line up with ``input_ids`` (as in Hugging Face
transformers); ``causal_lm_loss`` shifts them, so position t predicts ``labels[t + 1]``.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import torch
import torch.nn.functional as F

__all__ = ["IGNORE_INDEX", "sft_example", "chat_segments", "segment_labels", "pad_batch", "pack_examples",
           "causal_lm_loss", "sequence_logprobs", "bradley_terry", "dpo_loss", "DPOLoss", "token_kl",
           "speaker_questions", "sft_batches", "sft_train", "dpo_train", "score_answers", "greedy_match",
           "greedy_answers"]

IGNORE_INDEX = -100  # cross_entropy's default ignore_index: positions that carry no loss


def _check_ids(name: str, ids: object, allow_empty: bool = False) -> list[int]:
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise ValueError(f"{name} must be a 1-D sequence of token ids, got shape {tuple(ids.shape)}")
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"{name} must be a list of int token ids, got {type(ids).__name__}")
    for bad in ids:
        if isinstance(bad, int) and not isinstance(bad, bool):
            continue
        raise TypeError(f"{name} must be a list of int token ids, got a {type(bad).__name__} ({bad!r}) in it")
    if not ids and not allow_empty:
        raise ValueError(f"{name} is empty")
    return list(ids)


def _check_labels(name: str, labels: torch.Tensor, vocab_size: int) -> None:
    """Labels are token ids (int64/int32) in [0, vocab_size) or IGNORE_INDEX: a float or uint8 tensor is refused."""
    from llmbook.device import check_index_range

    check_index_range(name, labels, vocab_size, ignore_index=IGNORE_INDEX)


def sft_example(prompt_ids: Sequence[int], answer_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one prompt-answer pair: the loss falls on the answer only.

    >>> sft_example([5, 6, 7], [8, 9])
    ([5, 6, 7, 8, 9], [-100, -100, -100, 8, 9])
    """
    prompt = _check_ids("prompt_ids", prompt_ids)
    answer = _check_ids("answer_ids", answer_ids)
    return prompt + answer, [IGNORE_INDEX] * len(prompt) + answer


def chat_segments(template: str, messages: list[dict[str, str]]) -> list[tuple[str, bool]]:
    """Cut a rendered chat into (text, is_answer) pieces with the chat template itself.

    Rendering the conversation up to each assistant turn with ``add_generation_prompt=True``
    and then with the turn shows which characters the assistant wrote. The answer piece
    ends with the template's end-of-turn marker (e.g. ``<|im_end|>``): training on it is
    how the model learns to stop. Everything else (system and user turns, role headers,
    the newline after an end-of-turn marker) is prompt.

    >>> t = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>\\n{% endfor %}"
    ...      "{% if add_generation_prompt %}<assistant>{% endif %}")
    >>> chat_segments(t, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    [('<user>hi</s>\\n<assistant>', False), ('yo</s>', True), ('\\n', False)]
    """
    from .llama import render_chat

    if not isinstance(messages, list) or not any(isinstance(m, dict) and m.get("role") == "assistant"
                                                 for m in messages):
        raise ValueError("messages must be a list of chat turns holding at least one assistant turn")
    full = render_chat(template, messages, add_generation_prompt=False)
    pieces: list[tuple[str, bool]] = []
    done = 0  # characters of `full` already assigned to a piece
    for k, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before = render_chat(template, messages[:k], add_generation_prompt=True)
        after = render_chat(template, messages[:k + 1], add_generation_prompt=False)
        if not full.startswith(before) or not full.startswith(after) or not after.startswith(before):
            raise ValueError("the chat template does not render a conversation as a prefix of its continuation; "
                             "its answers cannot be located")
        start = after.index(m["content"], len(before)) if m["content"] else len(before)
        end = len(after.rstrip())  # the trailing newline after the end-of-turn marker stays prompt
        if start > done:
            pieces.append((full[done:start], False))
        pieces.append((full[start:end], True))
        done = end
    if done < len(full):
        pieces.append((full[done:], False))
    return pieces


def segment_labels(encode: Callable[[str], list[int]], segments: list[tuple[str, bool]]) -> tuple[list[int], list[int]]:
    """Token ids and labels of (text, is_answer) pieces: each piece tokenised on its own.

    Pieces meet at the template's special markers, so tokenising them apart gives the
    same ids as tokenising the whole text (tests/test_sft.py checks it for SmolLM2).
    """
    if not callable(encode):
        raise TypeError(f"encode must be a function str -> list of ids, got {type(encode).__name__}")
    if not segments:
        raise ValueError("segments is empty")
    ids: list[int] = []
    labels: list[int] = []
    for text, is_answer in segments:
        piece = _check_ids("encode(text)", encode(text), allow_empty=True)
        ids += piece
        labels += piece if is_answer else [IGNORE_INDEX] * len(piece)
    return ids, labels


def pad_batch(examples: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int,
              device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad (input_ids, labels) pairs to the longest: ``(B, T_max)`` ids and labels.

    Padding comes after each example, so a causal model's earlier positions never see it;
    its labels are ``IGNORE_INDEX``.

    >>> pad_batch([([1, 2, 3], [-100, 2, 3]), ([4], [4])], pad_id=0)
    (tensor([[1, 2, 3],
            [4, 0, 0]]), tensor([[-100,    2,    3],
            [   4, -100, -100]]))
    """
    if not examples:
        raise ValueError("examples is empty")
    if isinstance(pad_id, bool) or not isinstance(pad_id, int) or pad_id < 0:
        raise ValueError(f"pad_id must be a non-negative int, got {pad_id!r}")
    T = 0
    for i, (ids, labels) in enumerate(examples):
        ids, labels = (_check_ids(f"examples[{i}] input_ids", ids, allow_empty=True),
                       _check_ids(f"examples[{i}] labels", labels, allow_empty=True))
        if len(ids) != len(labels):
            raise ValueError(f"examples[{i}]: input_ids ({len(ids)}) and labels ({len(labels)}) differ in length")
        T = max(T, len(ids))
    x = torch.full((len(examples), T), pad_id, dtype=torch.long)
    y = torch.full((len(examples), T), IGNORE_INDEX, dtype=torch.long)
    for i, (ids, labels) in enumerate(examples):
        x[i, :len(ids)] = torch.as_tensor(list(ids), dtype=torch.long)
        y[i, :len(labels)] = torch.as_tensor(list(labels), dtype=torch.long)
    return x.to(device), y.to(device)


def pack_examples(examples: Sequence[tuple[Sequence[int], Sequence[int]]], block_size: int,
                  pad_id: int = 0, device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate (input_ids, labels) pairs end to end and cut the stream into rows of ``block_size``.

    No position is wasted on padding (only the last row is padded), but an example may be
    cut between two rows and sees the examples before it in its row; the first label of
    a row is never a target of ``causal_lm_loss`` (nothing before it in the row predicts it).

    >>> pack_examples([([1, 2, 3], [-100, 2, 3]), ([4, 5], [-100, 5])], block_size=3)
    (tensor([[1, 2, 3],
            [4, 5, 0]]), tensor([[-100,    2,    3],
            [-100,    5, -100]]))
    """
    if not examples:
        raise ValueError("examples is empty")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 2:
        raise ValueError(f"block_size must be an int >= 2, got {block_size!r}")
    ids: list[int] = []
    labels: list[int] = []
    for i, (a, b) in enumerate(examples):
        if len(a) != len(b):
            raise ValueError(f"examples[{i}]: input_ids ({len(a)}) and labels ({len(b)}) differ in length")
        ids += list(a)
        labels += list(b)
    rows = [(ids[s:s + block_size], labels[s:s + block_size]) for s in range(0, len(ids), block_size)]
    return pad_batch(rows, pad_id, device)


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy: position t predicts ``labels[:, t + 1]``; ``IGNORE_INDEX`` skipped.

    ``reduction="mean"`` averages over the labelled tokens of the whole batch; ``"sum"``
    adds them up.
    """
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (B, T, V) and labels (B, T); got logits {tuple(logits.shape)} "
                         f"and labels {tuple(labels.shape)}")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
    V = logits.shape[-1]
    _check_labels("labels", labels, V)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V).float(), labels[:, 1:].reshape(-1),
                           ignore_index=IGNORE_INDEX, reduction=reduction)


def sequence_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log p(answer | prompt) per sequence: the sum of log-probabilities of the labelled tokens, (B,)."""
    if logits.dim() != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (B, T, V) and labels (B, T); got logits {tuple(logits.shape)} "
                         f"and labels {tuple(labels.shape)}")
    _check_labels("labels", labels, logits.shape[-1])
    targets = labels[:, 1:]                                          # (B, T-1)
    keep = targets != IGNORE_INDEX
    logp = logits[:, :-1].float().log_softmax(-1)                   # (B, T-1, V)
    picked = logp.gather(-1, targets.clamp_min(0).unsqueeze(-1)).squeeze(-1)  # (B, T-1)
    return torch.where(keep, picked, 0.0).sum(-1)  # not picked * keep: a -inf read off the answer would give NaN


def bradley_terry(reward_chosen: torch.Tensor, reward_rejected: torch.Tensor) -> torch.Tensor:
    """P(chosen preferred to rejected) = sigmoid(r_chosen - r_rejected) (Bradley and Terry 1952)."""
    return torch.sigmoid(reward_chosen - reward_rejected)


class DPOLoss(NamedTuple):
    loss: torch.Tensor              # scalar: mean over the pairs
    chosen_rewards: torch.Tensor    # (N,) beta * (log pi - log pi_ref) of the chosen answers, detached
    rejected_rewards: torch.Tensor  # (N,) the same for the rejected answers

    @property
    def margin(self) -> torch.Tensor:
        """Mean implicit-reward margin, chosen minus rejected."""
        return (self.chosen_rewards - self.rejected_rewards).mean()


def dpo_loss(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor,
             ref_chosen_logps: torch.Tensor, ref_rejected_logps: torch.Tensor, beta: float = 0.1) -> DPOLoss:
    """The DPO loss of N preference pairs from their sequence log-probabilities.

    The KL-regularised RL objective max E[r] - beta KL(pi || pi_ref) has the optimum
    pi(y|x) = pi_ref(y|x) exp(r(x, y) / beta) / Z(x), so r = beta log(pi / pi_ref) + beta log Z.
    Put into the Bradley-Terry model, Z cancels:
    loss = -log sigmoid(beta [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))]).

    >>> z = torch.zeros(2)
    >>> round(float(dpo_loss(z, z, z, z).loss), 4)   # policy = reference: -log sigmoid(0) = log 2
    0.6931
    """
    named = {"policy_chosen_logps": policy_chosen_logps, "policy_rejected_logps": policy_rejected_logps,
             "ref_chosen_logps": ref_chosen_logps, "ref_rejected_logps": ref_rejected_logps}
    for name, t in named.items():
        if not isinstance(t, torch.Tensor) or t.dim() != 1:
            raise ValueError(f"{name} must be a 1-D tensor (one log-probability per pair), "
                             f"got {tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        if t.numel() == 0:
            raise ValueError(f"{name} is empty: DPO needs at least one preference pair")
        if t.shape != policy_chosen_logps.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, policy_chosen_logps {tuple(policy_chosen_logps.shape)}: "
                             "every tensor holds one number per pair")
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta < float("inf"):
        raise ValueError(f"beta must be a finite number > 0, got {beta!r}")
    chosen = beta * (policy_chosen_logps - ref_chosen_logps)        # implicit rewards, up to beta log Z
    rejected = beta * (policy_rejected_logps - ref_rejected_logps)
    loss = -F.logsigmoid(chosen - rejected).mean()                  # = -log bradley_terry(chosen, rejected)
    return DPOLoss(loss, chosen.detach(), rejected.detach())


def token_kl(policy_logits: torch.Tensor, ref_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean KL(pi || pi_ref) of the next-token distributions at the labelled positions (nats per token)."""
    if policy_logits.shape != ref_logits.shape or policy_logits.dim() != 3 or labels.shape != policy_logits.shape[:2]:
        raise ValueError(f"policy_logits and ref_logits must both be (B, T, V) and labels (B, T); got "
                         f"{tuple(policy_logits.shape)}, {tuple(ref_logits.shape)}, {tuple(labels.shape)}")
    _check_labels("labels", labels, policy_logits.shape[-1])
    keep = labels[:, 1:] != IGNORE_INDEX                            # (B, T-1): positions that predict an answer token
    lp = policy_logits[:, :-1].float().log_softmax(-1)
    lq = ref_logits[:, :-1].float().log_softmax(-1)
    kl = (lp.exp() * (lp - lq)).sum(-1)                             # (B, T-1)
    return (kl * keep).sum() / keep.sum().clamp_min(1)


# ---------------------------------------------------------------- chapter 9's small instruction set and loops

def speaker_questions(part: str, speakers: Sequence[str], max_chars: int = 34,
                      min_chars: int = 12) -> list[tuple[str, str]]:
    r"""("Who says: <line>?\n", SPEAKER) pairs from the speeches of one part of ``load_splits("shakespeare")``.

    Every line of at least ``min_chars`` characters of a speech by one of ``speakers``
    becomes a question (cut at a word boundary to at most ``max_chars``). Taking each part
    of ``load_splits`` apart keeps held-out questions out of training (and out of the base
    model's pre-training text).

    >>> speaker_questions("HAMLET:\nTo be, or not to be: that is the question:\n\nOPHELIA:\nGood my lord,", ["HAMLET"])
    [('Who says: To be, or not to be: that is the?\n', 'HAMLET')]
    """
    if not isinstance(part, str):
        raise TypeError(f"part must be a str (a part of load_splits), got {type(part).__name__}")
    if not speakers or not all(isinstance(x, str) and x for x in speakers):
        raise ValueError(f"speakers must be a non-empty list of names, got {speakers!r}")
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < min_chars:
        raise ValueError(f"max_chars must be an int >= min_chars={min_chars}, got {max_chars!r}")
    wanted = set(speakers)
    out = []
    for speech in part.rstrip("\n").split("\n\n"):
        who, _, text = speech.partition(":\n")
        if who not in wanted:
            continue
        for line in text.split("\n"):
            line = line.strip()
            if len(line) < min_chars:
                continue
            if len(line) > max_chars:
                line = line[:max_chars + 1].rsplit(" ", 1)[0]
            out.append((f"Who says: {line}?\n", who))
    return out


def sft_batches(examples: Sequence[tuple[Sequence[int], Sequence[int]]], steps: int, batch_size: int = 16,
                seed: int = 0, pack_block: int | None = None):
    """The (input_ids, labels) batches of ``sft_train``: ``steps`` random draws of ``batch_size`` examples.

    The draws depend only on ``seed``, so runs that differ in anything else see the same
    examples in the same order. Each draw is padded (``pad_batch``, one example per row) or,
    with ``pack_block``, packed end to end into rows of that many tokens (``pack_examples``).
    Yields CPU tensors.
    """
    if not examples:
        raise ValueError("examples is empty")
    for name, v in (("steps", steps), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if pack_block is not None and (isinstance(pack_block, bool) or not isinstance(pack_block, int) or pack_block < 2):
        raise ValueError(f"pack_block must be None (pad) or an int >= 2, got {pack_block!r}")
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        pick = [examples[i] for i in torch.randint(len(examples), (batch_size,), generator=g).tolist()]
        yield pad_batch(pick, 0) if pack_block is None else pack_examples(pick, pack_block)


def sft_train(model: torch.nn.Module, examples: Sequence[tuple[Sequence[int], Sequence[int]]], steps: int,
              lr: float, batch_size: int = 16, seed: int = 0, min_lr: float | None = None,
              pack_block: int | None = None) -> list[float]:
    """AdamW on ``causal_lm_loss`` of random batches of (input_ids, labels); trains what requires grad.

    Returns the loss of every step. The batches come from ``sft_batches`` (padded, or packed
    into rows of ``pack_block`` tokens) and depend only on ``seed``. The learning rate is
    ``lr`` throughout, or, with ``min_lr``, a cosine from ``lr`` down to ``min_lr`` at the last step.
    """
    if not examples:
        raise ValueError("examples is empty")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < float("inf"):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if min_lr is not None and (isinstance(min_lr, bool) or not isinstance(min_lr, (int, float)) or not 0 <= min_lr <= lr):
        raise ValueError(f"min_lr must be None or a number in [0, lr], got {min_lr!r}")
    batches = sft_batches(examples, steps, batch_size, seed, pack_block)  # checks steps, batch_size, pack_block
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no parameter that requires grad")
    device = params[0].device
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for step, (x, y) in enumerate(batches):
        if min_lr is not None:  # cosine decay: lr at step 0, min_lr at the last step
            for group in opt.param_groups:
                group["lr"] = min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * step / max(1, steps - 1)))
        loss = causal_lm_loss(model(x.to(device))[0], y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    model.eval()
    return [float(v) for v in losses]  # one host sync, after training


def _pair_logps(model: torch.nn.Module, chosen: torch.Tensor, rejected: torch.Tensor,
                yc: torch.Tensor, yr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return sequence_logprobs(model(chosen)[0], yc), sequence_logprobs(model(rejected)[0], yr)


def dpo_train(policy: torch.nn.Module, reference: torch.nn.Module,
              pairs: Sequence[tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]],
              steps: int, lr: float, beta: float = 0.1, batch_size: int = 16, seed: int = 0) -> list[float]:
    """DPO on (chosen example, rejected example) pairs, each an (input_ids, labels) pair; ``reference`` stays frozen."""
    if not pairs:
        raise ValueError("pairs is empty: DPO needs at least one preference pair")
    for name, v in (("steps", steps), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v in (("lr", lr), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    params = [p for p in policy.parameters() if p.requires_grad]
    if not params:
        raise ValueError("policy has no parameter that requires grad")
    device = params[0].device
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    reference.eval()
    policy.train()
    losses = []
    for _ in range(steps):
        pick = torch.randint(len(pairs), (batch_size,), generator=g).tolist()
        xc, yc = pad_batch([pairs[i][0] for i in pick], 0, device)
        xr, yr = pad_batch([pairs[i][1] for i in pick], 0, device)
        with torch.no_grad():
            rc, rr = _pair_logps(reference, xc, xr, yc, yr)
        pc, pr = _pair_logps(policy, xc, xr, yc, yr)
        loss = dpo_loss(pc, pr, rc, rr, beta=beta).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    policy.eval()
    return [float(v) for v in losses]


@torch.no_grad()
def score_answers(model: torch.nn.Module, encode: Callable[[str], list[int]], prompts: Sequence[str],
                  candidates: Sequence[str], batch_size: int = 256) -> torch.Tensor:
    """log p(candidate | prompt) for every prompt and candidate answer: a (len(prompts), len(candidates)) tensor.

    The model's choice among the candidates is the row's argmax: a multiple-choice reading
    of a generative model that needs no sampling.
    """
    if not prompts or not candidates:
        raise ValueError("prompts and candidates must both be non-empty")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    examples = [sft_example(encode(p), encode(c)) for p in prompts for c in candidates]
    out = []
    for s in range(0, len(examples), batch_size):
        x, y = pad_batch(examples[s:s + batch_size], 0, device)
        out.append(sequence_logprobs(model(x)[0], y))
    model.train(was_training)
    return torch.cat(out).view(len(prompts), len(candidates))


@torch.no_grad()
def greedy_match(model: torch.nn.Module, encode: Callable[[str], list[int]], prompts: Sequence[str],
                 answers: Sequence[str], batch_size: int = 256) -> torch.Tensor:
    """Would greedy decoding after each prompt write exactly its answer? A (len(prompts),) bool tensor.

    Greedy decoding writes ``answer`` if and only if, with the answer's own characters fed in
    (teacher forcing), the most likely next token is the answer's next token at every position.
    So one batched forward pass per ``batch_size`` questions replaces a token-by-token
    generation (an exact tie between two most likely tokens aside). Include the stop token in
    ``answers`` (e.g. ``"word\\n"``) to require that the model also stops there.
    """
    if not prompts or len(prompts) != len(answers):
        raise ValueError(f"prompts and answers must be non-empty and of the same length, got {len(prompts)} and {len(answers)}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    examples = [sft_example(encode(p), encode(a)) for p, a in zip(prompts, answers)]
    out = []
    for s in range(0, len(examples), batch_size):
        x, y = pad_batch(examples[s:s + batch_size], 0, device)
        target = y[:, 1:]                                            # position t predicts token t + 1
        hit = (model(x)[0][:, :-1].argmax(-1) == target) | (target == IGNORE_INDEX)
        out.append(hit.all(1).cpu())
    model.train(was_training)
    return torch.cat(out)


@torch.no_grad()
def greedy_answers(model: torch.nn.Module, encode: Callable[[str], list[int]], decode: Callable[[list[int]], str],
                   prompts: Sequence[str], max_new: int = 16, stop: str = "\n") -> list[str]:
    """The greedy reply to each prompt, cut at the first ``stop`` (at most ``max_new`` tokens).

    Prompts of equal length are generated together, one batch per length, with the model's
    own ``generate(ids, max_new, temperature=0)`` (the book's GPT; it keeps a key-value cache).
    """
    if not prompts:
        raise ValueError("prompts is empty")
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise ValueError(f"max_new must be an int >= 1, got {max_new!r}")
    ids = [encode(p) for p in prompts]
    by_len: dict[int, list[int]] = {}
    for i, x in enumerate(ids):
        by_len.setdefault(len(x), []).append(i)
    out: list[str] = [""] * len(prompts)
    for n, rows in by_len.items():
        new = model.generate(torch.tensor([ids[i] for i in rows]), max_new, temperature=0)[:, n:].tolist()
        for i, row in zip(rows, new):
            text = decode(row)
            out[i] = text.split(stop)[0] if stop else text
    return out
