"""The static HTML book (make html) in Chromium, opened from disk (file://, no server, network
off): chapter 3's attention explorer, rebuilt from the notebook's saved widget state, switches
heads and rescales in the page itself, and nothing is fetched from the network."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]


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


def test_static_attention_explorer_switches_head(browser, built):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
    page = context.new_page()
    remote = []
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:", "blob:")) else None)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(built.as_uri(), wait_until="load")
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
