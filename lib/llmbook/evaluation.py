"""Evaluation beyond loss: multiple-choice scoring by log-likelihood, and bits per byte.

Multiple-choice benchmarks such as HellaSwag (Zellers et al. 2019) are scored without
generating anything: the model reads the context, and each candidate continuation gets the
log-probability the model assigns to its tokens,

    log p(c | x) = sum_i log p(c_i | x, c_<i).

The answer is the candidate with the highest score. Raw sums favour short candidates (every
token multiplies in a probability below one), so harnesses normalise: per token (divide by
the candidate's token count) or per byte (by its UTF-8 length; EleutherAI's
lm-evaluation-harness reports this as ``acc_norm`` for HellaSwag, dividing by characters).
Per-byte scores do not depend on the tokenizer, which matters when models with different
vocabularies are compared.

LAMBADA (Paperno et al. 2016) uses the same log-likelihood but has no candidates: the
harness scores the one final word of each passage (``output_type: loglikelihood`` in its
``lambada_openai.yaml``) and reports its perplexity and ``acc``, whether that word is the
model's greedy continuation. This module covers the multiple-choice case only.

For the same reason loss per token cannot compare a character model with a BPE model: a
token is a different amount of text. **Bits per byte** can: the total negative
log-likelihood of a text in bits, divided by its length in UTF-8 bytes.

The scoring functions take a ``score(context, continuation) -> (log-prob, n_tokens)``
callable, so any model fits; ``llama_scorer`` and ``char_gpt_scorer`` build one for the
book's LLaMA (SmolLM2) and for the chapter-6 character GPT. ``book_items`` gives the book's
own small item sets, in two versions: the first written with some right answers longer than
their distractors, and a length-balanced one (see its docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

__all__ = ["MCItem", "NORMALISATIONS", "book_items", "choose", "mc_accuracy", "bits_per_byte", "llama_scorer",
           "char_gpt_scorer", "text_nll"]

NORMALISATIONS = ("sum", "per_token", "per_byte")
Scorer = Callable[[str, str], tuple[float, int]]


@dataclass(frozen=True)
class MCItem:
    """One multiple-choice item: a context, candidate continuations and the right one's index."""

    context: str
    choices: tuple[str, ...]
    answer: int
    lang: str = "en"

    def __post_init__(self):
        if not isinstance(self.context, str) or not self.context:
            raise ValueError("context must be a non-empty str")
        if len(self.choices) < 2 or not all(isinstance(c, str) and c for c in self.choices):
            raise ValueError("choices must be at least two non-empty strs")
        if isinstance(self.answer, bool) or not isinstance(self.answer, int) or not 0 <= self.answer < len(self.choices):
            raise ValueError(f"answer must be an index into choices (0..{len(self.choices) - 1}), got {self.answer!r}")


def _normalise(logprob: float, n_tokens: int, text: str, how: str) -> float:
    if how == "sum":
        return logprob
    if how == "per_token":
        return logprob / n_tokens
    return logprob / len(text.encode("utf-8"))


def choose(item: MCItem, score: Scorer, normalisation: str = "sum") -> int:
    """Index of the candidate with the highest (normalised) log-likelihood."""
    if normalisation not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}")
    values = []
    for c in item.choices:
        lp, n = score(item.context, c)
        if n < 1:
            raise ValueError(f"the scorer returned {n} tokens for the choice {c!r}; each choice needs at least one")
        values.append(_normalise(lp, n, c, normalisation))
    return max(range(len(values)), key=values.__getitem__)


def mc_accuracy(items: Sequence[MCItem], score: Scorer, normalisation: str = "sum") -> float:
    """Fraction of ``items`` whose highest-scoring choice is the right one."""
    if not items:
        raise ValueError("items is empty")
    return sum(choose(it, score, normalisation) == it.answer for it in items) / len(items)


