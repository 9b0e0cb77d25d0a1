"""Keyboard on the sliders render.js draws (issue 18), inside JupyterLab: a focused slider moves
with ArrowRight/ArrowLeft/End/Home and the picture follows. In JupyterLab the notebook's shortcuts
(Lumino's keymap, on the document) bind the arrow keys in command mode and would swallow them;
render.js keeps those keys inside the control. (The static HTML page: test_static_html.py.)"""

import pytest

pytestmark = pytest.mark.browser


def _press(lab, slider, key: str) -> str:
    """Press ``key`` on the focused slider; return the picture drawn after it."""
    slider.press(key)
    lab.page.wait_for_timeout(150)
    assert lab.page.evaluate("document.activeElement && document.activeElement.type") == "range", (
        f"the slider lost the keyboard focus after {key}")
    return lab.view_svg()


def test_arrow_keys_move_a_browser_drawn_slider(lab):
    lab.open("tests/browser/fixtures/frontend_bars.ipynb")
    slider = lab.page.locator(".llmbook-ctl-step input[type=range]").first
    slider.scroll_into_view_if_needed()
    slider.focus()
    start = lab.view_svg()
    assert slider.input_value() == "0" and "T=2" in start
    right = _press(lab, slider, "ArrowRight")
    assert slider.input_value() == "1", "ArrowRight did not move the slider (the notebook's shortcuts ate the key?)"
    assert right != start and "T=1" in right
    left = _press(lab, slider, "ArrowLeft")
    assert slider.input_value() == "0" and "T=2" in left
    end = _press(lab, slider, "End")
    assert slider.input_value() == "2" and "T=0.5" in end
    # the selection reached Python (which marks frame 2 stale) like a mouse move would
    lab.page.locator(".llmbook-front-stale").first.wait_for(state="visible", timeout=30_000)
    home = _press(lab, slider, "Home")
    assert slider.input_value() == "0" and "T=2" in home


def test_arrow_keys_step_the_attention_scale(lab):
    lab.open("tests/browser/fixtures/ch03_attention_explorer.ipynb")
    slider = lab.page.locator(".llmbook-ctl-scale input[type=range]").first
    slider.scroll_into_view_if_needed()
    slider.focus()
    start = lab.view_svg()
    assert "scale 1.0" in start
    once = _press(lab, slider, "ArrowRight")
    assert "scale 1.1" in once and once != start
    lab.wait_idle(timeout_s=60)  # the kernel has seen the new scale: focus and keys still work
    twice = _press(lab, slider, "ArrowRight")
    assert "scale 1.2" in twice and twice != once
