"""WordPiece (llmbook.tokenizers.wordpiece) against transformers' BERT tokenizers on MiniLM's vocab.

transformers 5 names the pure-Python reference ``BertTokenizerLegacy`` (the old "slow"
BertTokenizer); ``BertTokenizer`` is now the Rust-backed fast one. We compare with both.
"""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

from llmbook.data import load_text  # noqa: E402
from llmbook.tokenizers import Tokenizer, WordPiece, minilm_vocab_path  # noqa: E402
from llmbook.tokenizers.wordpiece import basic_tokenize, wordpiece_word  # noqa: E402

N_CHARS = 500_000  # of Shakespeare; the whole 4.8 MB also matches but takes ~15 s more

EDGE_CASES = [
    "",
    "   ",
    "Hello, World!",
    "HELLO hello HeLLo",
    "naïve café résumé Ångström",  # accents stripped after lower-casing
    "Crème brûlée\u0301",  # a lone combining mark
    "don't stop-believing... (really?) [yes] {no} $5 @home #tag ^_^ `x` ~y|z",
    "我今天去了商店。",  # CJK ideographs split, then mostly [UNK]-free single characters
    "今天天气很好, 东京 とうきょう 서울",  # kana and hangul are not split like ideographs
    "tab\tnew\nline\rcarriage\x00nul\x07bell\ufffdrepl\u200bzwsp\u2028sep",
    "emoji 😀 👩‍👩‍👧 ☃",
    "a" * 100 + " " + "b" * 101,  # 101 characters: the whole word is [UNK]
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "1234567890 3.14159 1,000,000",
    "\u00a0non\u00a0breaking\u3000ideographic space",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
]


@pytest.fixture(scope="module")
def ours():
    return WordPiece.from_vocab(minilm_vocab_path())


@pytest.fixture(scope="module")
def slow():
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    return BertTokenizerLegacy(str(minilm_vocab_path()), do_lower_case=True)


@pytest.fixture(scope="module")
def fast():
    return transformers.BertTokenizer.from_pretrained(str(minilm_vocab_path().parent))


def test_vocab_path_and_size(ours):
    assert minilm_vocab_path().name == "vocab.txt"
    assert ours.vocab_size == 30522
    assert ours.token_to_id["[CLS]"] == 101 and ours.token_to_id["[SEP]"] == 102


def test_same_ids_as_bert_on_shakespeare(ours, slow, fast):
    text = load_text("shakespeare")[:N_CHARS]
    ids = ours.encode(text)
    assert ids == slow.encode(text, add_special_tokens=False)
    assert ids == fast.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("text", EDGE_CASES)
def test_same_ids_as_bert_on_edge_cases(ours, slow, fast, text):
    ids = ours.encode(text)
    assert ids == slow.encode(text, add_special_tokens=False)
    assert ids == fast.encode(text, add_special_tokens=False)
    assert ours.tokenize(text) == slow.tokenize(text)


def test_documented_behaviour(ours):
    assert ours.tokenize("Naïve CAFÉ") == ["naive", "cafe"]
    assert ours.tokenize("x" * 101) == ["[UNK]"]
    assert ours.tokenize("我爱NLP") == ["我", "[UNK]", "nl", "##p"]  # '爱' is not in MiniLM's vocab
    assert ours.decode(ours.encode("Unaffable tokenizers!")) == "unaffable tokenizers !"


def test_encode_pair_matches_bert(ours, slow, fast):
    a, b = "The quick brown fox.", "It jumps over the lazy dog!"
    ids, seg = ours.encode_pair(a, b)
    ref = fast(a, b)
    assert ids == ref["input_ids"] and seg == ref["token_type_ids"]
    ids1, seg1 = ours.encode_pair(a)
    assert ids1 == fast(a)["input_ids"] and seg1 == [0] * len(ids1)
    ids2, seg2 = ours.encode_pair(a, b, max_len=10)
    ref2 = fast(a, b, truncation="longest_first", max_length=10)
    assert ids2 == ref2["input_ids"] and seg2 == ref2["token_type_ids"]
    # Without transformers' clean-up (which glues "fox ." back to "fox."), decode agrees.
    ref_text = slow.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    assert ours.decode(ids, skip_special_tokens=True) == ref_text


def test_greedy_longest_match_by_hand():
    vocab = {"[UNK]", "un", "##aff", "##able", "u", "##n", "##a", "##f", "##b", "##l", "##e"}
    assert wordpiece_word("unaffable", vocab) == ["un", "##aff", "##able"]
    assert wordpiece_word("unx", vocab) == ["[UNK]"]
    assert basic_tokenize("Hi!!") == ["hi", "!", "!"]


def test_train_and_save(tmp_path):
    text = load_text("shakespeare")[:5_000]
    wp = WordPiece.train(text, 200, progress=False)
    assert wp.vocab_size == 200
    assert wp.vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    toks = wp.tokenize("To be, or not to be")
    assert "[UNK]" not in toks and "".join(t.removeprefix("##") for t in toks) == "tobe,ornottobe"
    wp.save(tmp_path / "wp.json")
    assert Tokenizer.load(tmp_path / "wp.json").encode("the king") == wp.encode("the king")
    wp.save_vocab(tmp_path / "vocab.txt")
    assert WordPiece.from_vocab(tmp_path / "vocab.txt").vocab == wp.vocab


def test_bad_input(ours, tmp_path):
    with pytest.raises(TypeError, match="text"):
        ours.encode(None)
    with pytest.raises(TypeError, match="text"):
        WordPiece.train(["a list"], 100)
    with pytest.raises(ValueError, match="empty"):
        WordPiece.train("", 100)
    with pytest.raises(ValueError, match="vocab_size=10"):
        WordPiece.train("hello world", 10, progress=False)
    with pytest.raises(ValueError, match="unknown id 30522"):
        ours.decode([101, 30522])
    with pytest.raises(ValueError, match="max_len"):
        ours.encode_pair("a", "b", max_len=2)
    with pytest.raises(ValueError, match="not a file"):
        WordPiece.from_vocab(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="unk_token"):
        WordPiece(["a", "b"])
