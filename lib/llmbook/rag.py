"""Retrieval-augmented generation: retrieved passages put into a chat model's prompt.

Covers the pieces chapter 8g needs around a retriever (``llmbook.retrieval``) and a chat
model (``llmbook.llama``): a question set with exact answers made from the indexed
passages themselves (``speaker_questions``: "Which character says ...?", the speaker
heading the passage as gold), the RAG prompt (``rag_messages``: numbered passages, then
the question, as one user turn; ``rag_prompt`` renders it with the model's chat template),
a tolerant grader (``grade_answer``) and the extractive rule that answers without a
language model (``passage_speaker`` of the top retrieved passage).

Leaves out: training the retriever or the generator together (Lewis et al. 2020 fine-tune
both; here both are frozen), marginalising over passages (RAG-Sequence / RAG-Token),
reranking, and long-context tricks.

Paper: Lewis et al. 2020, *Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks*.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["Question", "passage_speaker", "speaker_questions", "rag_messages", "rag_prompt",
           "normalise_answer", "grade_answer", "quote_speech", "SYSTEM_NOTE", "FORMATS"]

# A speech heading: a line of capitals (and spaces, dots, apostrophes, hyphens) ending in a colon.
_HEADING = re.compile(r"([A-Z](?:[A-Z .'&-]*[A-Z.])?):")

SYSTEM_NOTE = "Answer with the name of the character only."


@dataclass(frozen=True)
class Question:
    """One question: its text, the gold answer, the passage it was made from, and the quoted line."""

    text: str
    answer: str
    passage: int
    line: str


def passage_speaker(passage: str) -> Optional[str]:
    """The speaker heading ``passage`` ("ROMEO:" as its first line), or None if it has none.

    >>> passage_speaker("FIRST LORD:\\nHe is gone.")
    'FIRST LORD'
    >>> passage_speaker("and so on\\nROMEO:") is None
    True
    """
    if not isinstance(passage, str):
        raise TypeError(f"passage must be a str, got {type(passage).__name__}")
    m = _HEADING.fullmatch(passage.split("\n", 1)[0].strip())
    return m.group(1) if m else None


def speaker_questions(passages: Sequence[str], n: int, seed: int = 0, min_words: int = 6,
                      max_words: int = 12) -> list[Question]:
    """``n`` questions "Which character says: "<line>"?" drawn from ``passages``.

    A candidate is a line of a passage that has a speaker heading, not the heading itself,
    of ``min_words`` to ``max_words`` words, that occurs (stripped) in no other passage and
    nowhere else in its own. Passages are visited in an order shuffled by ``seed``, one
    question per passage (its first candidate line), so the questions are spread over the
    index and come out the same for the same passages and seed.

    >>> qs = speaker_questions(["HERMIA:\\nI would my father look'd but with my eyes.", "x"], 1, min_words=3)
    >>> qs[0].answer, qs[0].passage
    ('HERMIA', 0)
    """
    if isinstance(passages, str) or not isinstance(passages, Sequence) or not passages:
        raise ValueError("passages must be a non-empty list of str")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if not 1 <= min_words <= max_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words} and {max_words}")
    counts: dict[str, int] = {}
    for p in passages:
        for line in p.split("\n"):
            counts[line.strip()] = counts.get(line.strip(), 0) + 1
    order = list(range(len(passages)))
    random.Random(seed).shuffle(order)
    out: list[Question] = []
    for i in order:
        who = passage_speaker(passages[i])
        if who is None:
            continue
        for line in passages[i].split("\n")[1:]:
            line = line.strip()
            if min_words <= len(line.split()) <= max_words and counts[line] == 1:
                out.append(Question(f'Which character says: "{line}"?', who, i, line))
                break
        if len(out) == n:
            return out
    raise ValueError(f"only {len(out)} questions can be made from these passages, asked for {n}")


def quote_speech(passage: str) -> str:
    """A passage as one quoted speech: 'Rosalind says: "<its lines, joined>"'.

    A passage without a speaker heading (the middle of a long speech) becomes just its
    quoted lines.

    >>> quote_speech("DUKE SENIOR:\\nNow, my co-mates\\nand brothers in exile")
    'Duke Senior says: "Now, my co-mates and brothers in exile"'
    """
    who = passage_speaker(passage)
    lines = [x.strip() for x in passage.split("\n")[1 if who else 0:]]
    body = " ".join(x for x in lines if x)
    return f'{who.title()} says: "{body}"' if who else f'"{body}"'


# The worked example of the "quoted" format: a speech from outside the index (Hamlet is not in it).
EXAMPLE_PASSAGE = 'Hamlet says: "To be, or not to be: that is the question"'
EXAMPLE_QUESTION = 'Which character says: "that is the question"?'
EXAMPLE_ANSWER = "Hamlet"
FORMATS = ("plain", "quoted")


def _turn(question: str, passages: Sequence[str]) -> str:
    if not passages:
        return f"{question}\n{SYSTEM_NOTE}"
    blocks = "\n\n".join(f"Passage {j}:\n{p}" for j, p in enumerate(passages, 1))
    return f"{blocks}\n\nUsing the passages, answer: {question}\n{SYSTEM_NOTE}"


def rag_messages(question: str, passages: Sequence[str] = (), fmt: str = "plain") -> list[dict[str, str]]:
    """The chat of a (retrieval-augmented) question.

    ``fmt="plain"``: one user turn, "Passage j:\\n<text>" blocks (best first), then the
    question and the instruction ``SYSTEM_NOTE``; with no passages (closed book), only the
    question and the instruction. ``fmt="quoted"``: each passage rewritten by
    ``quote_speech``, after one worked example (a user turn in the same form and the
    assistant's answer).

    >>> rag_messages("Who?", ["A:\\nhi"])[0]["content"]
    'Passage 1:\\nA:\\nhi\\n\\nUsing the passages, answer: Who?\\nAnswer with the name of the character only.'
    >>> rag_messages("Who?")[0]["content"]
    'Who?\\nAnswer with the name of the character only.'
    >>> [m["content"] for m in rag_messages("Who?", ["A:\\nhi"], fmt="quoted")][1:]
    ['Hamlet', 'Passage 1:\\nA says: "hi"\\n\\nUsing the passages, answer: Who?\\nAnswer with the name of the character only.']
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("question must be a non-empty str")
    if isinstance(passages, str) or not all(isinstance(p, str) for p in passages):
        raise ValueError("passages must be a list of str")
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    if fmt == "plain":
        return [{"role": "user", "content": _turn(question, passages)}]
    example = _turn(EXAMPLE_QUESTION, [EXAMPLE_PASSAGE] if passages else [])
    return [{"role": "user", "content": example}, {"role": "assistant", "content": EXAMPLE_ANSWER},
            {"role": "user", "content": _turn(question, [quote_speech(p) for p in passages])}]


def rag_prompt(template: str, question: str, passages: Sequence[str] = (), fmt: str = "plain") -> str:
    """``rag_messages`` rendered with a chat template, ending where the assistant's reply begins."""
    from .llama import render_chat

    return render_chat(template, rag_messages(question, passages, fmt), add_generation_prompt=True)


def normalise_answer(text: str) -> str:
    """Lower case, letters and spaces only, single spaces.

    >>> normalise_answer("  Lady  Capulet's!")
    'lady capulet s'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return " ".join(re.sub(r"[^a-z]+", " ", text.lower()).split())


def grade_answer(answer: str, gold: str, names: Sequence[str] = ()) -> bool:
    """True when ``answer`` names ``gold`` and no other of ``names`` (the candidate answers).

    Case, punctuation and extra words are forgiven ("The character is Hermia." is right for
    HERMIA); the gold name must appear as whole words; an answer that also names another
    candidate (a list of guesses) is wrong, unless that name is part of the gold one
    (DUKE inside DUKE SENIOR).

    >>> grade_answer("It is Hermia.", "HERMIA", ["HERMIA", "LYSANDER"])
    True
    >>> grade_answer("Hermia or Lysander", "HERMIA", ["HERMIA", "LYSANDER"])
    False
    >>> grade_answer("Hermione", "HERMIA")
    False
    """
    if not isinstance(gold, str) or not normalise_answer(gold):
        raise ValueError(f"gold must be a str with letters, got {gold!r}")
    a = f" {normalise_answer(answer)} "
    g = normalise_answer(gold)
    if f" {g} " not in a:
        return False
    for name in names:
        n = normalise_answer(name)
        if n and n != g and f" {n} " not in f" {g} " and f" {n} " in a:
            return False
    return True
