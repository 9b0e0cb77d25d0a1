"""Word-level tokenizers: whitespace splitting and a rule-based (Penn Treebank) splitter.

Both cut text into words and give each word of a training text an id; every other word
is ``<unk>`` (id 0). They are the baseline the chapter starts from, and their failures
are the point:

- ``WhitespaceTokenizer`` is ``text.split()``: Chinese has no spaces, so a whole clause
  is one "word"; German compounds are single words that never repeat; punctuation sticks
  to words ('cheese.' and 'cheese' are different words).
- ``PennTreebankTokenizer`` follows the Penn Treebank conventions (Marcus et al. 1993,
  as in NLTK's ``TreebankWordTokenizer``): punctuation is split off, contractions are
  split before the clitic (don't -> do n't, I'm -> I 'm, can't -> ca n't), hyphenated
  words stay whole (father-in-law), the final period of each line is split off but one
  inside a word ('e.g.', '3.14') is kept. The rules assume one sentence per line: a full
  stop that ends a sentence in the middle of a line stays on its word ('sir.').

Decoding joins words with single spaces, so it is not the inverse of encoding: word
tokenizers throw away the exact spacing. Unknown words decode to ``<unk>``.

Left out: the Treebank's quote conversion (" -> `` and ''), sentence splitting.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import regex

from .base import Tokenizer, check_text, check_training_text, check_vocab_size, special_token_list

__all__ = ["WhitespaceTokenizer", "PennTreebankTokenizer", "treebank_split"]

UNK = "<unk>"

# Each rule is (pattern, replacement); applied in order, then the text is split on spaces.
_TREEBANK_RULES = [
    (regex.compile(r"\.\.\."), r" ... "),
    (regex.compile(r"([;:@#$%&?!()\[\]{}<>\"“”‘’])"), r" \1 "),
    (regex.compile(r"(?<!\d),|,(?!\d)"), r" , "),  # a comma, except inside a number (1,000)
    (regex.compile(r"(^|\s)'(?=\S)"), r"\1' "),  # an opening single quote
    (regex.compile(r"(?i)([^\s])(n't)\b"), r"\1 \2"),  # don't -> do n't, can't -> ca n't
    (regex.compile(r"(?i)([^\s])('(?:s|m|d|ll|re|ve))\b"), r"\1 \2"),  # I'm -> I 'm
    # the final period of each line: a line is taken as one sentence (the Treebank's input)
    (regex.compile(r"(?m)(?<!\.)\.([^\S\n]*[\]\)}\"'”’]*[^\S\n]*)$"), r" .\1"),
]


def treebank_split(text: str) -> list[str]:
    """Split ``text`` with Penn Treebank rules.

    >>> treebank_split("the mouse ate the cheese.")
    ['the', 'mouse', 'ate', 'the', 'cheese', '.']
    >>> treebank_split("Go.\\nthe end.")  # each line is one sentence
    ['Go', '.', 'the', 'end', '.']
    >>> treebank_split("I don't think my father-in-law can't pay $1,000, e.g. today!")
    ['I', 'do', "n't", 'think', 'my', 'father-in-law', 'ca', "n't", 'pay', '$', '1,000', ',', 'e.g.', 'today', '!']
    """
    check_text(text)
    for pattern, repl in _TREEBANK_RULES:
        text = pattern.sub(repl, text)
    return text.split()


class WhitespaceTokenizer(Tokenizer):
    """Words are what ``str.split()`` returns; id 0 is ``<unk>``.

    >>> tok = WhitespaceTokenizer.train("the mouse ate the cheese.")
    >>> tok.tokenize("the cat ate the cheese.")
    ['the', '<unk>', 'ate', 'the', 'cheese.']
    """

    def __init__(self, words: Sequence[str], special_tokens: "dict[str, int] | Sequence[str] | None" = None) -> None:
        words = list(words)
        if len(set(words)) != len(words) or any(not isinstance(w, str) or not w for w in words):
            raise ValueError("words must be distinct non-empty strings")
        self.words = words  # id k+1 is words[k]
        self._index = {w: k + 1 for k, w in enumerate(words)}
        super().__init__(special_tokens)

    def split(self, text: str) -> list[str]:
        """Cut text into words (before looking them up in the vocabulary)."""
        return check_text(text).split()

    @classmethod
    def train(cls, text: str, vocab_size: "int | None" = None, special_tokens: "Sequence[str] | None" = None) -> "WhitespaceTokenizer":
        """Vocabulary: ``<unk>`` + the most frequent words (ties: first seen), all if ``vocab_size`` is None."""
        check_training_text(text)
        specials = special_token_list(special_tokens)
        counts = Counter(cls.split(cls, text))  # split does not use the instance
        if not counts:
            raise ValueError("text has no words (only whitespace)")
        ranked = sorted(counts, key=lambda w: -counts[w])  # stable: ties keep first-seen order
        if vocab_size is not None:
            check_vocab_size(vocab_size, 2 + len(specials), "<unk>, one word and the special tokens")
            ranked = ranked[: vocab_size - 1 - len(specials)]
        return cls(ranked, special_tokens=specials)

    @property
    def _base_vocab_size(self) -> int:
        return len(self.words) + 1

    def _encode_ordinary(self, text: str) -> list[int]:
        get = self._index.get
        return [get(w, 0) for w in self.split(text)]

    def _decode_ordinary(self, ids: list[int]) -> str:
        return " ".join(UNK if i == 0 else self.words[i - 1] for i in ids)

    def _token_str(self, id: int) -> str:
        return UNK if id == 0 else self.words[id - 1]

    def coverage(self, text: str) -> float:
        """Fraction of the words of ``text`` that are in the vocabulary."""
        words = self.split(text)
        if not words:
            raise ValueError("text has no words: coverage is undefined")
        return sum(w in self._index for w in words) / len(words)

    def _state(self) -> dict[str, Any]:
        return {"words": self.words}

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "WhitespaceTokenizer":
        return cls(state["words"], special_tokens=special_tokens)


class PennTreebankTokenizer(WhitespaceTokenizer):
    """Word tokenizer with Penn Treebank splitting rules (see :func:`treebank_split`).

    >>> PennTreebankTokenizer.train("Don't stop.").tokenize("don't stop")
    ['<unk>', "n't", 'stop']
    """

    def split(self, text: str) -> list[str]:
        return treebank_split(text)
