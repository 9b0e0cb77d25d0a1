"""treebank_split takes each line as one sentence: the final full stop of every line is split off."""

from llmbook.data import load_text
from llmbook.tokenizers import PennTreebankTokenizer
from llmbook.tokenizers.whitespace import treebank_split


def test_final_period_of_every_line():
    assert treebank_split("the cat sat.\nthe dog ran.") == ["the", "cat", "sat", ".", "the", "dog", "ran", "."]
    assert treebank_split("He said (so).\n'Tis true.") == ["He", "said", "(", "so", ")", ".", "'", "Tis", "true", "."]
    assert treebank_split("Wait... what?\n$1,000, sir.") == ["Wait", "...", "what", "?", "$", "1,000", ",", "sir", "."]
    # a full stop inside a line is not a sentence end to these rules, nor a dot inside a word
    assert treebank_split("Go. Come here, e.g. now.") == ["Go.", "Come", "here", ",", "e.g.", "now", "."]


def test_whole_text_equals_line_by_line():
    text = load_text("shakespeare")[:60_000]
    assert treebank_split(text) == [w for line in text.splitlines() for w in treebank_split(line)]
    tok = PennTreebankTokenizer.train(text)
    by_line = [w for line in text.splitlines() for w in treebank_split(line)]
    assert set(tok.words) == set(by_line) and len(tok.words) == len(set(by_line))
    assert "sir" in tok.words and tok.coverage(text) == 1.0
