"""A character-level vocabulary: one token per distinct character of a corpus.

The simplest tokenizer a language model can use (nanoGPT's Shakespeare example): the
vocabulary is the sorted set of characters in the training text. It covers encoding,
decoding and a clear error for characters the vocabulary has never seen; it leaves out
unknown-token fallbacks (chapter 1's byte-level BPE is the real answer to unseen text).
"""

from __future__ import annotations

import json

import torch

__all__ = ["CharVocab"]


class CharVocab:
    """Map characters to ids 0..V-1 and back.

    >>> v = CharVocab.from_text("hello")
    >>> v.chars, v.encode("hole"), v.decode([3, 2])
    ('ehlo', [1, 3, 2, 0], 'ol')
    """

    def __init__(self, chars: str):
        if not isinstance(chars, str):
            raise TypeError(f"chars must be a str, got {type(chars).__name__}")
        if not chars:
            raise ValueError("chars is empty: a vocabulary needs at least one character")
        if len(set(chars)) != len(chars):
            raise ValueError("chars has repeated characters")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text: str) -> "CharVocab":
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return cls("".join(sorted(set(text))))

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        """Ids of the characters of ``text``; a ValueError names the characters not in the vocabulary."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        unknown = sorted({c for c in text if c not in self.stoi})
        if unknown:
            raise ValueError(f"text has characters outside the vocabulary of {len(self)}: "
                             f"{''.join(unknown)!r}; use only characters seen in training")
        return [self.stoi[c] for c in text]

    def encode_tensor(self, text: str, device: torch.device | str | None = None) -> torch.Tensor:
        """``encode`` as a (1, T) long tensor on ``device``, ready for ``GPT.generate``.

        Pass the model's device (``llmbook.device.model_device(model)``); with None the
        tensor is made on torch's default device (``generate`` moves a prompt to the model).
        """
        return torch.tensor([self.encode(text)], dtype=torch.long, device=device)  # (1, T)

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist()
        out = []
        for i in ids:
            if not isinstance(i, int) or not 0 <= i < len(self.chars):
                raise ValueError(f"ids must be ints in [0, {len(self.chars)}), got {i!r}")
            out.append(self.chars[i])
        return "".join(out)

    def to_json(self) -> str:
        return json.dumps(self.chars)

    @classmethod
    def from_json(cls, data: str) -> "CharVocab":
        return cls(json.loads(data))
