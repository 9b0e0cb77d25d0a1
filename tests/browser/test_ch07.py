"""The chapter-7 masked-word explorer in a real browser: typing, picking a word, top-k, inline errors."""

import pytest

pytestmark = pytest.mark.browser


def test_ch07_masked_word_explorer(lab):
    lab.open("tests/browser/fixtures/ch07_masked_word.ipynb")
    start = lab.view_png()
    lab.move_slider("top_k", -3)  # fewer bars
    fewer = lab.view_png()
    assert fewer != start
    lab.select("word", "1: be")  # mask another word
    other = lab.view_png()
    assert other != fewer
    lab.set_text("sentence", "the king is [MASK] .")
    typed = lab.view_png()
    assert typed != other
    assert lab.error_text().strip() == ""
    lab.save_screenshot("ch07_masked_word")
    lab.set_text("sentence", "no mask here")
    assert "[MASK]" in lab.error_text()
    lab.set_text("sentence", "")
    assert "empty" in lab.error_text()
