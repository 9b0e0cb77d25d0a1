"""Byte tokenizer: the 256 values of a UTF-8 byte, the other extreme.

No training: every string is a sequence of UTF-8 bytes, so the 256 ids cover any text
(there is never an unknown token), at the price of long sequences: a Chinese character
is 3 bytes, an emoji 4. Decoding an arbitrary id sequence may cut a character in the
middle; such bytes decode to U+FFFD (``errors="replace"``), as tiktoken does.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import Tokenizer, check_training_text, check_vocab_size, special_token_list, utf8_bytes

__all__ = ["ByteTokenizer"]


class ByteTokenizer(Tokenizer):
    """One id per byte value 0..255.

    >>> ByteTokenizer().encode("今天")
    [228, 187, 138, 229, 164, 169]
    >>> ByteTokenizer().tokenize("hé")
    ['h', '\\\\xc3', '\\\\xa9']
    """

    def __init__(self, special_tokens: "dict[str, int] | Sequence[str] | None" = None) -> None:
        super().__init__(special_tokens)

    @classmethod
    def train(cls, text: str, vocab_size: int = 256, special_tokens: "Sequence[str] | None" = None) -> "ByteTokenizer":
        """Nothing to learn; checks the arguments like every other ``train``."""
        check_training_text(text)
        specials = special_token_list(special_tokens)
        check_vocab_size(vocab_size, 256 + len(specials), "the 256 byte values and the special tokens")
        return cls(special_tokens=specials)

    @property
    def _base_vocab_size(self) -> int:
        return 256

    def _encode_ordinary(self, text: str) -> list[int]:
        return list(utf8_bytes(text))

    def _decode_ordinary(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def _token_str(self, id: int) -> str:
        # Printable ASCII as itself, every other byte as an escape such as '\xe4'.
        return chr(id) if 32 <= id < 127 else f"\\x{id:02x}"

    def _state(self) -> dict[str, Any]:
        return {}

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "ByteTokenizer":
        return cls(special_tokens=special_tokens)
