"""Chapter 0's next-character figure and explorer, without a browser."""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import pytest
import torch

import llmbook.viz  # noqa: F401  (applies the book style and the CJK font)
from llmbook.ngram import CharNGramLM
from llmbook.viz.intro import next_char_bar, next_char_explorer, next_char_spec, render_next_char, visible_char

TEXT = "ROMEO:\nO, she doth teach the torches to burn bright!\n\nJULIET:\nO Romeo, Romeo!\n今天天气很好\n"


@pytest.fixture(scope="module")
def lm() -> CharNGramLM:
    return CharNGramLM(order=2, alpha=0.5).fit(TEXT)


def _bar_heights(fig) -> list[float]:
    return [round(p.get_height(), 9) for p in fig.axes[0].patches]


def test_render_shows_top_characters_sorted_with_labels(lm):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph would warn
        fig = render_next_char(lm, "ROMEO:\nO", 1.0, top=5)
        fig.canvas.draw()
    ax = fig.axes[0]
    heights = _bar_heights(fig)
    assert len(heights) == 5 and heights == sorted(heights, reverse=True)
    chars, p = lm.prob_next("ROMEO:\nO")
    assert heights[0] == pytest.approx(float(p.max()))
    assert ax.get_xlabel().startswith("next character") and ax.get_ylabel() == "probability"
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert " " not in labels and "\n" not in labels
    assert "↵" in ax.get_title(loc="left")  # the newline in the prompt is shown visibly
    plt.close(fig)


def test_temperature_changes_the_picture(lm):
    cold = render_next_char(lm, "O", 0.3)
    hot = render_next_char(lm, "O", 3.0)
    assert _bar_heights(cold)[0] > _bar_heights(hot)[0]
    plt.close("all")


def test_space_and_newline_visible():
    assert visible_char(" ") == "␣" and visible_char("\n") == "↵" and visible_char("今") == "今"
    fig = next_char_bar([" ", "\n", "a"], torch.tensor([0.5, 0.3, 0.2]))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["␣", "↵", "a"]
    plt.close(fig)


def test_chinese_prompt_draws_without_missing_glyphs(lm):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = render_next_char(lm, "今天", 1.0)
        fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels[0] in {"天", "气"}
    plt.close(fig)


def test_bad_input_raises_clear_errors(lm):
    with pytest.raises(ValueError, match="empty"):
        render_next_char(lm, "", 1.0)
    with pytest.raises(ValueError, match="never saw"):
        render_next_char(lm, "xyz@", 1.0)
    with pytest.raises(ValueError, match="temperature"):
        render_next_char(lm, "O", 0.0)
    with pytest.raises(TypeError, match="model"):
        render_next_char("not a model", "O", 1.0)
    with pytest.raises(TypeError, match="prompt"):
        render_next_char(lm, 3, 1.0)
    with pytest.raises(ValueError, match="same length"):
        next_char_bar(["a"], [0.5, 0.5])
    with pytest.raises(ValueError, match="top"):
        next_char_bar(["a"], [1.0], top=0)


def test_explorer_controls_and_inline_error(lm):
    ex = next_char_explorer(lm)
    assert set(ex.controls) == {"prompt", "temperature"}
    slider = ex.controls["temperature"]
    assert (slider.min, slider.max, slider.continuous_update) == (0.1, 3.0, False)
    assert ex.controls["prompt"].continuous_update is True  # applied as the reader types (review UX #17)
    assert ex.view.children == (ex.front,)  # drawn in the browser
    first = ex.front.spec
    slider.value = 2.5
    assert ex.front.spec != first and ex.error.value == ""
    assert "T = 2.5" in ex.front.spec["panels"][0]["title"]
    kept = ex.front.spec
    ex.controls["prompt"].value = ""
    assert "empty" in ex.error.value and ex.front.spec == kept and ex.front.stale  # last picture kept, greyed out
    ex.controls["prompt"].value = "O"
    assert ex.error.value == "" and not ex.front.stale
    plt.close("all")


def test_title_names_the_history_that_matters():
    tri = CharNGramLM(order=3, alpha=0.5).fit(TEXT)
    title = render_next_char(tri, "JULIET:\nO Ro", 2.0).axes[0].get_title(loc="left")
    assert "T = 2" in title and "only \u201cRo\u201d matters" in title
    uni = CharNGramLM(order=1).fit(TEXT)
    title = render_next_char(uni, "O", 1.0).axes[0].get_title(loc="left")
    assert title.startswith("p(next | \u201cO\u201d)\n") and "does not matter" in title and "T =" not in title
    plt.close("all")


def test_spec_matches_the_figure(lm):
    spec = next_char_spec(lm, "ROMEO:\nO", 0.7)
    assert spec["kind"] == "panels"
    (bars,) = spec["panels"]
    fig = render_next_char(lm, "ROMEO:\nO", 0.7)
    ax = fig.axes[0]
    assert bars["labels"] == [t.get_text() for t in ax.get_xticklabels()]
    assert bars["values"] == pytest.approx(_bar_heights(fig), rel=1e-3)
    assert bars["title"] == ax.get_title(loc="left") and bars["xlabel"] == ax.get_xlabel()
    assert bars["note"] == ax.texts[0].get_text() and bars["ymax"] == pytest.approx(ax.get_ylim()[1])
    chars, p = lm.prob_next("ROMEO:\nO", temperature=0.7)
    assert bars["values"][0] == pytest.approx(float(p.max()), rel=1e-3)
    plt.close("all")


def test_spec_bad_input_names_the_parameter(lm):
    with pytest.raises(ValueError, match="prompt is empty"):
        next_char_spec(lm, "", 1.0)
    with pytest.raises(ValueError, match="never saw"):
        next_char_spec(lm, "xyz@", 1.0)
    with pytest.raises(ValueError, match="temperature"):
        next_char_spec(lm, "O", 0.0)
    with pytest.raises(ValueError, match="top"):
        next_char_spec(lm, "O", 1.0, top=0)
    with pytest.raises(TypeError, match="prompt"):
        next_char_spec(lm, 3, 1.0)
