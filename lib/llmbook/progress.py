"""Progress bars that leave a readable line in a saved notebook.

``tqdm.auto`` draws a notebook bar as an ipywidget. A saved notebook keeps, beside the
widget, the text form the bar had when it was first displayed: ``0%| | 0/300``. A reader
on GitHub or nbviewer (no widget state) sees that line for ever, as if the run had
stopped. ``tqdm`` here is a drop-in for ``tqdm.auto.tqdm``; in a notebook it displays the
bar with a display id and, when the bar closes, replaces that saved text by the final
line (``100%| ... | 300/300``), or by nothing for a bar made with ``leave=False``. Outside a
notebook it is ``tqdm.auto.tqdm`` itself (a text bar on stderr).

Leaves out: bars that other libraries draw (transformers' "Loading weights": switch those
off with the library's own setting).
"""

from __future__ import annotations

from tqdm.auto import tqdm as _auto_tqdm

__all__ = ["tqdm", "in_notebook"]

try:  # tqdm.notebook needs ipywidgets; without it tqdm.auto never picks the notebook bar
    from tqdm.notebook import tqdm as _notebook_tqdm
except ImportError:  # pragma: no cover - ipywidgets is a dependency of the book
    _notebook_tqdm = None


def in_notebook() -> bool:
    """Whether ``tqdm.auto`` draws widget bars here (a Jupyter kernel with ipywidgets)."""
    return _notebook_tqdm is not None and issubclass(_auto_tqdm, _notebook_tqdm)


if _notebook_tqdm is not None:

    class _SavedNotebookBar(_auto_tqdm):  # type: ignore[misc, valid-type]
        """The notebook bar, displayed under a display id so ``close`` can rewrite its saved text."""

        def __init__(self, *args, **kwargs):
            kwargs["display"] = False  # displayed below, with an id
            super().__init__(*args, **kwargs)
            self._handle = None
            if not self.disable:
                from IPython.display import display

                self._handle = display(self.container, display_id=True)
                self.displayed = True  # tqdm must not display it a second time

        def close(self):
            handle, self._handle = getattr(self, "_handle", None), None
            super().close()
            if handle is None:
                return
            if self.leave:
                handle.update(self.container)  # the widget and its final text line
            else:
                handle.update({"text/plain": ""}, raw=True)  # the bar is gone: leave no stale line


def tqdm(*args, **kwargs):
    """``tqdm.auto.tqdm(*args, **kwargs)`` whose saved notebook text is the final line (see the module docstring).

    >>> bar = tqdm(range(3), disable=True)
    >>> list(bar)
    [0, 1, 2]
    """
    if in_notebook():
        return _SavedNotebookBar(*args, **kwargs)
    return _auto_tqdm(*args, **kwargs)
