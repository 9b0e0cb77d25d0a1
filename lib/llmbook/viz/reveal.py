"""Output that stays folded until the reader asks for it: what an exercise's solution prints or shows.

A solution cell is collapsed in the notebook (its source and outputs hidden), but JupyterLab
shows a cell's new outputs again when it runs, so after Run All a solution that prints its
numbers would print the answer right under the exercise. ``solution_output()`` captures what
the block prints, and what it displays (a figure shown with ``plt.show()``, an HTML table), and
shows it all, in order, as one collapsed HTML ``<details>`` element: the reader sees a line
"show what the solution prints" and opens it when ready. The same element stays folded in a
static HTML page of the notebook. Plain-text viewers get one line saying where the output is.

    with solution_output():
        assert check("00.4", n_histories).passed
        print(f"{V}^2 = {n_histories(V, 3):,}")

What is printed still reaches the reader when the block raises (an assertion of the solution
fails): it is shown, folded, before the exception propagates. Leaves out: what goes to stderr
(warnings) and a cell's last bare expression (outside the block), which show as usual.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
from typing import Iterator

from IPython.core.displaypub import DisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display

__all__ = ["solution_output", "SUMMARY", "PLAIN"]

SUMMARY = "Show what the solution prints"
PLAIN = "(the solution's printed output is folded: open it in the notebook or the HTML page)"


def _as_html(data: dict) -> str:
    """One displayed output (a mime bundle) as HTML that can sit inside the fold."""
    if "text/html" in data:
        return str(data["text/html"])
    for mime in ("image/png", "image/jpeg"):
        if mime in data:
            raw = data[mime]
            b64 = base64.b64encode(raw).decode("ascii") if isinstance(raw, bytes) else str(raw).replace("\n", "")
            return f'<img src="data:{mime};base64,{b64}" style="max-width:100%">'
    if "image/svg+xml" in data:
        return str(data["image/svg+xml"])
    return _pre(str(data.get("text/plain", "")))


def _pre(text: str) -> str:
    return f'<pre style="white-space:pre-wrap">{html.escape(text)}</pre>'


class _Collector(DisplayPublisher):
    """Stands in for the shell's display publisher inside the block: keeps each display, in order
    with the text printed before it."""

    def __init__(self, parts: list[str], buf: io.StringIO) -> None:
        super().__init__()
        self.parts, self.buf = parts, buf

    def flush_text(self) -> None:
        if self.buf.getvalue():
            self.parts.append(_pre(self.buf.getvalue()))
            self.buf.seek(0)
            self.buf.truncate()

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs) -> None:
        self.flush_text()
        self.parts.append(_as_html(data))

    def clear_output(self, wait: bool = False) -> None:
        self.buf.seek(0)
        self.buf.truncate()
        self.parts.clear()


@contextlib.contextmanager
def solution_output(summary: str = SUMMARY) -> Iterator[None]:
    """Capture what the block prints and displays; show it as one collapsed ``<details>`` element."""
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError(f"summary must be a non-empty str, got {summary!r}")
    parts: list[str] = []
    buf = io.StringIO()
    collector = _Collector(parts, buf)
    shell = InteractiveShell.instance() if InteractiveShell.initialized() else None
    saved = shell.display_pub if shell is not None else None
    try:
        if shell is not None:
            shell.display_pub = collector
        with contextlib.redirect_stdout(buf):
            yield
    finally:
        if shell is not None:
            shell.display_pub = saved
        collector.flush_text()
        if parts:
            body = (f'<details class="llmbook-solution-output"><summary>{html.escape(summary)}</summary>'
                    + "".join(parts) + "</details>")
            display({"text/html": body, "text/plain": PLAIN}, raw=True)
