"""The chapter-7 masked-word explorer in a real browser: typing, picking a word, top-k, inline errors.

The picture is drawn in the browser (a ``panels`` view): the sentence and the word go to the
kernel, which sends the model's top pieces; the top-k slider is a browser control.
"""

import re

import pytest

pytestmark = pytest.mark.browser


def bars(svg: str) -> int:
    """Bars drawn (the axes frame is a rect without fill)."""
    return len(re.findall(r'<rect(?![^>]*fill="none")', svg))


def test_ch07_masked_word_explorer(lab):
    lab.open("tests/browser/fixtures/ch07_masked_word.ipynb")
    start = lab.view_svg()
    assert bars(start) == 8 and "[MASK] at piece" in start  # top_k=8 by default
    lab.front_slider("top_k", 5)  # fewer bars, drawn without the kernel
    fewer = lab.view_svg()
    assert fewer != start and bars(fewer) == 5
    lab.select("word", "1: be")  # mask another word: the kernel sends new predictions
    other = lab.wait_view_change(fewer)
    assert bars(other) == 5 and "to [MASK] or not" in other
    lab.set_text("sentence", "the king is [MASK] .")
    typed = lab.wait_view_change(other)
    assert "the king is [MASK] ." in typed
    assert lab.error_text().strip() == ""
    lab.save_screenshot("ch07_masked_word")
    # A new sentence without [MASK]: its first content word is masked at once, so the
    # reader sees a prediction for it, not "no [MASK]" over the old picture.
    lab.set_text("sentence", "the queen is dead .")
    assert lab.error_text().strip() == ""
    word = lab.page.locator(".llmbook-ctl-word select").first
    assert word.evaluate("s => s.options[s.selectedIndex].text").replace("\xa0", " ") == "1: queen"
    fresh = lab.wait_view_change(typed)
    assert "the [MASK] is dead ." in fresh
    lab.front_slider("top_k", 12)
    more = lab.view_svg()
    assert bars(more) == 12 and more != fresh
    lab.save_screenshot("ch07_new_sentence")
    lab.set_text("sentence", ". , !")  # no word to mask
    assert "[MASK]" in lab.error_text() and lab.view_is_stale()
    lab.set_text("sentence", "")
    assert "empty" in lab.error_text()
    lab.set_text("sentence", "to be or [MASK] to be")  # fixed: the picture is drawn again, not greyed
    assert lab.error_text().strip() == "" and not lab.view_is_stale()
    assert "to be or [MASK] to be" in lab.view_svg()
