"""llmbook.viz base without a browser: the Explorer frame, show_static, the CJK font."""

from __future__ import annotations

import os
import warnings

import ipywidgets as widgets
import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib import font_manager
from matplotlib.figure import Figure

import llmbook.viz as viz
from llmbook.viz import CJK_FAMILY, Explorer, cjk_font_path, figure_to_png, show_static


def _make(calls: list) -> Explorer:
    def render(n: int, label: str):
        calls.append((n, label))
        if n < 0:
            raise ValueError("n must be >= 0")
        if label == "html":
            return f"<p>n = {n}</p>"
        fig, ax = plt.subplots(figsize=(2, 1.5))
        ax.plot(range(n + 2))
        ax.set_title(label)
        return [fig, f"<i>{label}</i>"]

    return Explorer(
        render,
        {"n": widgets.IntSlider(value=1, min=-3, max=5), "label": widgets.Text(value="今天")},
        title="test explorer",
    )


def test_render_called_with_control_values():
    calls: list = []
    ex = _make(calls)
    assert calls == [(1, "今天")]
    assert ex.values() == {"n": 1, "label": "今天"}
    kinds = [type(w).__name__ for w in ex.view.children]
    assert kinds == ["Image", "HTML"]
    assert ex.view.children[0].value[:8] == b"\x89PNG\r\n\x1a\n"


def test_css_classes_for_the_browser_tests():
    ex = _make([])
    assert "llmbook-ctl-n" in ex.controls["n"]._dom_classes
    assert "llmbook-ctl-label" in ex.controls["label"]._dom_classes
    assert "llmbook-view" in ex.view._dom_classes
    assert "llmbook-error" in ex.error._dom_classes


def test_control_change_rerenders():
    calls: list = []
    ex = _make(calls)
    before = ex.view.children[0].value
    ex.controls["n"].value = 4
    assert calls[-1] == (4, "今天")
    assert ex.view.children[0].value != before
    ex.controls["label"].value = "html"
    assert calls[-1] == (4, "html")
    assert [type(w).__name__ for w in ex.view.children] == ["HTML"]
    assert ex.view.children[0].value == "<p>n = 4</p>"


def test_render_error_shown_inline_and_last_view_kept():
    ex = _make([])
    kept = ex.view.children
    ex.controls["n"].value = -2  # render raises
    assert "ValueError" in ex.error.value and "n must be &gt;= 0" in ex.error.value
    assert isinstance(ex.last_error, ValueError)
    assert ex.view.children == kept
    ex.controls["n"].value = 2  # recovers: error cleared, new view
    assert ex.error.value == "" and ex.last_error is None
    assert ex.view.children != kept


def test_render_returning_wrong_type_is_an_inline_error():
    ex = Explorer(lambda x: 42, {"x": widgets.IntSlider(value=1)})
    assert "TypeError" in ex.error.value and "Figure" in ex.error.value


def test_explorer_validates_arguments():
    with pytest.raises(TypeError, match="render"):
        Explorer("not callable", {"x": widgets.IntSlider()})
    with pytest.raises(ValueError, match="controls"):
        Explorer(lambda: None, {})


def test_show_static_outputs(monkeypatch):
    shown = []
    monkeypatch.setattr("llmbook.viz.widget.display", lambda obj: shown.append(obj))
    ex = _make([])
    ex.show_static()
    assert isinstance(shown[0], Figure)
    assert type(shown[1]).__name__ == "HTML" and "今天" in shown[1].data
    shown.clear()
    show_static(lambda: "<b>hi</b>")
    assert shown[0].data == "<b>hi</b>"
    with pytest.raises(TypeError, match="static"):
        show_static(lambda: 3)


def test_figure_to_png_closes_the_figure():
    fig, ax = plt.subplots()
    n = len(plt.get_fignums())
    data = figure_to_png(fig)
    assert data.startswith(b"\x89PNG") and len(plt.get_fignums()) == n - 1


def test_cjk_font_registered_and_has_glyphs():
    path = cjk_font_path()
    assert path is not None and os.path.exists(path) and "mplfonts" in path
    found = font_manager.findfont(font_manager.FontProperties(family=CJK_FAMILY), fallback_to_default=False)
    assert os.path.samefile(found, path)
    assert CJK_FAMILY in matplotlib.rcParams["font.family"]
    # Every character of 今天 is in the font's character map ...
    from matplotlib.ft2font import FT2Font

    cmap = FT2Font(path).get_charmap()
    assert all(ord(c) in cmap for c in "今天很好")
    # ... and drawing it with the book style emits no "Glyph missing" warning.
    viz.use_book_style()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.set_title("今天 weather")
        ax.set_xlabel("天气")
        fig.canvas.draw()
        plt.close(fig)
    assert not [w for w in caught if "missing" in str(w.message).lower()]


def test_without_cjk_font_latin_fallback_warns():
    # Control experiment: DejaVu Sans alone has no glyph for 今, so the check above means something.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
            fig, ax = plt.subplots(figsize=(2, 1))
            ax.set_title("今天")
            fig.canvas.draw()
            plt.close(fig)
    assert any("missing" in str(w.message).lower() for w in caught)


