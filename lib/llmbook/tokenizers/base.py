"""The interface every tokenizer in the book shares, and the checks they all use.

A tokenizer turns a string into a list of integer ids and back. Every tokenizer in
``llmbook.tokenizers`` subclasses :class:`Tokenizer` and so offers the same calls:

=================================  ====================================================
``Cls.train(text, vocab_size)``    classmethod: learn a vocabulary from ``text``, return
                                   a new tokenizer (keyword options per class)
``tok.encode(text)``               ``list[int]``; ``allowed_special`` lets special tokens
                                   such as ``<|endoftext|>`` through as one id each
``tok.decode(ids)``                ``str``; an id outside the vocabulary -> ValueError
``tok.tokenize(text)``             ``list[str]``: the pieces ``encode`` produces
``tok.vocab_size``                 number of ids, special tokens included
``tok.special_tokens``             ``dict[str, int]``
``tok.save(path)``                 plain JSON, written atomically (never pickle)
``Tokenizer.load(path)``           reads any saved tokenizer back (or ``Cls.load``)
=================================  ====================================================

A subclass implements ``train`` (a classmethod); ``_encode_ordinary(text)`` for text
without special tokens; ``_decode_ordinary(ids)`` and ``_token_str(id)``; ``_state()``
and ``_from_state(state, special_tokens)`` for saving; and the property
``_base_vocab_size`` (ids below it are ordinary, special tokens get ids from there on).
It sets up its own vocabulary first and then calls ``super().__init__(special_tokens)``,
which needs ``_base_vocab_size``.

Special tokens. ``encode(text)`` treats text that looks like a special token as
ordinary text (as tiktoken's ``encode_ordinary`` does), so a user's input can never
inject a control token by accident; ``encode(text, allowed_special="all")`` or a set of
names turns those substrings into their special ids. ``special_tokens`` is a list (or
tuple) of strings, or a ``{text: id}`` dict for a constructor; a bare string is refused
with a TypeError (``list("<|endoftext|>")`` would make each of its characters a control
token), by one shared check, :func:`special_token_list`.

Left out: batching, padding and truncation (chapter 4 adds what the models need), and
offsets back into the original string.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Iterable, Sequence

import regex

__all__ = [
    "Tokenizer",
    "check_text",
    "check_training_text",
    "check_vocab_size",
    "check_ids",
    "check_special_tokens",
    "special_token_list",
    "compile_pattern",
    "split_keep_gaps",
    "utf8_bytes",
    "write_json_atomic",
]

_FORMAT_VERSION = 1


# ---------------------------------------------------------------- shared checks


def check_text(text: Any, name: str = "text") -> str:
    """Return ``text`` if it is a ``str``; otherwise raise a TypeError naming ``name``.

    >>> check_text("hi")
    'hi'
    >>> check_text(b"hi")
    Traceback (most recent call last):
    ...
    TypeError: text must be a str, got bytes
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def check_training_text(text: Any, name: str = "text") -> str:
    """Like :func:`check_text`, and also refuse an empty training text.

    >>> check_training_text("")
    Traceback (most recent call last):
    ...
    ValueError: text is empty: a tokenizer cannot be trained on ''
    """
    check_text(text, name)
    if not text:
        raise ValueError(f"{name} is empty: a tokenizer cannot be trained on ''")
    return text