def bits_per_byte(nll_nats: float, text: str) -> float:
    """Total negative log-likelihood (nats) of ``text`` -> bits per UTF-8 byte."""
    n = len(text.encode("utf-8"))
    if n == 0:
        raise ValueError("text is empty")
    return nll_nats / math.log(2) / n


def _continuation_logprob(logits: torch.Tensor, ids: list[int], start: int) -> float:
    """Sum of log p(ids[t] | ids[:t]) for t >= start, from logits (T, V) of the whole sequence."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    targets = torch.tensor(ids[start:], device=logits.device)
    return float(logp[start - 1:len(ids) - 1].gather(1, targets[:, None]).sum())


def llama_scorer(model, tokenizer) -> Scorer:
    """A scorer for the book's ``Llama`` with a Hugging Face tokenizer (SmolLM2).

    The context and the continuation are encoded together and the continuation's tokens are
    those after the context's own encoding, so a space that starts the continuation joins its
    first word as the tokenizer would (as lm-evaluation-harness does).
    """
    device = next(model.parameters()).device

    @torch.no_grad()
    def score(context: str, continuation: str) -> tuple[float, int]:
        ctx = tokenizer.encode(context)
        ids = tokenizer.encode(context + continuation)
        start = len(ctx)
        if ids[:start] != ctx:  # the boundary token merged: score from the first differing token
            start = next(i for i, (a, b) in enumerate(zip(ids, ctx)) if a != b)
        if start == 0 or start >= len(ids):
            raise ValueError(f"cannot split {context!r} + {continuation!r} into context and continuation tokens")
        logits = model(torch.tensor([ids], device=device))[0]
        return _continuation_logprob(logits, ids, start), len(ids) - start

    return score


def char_gpt_scorer(model, vocab) -> Scorer:
    """A scorer for the chapter-6 character GPT (one token per character; last block_size only)."""
    device = next(model.parameters()).device
    block = model.config.block_size

    @torch.no_grad()
    def score(context: str, continuation: str) -> tuple[float, int]:
        ids = vocab.encode(context + continuation)
        keep = ids[-block:]
        start = len(keep) - len(continuation)
        if start < 1:
            raise ValueError(f"continuation {continuation!r} is longer than the model's context ({block - 1})")
        logits = model(torch.tensor([keep], device=device))[0][0]
        return _continuation_logprob(logits, keep, start), len(continuation)

    return score


@torch.no_grad()
def text_nll(logits_fn: Callable[[torch.Tensor], torch.Tensor], ids: Sequence[int], window: int,
             device: torch.device | str | None = None) -> tuple[float, int]:
    """Total negative log-likelihood (nats) of ``ids[1:]`` given what precedes, in windows.

    The text is cut into consecutive windows of ``window`` tokens; each window is scored with
    its own first token as the only context (the simple, slightly pessimistic protocol; a
    sliding window would give every token more context). Returns (nats, tokens scored).
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise ValueError(f"window must be an int >= 2, got {window!r}")
    ids = list(ids)
    if len(ids) < 2:
        raise ValueError("ids must hold at least 2 tokens")
    total, count = 0.0, 0
    for s in range(0, len(ids) - 1, window - 1):
        chunk = ids[s:s + window]
        if len(chunk) < 2:
            break
        logits = logits_fn(torch.tensor([chunk], device=device))[0]
        total -= _continuation_logprob(logits, chunk, 1)
        count += len(chunk) - 1
    return total, count


