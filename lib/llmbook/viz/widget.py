"""The widget frame shared by every explorer in the book.

An explorer is a pure ``render(**values)`` function, which draws the picture for one
set of control values, plus the ipywidgets controls that supply those values. Keeping
the logic in ``render`` means it is tested without a browser; this module only wires
controls to it:

- every change of a control re-renders the view;
- an exception raised by ``render`` (bad input) is shown in red inside the widget, the
  last good picture stays, and the kernel keeps running;
- ``show_static()`` draws the default view as an ordinary output, so a reader without
  a kernel (GitHub, nbviewer) still sees the picture.

Each control gets the CSS class ``llmbook-ctl-<name>``, the view ``llmbook-view`` and
the error area ``llmbook-error``; the browser tests find them by these names.
"""

from __future__ import annotations

import html
import io
from typing import Any, Callable, Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display
from matplotlib.figure import Figure

__all__ = ["Explorer", "figure_to_png", "show_static"]

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


class Explorer:
    """Controls + a view re-drawn by ``render`` + an inline error area.

    Parameters
    ----------
    render:
        ``render(**values) -> Figure | str | list``; receives one keyword per control.
    controls:
        name -> ipywidgets control (its ``value`` is passed to ``render`` under ``name``).
    title:
        optional heading shown above the controls.
    """

    def __init__(self, render: Callable[..., View], controls: Mapping[str, widgets.ValueWidget], title: str | None = None):
        if not callable(render):
            raise TypeError("render must be callable")
        if not controls:
            raise ValueError("controls must name at least one control")
        self.render = render
        self.controls = dict(controls)
        for name, control in self.controls.items():
            control.add_class(f"llmbook-ctl-{name}")
            control.observe(self._on_change, names="value")
        self.error = widgets.HTML(value="")
        self.error.add_class("llmbook-error")
        self.view = widgets.VBox([])
        self.view.add_class("llmbook-view")
        header = [widgets.HTML(f"<b>{html.escape(title)}</b>")] if title else []
        self.box = widgets.VBox(header + [widgets.VBox(list(self.controls.values())), self.error, self.view])
        self.box.add_class("llmbook-explorer")
        self.last_error: Exception | None = None
        self.refresh()

    def values(self) -> dict[str, Any]:
        return {name: control.value for name, control in self.controls.items()}

    def refresh(self) -> None:
        """Re-render the view from the current control values; show errors inline."""
        try:
            items = [_to_widget(item) for item in _as_list(self.render(**self.values()))]
        except Exception as exc:  # shown to the reader; the kernel must survive bad input
            self.last_error = exc
            self.error.value = (
                '<div style="color:#b00020;border-left:3px solid #b00020;padding:2px 8px">'
                f"<b>{html.escape(type(exc).__name__)}</b>: {html.escape(str(exc))}</div>"
            )
            return
        self.last_error = None
        self.error.value = ""
        self.view.children = items

    def _on_change(self, _change: dict) -> None:
        self.refresh()

    def show_static(self) -> None:
        """Draw the current view as ordinary output, for readers without a kernel."""
        show_static(self.render, **self.values())

    def _ipython_display_(self) -> None:
        display(self.box)
