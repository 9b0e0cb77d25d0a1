"""The widget frame shared by every explorer in the book.

An explorer is a pure ``render(**values)`` function, which draws the picture for one
set of control values, plus the ipywidgets controls that supply those values. Keeping
the logic in ``render`` means it is tested without a browser; this module only wires
controls to it:

- every change of a control re-renders the view (a busy sign shows meanwhile); a text box that
  applies as the reader types can wait for a pause in the typing first (``typing_pause``), so an
  explorer whose picture takes a second to compute does not redraw once per keystroke;
- an exception raised by ``render`` (bad input) is shown in red inside the widget (cut
  to ``MAX_ERROR`` characters), the last picture stays but is greyed out, with a note (not
  greyed) saying it is out of date, and the kernel keeps running;
- colours come from JupyterLab's theme variables (light and dark themes), and sliders get
  a track long enough to set a value by dragging; the controls sit side by side, wrapping onto
  new rows as the width requires, so a laptop screen shows a control and its picture together;
- ``show_static()`` draws the default view as an ordinary output, so a reader without
  a kernel (GitHub, nbviewer) still sees the picture; a saved widget output carries a
  one-line text description instead of the raw ``VBox(...)`` repr.

An explorer may draw in the browser instead (``front=``, a
:class:`llmbook.viz.frontend.FrontView`): then the Python controls produce a data
``spec`` (``spec(**python_values)``), sent once, and the display-only controls (layer,
head, scale, ...) live in the browser as ``front_controls``; ``render`` still draws the
same picture with matplotlib for ``show_static`` and the tests.

Each control gets the CSS class ``llmbook-ctl-<name>``, the view ``llmbook-view`` and
the error area ``llmbook-error``; the browser tests find them by these names.
"""

from __future__ import annotations

import asyncio
import html
import io
from typing import Any, Callable, Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display
from matplotlib.figure import Figure

__all__ = ["Explorer", "figure_to_png", "show_static", "short_message", "MAX_ERROR"]

MAX_ERROR = 200  # characters of an error message shown inline (a long input is not echoed whole)

View = Any  # a matplotlib Figure, an HTML string, or a list of those