# ----------------------------------------------------------------------------- the book's items
# Written for this book (not taken from any benchmark): everyday completions with one right
# continuation and three that a reader rejects at once. The right one is listed first here and
# moved to a fixed pseudo-random place by ``book_items``. In this first set the lengths were not
# controlled: several right answers are longer than every wrong one (chapter 8d counts them), which
# favours per-token scoring by how the items were written; the balanced set below removes that.
_EN = [
    ("She poured the milk into a tall", [" glass.", " mountain.", " argument.", " Tuesday."]),
    ("To open the locked door, he needed the", [" key.", " weather.", " soup.", " alphabet."]),
    ("The sun rises in the east and sets in the", [" west.", " kitchen.", " morning.", " bottle."]),
    ("After running the marathon, she was very", [" tired.", " purple.", " square.", " wooden."]),
    ("He put on his coat because it was", [" cold outside.", " a triangle.", " made of cheese.", " very loud."]),
    ("The children built a snowman in the", [" garden after the heavy snowfall.", " oven.", " sky.", " clock."]),
    ("Water boils at one hundred degrees", [" Celsius.", " tall.", " hungry.", " quickly."]),
    ("Birds can fly because they have", [" wings.", " wheels.", " roots.", " pockets."]),
    ("To read in the dark, she turned on the", [" lamp.", " river.", " bread.", " horse."]),
    ("The capital of France is", [" Paris.", " Berlin.", " a fish.", " blue."]),
    ("A week has seven", [" days.", " wheels.", " oceans.", " letters."]),
    ("He was thirsty, so he drank a glass of", [" cold water from the tap.", " sand.", " noise.", " paper."]),
    ("The doctor told the patient to take the", [" medicine twice a day with food.", " elephant.", " moon.", " chair."]),
    ("Ice melts when it gets", [" warm.", " sad.", " heavy.", " loud."]),
    ("She wrote the letter with a", [" pen.", " spoon.", " cloud.", " shoe."]),
    ("The cat climbed the tree to catch the", [" bird that was singing on a branch.", " ocean.", " song.", " Monday."]),
]
_ZH = [
    ("天气很冷，他穿上了", ["厚厚的大衣。", "游泳衣。", "一本书。", "月亮。"]),
    ("我渴了，想喝一杯", ["水。", "石头。", "桌子。", "电视。"]),
    ("中国的首都是", ["北京。", "巴黎。", "苹果。", "星期一。"]),
    ("太阳从东方升起，从", ["西方落下。", "厨房落下。", "书包落下。", "早上落下。"]),
    ("下雨了，出门要带", ["雨伞。", "冰箱。", "钢琴。", "太阳。"]),
    ("他饿了，所以去餐厅吃", ["一碗热腾腾的面条。", "铅笔。", "云。", "椅子。"]),
    ("一年有十二个", ["月。", "轮子。", "海洋。", "鼻子。"]),
    ("医生让病人按时", ["吃药。", "吃石头。", "唱歌。", "开飞机。"]),
    ("鱼生活在", ["水里。", "天上。", "火里。", "书里。"]),
    ("晚上天黑了，我打开了", ["灯。", "河。", "面包。", "马。"]),
    ("学生们在教室里认真地", ["听老师讲课。", "游泳。", "种树。", "开车。"]),
    ("冬天到了，地上铺满了白白的", ["雪。", "沙子。", "米饭。", "纸。"]),
    ("他用钥匙打开了", ["门。", "天空。", "歌声。", "汤。"]),
    ("妈妈在厨房里做", ["晚饭。", "飞机。", "作业本。", "太阳。"]),
    ("春天来了，花园里的花都", ["开了。", "冻住了。", "飞走了。", "哭了。"]),
    ("他每天早上七点", ["起床。", "下雪。", "结婚。", "变成鱼。"]),
]


