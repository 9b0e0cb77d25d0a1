"""The chapter-6 sampling explorer in a real browser: each control re-draws the view.

The view is drawn in the browser (SVG bars + the continuation as text) from the data
Python sends, so each step compares the picture's markup and reads its title.
"""

import pytest

pytestmark = pytest.mark.browser


def test_ch06_sampling_explorer(lab):
    lab.open("tests/browser/fixtures/ch06_sampling.ipynb")
    start = lab.view_svg()
    assert "temperature 1.00, top_k off, top_p off, seed 0" in start
    assert start.count("<rect") >= 20 and "#bbbbbb" not in start  # no filter: every bar kept (blue)
    lab.move_slider("temperature", -10)  # 1.0 -> 0.5: sharper bars, another continuation
    cooler = lab.wait_view_change(start)
    assert "temperature 0.50" in cooler
    lab.move_slider("top_k", 5)  # keep 5 characters: the rest turn grey
    topk = lab.wait_view_change(cooler)
    assert "top_k 5" in topk and "5 of 81 tokens kept" in topk and "#bbbbbb" in topk
    lab.move_slider("top_p", -8)  # 1.0 -> 0.6
    topp = lab.wait_view_change(topk)
    assert "top_p 0.60" in topp
    lab.set_text("seed", "7")
    reseeded = lab.wait_view_change(topp)
    assert "seed 7" in reseeded
    # The prompt box is a text area: the line break reaches the model and the view.
    box = lab.page.locator(".llmbook-ctl-prompt textarea").first
    assert box.input_value() == "ROMEO:\nWhat "
    lab.set_text("prompt", "JULIET:\nO ")
    juliet = lab.wait_view_change(reseeded)
    assert "JULIET:\nO" in lab.page.locator(".llmbook-view .llmbook-panel-text").first.inner_text()
    lab.save_screenshot("ch06_sampling_explorer")
    lab.set_text("prompt", "")
    assert "empty" in lab.error_text()
    assert lab.view_svg() == juliet  # the last picture stays, greyed out
    assert lab.page.locator(".llmbook-front-stale").first.is_visible()
    lab.set_text("prompt", "日本")
    assert "outside the vocabulary" in lab.error_text()


# Counts the redraws of the first browser-drawn picture (each new spec from Python redraws it once).
_COUNT_REDRAWS = """() => {
  const pic = document.querySelector('.llmbook-view .llmbook-front-picture');
  window.__llmbookRedraws = 0;
  new MutationObserver(() => { window.__llmbookRedraws += 1; }).observe(pic, {childList: true});
}"""


def test_ch06_prompt_applies_as_you_type_without_leaving_the_box(lab):
    """Review 2026-11-26 UX #17: the prompt box applies without a click outside it (as chapters 0 and
    1a's text boxes do), once the typing pauses: a burst of keystrokes redraws once, and Enter is a
    line break of the prompt that applies too."""
    lab.open("tests/browser/fixtures/ch06_sampling.ipynb")
    start = lab.view_svg()
    prompt = lambda: lab.page.locator(".llmbook-view .llmbook-panel-text b").first.inner_text()  # the prompt, bold
    box = lab.page.locator(".llmbook-ctl-prompt textarea").first
    box.scroll_into_view_if_needed()
    box.click()
    lab.page.keyboard.press("Control+End")
    lab.page.evaluate(_COUNT_REDRAWS)
    box.press_sequentially("is it", delay=60)  # five keystrokes, no blur, no Enter
    typed = lab.wait_view_change(start)
    assert prompt() == "ROMEO:\nWhat is it"
    assert box.evaluate("e => document.activeElement === e")  # the reader never left the box
    lab.page.wait_for_timeout(1500)
    assert lab.page.evaluate("() => window.__llmbookRedraws") == 1  # one redraw for the burst, not five
    box.press("Enter")
    box.press_sequentially("JULIET:", delay=60)
    lab.wait_view_change(typed)
    assert prompt() == "ROMEO:\nWhat is it\nJULIET:"
    assert lab.page.locator(".llmbook-explorer b").first.inner_text().endswith("(the prompt applies when you pause typing)")
    lab.save_screenshot("ch06_prompt_typed")
