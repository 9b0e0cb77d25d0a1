"""Chapter 0's next-character explorer in a real browser (bars drawn in the browser from Python's data)."""

import pytest

pytestmark = pytest.mark.browser


def test_next_char_temperature_and_inline_error(lab):
    lab.open("tests/browser/fixtures/ch00_next_char.ipynb")
    before = lab.view_svg()
    assert "p(next | “ROMEO:↵O”)" in before and before.count("<rect") >= 20
    lab.save_screenshot("before")
    lab.move_slider("temperature", 10)  # 1.0 -> 2.0: a flatter distribution
    after = lab.wait_view_change(before)
    lab.save_screenshot("after_temperature")
    assert "T = 2" in after
    assert lab.error_text().strip() == ""

    lab.set_text("prompt", "JULIET:\nO Rome")
    typed = lab.wait_view_change(after)
    assert "O␣Rome”)" in typed and "only “e” matters" in typed

    lab.set_text("prompt", "")
    assert "empty" in lab.error_text()
    lab.save_screenshot("empty_prompt")
    assert lab.view_svg() == typed and lab.page.locator(".llmbook-front-stale").first.is_visible()  # kept, greyed out

    lab.set_text("prompt", "O")
    assert lab.error_text().strip() == ""
    assert "p(next | “O”)" in lab.wait_view_change(typed)


def test_solutions_stay_folded_after_run_all_in_the_chapter(lab):
    """Review 2026-11-26 (UX #9): JupyterLab shows a collapsed cell's new outputs when it runs, so after
    Run All a solution that prints would show its answer under the exercise (00.4's counts, 00.5's
    answer). The solutions print into a closed <details> element instead: nothing of them is visible
    until the reader opens it, and opening it shows the output."""
    lab.open("notebooks/00_introduction.ipynb")
    page = lab.page
    secrets = ["80^2 = 6,400", "'prob': 0.07", "80^5 = 3,276,800,000", "I withe the the"]  # what 00.3-00.5 print
    page.evaluate("""() => { const p = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')
                                 || document.querySelector('.jp-NotebookPanel .jp-Notebook');
                             p.scrollTop = p.scrollHeight; }""")
    page.wait_for_timeout(1500)
    folded = page.locator("details.llmbook-solution-output")
    folded.last.wait_for(state="attached", timeout=60_000)
    assert folded.count() >= 2  # 00.4 and 00.5 at least are rendered at the end of the notebook
    for i in range(folded.count()):
        box = folded.nth(i)
        box.scroll_into_view_if_needed()
        page.wait_for_timeout(200)
        # on screen, the solution's output is one line: the summary to click
        assert box.locator("summary").is_visible() and not box.locator("pre").is_visible()
        assert box.locator("summary").inner_text().strip() == "Show what the solution prints"
        for s in secrets:  # with this solution on screen, none of what the solutions print is visible
            hits = page.get_by_text(s)
            assert not any(hits.nth(j).is_visible() for j in range(hits.count())), s
    lab.save_screenshot("ch00_solutions_folded")
    last = folded.last
    last.locator("summary").click()
    assert last.locator("pre").is_visible() and "passed" in last.locator("pre").inner_text()
    assert "'prob': 0.07" in last.locator("pre").inner_text()  # 00.5's answer, shown once asked for
    lab.save_screenshot("ch00_solution_opened")
