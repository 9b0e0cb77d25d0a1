"""The shared front end (llmbook.viz.frontend) in a real browser: a control drawn by render.js
redraws the SVG without the kernel, and the selection reaches Python (which answers by marking
the view stale, shown by the browser)."""

import pytest

pytestmark = pytest.mark.browser


def test_bars_frame_slider_and_selection_round_trip(lab):
    lab.open("tests/browser/fixtures/frontend_bars.ipynb")
    first = lab.view_svg()
    assert "next letter — T=2" in first and "<rect" in first
    lab.front_slider("step", 1)
    second = lab.view_svg()
    assert second != first and "T=1" in second
    stale = lab.page.locator(".llmbook-front-stale").first
    assert not stale.is_visible()
    lab.front_slider("step", 2)
    assert "T=0.5" in lab.view_svg()
    stale.wait_for(state="visible", timeout=30_000)  # Python saw step == 2 and set stale
    lab.save_screenshot("frontend_bars")
