"""The tokenizer comparison's pure functions (no browser)."""

import pytest
from matplotlib.figure import Figure

from llmbook.viz.tokenizers import (
    EXAMPLES,
    YOUR_TEXT,
    TokenRow,
    compare,
    compare_explorer,
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
    assert ex.last_error is None and len(ex.view.children) == 2
    ex.controls["text"].value = ""
    assert "empty" in ex.error.value
    ex.controls["examples"].value = list(EXAMPLES)[0]
    assert ex.last_error is None


def test_build_tokenizers_small():
    from llmbook.viz.tokenizers import build_tokenizers

    tk = build_tokenizers(english="the cat sat on the mat. " * 40, chinese="我今天去了商店。今天天气很好。" * 10, n_merges=20)
    rows = {r.name: r.tokens for r in compare("the cat 今天", tk)}
    assert rows["characters"] == list("the cat 今天")
    assert len(rows["UTF-8 bytes"]) == len("the cat 今天".encode())
    assert rows["jieba (word dictionary)"][-1] == "今天"
    assert rows["WordPiece, MiniLM (30,522)"][:2] == ["the", "cat"]
    assert len(tk) == 10
