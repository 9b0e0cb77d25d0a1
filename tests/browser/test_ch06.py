"""The chapter-6 sampling explorer in a real browser: each control re-draws the view."""

import pytest

pytestmark = pytest.mark.browser


def test_ch06_sampling_explorer(lab):
    lab.open("tests/browser/fixtures/ch06_sampling.ipynb")
    start = lab.view_png()
    lab.move_slider("temperature", -10)  # 1.0 -> 0.5: sharper bars, another continuation
    cooler = lab.view_png()
    assert cooler != start
    lab.move_slider("top_k", 5)  # keep 5 characters: the rest turn grey
    topk = lab.view_png()
    assert topk != cooler
    lab.move_slider("top_p", -8)  # 1.0 -> 0.6
    topp = lab.view_png()
    assert topp != topk
    lab.set_text("seed", "7")
    reseeded = lab.view_png()
    assert reseeded != topp
    # The prompt box is a text area: the line break reaches the model and the view.
    box = lab.page.locator(".llmbook-ctl-prompt textarea").first
    assert box.input_value() == "ROMEO:\nWhat "
    lab.set_text("prompt", "JULIET:\nO ")
    assert lab.view_png() != reseeded
    assert "JULIET:\nO" in lab.page.locator(".llmbook-view").first.inner_text()
    lab.save_screenshot("ch06_sampling_explorer")
    lab.set_text("prompt", "")
    assert "empty" in lab.error_text()
    lab.set_text("prompt", "日本")
    assert "outside the vocabulary" in lab.error_text()
