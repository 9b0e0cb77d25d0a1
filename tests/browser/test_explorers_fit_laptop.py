"""The tallest explorers fit a laptop screen (review 2026-11-26, UX #5).

At 1366 x 768 with the file browser open (as ``make lab`` starts), JupyterLab's notebook shows about
650 px. The explorers of chapters 5 (positional encodings), 7 (MiniLM's 12-head attention grid),
9 (checkpoints side by side) and 1a (BPE merges) used to be 790-930 px tall there, so a control and
the picture it changes were never on screen together. The fixture builds each with its chapter's
settings on small data; here each must be no taller than the notebook's visible area (and 650 px),
and, the window narrowed to 900 px, none of their text may be drawn under 9 px (the layouts reflow
instead of shrinking).
"""

import pytest
from test_explorers_readable import _SIZES, MIN_FONT_PX

pytestmark = pytest.mark.browser

FIXTURE = "tests/browser/fixtures/laptop_fit.ipynb"
EXPLORERS = ["ch05 positional", "ch07 attention (12 heads)", "ch09 checkpoints", "ch01a BPE"]
FIT_PX = 650  # what a 768-px-high window shows of a notebook


def test_the_tallest_explorers_fit_a_laptop_screen(lab):
    page = lab.page
    page.set_viewport_size({"width": 1366, "height": 768})
    lab.open(FIXTURE, timeout_s=400)
    page.wait_for_timeout(1500)  # the pictures redraw for the width they got
    assert page.locator(".jp-SideBar .lm-TabBar-tab.lm-mod-current").count() >= 1, "the file browser is not open"
    visible = page.evaluate("() => document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')"
                            ".getBoundingClientRect().height")
    assert 600 <= visible <= 700, visible  # the notebook's visible area at this window size
    explorers = page.locator(".llmbook-explorer")
    assert explorers.count() == len(EXPLORERS)
    heights = {}
    for i, name in enumerate(EXPLORERS):
        ex = explorers.nth(i)
        ex.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
        # drawn: the browser-side picture has its content (SVG or HTML)
        assert ex.locator(".llmbook-front-picture").first.inner_html(), f"{name}: no picture"
        heights[name] = ex.evaluate("e => e.getBoundingClientRect().height")
        lab.save_screenshot(f"1366x768_{i}_{name.split()[0]}")
    print("explorer heights at 1366x768 (px):", {k: round(v) for k, v in heights.items()}, "visible:", round(visible))
    tall = {k: round(v) for k, v in heights.items() if v > min(FIT_PX, visible)}
    assert not tall, f"taller than the {min(FIT_PX, visible):.0f} px a 1366x768 window shows: {tall}"

    page.set_viewport_size({"width": 900, "height": 768})
    page.wait_for_timeout(1500)  # JupyterLab lays out again, then the pictures redraw for their width
    for i, name in enumerate(EXPLORERS):
        explorers.nth(i).scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        sizes = page.evaluate(_SIZES, i)
        assert len(sizes) >= 5, (name, sizes)
        small = sorted((s for s in sizes if s["px"] < MIN_FONT_PX - 0.05), key=lambda s: s["px"])
        assert not small, f"{name}: text under {MIN_FONT_PX} px at 900 px wide: {small[:8]}"
    lab.save_screenshot("900px")
