"""llmbook.viz.reveal: a solution's printed output is shown folded (review 2026-11-26, UX #9)."""

import base64

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from llmbook.viz.reveal import PLAIN, SUMMARY, solution_output


def _run(block):
    InteractiveShell.instance()  # display() needs a shell to publish to
    with capture_output() as cap:
        try:
            block()
        except AssertionError:
            pass
    return cap


def test_printed_text_is_displayed_in_a_closed_details_element_not_on_stdout():
    def block():
        with solution_output():
            print("the answer is 42 < 43")
    cap = _run(block)
    assert cap.stdout == ""  # nothing printed in the open
    (out,) = cap.outputs
    html = out.data["text/html"]
    assert html.startswith('<details class="llmbook-solution-output"><summary>' + SUMMARY)
    assert "<details open" not in html and "the answer is 42 &lt; 43" in html
    assert out.data["text/plain"] == PLAIN and "42" not in PLAIN


def test_output_is_kept_when_the_solution_fails_and_nothing_shows_when_nothing_prints():
    def failing():
        with solution_output():
            print("partial result 7")
            raise AssertionError("solution broken")
    cap = _run(failing)
    assert "partial result 7" in cap.outputs[0].data["text/html"]

    def silent():
        with solution_output():
            pass
    assert _run(silent).outputs == []


def test_summary_must_be_text():
    with pytest.raises(ValueError, match="summary"):
        with solution_output(""):
            pass


def test_a_displayed_figure_is_folded_too_in_order_with_the_printed_text():
    """A solution that shows a figure (``plt.show()`` displays it) keeps it inside the fold, after the
    text printed before it; nothing is displayed in the open, and the shell's publisher is restored."""
    from IPython.display import Image, display

    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
    shell = InteractiveShell.instance()

    def block():
        before = shell.display_pub
        with solution_output():
            print("first the numbers")
            display(Image(data=png, format="png"))
            print("then the verdict")
        assert shell.display_pub is before

    cap = _run(block)
    assert cap.stdout == ""
    (out,) = cap.outputs  # one fold, no figure outside it
    html = out.data["text/html"]
    img = html.index('<img src="data:image/png;base64,' + base64.b64encode(png).decode())
    assert html.index("first the numbers") < img < html.index("then the verdict")
    assert out.data["text/plain"] == PLAIN


def test_the_publisher_is_restored_when_the_block_raises():
    shell = InteractiveShell.instance()
    before = shell.display_pub

    def failing():
        with solution_output():
            raise AssertionError("solution broken")
    _run(failing)
    assert shell.display_pub is before
