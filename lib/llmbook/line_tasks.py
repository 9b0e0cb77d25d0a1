"""Chapter 9's instruction set: questions about a line of Shakespeare, answered by a word of the line.

A question is ``"Last word: <line>\\n"`` and its answer the line's last word (``last_word_questions``).
The answer is exact and computed from the line, so every target is right, a reply is either
right or wrong, and a model cannot score well by answering one thing to every question: the
answers spread over thousands of different words. Lines come from the speeches of one part of
``llmbook.data.load_splits("shakespeare")`` (``play_lines``), so held-out questions are about
lines that neither pre-training nor fine-tuning saw.

Also here: an honest held-out sample (``sample_questions``: distinct questions drawn at random,
never the first n of a list), the two constant baselines every accuracy is printed beside
(``constant_baselines``: the most frequent training answer, and the best single answer for the
scored set itself), and a reading of wrong answers (``answer_kind``, ``kind_counts``: the right
word, another word of the line, or a word that is not in the line).

Leaves out: other question kinds (first word, the word after another); chapter 9 keeps one, so
that what is learned can be measured against baselines without mixing tasks.

>>> last_word_questions("HAMLET:\\nTo be, or not to be: that is the question:\\n\\nOPHELIA:\\nGood my lord,")
[('Last word: To be, or not to be: that is the\\n', 'the'), ('Last word: Good my lord,\\n', 'lord')]
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Iterable, Sequence

__all__ = ["PROMPT", "WORD", "play_lines", "line_words", "last_word_questions", "question_line", "word_candidates",
           "sample_questions", "constant_baselines", "KINDS", "answer_kind", "kind_counts"]

PROMPT = "Last word: "                            # every question starts with it
WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")    # a word: letters, with inner apostrophes (o'er, father's)


def play_lines(part: str, max_chars: int = 34, min_chars: int = 12) -> list[str]:
    """The spoken lines of one part of ``load_splits("shakespeare")``, speaker names dropped.

    Each line of at least ``min_chars`` characters is kept, cut at a word boundary to at most
    ``max_chars`` (a question must fit the character GPT's 64-character context with its answer).

    >>> play_lines("HAMLET:\\nTo be, or not to be: that is the question:\\nshort\\n", max_chars=20)
    ['To be, or not to be:']
    """
    if not isinstance(part, str):
        raise TypeError(f"part must be a str (a part of load_splits), got {type(part).__name__}")
    for name, v in (("min_chars", min_chars), ("max_chars", max_chars)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if max_chars < min_chars:
        raise ValueError(f"max_chars ({max_chars}) must be >= min_chars ({min_chars})")
    out = []
    for speech in part.rstrip("\n").split("\n\n"):
        _, _, text = speech.partition(":\n")
        for line in text.split("\n"):
            line = line.strip()
            if len(line) < min_chars:
                continue
            if len(line) > max_chars:
                line = line[:max_chars + 1].rsplit(" ", 1)[0]
            out.append(line)
    return out


def line_words(line: str) -> list[str]:
    """The words of a line, in order, without punctuation.

    >>> line_words("Now, Master Shallow, you'll")
    ['Now', 'Master', 'Shallow', "you'll"]
    """
    return WORD.findall(line)


def last_word_questions(part: str, max_chars: int = 34, min_chars: int = 12,
                        min_words: int = 3) -> list[tuple[str, str]]:
    """``("Last word: <line>\\n", word)`` for every line of ``part`` with at least ``min_words`` words."""
    if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 1:
        raise ValueError(f"min_words must be an int >= 1, got {min_words!r}")
    out = []
    for line in play_lines(part, max_chars, min_chars):
        words = line_words(line)
        if len(words) >= min_words:
            out.append((f"{PROMPT}{line}\n", words[-1]))
    return out


def question_line(question: str) -> str:
    """The line a question asks about.

    >>> question_line("Last word: O Romeo, Romeo\\n")
    'O Romeo, Romeo'
    """
    if not isinstance(question, str) or not question.startswith(PROMPT):
        raise ValueError(f"question must start with {PROMPT!r}, got {question!r:.60}")
    return question[len(PROMPT):].rstrip("\n")


def word_candidates(text: str) -> list[str]:
    """The distinct words of the line a question asks about, in order, each ending with the answer's newline.

    Text that is not a question (a prompt typed into chapter 9's explorer) gives its own words.

    >>> word_candidates("Last word: O Romeo, Romeo\\n")
    ['O\\n', 'Romeo\\n']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    line = question_line(text) if text.startswith(PROMPT) else text
    return [w + "\n" for w in dict.fromkeys(line_words(line))]


def sample_questions(questions: Sequence[tuple[str, str]], n: int, seed: int,
                     exclude: Iterable[str] = ()) -> list[tuple[str, str]]:
    """``n`` distinct questions drawn uniformly at random (without replacement) with ``seed``.

    Repeated questions (a line that occurs twice) count once, and a question whose text is in
    ``exclude`` (the training questions: a line such as "Good my lord," occurs in many plays) is
    never drawn. Every other question has the same chance, wherever it stands in the list: no
    slicing that keeps the head of a list ordered by play.

    >>> qs = [("a", "x"), ("b", "y"), ("a", "x"), ("c", "z")]
    >>> sample_questions(qs, 2, seed=0), sample_questions(qs, 2, seed=0, exclude=["b"])
    ([('b', 'y'), ('c', 'z')], [('c', 'z'), ('a', 'x')])
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if isinstance(exclude, str):
        raise TypeError("exclude must be a collection of question texts, not one string")
    skip = set(exclude)
    distinct = sorted(q for q in set(questions) if q[0] not in skip)
    if n > len(distinct):
        raise ValueError(f"n = {n} is more than the {len(distinct)} distinct questions left to draw from")
    return random.Random(seed).sample(distinct, n)


def constant_baselines(train_answers: Sequence[str], answers: Sequence[str]) -> dict[str, tuple[str, float]]:
    """The two constant answers every accuracy of chapter 9 is printed beside, scored on ``answers``.

    ``"majority"``: the most frequent training answer (the majority class), what a model that
    learned only the answers' prior would say to every question. ``"best constant"``: the single
    answer that scores best on ``answers`` themselves, an upper bound for any constant (it peeks
    at the scored set). Ties go to the alphabetically first answer.

    >>> constant_baselines(["me", "me", "you"], ["you", "you", "me", "him"])
    {'majority': ('me', 0.25), 'best constant': ('you', 0.5)}
    """
    if not train_answers or not answers:
        raise ValueError("train_answers and answers must both be non-empty")
    def top(xs):
        counts = Counter(xs)
        return min(counts, key=lambda a: (-counts[a], a))
    out = {}
    for name, pick in (("majority", top(train_answers)), ("best constant", top(answers))):
        out[name] = (pick, sum(a == pick for a in answers) / len(answers))
    return out


KINDS = ("right", "another word of the line", "not a word of the line", "empty")


def answer_kind(reply: str, question: str, gold: str) -> str:
    """Which of ``KINDS`` a reply is: the right word, another word of the line, anything else, nothing.

    >>> [answer_kind(r, "Last word: O Romeo, Romeo, wherefore\\n", "wherefore") for r in ("wherefore", "Romeo", "where", "")]
    ['right', 'another word of the line', 'not a word of the line', 'empty']
    """
    if reply == gold:
        return "right"
    if not reply:
        return "empty"
    return "another word of the line" if reply in line_words(question_line(question)) else "not a word of the line"


def kind_counts(replies: Sequence[str], questions: Sequence[tuple[str, str]]) -> dict[str, int]:
    """How many replies are of each of ``KINDS`` (every kind listed, zeros included)."""
    if len(replies) != len(questions):
        raise ValueError(f"replies ({len(replies)}) and questions ({len(questions)}) differ in length")
    counts = Counter(answer_kind(r, q, a) for r, (q, a) in zip(replies, questions))
    return {k: counts[k] for k in KINDS}
