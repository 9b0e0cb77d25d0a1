"""Chapter 1's tokenizer comparison in a real browser (table and bars drawn in the browser from Python's data)."""

import pytest

pytestmark = pytest.mark.browser


def test_tokenizer_compare_text_example_and_inline_error(lab):
    lab.open("tests/browser/fixtures/ch01_tokenizer_compare.ipynb")
    before = lab.view_svg()
    assert "your text:" in before and "tokens per character" in before
    lab.set_text("text", "今天天气很好，我们去公园散步吧。")
    after = lab.wait_view_change(before)
    lab.save_screenshot("compare_chinese")
    assert "your text: 16 characters" in after and "The same 16 characters through every tokenizer" in after
    table = lab.page.locator(".llmbook-view .llmbook-panel-tokens").first
    assert "今天" in table.inner_text() and table.locator("tr").count() >= 2
    assert lab.error_text().strip() == ""

    lab.set_text("text", "")
    assert "empty" in lab.error_text()
    assert lab.view_svg() == after and lab.page.locator(".llmbook-front-stale").first.is_visible()  # kept, greyed out

    lab.select("examples", "English: Shakespeare")  # an example replaces the typed text
    assert lab.error_text().strip() == ""
    shakespeare = lab.wait_view_change(after)
    assert "example “English: Shakespeare”" in shakespeare and "Shall" in shakespeare
