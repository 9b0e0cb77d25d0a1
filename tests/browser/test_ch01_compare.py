"""Chapter 1's tokenizer comparison in a real browser."""

import pytest

pytestmark = pytest.mark.browser


def test_tokenizer_compare_text_example_and_inline_error(lab):
    lab.open("tests/browser/fixtures/ch01_tokenizer_compare.ipynb")
    before = lab.view_png()
    lab.set_text("text", "今天天气很好，我们去公园散步吧。")
    after = lab.view_png()
    after_html = lab.view_html()
    lab.save_screenshot("compare_chinese")
    assert before != after
    assert lab.error_text().strip() == ""

    lab.set_text("text", "")
    assert "empty" in lab.error_text()
    assert lab.view_html() == after_html and lab.view_is_stale()  # the last picture stays, greyed out

    lab.select("examples", "English: Shakespeare")  # an example replaces the typed text
    assert lab.error_text().strip() == ""
    assert lab.view_png() != after
