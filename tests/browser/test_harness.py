"""The browser harness itself, on a minimal explorer: slider, text box, inline error."""


def test_explorer_slider_text_and_error(lab):
    lab.open("tests/browser/fixtures/harness_selftest.ipynb")
    before = lab.view_png()
    lab.save_screenshot("before")
    lab.move_slider("freq", 3)
    after = lab.view_png()
    after_html = lab.view_html()
    lab.save_screenshot("after")
    assert before != after, "moving the slider did not change the picture"
    assert lab.error_text().strip() == ""

    lab.set_text("title", "")
    assert "title is empty" in lab.error_text()
    # The last good picture stays, greyed out (its title no longer matches the controls), and the
    # kernel survives: a valid value renders again.
    assert lab.view_html() == after_html and lab.view_is_stale()
    lab.set_text("title", "back")
    assert lab.error_text().strip() == "" and not lab.view_is_stale()
    assert lab.view_png() != after
