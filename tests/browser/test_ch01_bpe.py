"""Chapter 1's BPE merge explorer in a real browser: the merges slider moves in the browser over
a merge history computed once; level, text and corpus need Python."""

import pytest

pytestmark = pytest.mark.browser


def test_bpe_explorer_merges_level_and_inline_error(lab):
    lab.open("tests/browser/fixtures/ch01_bpe_explorer.ipynb")
    before = lab.view_svg()
    assert "<b>3</b> merges" in before
    slider = lab.page.locator(".llmbook-ctl-merges input[type=range]").first
    most = int(slider.get_attribute("max"))
    assert 3 < most < 300  # the merges this text allows, not a fixed 300
    lab.front_slider("merges", 8)  # 3 -> 8 merges: longer tokens
    after = lab.view_svg()
    lab.save_screenshot("bpe_after_merges")
    assert before != after and "<b>8</b> merges" in after
    lab.front_slider("merges", most)
    assert f"<b>{most}</b> merges" in lab.view_svg()
    assert lab.error_text().strip() == ""

    at_most = lab.view_svg()
    lab.click_option("level", "bytes")  # byte level: Chinese starts as 3 bytes a character
    as_bytes = lab.wait_view_change(at_most)  # Python retrains and sends a new merge history
    assert "256 bytes" in as_bytes

    lab.set_text("text", "")
    assert "empty" in lab.error_text()
    lab.save_screenshot("bpe_empty_text")
    lab.page.locator(".llmbook-front-stale").first.wait_for(state="visible", timeout=30_000)  # old picture greyed out

    lab.set_text("text", "今天天气很好")
    assert lab.error_text().strip() == ""
    assert "\ufffd" not in lab.wait_view_change(as_bytes)

    lab.select("corpus", "Shakespeare")  # the text box is not used now: it says so by being disabled
    assert lab.page.locator(".llmbook-ctl-text textarea").first.is_disabled()
    lab.select("corpus", "your text")
    assert not lab.page.locator(".llmbook-ctl-text textarea").first.is_disabled()
