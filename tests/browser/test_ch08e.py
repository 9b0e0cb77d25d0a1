"""Chapter 8e's explorers in a real browser: the logit-lens grid (hover text = top 5) and the patching view."""

import re

import pytest

pytestmark = pytest.mark.browser


def cells(page: str) -> list[str]:
    """The top tokens shown in the grid's cells, in reading order."""
    return re.findall(r'class="llmbook-lens-cell"[^>]*>([^<]*)</td>', page)


def hovers(page: str) -> list[str]:
    return re.findall(r'class="llmbook-lens-cell" title="([^"]*)"', page)


def test_ch08e_lens_and_patching_explorers(lab):
    lab.open("tests/browser/fixtures/ch08e_lens.ipynb")
    start = lab.view_html(0)
    n_layers = 4
    assert len(cells(start)) == (n_layers + 1) * len("Good morrow, my lor")
    assert all(len(h.split("\n")) == 5 for h in hovers(start))  # the hover text lists the top 5
    assert cells(start)[len("Good morrow, my lor") - 1] == "d"  # the top row (last block) at the last position
    lab.set_text("text", "To be, or not to be, that is the questio")
    lab.page.wait_for_function(
        "() => document.querySelectorAll('.llmbook-view')[0].querySelectorAll('.llmbook-lens-cell').length === 5 * 40")
    typed = lab.view_html(0)
    assert len(cells(typed)) == 5 * 40
    lab.select("model", "untrained GPT")
    lab.page.wait_for_function(
        "(before) => document.querySelectorAll('.llmbook-view')[0].innerHTML !== before", arg=typed)
    untrained = lab.view_html(0)
    assert cells(untrained) != cells(typed) and "untrained GPT" in untrained
    cell = lab.page.locator(".llmbook-view").nth(0).locator(".llmbook-lens-cell").first
    cell.hover()
    assert len(cell.get_attribute("title").split("\n")) == 5
    lab.save_screenshot("ch08e_lens_explorer")
    lab.set_text("text", "")  # bad input: an inline error, the kernel survives
    assert "prompt" in lab.error_text(0) and lab.view_is_stale(0)
    lab.set_text("text", "Good morrow")
    assert lab.error_text(0).strip() == "" and not lab.view_is_stale(0)
    before = lab.view_src(1)
    lab.move_slider("layer", 3)
    lab.page.wait_for_function(
        "(b) => [...document.querySelectorAll('.llmbook-view')[1].querySelectorAll('img')].map(i => i.src).join() !== b",
        arg=",".join(before))
    assert lab.view_src(1) != before
    lab.save_screenshot("ch08e_patching_explorer")
