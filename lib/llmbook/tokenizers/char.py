"""Character tokenizer: one id per character, the fine-grained extreme.

Training keeps the ``vocab_size - 1`` most frequent characters of the text (ties broken
by code point, so the vocabulary is deterministic) and reserves id 0 for ``<unk>``.
Unknown characters, those never seen in training or cut by the size limit, encode to
id 0, which decodes to U+FFFD (the replacement character): the round trip is exact only
for text whose characters are all in the vocabulary.

Left out: Unicode normalisation (NFC/NFKC); the text is taken code point by code point.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from .base import Tokenizer, check_text, check_training_text, check_vocab_size, special_token_list

__all__ = ["CharTokenizer"]

UNK = "<unk>"


class CharTokenizer(Tokenizer):
    """One id per character; id 0 is ``<unk>``.

    >>> tok = CharTokenizer.train("hello", vocab_size=10)
    >>> tok.tokenize("hole")
    ['h', 'o', 'l', 'e']
    >>> tok.decode(tok.encode("hex"))   # 'x' was never seen
    'he\\ufffd'
    """

    def __init__(self, chars: Sequence[str], special_tokens: "dict[str, int] | Sequence[str] | None" = None) -> None:
        chars = list(chars)
        for c in chars:
            if not isinstance(c, str) or len(c) != 1:
                raise ValueError(f"chars must be single characters, got {c!r}")
        if len(set(chars)) != len(chars):
            raise ValueError("chars contains a character twice")
        self.chars = chars  # id k+1 is chars[k]
        self._index = {c: k + 1 for k, c in enumerate(chars)}
        super().__init__(special_tokens)

    @classmethod
    def train(cls, text: str, vocab_size: "int | None" = None, special_tokens: "Sequence[str] | None" = None) -> "CharTokenizer":
        """Vocabulary: ``<unk>`` plus the most frequent characters (all of them if ``vocab_size`` is None)."""
        check_training_text(text)
        specials = special_token_list(special_tokens)
        n_special = len(specials)
        counts = Counter(text)
        ranked = sorted(counts, key=lambda c: (-counts[c], ord(c)))
        if vocab_size is not None:
            check_vocab_size(vocab_size, 2 + n_special, "<unk>, one character and the special tokens")
            ranked = ranked[: vocab_size - 1 - n_special]
        return cls(ranked, special_tokens=specials)

    @property
    def _base_vocab_size(self) -> int:
        return len(self.chars) + 1

    def _encode_ordinary(self, text: str) -> list[int]:
        get = self._index.get
        return [get(c, 0) for c in text]

    def _decode_ordinary(self, ids: list[int]) -> str:
        return "".join("\ufffd" if i == 0 else self.chars[i - 1] for i in ids)

    def _token_str(self, id: int) -> str:
        return UNK if id == 0 else self.chars[id - 1]

    def coverage(self, text: str) -> float:
        """Fraction of the characters of ``text`` that are in the vocabulary (not ``<unk>``)."""
        check_text(text)
        if not text:
            raise ValueError("text is empty: coverage is undefined")
        return sum(c in self._index for c in text) / len(text)

    def _state(self) -> dict[str, Any]:
        return {"chars": "".join(self.chars)}

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "CharTokenizer":
        return cls(list(state["chars"]), special_tokens=special_tokens)
