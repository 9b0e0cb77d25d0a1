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
    # A new sentence without [MASK]: its first content word is masked at once, so the
    # reader sees a prediction for it, not "no [MASK]" over the old picture.
    lab.set_text("sentence", "the queen is dead .")
    assert lab.error_text().strip() == ""
    word = lab.page.locator(".llmbook-ctl-word select").first
    assert word.evaluate("s => s.options[s.selectedIndex].text").replace("\xa0", " ") == "1: queen"
    fresh = lab.view_png()
    assert fresh != typed
    lab.save_screenshot("ch07_new_sentence")
    lab.set_text("sentence", ". , !")  # no word to mask
    assert "[MASK]" in lab.error_text()
    lab.set_text("sentence", "")
    assert "empty" in lab.error_text()
