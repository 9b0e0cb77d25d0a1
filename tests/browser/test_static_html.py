"""The static HTML book (make html) in Chromium, opened from disk (file://, no server, network
off): chapter 3's attention explorer, rebuilt from the notebook's saved widget state, switches
heads and rescales in the page itself (with the mouse and with the keyboard), its equations are
typeset by the MathJax copied next to the page, its exercise solutions stay folded until opened,
and nothing is fetched from the network."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
LOCAL = ("file:", "data:", "blob:")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html")
    subprocess.run([sys.executable, "scripts/build_html.py", "--out", str(out), "notebooks/03_attention.ipynb"],
                   cwd=REPO, check=True, capture_output=True, text=True, timeout=300)
    return out / "03_attention.html"


def test_page_loads_nothing_from_the_network(built):
    sys.path.insert(0, str(REPO / "scripts"))
    from build_html import remote_references

    page = built.read_text(encoding="utf-8")
    assert remote_references(page) == []
    assert 'id="llmbook-render"' in page and page.count('class="llmbook-static-front"') >= 1
    assert "application/vnd.jupyter.widget-state+json" not in page  # no widget manager from a CDN
    # equations: MathJax from the copy beside the page, by a relative address
    assert page.count('<script src="mathjax/MathJax.js?config=') == 1
    assert (built.parent / "mathjax" / "MathJax.js").is_file()
    assert list((built.parent / "mathjax" / "fonts" / "HTML-CSS" / "STIX-Web" / "woff").glob("*.woff"))


def _open_offline(browser, built):
    """A page of the built book in an offline context: every request that is not local is
    recorded and aborted (MathJax's font check asks for about:blank, which is no fetch)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
    remote, errors = [], []

    def guard(route):
        url = route.request.url
        if url.startswith(LOCAL) or url == "about:blank":
            route.continue_()
        else:
            remote.append(url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on("request", lambda r: remote.append(r.url) if not (r.url.startswith(LOCAL) or r.url == "about:blank") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(built.as_uri(), wait_until="load")
    return context, page, remote, errors


def test_equations_are_typeset_offline(browser, built):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context, page, remote, errors = _open_offline(browser, built)
    try:
        try:
            page.wait_for_function("() => window.MathJax && window.MathJax.Hub && window.MathJax.Hub.queue", timeout=15_000)
        except PlaywrightTimeout:
            raise AssertionError("MathJax did not load: the page has no working local copy (mathjax/MathJax.js)") from None
        page.wait_for_function(
            "() => MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running"
            " && document.querySelectorAll('.MathJax_Display').length > 0",
            timeout=60_000)
        # the attention formula of section 2, a display equation, typeset
        display = page.locator(".MathJax_Display").filter(has_text="Attention").first
        display.scroll_into_view_if_needed()
        assert display.is_visible()
        assert "softmax" in display.inner_text()
        counts = page.evaluate("""() => ({
            shown: document.querySelectorAll('.MathJax, .MathJax_Display').length,
            tex: document.querySelectorAll('script[type^="math/tex"]').length,
            errors: document.querySelectorAll('.MathJax_Error, .noError, merror').length,
            stix: [...document.fonts].filter((f) => f.family.startsWith('STIXMathJax') && f.status === 'loaded').length})""")
        assert counts["tex"] > 10 and counts["shown"] >= counts["tex"], counts  # every equation found was drawn
        assert counts["errors"] == 0, counts
        assert counts["stix"] > 0, f"MathJax's STIX web fonts did not load from the local copy: {counts}"
        text = page.locator(".jp-MarkdownOutput").all_inner_texts()
        raw = [m for t in text for m in re.findall(r"\$\$|\\(?:frac|sqrt|sum|softmax)\b", t)]
        assert raw == [], f"TeX source still visible in the text: {raw[:5]}"
    finally:
        context.close()
    assert errors == []
    assert remote == [], f"requests outside file://: {remote}"


def test_static_attention_explorer_switches_head(browser, built):
    context, page, remote, errors = _open_offline(browser, built)
    try:
        explorer = page.locator(".llmbook-static").filter(has=page.locator(".llmbook-ctl-head")).first
        picture = explorer.locator(".llmbook-front-picture").first
        picture.locator("svg").first.wait_for(state="attached", timeout=30_000)
        explorer.scroll_into_view_if_needed()
        before = picture.inner_html()
        select = explorer.locator(".llmbook-ctl-head select").first
        labels = select.locator("option").all_inner_texts()
        current = select.evaluate("s => s.options[s.selectedIndex].text")
        other = next(label for label in labels if label != current)
        select.select_option(label=other)
        page.wait_for_timeout(200)
        after = picture.inner_html()
        assert after != before
        assert (f"{other} of" in after) if other.startswith("head") else ("All heads of" in after)
        explorer.locator(".llmbook-ctl-scale input[type=range]").first.evaluate(
            "e => { e.value = '3'; e.dispatchEvent(new Event('input', {bubbles: true})); }")
        page.wait_for_timeout(200)
        assert "scale 3.0" in picture.inner_html()
        # the text box needs Python: shown with its saved value and a note
        assert "need Python" in explorer.inner_text()
        shots = REPO / "tests" / "browser" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "static_html_ch03.png"))
    finally:
        context.close()
    assert errors == []
    assert remote == []


def test_static_slider_moves_with_the_keyboard(browser, built):
    context, page, remote, errors = _open_offline(browser, built)
    try:
        explorer = page.locator(".llmbook-static").filter(has=page.locator(".llmbook-ctl-scale")).first
        picture = explorer.locator(".llmbook-front-picture").first
        picture.locator("svg").first.wait_for(state="attached", timeout=30_000)
        slider = explorer.locator(".llmbook-ctl-scale input[type=range]").first
        slider.scroll_into_view_if_needed()
        slider.focus()
        start = float(slider.input_value())
        key, expected = ("ArrowRight", start + 0.1) if start < 4 else ("ArrowLeft", start - 0.1)
        before = picture.inner_html()
        assert f"scale {start:.1f}" in before
        slider.press(key)
        page.wait_for_timeout(150)
        assert float(slider.input_value()) == pytest.approx(expected), f"{key} did not move the slider"
        after = picture.inner_html()
        assert after != before and f"scale {expected:.1f}" in after
        slider.press("End")
        page.wait_for_timeout(150)
        assert "scale 4.0" in picture.inner_html()
        slider.press("Home")
        page.wait_for_timeout(150)
        assert "scale 0.1" in picture.inner_html()
    finally:
        context.close()
    assert errors == []
    assert remote == []


def test_solutions_stay_hidden_until_opened(browser, built):
    """Chapter 3's exercise solutions: one closed line each; the code and what it prints show only once opened."""
    context, page, remote, errors = _open_offline(browser, built)
    try:
        folds = page.locator("details.llmbook-solution")
        n = folds.count()
        assert n >= 5  # exercises 03.1-03.5
        visible_text = page.evaluate("() => document.body.innerText")
        assert "math.sqrt(q.shape[-1])" in page.evaluate("() => document.body.textContent")  # 03.2's answer: in the page, not shown
        assert "math.sqrt(q.shape[-1])" not in visible_text
        for i in range(n):
            fold = folds.nth(i)
            summary = fold.locator(":scope > summary")
            summary.scroll_into_view_if_needed()
            assert summary.is_visible() and summary.inner_text().startswith("Solution to exercise 03.")
            cell = fold.locator(".jp-Cell").first
            assert not cell.is_visible(), f"{summary.inner_text()}: the solution shows before it is opened"
        second = folds.nth(1)  # 03.2
        assert second.locator(":scope > summary").inner_text() == "Solution to exercise 03.2 (click to show)"
        second.locator(":scope > summary").click()
        cell = second.locator(".jp-Cell").first
        cell.wait_for(state="visible", timeout=5_000)
        assert "math.sqrt(q.shape[-1])" in cell.inner_text()
        assert "math.sqrt(q.shape[-1])" in page.evaluate("() => document.body.innerText")
        assert not folds.nth(2).locator(".jp-Cell").first.is_visible()  # the others stay closed
        shots = REPO / "tests" / "browser" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "static_html_ch03_solution.png"))
    finally:
        context.close()
    assert errors == []
    assert remote == []