# The length-balanced set: the same contexts, with choices rewritten so that the right answer is
# the longest choice (in UTF-8 bytes) in 4 items, the shortest in 4 and neither in 8, the shares
# a random choice would have. Neither the raw sum nor a per-length score is favoured by construction.
_EN_BALANCED = [
    ("She poured the milk into a tall", [" glass.", " idea.", " Monday.", " song."]),
    ("To open the locked door, he needed the", [" key.", " weather.", " soup.", " alphabet."]),
    ("The sun rises in the east and sets in the", [" west.", " kitchen.", " morning.", " bottle."]),
    ("After running the marathon, she was very", [" tired.", " blue.", " square.", " wooden."]),
    ("He put on his coat because it was", [" cold outside.", " a triangle.", " made of cheese.", " very loud."]),
    ("The children built a snowman in the", [" garden.", " oven.", " ceiling.", " soup."]),
    ("Water boils at one hundred degrees", [" Celsius.", " tall.", " hungry.", " slow."]),
    ("Birds can fly because they have", [" wings.", " wheels.", " roots.", " pockets."]),
    ("To read in the dark, she turned on the", [" lamp.", " river.", " bread.", " cat."]),
    ("The capital of France is", [" Paris.", " Berlin.", " a fish.", " blue."]),
    ("A week has seven", [" days.", " wheels.", " oceans.", " letters."]),
    ("He was thirsty, so he drank a glass of", [" cold water.", " sand.", " noise.", " paper."]),
    ("The doctor told the patient to take the", [" medicine.", " piano.", " moon.", " chair."]),
    ("Ice melts when it gets", [" warm.", " sad.", " heavy.", " loud."]),
    ("She wrote the letter with a", [" pen.", " spoon.", " cloud.", " shoe."]),
    ("The cat climbed the tree to catch the", [" little bird.", " ocean.", " song.", " Monday."]),
]
_ZH_BALANCED = [
    ("天气很冷，他穿上了", ["大衣。", "游泳衣。", "一本书。", "月亮。"]),
    ("我渴了，想喝一杯", ["水。", "石头。", "桌子。", "电视。"]),
    ("中国的首都是", ["北京市。", "巴黎。", "苹果。", "书。"]),
    ("太阳从东方升起，从", ["西方落下。", "厨房落下。", "书包落下。", "早上落下。"]),
    ("下雨了，出门要带", ["雨伞。", "冰箱。", "钢琴。", "太阳。"]),
    ("他饿了，所以去餐厅吃", ["一碗面条。", "铅笔。", "云。", "椅子。"]),
    ("一年有十二个", ["月。", "轮子。", "海洋。", "鼻子。"]),
    ("医生让病人按时", ["吃药。", "吃石头。", "唱歌。", "开飞机。"]),
    ("鱼生活在", ["水里。", "天空上。", "火堆里。", "书包里。"]),
    ("晚上天黑了，我打开了", ["灯。", "河。", "面包。", "马。"]),
    ("学生们在教室里认真地", ["听老师讲课。", "游泳。", "种树。", "开车。"]),
    ("冬天到了，地上铺满了白白的", ["雪。", "沙子。", "米饭。", "纸。"]),
    ("他用钥匙打开了", ["大门。", "天。", "歌。", "汤。"]),
    ("妈妈在厨房里做", ["饭。", "飞机。", "作业本。", "太阳。"]),
    ("春天来了，花园里的花都", ["开了。", "冻住了。", "飞走了。", "哭了。"]),
    ("他每天早上七点", ["起床。", "下雪。", "结婚。", "变成鱼。"]),
]


def book_items(lang: str, balanced: bool = False) -> list[MCItem]:
    """The book's 16 English ("en") or 16 Chinese ("zh") items, the right choice at a fixed random place.

    ``balanced=False``: the first set, whose lengths were not controlled (some right answers are
    longer than every distractor).
    ``balanced=True``: the length-balanced set (same contexts): the right answer is the longest choice
    in UTF-8 bytes in 4 items, the shortest in 4, and neither in 8.
    """
    import random

    if lang not in ("en", "zh"):
        raise ValueError(f"lang must be 'en' or 'zh', got {lang!r}")
    if not isinstance(balanced, bool):
        raise TypeError(f"balanced must be True or False, got {balanced!r}")
    table = {("en", False): _EN, ("zh", False): _ZH, ("en", True): _EN_BALANCED, ("zh", True): _ZH_BALANCED}
    out = []
    for i, (ctx, choices) in enumerate(table[lang, balanced]):
        order = list(range(len(choices)))
        random.Random(1000 * (lang == "zh") + i).shuffle(order)
        out.append(MCItem(ctx, tuple(choices[j] for j in order), order.index(0), lang))
    return out
