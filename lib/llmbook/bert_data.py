"""BERT's pre-training data: masked tokens (MLM), sentence pairs (NSP) and their batches.

The model is :mod:`llmbook.bert`; fine-tuning is :mod:`llmbook.bert_finetune`. Every name
here is importable from ``llmbook.bert`` too, as before the split.

* ``mask_tokens``: choose 15% of the non-special tokens; of those 80% become [MASK], 10% a
  random token, 10% stay; labels ``IGNORE_INDEX`` (-100) elsewhere (Devlin et al. 2019,
  section 3.1).
* ``speeches`` and ``make_nsp_pairs``: documents as lists of sentences; 50% real next
  sentences, 50% a sentence from another document (``NSPPair``).
* ``batch_encode`` (sentences or pairs, padded), ``special_ids``, ``pretraining_batch``
  (both tasks in one batch) and ``pretraining_accuracy`` (MLM and NSP accuracy on a batch).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import torch

from llmbook.bert import IGNORE_INDEX, BertForPreTraining, _check_ids
from llmbook.device import model_device

__all__ = ["mask_tokens", "NSPPair", "speeches", "make_nsp_pairs", "batch_encode", "special_ids", "pretraining_batch",
           "pretraining_accuracy"]


# ---------------------------------------------------------------------------- data
def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Iterable[int],
    mlm_probability: float = 0.15,
    mask_fraction: float = 0.8,
    random_fraction: float = 0.1,
    generator: Optional[torch.Generator] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM corruption: returns ``(corrupted_ids, labels)``.

    Each token whose id is not in ``special_ids`` ([CLS], [SEP], [PAD], ...) is chosen
    with probability ``mlm_probability``. A chosen token becomes [MASK] with probability
    ``mask_fraction``, a random non-special token with ``random_fraction``, and stays
    itself otherwise; its label is its original id. Every other label is -100.

    >>> ids = torch.tensor([[1, 5, 6, 7, 8, 2]])            # 1 = [CLS], 2 = [SEP]
    >>> x, y = mask_tokens(ids, mask_id=3, vocab_size=10, special_ids=[0, 1, 2, 3],
    ...                    mlm_probability=1.0, mask_fraction=1.0, random_fraction=0.0)
    >>> x.tolist(), y.tolist()
    ([[1, 3, 3, 3, 3, 2]], [[-100, 5, 6, 7, 8, -100]])
    """
    _check_ids("input_ids", input_ids)
    for name, p in (("mlm_probability", mlm_probability), ("mask_fraction", mask_fraction), ("random_fraction", random_fraction)):
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
    if mask_fraction + random_fraction > 1.0 + 1e-9:
        raise ValueError(f"mask_fraction + random_fraction must be <= 1, got {mask_fraction + random_fraction}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    if isinstance(mask_id, bool) or not isinstance(mask_id, int) or not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id must be an id in [0, vocab_size), got {mask_id!r}")
    special = torch.tensor(sorted(set(int(i) for i in special_ids)), dtype=torch.long)
    allowed = torch.ones(vocab_size, dtype=torch.bool)
    allowed[special[(special >= 0) & (special < vocab_size)]] = False
    replacements = allowed.nonzero().squeeze(1)  # ids a random replacement may take
    if replacements.numel() == 0:
        raise ValueError("special_ids cover the whole vocabulary; nothing can be masked")
    ids = input_ids.long()
    device = ids.device
    g = generator
    # Random numbers are drawn where the generator lives (a CPU generator gives the same
    # masks whatever device the ids are on), then moved to the ids.
    rdev = g.device if g is not None else device
    candidates = ~torch.isin(ids, special.to(device))  # (B, T) True = may be chosen
    chosen = (torch.rand(ids.shape, generator=g, device=rdev).to(device) < mlm_probability) & candidates
    # One uniform draw per token splits the chosen ones 80 / 10 / 10.
    u = torch.rand(ids.shape, generator=g, device=rdev).to(device)
    to_mask = chosen & (u < mask_fraction)
    to_random = chosen & (u >= mask_fraction) & (u < mask_fraction + random_fraction)
    random_ids = replacements.to(device)[torch.randint(len(replacements), ids.shape, generator=g, device=rdev).to(device)]
    corrupted = ids.clone()
    corrupted[to_mask] = mask_id
    corrupted[to_random] = random_ids[to_random]
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    return corrupted, labels