def figure_to_png(fig: Figure) -> bytes:
    """Render a figure to PNG bytes and close it (so it is not displayed twice)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _as_list(view: View) -> list:
    return list(view) if isinstance(view, (list, tuple)) else [view]


def _to_widget(item: Any) -> widgets.Widget:
    if isinstance(item, Figure):
        # Show the PNG at its own pixel size; the Image widget would otherwise stretch it.
        width = int(round(item.get_figwidth() * item.dpi))
        return widgets.Image(value=figure_to_png(item), format="png", layout=widgets.Layout(width=f"{width}px", max_width="100%"))
    if isinstance(item, str):
        return widgets.HTML(value=item)
    if isinstance(item, widgets.Widget):
        return item
    raise TypeError(f"render must return a Figure, an HTML string or a list of them, got {type(item).__name__}")


def show_static(render: Callable[..., View], **values: Any) -> None:
    """Display ``render(**values)`` as plain notebook output (the static figure)."""
    from IPython.display import HTML

    for item in _as_list(render(**values)):
        if isinstance(item, Figure):
            display(item)
            plt.close(item)
        elif isinstance(item, str):
            display(HTML(item))
        else:
            raise TypeError(f"render returned {type(item).__name__}, which has no static form")


def short_message(exc: BaseException, limit: int = MAX_ERROR) -> str:
    """``str(exc)`` cut to ``limit`` characters with an ellipsis, so a long input is not echoed whole.

    >>> short_message(ValueError("x" * 500), 10)
    'xxxxxxxxx…'
    """
    msg = str(exc)
    return msg if len(msg) <= limit else msg[: limit - 1] + "\u2026"


# A stale Python-drawn picture is greyed out; a browser-drawn one (.llmbook-frontview) greys its own
# picture and keeps its "out of date" note readable, so the view around it is not faded again.
_STYLE = (
    "<style>.llmbook-stale > :not(.llmbook-frontview){opacity:.35;filter:grayscale(1)}"
    ".llmbook-busy{color:var(--jp-ui-font-color2,#595959);font-style:italic;font-size:12px;min-height:1.2em}"
    ".llmbook-stale-note{color:var(--jp-ui-font-color1,#1f1f1f);font-size:13px}</style>"
)
_BUSY = "\u23f3 updating\u2026"
_STALE_NOTE = "\u26a0 This picture is out of date: fix the error above to redraw it."
_SLIDERS = (widgets.IntSlider, widgets.FloatSlider, widgets.FloatLogSlider, widgets.IntRangeSlider, widgets.FloatRangeSlider)
# ipywidgets' default track is ~150 px, where a small drag jumps far; at 440 px (a ~270-px track) two
# sliders share a row of a laptop's notebook (~930 px wide with the file browser open)
SLIDER_WIDTH = "440px"
_TEXT_BOXES = (widgets.Text, widgets.Textarea)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running this code (the kernel's, while it handles a widget message), or None."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Explorer:
    """Controls + a view re-drawn by ``render`` + an inline error area.

    Parameters
    ----------
    render:
        ``render(**values) -> Figure | str | list``; receives one keyword per control
        (Python controls and front controls).
    controls:
        name -> ipywidgets control whose change needs Python (its ``value`` is passed to
        ``render`` and ``spec`` under ``name``).
    title:
        optional heading shown above the controls.
    front, spec, front_controls:
        optional browser-drawn view: ``spec(**python_values) -> dict`` is sent to the
        :class:`~llmbook.viz.frontend.FrontView` ``front`` on every Python control change;
        ``front_controls`` (name -> :class:`~llmbook.viz.frontend.FrontControl`) are the
        controls the browser draws and handles.
    summary:
        the one-line text a saved notebook shows where no widget can be drawn.
    typing_pause:
        seconds a text box that applies as the reader types (``continuous_update=True``) waits
        after the last keystroke before the view is redrawn (0: redraw on every keystroke). The
        wait needs the kernel's event loop; without one (plain Python, the tests) it redraws at once.
    """

    def __init__(self, render: Callable[..., View], controls: Mapping[str, widgets.ValueWidget], title: str | None = None,
                 *, front=None, spec: Callable[..., dict] | None = None, front_controls: Mapping[str, Any] | None = None,
                 summary: str | None = None, typing_pause: float = 0.0):
        if not callable(render):
            raise TypeError("render must be callable")
        if (front is None) != (spec is None):
            raise ValueError("give front and spec together (a FrontView and spec(**values) -> dict), or neither")
        if spec is not None and not callable(spec):
            raise TypeError("spec must be callable: spec(**values) -> dict")
        if not controls and not front_controls:
            raise ValueError("controls must name at least one control")
        if isinstance(typing_pause, bool) or not isinstance(typing_pause, (int, float)) or not 0 <= typing_pause <= 5:
            raise ValueError(f"typing_pause must be a number of seconds in [0, 5], got {typing_pause!r}")
        self.typing_pause = float(typing_pause)
        self._pending = None  # the redraw waiting for a pause in the typing (an asyncio TimerHandle)
        self.render = render
        self.py_controls = dict(controls)
        self.front = front
        self.spec = spec
        self.front_controls = dict(front_controls or {})
        clash = set(self.py_controls) & set(self.front_controls)
        if clash:
            raise ValueError(f"front_controls and controls share the names {sorted(clash)}")
        # Every control by name (front ones are stand-ins whose value lives in the browser view).
        self.controls = {**self.py_controls, **self.front_controls}
        for name, control in self.py_controls.items():
            control.add_class(f"llmbook-ctl-{name}")
            control.observe(self._on_change, names="value")
            if isinstance(control, _SLIDERS) and not control.layout.width:
                control.layout.width = SLIDER_WIDTH
                control.layout.max_width = "100%"
            if isinstance(control, widgets.ToggleButtons) and not control.layout.width:
                control.layout.width = "auto"  # its label beside its buttons, not above them (ipywidgets' 300 px)
        if front is not None:
            front.add_class("llmbook-frontview")
        self.title = title
        self.summary = summary
        self.error = widgets.HTML(value="")
        self.error.add_class("llmbook-error")
        self.busy = widgets.HTML(value="")
        self.busy.add_class("llmbook-busy")
        # the out-of-date note of a Python-drawn picture (a browser-drawn one shows its own)
        self.stale_note = widgets.HTML(value="")
        self.stale_note.add_class("llmbook-stale-note")
        self.view = widgets.VBox([])
        self.view.add_class("llmbook-view")
        header = [widgets.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        # The controls side by side, wrapping onto new rows (a narrow window gets one per row), rather than
        # one per row: on a 768-px laptop screen a control and the picture it changes are then on screen together.
        self.controls_box = widgets.Box(list(self.py_controls.values()),
                                        layout=widgets.Layout(flex_flow="row wrap", align_items="center", grid_gap="2px 18px"))
        self.controls_box.add_class("llmbook-controls")
        self.box = widgets.VBox([widgets.HTML(_STYLE)] + header
                                + [self.controls_box, self.error, self.stale_note, self.busy, self.view])
        self.box.add_class("llmbook-explorer")
        self.last_error: Exception | None = None
        self.refresh()

    def python_values(self) -> dict[str, Any]:
        """Values of the controls that need Python (the ones ``spec`` receives)."""
        return {name: control.value for name, control in self.py_controls.items()}

    def values(self) -> dict[str, Any]:
        """Values of every control, Python and front (the ones ``render`` receives)."""
        return {name: control.value for name, control in self.controls.items()}

    def _set_stale(self, stale: bool) -> None:
        if stale:
            self.view.add_class("llmbook-stale")
        else:
            self.view.remove_class("llmbook-stale")
        if self.front is not None:
            self.front.stale = stale
        else:
            self.stale_note.value = _STALE_NOTE if stale else ""

    def refresh(self) -> None:
        """Re-render the view from the current control values; show errors inline."""
        if self._pending is not None:  # this redraw reads every control, the typed text included
            self._pending.cancel()
            self._pending = None
        self.busy.value = _BUSY
        try:
            if self.front is not None:
                self.front.spec = self.spec(**self.python_values())
                items = [self.front]
            else:
                items = [_to_widget(item) for item in _as_list(self.render(**self.values()))]
        except Exception as exc:  # shown to the reader; the kernel must survive bad input
            self.last_error = exc
            self.error.value = (
                '<div style="color:var(--jp-error-color1,#b00020);border-left:3px solid var(--jp-error-color1,#b00020);padding:2px 8px">'
                f"<b>{html.escape(type(exc).__name__)}</b>: {html.escape(short_message(exc))}</div>"
            )
            # Keep the last picture for comparison, greyed out: its title no longer matches the controls.
            self._set_stale(True)
            return
        finally:
            self.busy.value = ""
        self.last_error = None
        self.error.value = ""
        self._set_stale(False)
        self.view.children = items

    def _on_change(self, change: dict) -> None:
        owner = change.get("owner") if isinstance(change, dict) else None
        loop = _running_loop() if self.typing_pause and isinstance(owner, _TEXT_BOXES) and owner.continuous_update else None
        if loop is None:
            self.refresh()
            return
        # Typing: redraw once the reader pauses; each keystroke moves the redraw later.
        if self._pending is not None:
            self._pending.cancel()
        self._pending = loop.call_later(self.typing_pause, self.refresh)

    def show_static(self) -> None:
        """Draw the current view as ordinary output, for readers without a kernel."""
        show_static(self.render, **self.values())

    def describe(self) -> str:
        """One line naming the explorer and its controls (the saved notebook's text form)."""
        if self.summary:
            return self.summary
        names = ", ".join(self.controls)
        return f"{self.title or 'Explorer'}: interactive ({names}); run the notebook to use it."

    def _repr_mimebundle_(self, **kwargs) -> dict:
        bundle = self.box._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = self.describe()  # instead of the raw VBox(children=...) repr
        return bundle
