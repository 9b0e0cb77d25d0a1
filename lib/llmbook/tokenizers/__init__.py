"""Tokenizers of chapter 1, each built from scratch behind one interface.

=====================  ===============  =================================================
class                  module           idea
=====================  ===============  =================================================
Tokenizer              base             the shared interface and argument checks
WhitespaceTokenizer    whitespace       ``text.split()`` with a word vocabulary
PennTreebankTokenizer  whitespace       rules: punctuation split, don't -> do n't
CharTokenizer          char             one id per character seen in training
ByteTokenizer          byte             one id per UTF-8 byte (256, no training)
BPETokenizer           bpe              byte pair encoding over characters
ByteBPETokenizer       byte_bpe         BPE over bytes with a regex split (GPT-2, cl100k)
Unigram                unigram          unigram language model, EM + pruning (SentencePiece)
WordPiece              wordpiece        BERT: basic tokenizer + greedy longest match, ``##``
=====================  ===============  =================================================

Every class is ``Cls.train(text, vocab_size, ...)`` (a classmethod returning a new
tokenizer) then ``encode`` / ``decode`` / ``tokenize`` / ``save`` / ``Tokenizer.load``;
see :mod:`llmbook.tokenizers.base`.

Names load lazily (a module is imported on first use), so adding a tokenizer is one
line in ``_EXPORTS`` below: ``"ClassName": "module"``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "Tokenizer": "base",
    "WhitespaceTokenizer": "whitespace",
    "PennTreebankTokenizer": "whitespace",
    "CharTokenizer": "char",
    "ByteTokenizer": "byte",
    "BPETokenizer": "bpe",
    "ByteBPETokenizer": "byte_bpe",
    "GPT2_SPLIT_PATTERN": "byte_bpe",
    "CL100K_SPLIT_PATTERN": "byte_bpe",
    # part B (Unigram, WordPiece) appends its names here
    "Unigram": "unigram",
    "UnigramTrainConfig": "unigram",
    "WordPiece": "wordpiece",
    "minilm_vocab_path": "wordpiece",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value  # cache: the next access skips __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
