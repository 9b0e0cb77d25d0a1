"""llmbook.viz.reveal: a solution's printed output is shown folded (review 2026-11-26, UX #9)."""

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
