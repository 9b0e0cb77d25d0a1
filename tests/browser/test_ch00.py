"""Chapter 0's next-character explorer in a real browser."""

import pytest

pytestmark = pytest.mark.browser


def test_next_char_temperature_and_inline_error(lab):
    lab.open("tests/browser/fixtures/ch00_next_char.ipynb")
    before = lab.view_png()
    lab.save_screenshot("before")
    lab.move_slider("temperature", 10)  # 1.0 -> 2.0: a flatter distribution
    after = lab.view_png()
    lab.save_screenshot("after_temperature")
    assert before != after
    assert lab.error_text().strip() == ""

    lab.set_text("prompt", "JULIET:\nO Rome")
    typed = lab.view_png()
    typed_html = lab.view_html()
    assert typed != after

    lab.set_text("prompt", "")
    assert "empty" in lab.error_text()
    lab.save_screenshot("empty_prompt")
    assert lab.view_html() == typed_html and lab.view_is_stale()  # the last picture stays, greyed out

    lab.set_text("prompt", "O")
    assert lab.error_text().strip() == ""