@dataclass(frozen=True)
class NSPPair:
    """One next-sentence example; ``where_a``/``where_b`` are (document, sentence) indices."""

    a: str
    b: str
    is_next: int  # 1 = b really follows a (IsNext), 0 = b is a random sentence (NotNext)
    where_a: tuple[int, int]
    where_b: tuple[int, int]


def speeches(text: str, min_lines: int = 2) -> list[list[str]]:
    """Split ``load_text('shakespeare')`` into documents: one speech = a list of its lines.

    The speaker line (``NAME:``) is dropped; speeches with fewer than ``min_lines``
    lines cannot provide a next sentence and are skipped.

    >>> speeches("A:\\nTo be, or not to be,\\nthat is the question.\\n\\nB:\\nAy.\\n")
    [['To be, or not to be,', 'that is the question.']]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if isinstance(min_lines, bool) or not isinstance(min_lines, int) or min_lines < 1:
        raise ValueError(f"min_lines must be a positive int, got {min_lines!r}")
    docs = []
    for block in text.split("\n\n"):
        lines = [ln.strip() for ln in block.strip().split("\n") if ln.strip()]
        if lines and lines[0].endswith(":"):
            lines = lines[1:]
        if len(lines) >= min_lines:
            docs.append(lines)
    return docs


def make_nsp_pairs(documents: Sequence[Sequence[str]], n_pairs: int, seed: int = 0, p_next: float = 0.5) -> list[NSPPair]:
    """Next-sentence pairs: sentence a, then with probability ``p_next`` the sentence that
    follows it in its document, else a random sentence from another document.

    >>> docs = [["a0", "a1"], ["b0", "b1"], ["c0", "c1"]]
    >>> pairs = make_nsp_pairs(docs, 200, seed=0)
    >>> all(p.b == docs[p.where_a[0]][p.where_a[1] + 1] for p in pairs if p.is_next)
    True
    >>> all(p.where_b[0] != p.where_a[0] for p in pairs if not p.is_next)
    True
    """
    if not isinstance(documents, (list, tuple)) or not all(isinstance(d, (list, tuple)) for d in documents):
        raise TypeError("documents must be a list of lists of sentences")
    usable = [i for i, d in enumerate(documents) if len(d) >= 2]
    if len(usable) < 1 or len(documents) < 2:
        raise ValueError("documents must hold at least two documents, one of them with two or more sentences")
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, int) or n_pairs < 1:
        raise ValueError(f"n_pairs must be a positive int, got {n_pairs!r}")
    if not 0.0 <= p_next <= 1.0:
        raise ValueError(f"p_next must be in [0, 1], got {p_next!r}")
    rng = random.Random(seed)
    nonempty = [i for i, d in enumerate(documents) if len(d) >= 1]
    out = []
    for _ in range(n_pairs):
        d = rng.choice(usable)
        i = rng.randrange(len(documents[d]) - 1)
        if rng.random() < p_next:
            out.append(NSPPair(documents[d][i], documents[d][i + 1], 1, (d, i), (d, i + 1)))
        else:
            d2 = d
            while d2 == d:  # another document: a random sentence of the same one could be the next
                d2 = rng.choice(nonempty)
            j = rng.randrange(len(documents[d2]))
            out.append(NSPPair(documents[d][i], documents[d2][j], 0, (d, i), (d2, j)))
    return out


# ---------------------------------------------------------------------------- batches
def batch_encode(tokenizer, texts_a: Sequence[str], texts_b: Optional[Sequence[str]] = None, max_len: int = 64) -> dict[str, torch.Tensor]:
    """Encode sentences (or sentence pairs) with a WordPiece tokenizer's ``encode_pair`` and pad.

    Returns ``input_ids``, ``token_type_ids``, ``attention_mask`` (1 = real token), all (B, T)
    with T the longest encoded length (at most ``max_len``; longer inputs are truncated,
    longest sentence first, as BERT does).
    """
    if isinstance(texts_a, str) or not isinstance(texts_a, Sequence) or len(texts_a) == 0:
        raise ValueError("texts_a must be a non-empty list of str")
    if texts_b is not None and (isinstance(texts_b, str) or len(texts_b) != len(texts_a)):
        raise ValueError(f"texts_b must be a list as long as texts_a ({len(texts_a)})")
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 3:
        raise ValueError(f"max_len must be an int >= 3, got {max_len!r}")
    encoded = [tokenizer.encode_pair(a, None if texts_b is None else texts_b[i], max_len=max_len) for i, a in enumerate(texts_a)]
    T = max(len(ids) for ids, _ in encoded)
    pad = tokenizer.token_to_id[tokenizer.pad_token]
    input_ids = torch.full((len(encoded), T), pad, dtype=torch.long)
    segments = torch.zeros((len(encoded), T), dtype=torch.long)
    mask = torch.zeros((len(encoded), T), dtype=torch.long)
    for i, (ids, seg) in enumerate(encoded):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        segments[i, : len(seg)] = torch.tensor(seg)
        mask[i, : len(ids)] = 1
    return {"input_ids": input_ids, "token_type_ids": segments, "attention_mask": mask}


def special_ids(tokenizer) -> list[int]:
    """Ids that masking must never choose: [PAD], [UNK], [CLS], [SEP], [MASK] (those present)."""
    t2i = tokenizer.token_to_id
    names = (tokenizer.pad_token, tokenizer.unk_token, tokenizer.cls_token, tokenizer.sep_token, tokenizer.mask_token)
    return sorted({t2i[n] for n in names if n in t2i} | {i for i, p in enumerate(tokenizer.vocab) if p.startswith("[unused")})


def pretraining_batch(tokenizer, pairs: Sequence[NSPPair], max_len: int = 48, generator: Optional[torch.Generator] = None) -> dict[str, torch.Tensor]:
    """A masked-LM + NSP batch from ``make_nsp_pairs`` output: encoded, padded, masked.

    Keys: ``input_ids`` (corrupted), ``token_type_ids``, ``attention_mask``,
    ``mlm_labels`` (-100 where not predicted) and ``nsp_labels`` (1 = IsNext).
    """
    batch = batch_encode(tokenizer, [p.a for p in pairs], [p.b for p in pairs], max_len=max_len)
    corrupted, labels = mask_tokens(
        batch["input_ids"], mask_id=tokenizer.token_to_id[tokenizer.mask_token], vocab_size=len(tokenizer.vocab),
        special_ids=special_ids(tokenizer), generator=generator,
    )
    batch["input_ids"], batch["mlm_labels"] = corrupted, labels
    batch["nsp_labels"] = torch.tensor([p.is_next for p in pairs], dtype=torch.long)
    return batch


@torch.no_grad()
def pretraining_accuracy(model: BertForPreTraining, batch: dict[str, torch.Tensor]) -> tuple[float, float]:
    """(masked-token accuracy, NSP accuracy) of ``model`` on a ``pretraining_batch``."""
    was_training = model.training
    model.eval()
    dev = model_device(model)
    batch = {k: v.to(dev) for k, v in batch.items()}  # a batch built on the CPU follows the model
    out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])  # mlm_logits (B, T, V)
    labels = batch["mlm_labels"]
    picked = labels != IGNORE_INDEX  # (B, T); counted with sums, not selected, so no data-dependent shape
    hits = ((out.mlm_logits.argmax(-1) == labels) & picked).sum()
    mlm_acc = (hits / picked.sum()).item()  # NaN if nothing is masked, as a mean over no tokens is
    nsp_acc = (out.nsp_logits.argmax(-1) == batch["nsp_labels"]).float().mean().item()
    model.train(was_training)
    return mlm_acc, nsp_acc
