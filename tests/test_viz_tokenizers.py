"""The tokenizer comparison's pure functions (no browser)."""

import pytest
from matplotlib.figure import Figure

from llmbook.viz.tokenizers import (
    EXAMPLES,
    YOUR_TEXT,
    TokenRow,
    compare,
    compare_explorer,
    compare_spec,
    comparison_figure,
    comparison_html,
    render_compare,
)

# Cheap stand-ins: the view does not care which tokenizer made the tokens.
TOY = {"whitespace": str.split, "characters": list, "pairs": lambda t: [t[i : i + 2] for i in range(0, len(t), 2)]}


def test_compare_and_table():
    rows = compare("to be or", TOY)
    assert [len(r.tokens) for r in rows] == [3, 8, 4]
    table = comparison_html(rows, 8)
    assert table.count("<tr") == 4 and "0.38" in table and "1.00" in table


def test_render_uses_example_or_text():
    html, fig = render_compare("ignored", "Chinese: the shop", TOY)
    assert isinstance(fig, Figure) and "商" in html
    html, _ = render_compare("hello world", YOUR_TEXT, TOY)
    assert "hello" in html and "商" not in html


def test_figure_labels():
    fig = comparison_figure([TokenRow("a", ["x"]), TokenRow("b", ["x", "y"])], 2)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "tokens per character" and ax.get_title()


def test_bad_input():
    with pytest.raises(ValueError, match="text is empty"):
        render_compare("", YOUR_TEXT, TOY)
    with pytest.raises(ValueError, match="text is empty"):
        render_compare("  \n", YOUR_TEXT, TOY)
    with pytest.raises(TypeError, match="text must be a str"):
        compare(3, TOY)
    with pytest.raises(ValueError, match="examples="):
        render_compare("x", "Klingon", TOY)
    with pytest.raises(ValueError, match="tokenizers"):
        compare("x", {})
    with pytest.raises(ValueError, match="n_chars"):
        comparison_html([], 0)
    with pytest.raises(ValueError, match="rows is empty"):
        comparison_figure([], 3)


def test_explorer_shows_error_inline():
    ex = compare_explorer(TOY)
    assert ex.last_error is None and ex.view.children == (ex.front,)
    before = ex.front.spec
    ex.controls["text"].value = ""
    assert "empty" in ex.error.value and ex.front.stale and ex.front.spec == before
    ex.controls["examples"].value = list(EXAMPLES)[0]
    assert ex.last_error is None and not ex.front.stale
    assert ex.front.spec["title"].startswith(f"example \u201c{list(EXAMPLES)[0]}\u201d")


def test_spec_matches_table_and_figure():
    spec = compare_spec("ignored", "Chinese: the shop", TOY)
    text = EXAMPLES["Chinese: the shop"]
    rows = compare(text, TOY)
    assert spec["kind"] == "panels" and spec["title"] == f"example \u201cChinese: the shop\u201d: {len(text)} characters through every tokenizer"
    table, bars = spec["panels"]
    assert table["n_chars"] == len(text)
    assert [(r["name"], r["tokens"]) for r in table["rows"]] == [(r.name, r.tokens) for r in rows]
    fig = comparison_figure(rows, len(text))
    ax = fig.axes[0]
    assert bars["title"] == ax.get_title() and bars["xlabel"] == ax.get_xlabel()
    # matplotlib draws the first tokenizer at the top (reversed y); the browser lists it first
    assert bars["labels"] == [t.get_text() for t in ax.get_yticklabels()][::-1]
    assert bars["values"] == pytest.approx([p.get_width() for p in ax.patches][::-1])
    own = compare_spec("to be or", YOUR_TEXT, TOY)
    assert own["title"].startswith("your text: 8 characters") and own["panels"][1]["values"] == pytest.approx([3 / 8, 1.0, 0.5])


def test_spec_tokenizes_each_text_once():
    calls = []
    counting = {"whitespace": lambda t: (calls.append(t), t.split())[1], "characters": list}
    ex = compare_explorer(counting, text="to be")
    ex.controls["text"].value = "or not"
    ex.controls["text"].value = "to be"  # seen before: served from the cache
    ex.controls["examples"].value = "English: the mouse"
    ex.controls["examples"].value = YOUR_TEXT
    assert calls == ["to be", "or not", EXAMPLES["English: the mouse"]]
    assert ex.front.spec["panels"][0]["rows"][0]["tokens"] == ["to", "be"]


def test_spec_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="text is empty"):
        compare_spec(" ", YOUR_TEXT, TOY)
    with pytest.raises(ValueError, match="examples="):
        compare_spec("x", "Klingon", TOY)
    with pytest.raises(TypeError, match="text must be a str"):
        compare_spec(None, YOUR_TEXT, TOY)


def test_build_tokenizers_small():
    from llmbook.viz.tokenizers import build_tokenizers

    tk = build_tokenizers(english="the cat sat on the mat. " * 40, chinese="我今天去了商店。今天天气很好。" * 10, n_merges=20)
    rows = {r.name: r.tokens for r in compare("the cat 今天", tk)}
    assert rows["characters"] == list("the cat 今天")
    assert len(rows["UTF-8 bytes"]) == len("the cat 今天".encode())
    assert rows["jieba (word dictionary)"][-1] == "今天"
    assert rows["WordPiece, MiniLM (30,522)"][:2] == ["the", "cat"]
    assert len(tk) == 10