def test_long_error_message_is_cut_and_the_picture_greyed_out():
    from llmbook.viz.widget import MAX_ERROR

    def render(text: str):
        if len(text) > 5:
            raise ValueError(f"text is too long: {text!r}")
        return "<p>ok</p>"

    ex = Explorer(render, {"text": widgets.Text(value="ok")})
    ex.controls["text"].value = "x" * 5000
    shown = ex.error.value
    assert "x" * (MAX_ERROR - 30) in shown and "x" * (MAX_ERROR + 1) not in shown and "\u2026" in shown
    assert "llmbook-stale" in ex.view._dom_classes and ex.busy.value == ""
    ex.controls["text"].value = "ok"
    assert "llmbook-stale" not in ex.view._dom_classes and ex.error.value == ""


def test_busy_sign_shows_while_python_renders():
    seen = []
    box = {}

    def render(n: int):
        if "ex" in box:
            seen.append(box["ex"].busy.value)
        return f"<p>{n}</p>"

    box["ex"] = ex = Explorer(render, {"n": widgets.IntSlider(value=1)})
    ex.controls["n"].value = 2
    assert seen and "updating" in seen[-1] and ex.busy.value == ""


def test_saved_output_has_a_readable_text_form():
    ex = Explorer(lambda n: "<p>x</p>", {"n": widgets.IntSlider(value=1)}, title="Demo")
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"] == "Demo: interactive (n); run the notebook to use it."
    assert "VBox" not in bundle["text/plain"]


def test_front_view_spec_and_round_sig():
    from llmbook.viz.frontend import FrontControl, FrontView, round_sig

    assert round_sig([1.23456789, 0.000123456]) == [1.235, 0.0001235]
    with pytest.raises(ValueError, match="digits"):
        round_sig([1.0], 0)
    with pytest.raises(ValueError, match="infinities"):
        round_sig([float("inf")])
    v = FrontView()
    import traitlets

    with pytest.raises(traitlets.TraitError, match="kind"):
        v.spec = {"kind": "pie chart"}
    with pytest.raises(traitlets.TraitError, match="scale"):
        v.scale = 0.0
    with pytest.raises(ValueError, match="trait"):
        FrontControl(v, "colour", "colour")
    with pytest.raises(ValueError, match="front and spec"):
        Explorer(lambda: "", {}, front=v)


def test_bars_spec_checks_its_frames():
    from llmbook.viz.frontend import bars_spec

    spec = bars_spec(["a", "b"], [[0.5, 0.5], [0.9, 0.1]], frame_labels=["x", "y"], colors=[[0, 0], [0, 7]])
    assert spec["kind"] == "bars" and spec["frames"][1] == {"label": "y", "values": [0.9, 0.1], "colors": [0, 7]}
    with pytest.raises(ValueError, match=r"frames\[1\] has 1 values"):
        bars_spec(["a", "b"], [[0.5, 0.5], [1.0]])
    with pytest.raises(ValueError, match="labels"):
        bars_spec([], [[1.0]])
    with pytest.raises(ValueError, match="frame_labels"):
        bars_spec(["a"], [[1.0]], frame_labels=["x", "y"])
    with pytest.raises(ValueError, match="NaN"):
        bars_spec(["a"], [[float("nan")]])


def test_typing_pause_redraws_once_after_the_last_keystroke():
    """With ``typing_pause``, a text box that applies as the reader types redraws once the typing pauses
    (inside the kernel, whose event loop runs the redraw); another control redraws at once, the typed
    text included; outside an event loop every keystroke redraws (nothing would run the timer)."""
    import asyncio

    calls: list = []

    def render(text: str, n: int) -> str:
        calls.append((text, n))
        return f"<p>{text} {n}</p>"

    def make(pause: float) -> Explorer:
        return Explorer(render, {"text": widgets.Textarea(value="a", continuous_update=True),
                                 "n": widgets.IntSlider(value=1)}, typing_pause=pause)

    async def typing(ex: Explorer, pause: float) -> None:
        for word in ("ab", "abc", "abcd"):  # three keystrokes in quick succession
            ex.controls["text"].value = word
            await asyncio.sleep(pause / 10)
        assert calls == [("a", 1)]  # nothing redrawn while typing
        await asyncio.sleep(pause * 2)
        assert calls == [("a", 1), ("abcd", 1)]  # one redraw, with the last text
        ex.controls["text"].value = "x"
        ex.controls["n"].value = 2  # a slider redraws at once and takes the pending text along
        assert calls[-1] == ("x", 2)
        await asyncio.sleep(pause * 2)
        assert calls[-1] == ("x", 2) and len(calls) == 3  # the pending redraw was cancelled

    asyncio.run(typing(make(0.2), 0.2))
    calls.clear()
    ex = make(0.2)  # no event loop: each keystroke redraws
    ex.controls["text"].value = "ab"
    assert calls == [("a", 1), ("ab", 1)]


def test_typing_pause_is_checked():
    for bad in (-1, 10, True, "0.5"):
        with pytest.raises(ValueError, match="typing_pause"):
            Explorer(lambda x: "<p></p>", {"x": widgets.Text()}, typing_pause=bad)
