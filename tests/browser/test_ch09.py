"""The chapter-9 checkpoint comparer in a real browser: every control re-draws the picture.

The picture is drawn in the browser (a ``panels`` view) from the numbers the kernel sends:
the checkpoints' next-token bars, their whole-answer bars and a table of sampled answers.
"""

import html
import re

import pytest

pytestmark = pytest.mark.browser


def answers(svg: str) -> list[str]:
    """The sampled answers in the table, as shown (repr of each answer)."""
    return [html.unescape(c) for c in re.findall(r"<td[^>]*>([^<]*)</td>", svg)]


def caption(svg: str) -> str:
    m = re.search(r"sampled answers \(([^)]*)\)", svg)
    return m.group(1) if m else ""


def test_ch09_checkpoint_explorer(lab):
    lab.open("tests/browser/fixtures/ch09_checkpoints.ipynb")
    start = lab.view_svg()
    assert "SFT compared with base" in start and "SFT: next token after the prompt" in start
    assert "base: whole answers" in start and caption(start) == "temperature 1, seed 0"
    lab.click_option("checkpoint", "DPO")           # SFT -> DPO: other bars, other answers
    dpo = lab.wait_view_change(start)
    assert "DPO compared with base" in dpo and "DPO: whole answers" in dpo
    lab.click_option("checkpoint", "LoRA")
    lora = lab.wait_view_change(dpo)
    assert "LoRA compared with base" in lora
    lab.click_option("against", "SFT")              # the right-hand column follows its own selector
    against = lab.wait_view_change(lora)
    assert "LoRA compared with SFT" in against and "SFT: whole answers" in against
    lab.select("prompt", "Who says: Et tu, Brute?")
    prompt = lab.wait_view_change(against)
    assert "Et tu, Brute?" in prompt
    lab.move_slider("temperature", 3)               # 1.0 -> 1.3: new samples, same distributions
    warmer = lab.wait_view_change(prompt)
    assert caption(warmer) == "temperature 1.3, seed 0"
    lab.set_text("seed", "5")
    seeded = lab.wait_view_change(warmer)
    assert caption(seeded) == "temperature 1.3, seed 5"
    lab.save_screenshot("ch09_checkpoint_explorer")
    # Review UX #2: a typed question (the one-line box cannot hold the new line every menu prompt
    # ends with) is formatted as the menu's: the checkpoints answer it as they answer the menu's.
    lab.select("prompt", "Who says: Put out the light?")
    menu = lab.wait_view_change(seeded)
    lab.select("prompt", "Who says: To be, or not to be?")
    other = lab.wait_view_change(menu)
    lab.set_text("custom", "Who says: Put out the light?")
    custom = lab.wait_view_change(other)
    assert "Put out the light?" in custom and "\\n" not in custom
    assert answers(custom) == answers(menu) and len(answers(custom)) == 6
    assert any(a not in ("''", '""') for a in answers(custom)), answers(custom)  # not every answer empty
    lab.set_text("custom", "日本")                   # bad input: shown inline, the kernel survives
    assert "outside the vocabulary" in lab.error_text() and lab.view_is_stale()
    lab.set_text("custom", "")
    assert lab.error_text().strip() == "" and not lab.view_is_stale()
    assert "To be, or not to be?" in lab.view_svg()  # the menu's prompt again