def check_vocab_size(vocab_size: Any, minimum: int, why: str = "", name: str = "vocab_size") -> int:
    """Return ``vocab_size`` if it is an int >= ``minimum``; else a clear error.

    >>> check_vocab_size(300, 256)
    300
    >>> check_vocab_size(100, 256, "the 256 byte tokens")
    Traceback (most recent call last):
    ...
    ValueError: vocab_size=100 is below the minimum 256 (the 256 byte tokens)
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"{name} must be an int, got {type(vocab_size).__name__}")
    if vocab_size < minimum:
        reason = f" ({why})" if why else ""
        raise ValueError(f"{name}={vocab_size} is below the minimum {minimum}{reason}")
    return vocab_size


def check_ids(ids: Any, vocab_size: int, valid: "set[int] | None" = None, name: str = "ids") -> list[int]:
    """Return ``ids`` as a list of ints, each in ``range(vocab_size)`` (or in ``valid``).

    >>> check_ids([1, 2], 5)
    [1, 2]
    >>> check_ids([1, 7], 5)
    Traceback (most recent call last):
    ...
    ValueError: ids contains unknown id 7 (valid ids are 0..4)
    """
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"{name} must be a sequence of ints, got {type(ids).__name__}")
    out = []
    for i in ids:
        # Tensors and numpy scalars convert with int(); floats and strings do not.
        if isinstance(i, bool) or not hasattr(i, "__index__"):
            raise TypeError(f"{name} must contain ints, got {type(i).__name__} {i!r}")
        i = int(i)
        ok = (i in valid) if valid is not None else (0 <= i < vocab_size)
        if not ok:
            raise ValueError(f"{name} contains unknown id {i} (valid ids are 0..{vocab_size - 1})")
        out.append(i)
    return out


def special_token_list(special_tokens: Any, name: str = "special_tokens", ordered: bool = True) -> list[str]:
    """Return the special tokens given to ``train`` as a list of non-empty strings.

    A bare string is refused: ``list("<|endoftext|>")`` would silently make every one of
    its characters a control token (so ordinary letters would encode to special ids).
    With ``ordered`` (tokens get ids in the order given) a set is refused too: its order,
    and so the ids, would change from run to run.

    >>> special_token_list(("<|endoftext|>",))
    ['<|endoftext|>']
    >>> special_token_list("<|endoftext|>")
    Traceback (most recent call last):
    ...
    TypeError: special_tokens must be a list of str such as ['<|endoftext|>'], got the bare str '<|endoftext|>' (it would be split into characters)
    """
    if special_tokens is None:
        return []
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError(
            f"{name} must be a list of str such as [{special_tokens!r}], got the bare "
            f"{type(special_tokens).__name__} {special_tokens!r} (it would be split into characters)"
        )
    if isinstance(special_tokens, dict) or not isinstance(special_tokens, Iterable):
        raise TypeError(f"{name} must be a list of str, got {type(special_tokens).__name__}")
    if ordered and isinstance(special_tokens, (set, frozenset)):
        raise TypeError(f"{name} must be a list or tuple, not a set: tokens get ids in the order given")
    out = list(special_tokens)
    for s in out:
        if not isinstance(s, str) or not s:
            raise ValueError(f"{name}: each token must be a non-empty str, got {s!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} lists a token twice: {out}")
    return out


def check_special_tokens(special_tokens: Any, first_id: int | None = None) -> dict[str, int]:
    """Normalise special tokens to ``{text: id}``.

    A list or tuple of strings gets consecutive ids from ``first_id``; a dict is taken as
    is; a bare string is refused (see :func:`special_token_list`).

    >>> check_special_tokens(["<|endoftext|>"], first_id=300)
    {'<|endoftext|>': 300}
    """
    if special_tokens is None:
        return {}
    if isinstance(special_tokens, dict):
        items = list(special_tokens.items())
    elif isinstance(special_tokens, (list, tuple, str, bytes)):
        tokens = special_token_list(special_tokens)
        if first_id is None:
            raise ValueError("special_tokens given as a list needs first_id")
        items = [(s, first_id + k) for k, s in enumerate(tokens)]
    else:
        raise TypeError(f"special_tokens must be a list of str or a dict str->int, got {type(special_tokens).__name__}")
    out: dict[str, int] = {}
    for s, i in items:
        if not isinstance(s, str) or not s:
            raise ValueError(f"special_tokens: each token must be a non-empty str, got {s!r}")
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise ValueError(f"special_tokens: id of {s!r} must be an int >= 0, got {i!r}")
        out[s] = i
    if len(set(out.values())) != len(out):
        raise ValueError(f"special_tokens: two tokens share an id in {out}")
    return out


def compile_pattern(pattern: Any, name: str = "pattern") -> "regex.Pattern[str]":
    r"""Compile a pre-tokenization pattern; a non-str or invalid one -> an error naming it.

    >>> compile_pattern(r"\w+").pattern
    '\\w+'
    >>> compile_pattern("(")
    Traceback (most recent call last):
    ...
    ValueError: pattern '(' is not a valid regular expression: missing ) at position 1
    """
    if not isinstance(pattern, str):
        raise TypeError(f"{name} must be a str (a regular expression), got {type(pattern).__name__}")
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise ValueError(f"{name} {pattern!r} is not a valid regular expression: {exc}") from None


def split_keep_gaps(split: "regex.Pattern[str]", text: str) -> list[str]:
    r"""Cut ``text`` at the matches of ``split``, keeping the text between matches as pieces.

    ``"".join(pieces) == text`` for every pattern, so no character is lost when a pattern
    does not cover the whole text (a user's ``\w+`` skips spaces and punctuation; those
    runs become pieces of their own). Empty matches give no piece.

    >>> split_keep_gaps(regex.compile(r"\w+"), "hi, there!")
    ['hi', ', ', 'there', '!']
    """
    if not split.groups:
        pieces = split.findall(text)  # the common case, all in C: the pattern tiles the text
        if sum(map(len, pieces)) == len(text):
            return [p for p in pieces if p] if "" in pieces else pieces
    out: list[str] = []
    at = 0
    for m in split.finditer(text):
        start, end = m.span()
        if start > at:
            out.append(text[at:start])
        if end > start:
            out.append(text[start:end])
        at = max(at, end)
    if at < len(text):
        out.append(text[at:])
    return out


def utf8_bytes(text: str, name: str = "text") -> bytes:
    """``text`` as UTF-8; a lone surrogate (which UTF-8 cannot hold) -> ValueError naming ``name``.

    >>> utf8_bytes("hé")
    b'h\\xc3\\xa9'
    >>> utf8_bytes("a\\ud800")
    Traceback (most recent call last):
    ...
    ValueError: text contains the lone surrogate U+D800 at index 1, which UTF-8 cannot encode (fix the text, e.g. text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace'))
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise ValueError(
            f"{name} contains the lone surrogate U+{ord(bad):04X} at index {exc.start}, which UTF-8 cannot encode "
            "(fix the text, e.g. text.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace'))"
        ) from None


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as UTF-8 JSON to ``path`` via a temporary file and ``os.replace``.

    A crash mid-write leaves the old file (or none), never a half-written one
    (:func:`llmbook.atomic.write_atomic`: mode 0o644, stale temporary files removed).
    """
    from llmbook.atomic import write_atomic

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False)

    write_atomic(path, write)


# ---------------------------------------------------------------- the interface


class Tokenizer(ABC):
    """Abstract tokenizer: the interface shared by every tokenizer in the book.

    Subclasses register themselves by class name, so :meth:`Tokenizer.load` can read
    any saved tokenizer back without being told its class.
    """

    _registry: ClassVar[dict[str, type["Tokenizer"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Tokenizer._registry[cls.__name__] = cls

    def __init__(self, special_tokens: "dict[str, int] | Sequence[str] | None" = None) -> None:
        self.special_tokens: dict[str, int] = check_special_tokens(special_tokens, first_id=self._base_vocab_size)
        for s, i in self.special_tokens.items():
            if i < self._base_vocab_size and not self._special_may_overlap():
                raise ValueError(f"special token {s!r} has id {i}, which an ordinary token already uses")
        self._inverse_special = {i: s for s, i in self.special_tokens.items()}
        self._special_re = None
        if self.special_tokens:
            # Longest first, so that '<|a|>x' is not cut at a shorter special '<|a|>' prefix.
            alts = sorted(self.special_tokens, key=len, reverse=True)
            self._special_re = regex.compile("(" + "|".join(regex.escape(s) for s in alts) + ")")

    # -- what a subclass provides -------------------------------------------------

    @classmethod
    @abstractmethod
    def train(cls, text: str, vocab_size: int, **options: Any) -> "Tokenizer":
        """Learn a vocabulary of ``vocab_size`` ids (special tokens included) from ``text``."""

    @property
    @abstractmethod
    def _base_vocab_size(self) -> int:
        """Number of ordinary ids (0..n-1); special tokens take ids from here on."""

    @abstractmethod
    def _encode_ordinary(self, text: str) -> list[int]:
        """Encode text that contains no special tokens."""

    @abstractmethod
    def _decode_ordinary(self, ids: list[int]) -> str:
        """Decode ordinary ids (already checked to be in range)."""

    @abstractmethod
    def _token_str(self, id: int) -> str:
        """Readable form of one ordinary id (used by ``tokenize``)."""

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """Everything needed to rebuild the tokenizer, as JSON-able values."""

    @classmethod
    @abstractmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "Tokenizer":
        """Inverse of :meth:`_state`."""

    def _special_may_overlap(self) -> bool:
        """True if a loaded vocabulary places special tokens among the ordinary ids."""
        return False

    # -- the shared calls ---------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids the tokenizer can produce, special tokens included."""
        top = max(self.special_tokens.values(), default=-1) + 1
        return max(self._base_vocab_size, top)

    def encode(self, text: str, allowed_special: "str | Iterable[str]" = ()) -> list[int]:
        """Encode ``text`` to ids.

        ``allowed_special``: ``"all"`` or an iterable of special-token strings that are
        turned into their ids; any other special-looking text is encoded as ordinary text.
        """
        check_text(text)
        allowed = self._allowed(allowed_special)
        if not allowed or self._special_re is None:
            return self._encode_ordinary(text)
        ids: list[int] = []
        start = 0
        for m in self._special_re.finditer(text):
            if m.group(0) not in allowed:
                continue
            ids.extend(self._encode_ordinary(text[start : m.start()]))
            ids.append(self.special_tokens[m.group(0)])
            start = m.end()
        ids.extend(self._encode_ordinary(text[start:]))
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` treating every substring as ordinary text (no special ids)."""
        return self._encode_ordinary(check_text(text))

    def decode(self, ids: Iterable[int]) -> str:
        """Turn ids back into a string; an id the tokenizer does not know -> ValueError."""
        ids = check_ids(ids, self.vocab_size)
        if self._inverse_special:
            # Ids between the ordinary vocabulary and the special ids may be unused (cl100k has gaps).
            base = self._base_vocab_size
            for i in ids:
                if i >= base and i not in self._inverse_special:
                    raise ValueError(f"ids contains unknown id {i} (no token has this id)")
        out: list[str] = []
        run: list[int] = []
        for i in ids:
            if i in self._inverse_special:
                if run:
                    out.append(self._decode_ordinary(run))
                    run = []
                out.append(self._inverse_special[i])
            else:
                run.append(i)
        if run:
            out.append(self._decode_ordinary(run))
        return "".join(out)

    def tokenize(self, text: str, allowed_special: "str | Iterable[str]" = ()) -> list[str]:
        """The pieces ``encode`` cuts ``text`` into, as readable strings."""
        return [self.id_to_token(i) for i in self.encode(text, allowed_special=allowed_special)]

    def id_to_token(self, id: int) -> str:
        """Readable form of one id (a special token's own text for special ids)."""
        (id,) = check_ids([id], self.vocab_size, name="id")
        if id in self._inverse_special:
            return self._inverse_special[id]
        if id >= self._base_vocab_size:
            raise ValueError(f"id {id} is unknown (no token has this id)")
        return self._token_str(id)

    def _allowed(self, allowed_special: "str | Iterable[str]") -> set[str]:
        if allowed_special == "all":
            return set(self.special_tokens)
        if isinstance(allowed_special, str):
            raise TypeError("allowed_special must be 'all' or an iterable of special-token strings")
        allowed = set(allowed_special)
        unknown = allowed - set(self.special_tokens)
        if unknown:
            raise ValueError(f"allowed_special names tokens that are not special tokens: {sorted(unknown)}")
        return allowed

    # -- saving -------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer as plain JSON (atomic: temporary file + rename)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        write_json_atomic(
            path,
            {
                "format": "llmbook-tokenizer",
                "version": _FORMAT_VERSION,
                "class": type(self).__name__,
                "special_tokens": self.special_tokens,
                "state": self._state(),
            },
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        """Read a tokenizer written by :meth:`save`; a damaged file -> ValueError."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        try:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path} is not a saved llmbook tokenizer (not valid JSON: {exc})") from None
        if not isinstance(obj, dict) or obj.get("format") != "llmbook-tokenizer":
            raise ValueError(f"{path} is not a saved llmbook tokenizer (no 'format': 'llmbook-tokenizer')")
        if obj.get("version") != _FORMAT_VERSION:
            raise ValueError(f"{path} has format version {obj.get('version')!r}; this code reads {_FORMAT_VERSION}")
        name = obj.get("class")
        if name not in Tokenizer._registry:
            # the classes register on import, and llmbook.tokenizers imports its modules lazily
            from . import _EXPORTS

            if isinstance(name, str) and name in _EXPORTS:
                import importlib

                importlib.import_module(f"{__package__}.{_EXPORTS[name]}")
        target = Tokenizer._registry.get(name)
        if target is None:
            raise ValueError(f"{path} holds a {name!r}, which is not a known tokenizer class")
        if cls is not Tokenizer and not issubclass(target, cls):
            raise ValueError(f"{path} holds a {name}, not a {cls.__name__}")
        try:
            return target._from_state(obj["state"], check_special_tokens(obj.get("special_tokens") or {}))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, regex.error) as exc:
            raise ValueError(f"{path} is damaged: {type(exc).__name__}: {exc}") from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, special_tokens={len(self.special_tokens)})"
