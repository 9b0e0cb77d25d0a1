"""The chapter-9 checkpoint comparer in a real browser: the checkpoint selector re-draws the view."""

import time

import pytest

pytestmark = pytest.mark.browser


def changed_view(lab, old, timeout_s=60):
    """The view's image data once it differs from ``old`` (a re-render on a busy machine can
    outlast the harness's idle wait); fails after ``timeout_s``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        now = lab.view_src()
        if now != old:
            return now
        lab.page.wait_for_timeout(500)
    raise AssertionError(f"the view did not change within {timeout_s} s")


def test_ch09_checkpoint_explorer(lab):
    lab.open("tests/browser/fixtures/ch09_checkpoints.ipynb")
    start = lab.view_src()
    lab.click_option("checkpoint", "DPO")           # SFT -> DPO: other bars, other answers
    dpo = changed_view(lab, start)
    lab.click_option("checkpoint", "LoRA")
    lora = changed_view(lab, dpo)
    lab.click_option("against", "SFT")              # the right-hand column follows its own selector
    against = changed_view(lab, lora)
    lab.select("prompt", "Who says: Et tu, Brute?")
    changed_view(lab, against)
    lab.save_screenshot("ch09_checkpoint_explorer")
    lab.set_text("custom", "日本")                   # bad input: shown inline, the kernel survives
    deadline = time.time() + 60
    while "outside the vocabulary" not in lab.error_text() and time.time() < deadline:
        lab.page.wait_for_timeout(500)
    assert "outside the vocabulary" in lab.error_text()
    lab.set_text("custom", "")
    deadline = time.time() + 60
    while lab.error_text().strip() and time.time() < deadline:
        lab.page.wait_for_timeout(500)
    assert lab.error_text().strip() == ""
