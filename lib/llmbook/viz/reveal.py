"""Output that stays folded until the reader asks for it: the printed part of an exercise's solution.

A solution cell is collapsed in the notebook (its source and outputs hidden), but JupyterLab
shows a cell's new outputs again when it runs, so after Run All a solution that prints its
numbers would print the answer right under the exercise. ``solution_output()`` captures what
the block prints and shows it as one collapsed HTML ``<details>`` element: the reader sees a
line "show what the solution prints" and opens it when ready. The same element stays folded in
a static HTML page of the notebook. Plain-text viewers get one line saying where the output is.

    with solution_output():
        assert check("00.4", n_histories).passed
        print(f"{V}^2 = {n_histories(V, 3):,}")

What is printed still reaches the reader when the block raises (an assertion of the solution
fails): it is shown, folded, before the exception propagates.
"""

from __future__ import annotations

import contextlib
import html
import io
from typing import Iterator

from IPython.display import display

__all__ = ["solution_output", "SUMMARY"]

SUMMARY = "Show what the solution prints"
PLAIN = "(the solution's printed output is folded: open it in the notebook or the HTML page)"


@contextlib.contextmanager
def solution_output(summary: str = SUMMARY) -> Iterator[None]:
    """Capture what the block prints and display it as a collapsed ``<details>`` element."""
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError(f"summary must be a non-empty str, got {summary!r}")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            yield
    finally:
        text = buf.getvalue()
        if text:
            body = (f'<details class="llmbook-solution-output"><summary>{html.escape(summary)}</summary>'
                    f'<pre style="white-space:pre-wrap">{html.escape(text)}</pre></details>')
            display({"text/html": body, "text/plain": PLAIN}, raw=True)
