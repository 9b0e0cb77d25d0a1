"""The chapter-3 attention explorer in a real browser: layer, head, scale and causal view are
drawn and handled by the browser from data sent once; the text box re-runs the model in Python."""

import pytest

pytestmark = pytest.mark.browser


def test_ch03_attention_explorer(lab):
    lab.open("tests/browser/fixtures/ch03_attention_explorer.ipynb")
    start = lab.view_svg()
    assert "All heads of layer 0, scale 1.0" in start and "one scale, all heads" in start
    lab.front_slider("scale", 2.0)  # sharper softmax, redrawn in the browser
    sharper = lab.view_svg()
    assert sharper != start and "scale 2.0" in sharper
    lab.front_slider("scale", 0.2)  # flatter: on the shared colour scale the maximum drops
    flatter = lab.view_svg()
    assert flatter != sharper
    lab.front_toggle("causal")
    causal = lab.view_svg()
    assert causal != flatter and ", causal" in causal
    lab.front_select("head", "head 1")
    one_head = lab.view_svg()
    assert one_head != causal and "head 1 of layer 0" in one_head
    lab.front_select("layer", "layer 1")
    layer1 = lab.view_svg()
    assert layer1 != one_head and "head 1 of layer 1" in layer1
    lab.set_text("text", "attention is all you need")  # Python: a new forward pass
    typed = lab.wait_view_change(layer1)
    assert "head 1 of layer 1" in typed  # the selection is kept
    lab.save_screenshot("ch03_attention_explorer")
    lab.set_text("text", "")
    assert "empty" in lab.error_text()
    # the old picture is greyed out and marked out of date, not left looking current
    stale = lab.page.locator(".llmbook-front-stale").first
    stale.wait_for(state="visible", timeout=30_000)
    lab.set_text("text", "abc")
    assert lab.error_text().strip() == ""
    stale.wait_for(state="hidden", timeout=30_000)
