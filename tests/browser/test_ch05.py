"""Chapter 5's positional-encoding explorer in a real browser."""

import pytest

pytestmark = pytest.mark.browser


def test_positional_explorer(lab):
    lab.open("tests/browser/fixtures/ch05_positional.ipynb")
    before = lab.view_svg()
    lab.save_screenshot("ch05_before")
    lab.move_slider("d_model", 4)  # 32 -> 48: Python recomputes the table
    wider = lab.wait_view_change(before)
    assert "d_model=48" in wider
    assert lab.error_text().strip() == ""

    lab.move_slider("base", -4)  # 10^4 -> 10^3
    smaller_base = lab.wait_view_change(wider)
    assert "base = 1000," in smaller_base

    lab.toggle("rope")
    rope = lab.wait_view_change(smaller_base)
    assert "RoPE" in rope
    lab.save_screenshot("ch05_rope")

    # dims: chosen in the browser from the table already sent
    lab.front_text("dims", "0, 999")
    assert "out of range" in lab.front_error()
    lab.front_text("dims", "0, 2")
    assert lab.front_error().strip() == ""
    two = lab.view_svg()
    assert two != rope and "dim 2" in two and "dim 4" not in two


def test_a_small_d_model_still_draws(lab):
    """Review 2026-11-26 (UX #6): d_model below the default dims (0, 4, 16) used to replace the
    picture by an error the reader did not cause. Now the dims that no longer exist are left out,
    with a note, and the picture is drawn; a typo in dims keeps the old picture, greyed."""
    lab.open("tests/browser/fixtures/ch05_positional.ipynb")
    before = lab.view_svg()
    lab.set_slider("d_model", 8)
    small = lab.wait_view_change(before)
    assert "d_model=8" in small and "dim 4" in small and "<svg" in small
    assert lab.error_text().strip() == "" and lab.front_error().strip() == ""
    assert "dims 16 left out: d_model=8" in lab.page.locator(".llmbook-front-note").first.inner_text()
    assert not lab.view_is_stale()
    lab.save_screenshot("ch05_d_model_8")
    lab.front_text("dims", "0, x")
    assert "comma-separated" in lab.front_error()
    assert lab.view_svg() == small and lab.view_is_stale()  # kept, greyed, under the note
    lab.save_screenshot("ch05_dims_typo")


# ----------------------------------------------------------------- exercise cells (issue 14)
def _cell_index(cells, *texts: str) -> int:
    """Index of the first notebook cell whose text holds every one of ``texts``.

    JupyterLab renders cells lazily, so the notebook is scrolled down until the cell appears.
    """
    page = cells.page
    for _ in range(80):
        for i in range(cells.count()):
            content = cells.nth(i).text_content() or ""
            if all(t in content for t in texts):
                return i
        page.evaluate("""() => { const p = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')
                                     || document.querySelector('.jp-NotebookPanel .jp-Notebook');
                                 p.scrollTop += p.clientHeight; }""")
        page.wait_for_timeout(300)
    raise AssertionError(f"no cell holds {texts}")


def _run_cell(lab, cell) -> None:
    """Select a code cell through its editor, run it with Shift+Enter, wait for the kernel."""
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-InputArea-editor").click()
    lab.page.keyboard.press("Shift+Enter")
    lab.page.wait_for_timeout(500)
    lab.wait_idle(timeout_s=180)


def test_exercise_cells_in_the_chapter(lab):
    """The real chapter: the solution is collapsed, and a wrong answer gets the checker's inline message."""
    lab.open_unrun("notebooks/05_positional_encoding.ipynb")
    cells = lab.page.locator(".jp-Notebook .jp-Cell")
    answer_at = _cell_index(cells, "def pe_norm2(d):", "NotImplemented")
    answer, check_cell, solution = cells.nth(answer_at), cells.nth(answer_at + 1), cells.nth(answer_at + 2)
    assert 'check("05.1", pe_norm2)' in (check_cell.text_content() or "")

    # The solution shows only JupyterLab's collapsed-input placeholder, not its code.
    solution.scroll_into_view_if_needed()
    assert solution.locator(".jp-InputPlaceholder").first.is_visible()
    assert not solution.locator(".jp-InputArea-editor").first.is_visible()
    assert not solution.get_by_text("assert check(").first.is_visible()
    lab.save_screenshot("ch05_exercise_collapsed")

    # The imports cell defines check(); then a wrong answer: every entry counted as if it squared to 1.
    _run_cell(lab, cells.nth(_cell_index(cells, "from llmbook.exercises import check")))
    answer.scroll_into_view_if_needed()
    answer.locator(".jp-InputArea-editor").click()
    lab.page.keyboard.press("Control+A")
    lab.page.keyboard.insert_text("def pe_norm2(d):\n    return d")
    lab.page.keyboard.press("Shift+Enter")
    lab.page.wait_for_timeout(500)
    lab.wait_idle(timeout_s=60)
    _run_cell(lab, check_cell)
    out = check_cell.locator(".jp-OutputArea-output").first
    out.wait_for(state="visible", timeout=30_000)
    text = out.inner_text()
    lab.save_screenshot("ch05_exercise_wrong_answer")
    assert "05.1 not yet" in text, text
    assert "only half the entries are sines" in text, text  # the hint for this wrong answer
    assert "d / 2" not in text and "d/2" not in text  # the verdict never prints the solution
