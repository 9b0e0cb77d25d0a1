"""The shared front end (llmbook.viz.frontend) in a real browser: a control drawn by render.js
redraws the SVG without the kernel, and the selection reaches Python (which answers by marking
the view stale, shown by the browser)."""

import pytest

pytestmark = pytest.mark.browser


def test_bars_frame_slider_and_selection_round_trip(lab):
    lab.open("tests/browser/fixtures/frontend_bars.ipynb")
    first = lab.view_svg()
    assert "next letter — T=2" in first and "<rect" in first
    lab.front_slider("step", 1)
    second = lab.view_svg()
    assert second != first and "T=1" in second
    stale = lab.page.locator(".llmbook-front-stale").first
    assert not stale.is_visible()
    lab.front_slider("step", 2)
    assert "T=0.5" in lab.view_svg()
    stale.wait_for(state="visible", timeout=30_000)  # Python saw step == 2 and set stale
    lab.save_screenshot("frontend_bars")


# ----------------------------------------------------------------- a page without JupyterLab (the static book)
def _static_page(browser, specs: list[dict]):
    """A plain HTML page (no JupyterLab, so none of its theme variables) drawing ``specs`` with
    render.js and static.js, as a static HTML book does; returns the Playwright page."""
    import html
    import json
    from pathlib import Path

    from llmbook.viz.frontend import RENDER_JS, FrontView

    static_js = (Path(__file__).resolve().parents[2] / "lib/llmbook/viz/frontend/static.js").read_text(encoding="utf-8")
    hosts = []
    for spec in specs:
        view = FrontView(dims="0, 4, 16")  # the positional explorer's default dims
        view.spec = spec  # computes cjk_font as in the notebook
        state = {k: getattr(view, k) for k in ("spec", "layer", "head", "scale", "causal", "dims", "step", "stale", "cjk_font")}
        hosts.append('<div class="llmbook-static-front"><script type="application/json" class="llmbook-static-state">'
                     f'{html.escape(json.dumps(state), quote=False)}</script><div class="llmbook-static-mount"></div></div>')
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    page.set_content("<!doctype html><html><body>" + "".join(hosts)
                     + f"<script>{RENDER_JS.replace('export default { render };', '')}\n{static_js}</script></body></html>")
    page.wait_for_selector(".llmbook-front-picture svg", state="attached")
    return page


def test_renderer_uses_light_defaults_without_jupyterlab_theme_and_serves_its_cjk_font(browser):
    from llmbook.viz.frontend import bar_panel, panels_spec
    from llmbook.viz.positional import positional_spec

    page = _static_page(browser, [positional_spec(16, positions=20),
                                  panels_spec([bar_panel(["今天", "商店"], [0.6, 0.4], "中文 bars")], title="今天天气很好")])
    try:
        colours = page.evaluate("""() => {
            const t = document.querySelector('.llmbook-front svg text');
            const root = document.querySelector('.llmbook-front');
            return [getComputedStyle(t).fill, getComputedStyle(root).color, getComputedStyle(root).backgroundColor]; }""")
        assert colours == ["rgb(31, 31, 31)"] * 2 + ["rgb(255, 255, 255)"]  # dark text on white
        page.wait_for_function("() => document.fonts.check('12px \"llmbook CJK\"', '今天')", timeout=30_000)
        assert page.evaluate("() => [...document.fonts].some((f) => f.family.replace(/\"/g, '') === 'llmbook CJK' && f.status === 'loaded')")
    finally:
        page.close()


def test_a_browser_side_error_keeps_the_old_picture_greyed_with_a_readable_note(browser):
    """Review UX #6/#7: a bad `dims` used to wipe the picture; now the old picture stays, greyed,
    under a note drawn at full contrast. A d_model smaller than the default dims still draws."""
    from llmbook.viz.positional import positional_spec

    page = _static_page(browser, [positional_spec(8, positions=20)])
    try:
        # d_model 8 with the default dims "0, 4, 16" (as after the reader drags the slider down): drawn, with a note
        assert "dim 4" in page.locator(".llmbook-front-picture").inner_html()
        assert "dims 16 left out: d_model=8" in page.locator(".llmbook-front-note").inner_text()
        page.locator(".llmbook-ctl-dims input").fill("0, x")
        page.locator(".llmbook-ctl-dims input").press("Enter")
        page.wait_for_timeout(200)
        assert "comma-separated" in page.locator(".llmbook-front-error").inner_text()
        pic = page.locator(".llmbook-front-picture")
        assert "<svg" in pic.inner_html()  # the old picture is still there
        assert float(pic.evaluate("p => getComputedStyle(p).opacity")) < 1
        note = page.locator(".llmbook-front-stale")
        assert note.is_visible() and "out of date" in note.inner_text()
        assert note.evaluate("n => { let o = 1; for (let e = n; e; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity); return o; }") == 1
    finally:
        page.close()
