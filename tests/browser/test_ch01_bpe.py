"""Chapter 1's BPE merge explorer in a real browser."""

import pytest

pytestmark = pytest.mark.browser


def test_bpe_explorer_merges_level_and_inline_error(lab):
    lab.open("tests/browser/fixtures/ch01_bpe_explorer.ipynb")
    before = lab.view_png()
    lab.move_slider("merges", 5)  # 3 -> 8 merges: longer tokens
    after = lab.view_png()
    lab.save_screenshot("bpe_after_merges")
    assert before != after
    assert lab.error_text().strip() == ""

    lab.click_option("level", "bytes")  # byte level: Chinese starts as 3 bytes a character
    as_bytes = lab.view_png()
    assert as_bytes != after

    lab.set_text("text", "")
    assert "empty" in lab.error_text()
    lab.save_screenshot("bpe_empty_text")
    assert lab.view_png() == as_bytes  # the last good picture stays

    lab.set_text("text", "今天天气很好")
    assert lab.error_text().strip() == ""
