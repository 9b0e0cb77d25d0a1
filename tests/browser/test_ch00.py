"""Chapter 0's next-character explorer in a real browser (bars drawn in the browser from Python's data)."""

import pytest

pytestmark = pytest.mark.browser


def test_next_char_temperature_and_inline_error(lab):
    lab.open("tests/browser/fixtures/ch00_next_char.ipynb")
    before = lab.view_svg()
    assert "p(next | “ROMEO:↵O”)" in before and before.count("<rect") >= 20
    lab.save_screenshot("before")
    lab.move_slider("temperature", 10)  # 1.0 -> 2.0: a flatter distribution
    after = lab.wait_view_change(before)
    lab.save_screenshot("after_temperature")
    assert "T = 2" in after
    assert lab.error_text().strip() == ""

    lab.set_text("prompt", "JULIET:\nO Rome")
    typed = lab.wait_view_change(after)
    assert "O␣Rome”)" in typed and "only “e” matters" in typed

    lab.set_text("prompt", "")
    assert "empty" in lab.error_text()
    lab.save_screenshot("empty_prompt")
    assert lab.view_svg() == typed and lab.page.locator(".llmbook-front-stale").first.is_visible()  # kept, greyed out

    lab.set_text("prompt", "O")
    assert lab.error_text().strip() == ""
    assert "p(next | “O”)" in lab.wait_view_change(typed)
