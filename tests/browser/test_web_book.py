"""The web book (make html, scripts/build_book.py) in Chromium, opened from disk (file://, no server)
with every request that is not a local file blocked and recorded.

The whole book is built once into a temporary folder (the build time is printed and must stay
under two minutes). Then, as a reader would: the landing page says how to run the book; "next"
from it visits every chapter in order; the search box finds RoPE and span corruption in the
chapters that teach them; chapter 3's attention explorer, drawn from the notebook's saved widget
state, switches heads and rescales (mouse and keyboard); equations are typeset by the MathJax
copied next to the pages; the exercise solutions stay folded until opened. Every test also
asserts that no request left file:// and that no script raised.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SHOTS = Path(__file__).resolve().parent / "screenshots"
sys.path.insert(0, str(REPO / "scripts"))

from build_book import chapters, is_collapsed  # noqa: E402

LOCAL = ("file:", "data:", "blob:")
BUILD_LIMIT_S = 120  # the bound, on CI's two cores


def _local(url: str) -> bool:
    # MathJax's font check points a test font at about:blank: nothing is fetched
    return url.startswith(LOCAL) or url == "about:blank"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("web-book") / "html"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "scripts/build_book.py", "--out", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, f"make html failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    print(f"\nweb book: built in {seconds:.1f} s ({len(chapters())} chapters)")
    assert seconds < BUILD_LIMIT_S, f"the web book took {seconds:.0f} s to build (limit {BUILD_LIMIT_S} s)"
    return out


class Reader:
    """A page in an offline context: requests outside file:// are recorded and aborted, page errors recorded."""

    def __init__(self, browser, site: Path) -> None:
        self.site = site
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, offline=True)
        self.remote: list[str] = []
        self.errors: list[str] = []

        def guard(route):
            if _local(route.request.url):
                route.continue_()
            else:
                self.remote.append(route.request.url)
                route.abort()

        self.context.route("**/*", guard)
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.page.on("request", lambda r: None if _local(r.url) else self.remote.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, name: str) -> None:
        self.page.goto((self.site / name).as_uri(), wait_until="load")

    def stem(self) -> str:
        return Path(self.page.url.split("#")[0].split("?")[0]).stem

    def wait_mathjax(self) -> None:
        self.page.wait_for_function("() => window.MathJax && window.MathJax.Hub && window.MathJax.Hub.queue",
                                    timeout=15_000)
        self.page.wait_for_function("() => MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running",
                                    timeout=60_000)

    def screenshot(self, label: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"web_book_{label}.png"))


@pytest.fixture
def reader(browser, site):
    r = Reader(browser, site)
    yield r
    r.context.close()
    assert r.remote == [], f"requests outside file://: {r.remote[:10]}"
    assert r.errors == [], f"script errors: {r.errors[:5]}"


def _title(path: Path) -> str:
    """The chapter's title as the notebook's first heading gives it, up to its first equation."""
    first = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
    return first.lstrip("# ").split("$")[0].strip()


def test_next_from_the_landing_page_visits_every_chapter_in_order(reader):
    paths = chapters()
    reader.open("intro.html")
    text = reader.page.locator("article").inner_text()
    assert "make lab" in text and "make test" in text  # how to run the book
    # the sidebar lists every chapter by its title, in order
    nav = reader.page.locator("nav.bd-docs-nav a.reference")
    hrefs = nav.evaluate_all("els => els.map((e) => e.href.split('#')[0])")  # resolved: the current page's is "#"
    assert [Path(h).stem for h in hrefs] == ["intro"] + [p.stem for p in paths]
    for link, path in zip(nav.all_inner_texts()[1:], paths):
        assert link.replace("\u2019", "'").startswith(_title(path)), (link, path.name)  # Sphinx's smart quotes
    reader.screenshot("intro")
    visited, previous = [reader.stem()], "intro"
    while reader.page.locator("a.right-next").count():
        reader.page.locator("a.right-next").first.click()
        reader.page.wait_for_load_state("load")
        visited.append(reader.stem())
        assert reader.page.locator("a.left-prev").first.get_attribute("href") == f"{previous}.html"
        previous = visited[-1]
        if len(visited) > len(paths) + 1:
            break
    assert visited == ["intro"] + [p.stem for p in paths]


def _search(reader, query: str) -> list[str]:
    """Type the query into the search box of the landing page; return the result pages (stems), best first."""
    reader.open("intro.html")
    reader.page.locator(".bd-sidebar-primary .search-button-field").first.click()
    box = reader.page.locator("#pst-search-dialog input[type=search]")
    box.fill(query)
    box.press("Enter")
    reader.page.wait_for_url(re.compile(r"search\.html\?q="))
    reader.page.wait_for_function("() => /Search finished/.test(document.querySelector('#search-results')?.innerText || '')",
                                  timeout=30_000)
    hrefs = reader.page.locator("#search-results ul.search li > a").evaluate_all(
        "els => els.map((e) => e.getAttribute('href'))")
    return [Path(h.split("#")[0].split("?")[0]).stem for h in hrefs]


def test_search_finds_rope_and_span_corruption_in_their_chapters(reader):
    rope = _search(reader, "RoPE")
    assert "05_positional_encoding" in rope[:2], rope  # where rotary position embedding is taught
    assert "08a_beyond_llama" in rope, rope  # LLaMA's section on it
    # the sidebar's chapter titles are typeset here too (chapter 3b's title holds an equation)
    reader.wait_mathjax()
    assert "\\(" not in reader.page.locator("nav.bd-docs-nav").inner_text()
    reader.screenshot("search_rope")
    span = _search(reader, "span corruption")
    assert span and span[0] == "07b_t5_glm", span  # T5's pre-training objective


def _attention_explorer(reader):
    reader.open("03_attention.html")
    explorer = reader.page.locator(".llmbook-static").filter(has=reader.page.locator(".llmbook-ctl-head")).first
    picture = explorer.locator(".llmbook-front-picture").first
    picture.locator("svg").first.wait_for(state="attached", timeout=30_000)
    explorer.scroll_into_view_if_needed()
    return explorer, picture


def test_attention_explorer_switches_heads_from_saved_state(reader):
    explorer, picture = _attention_explorer(reader)
    before = picture.inner_html()
    select = explorer.locator(".llmbook-ctl-head select").first
    labels = select.locator("option").all_inner_texts()
    current = select.evaluate("s => s.options[s.selectedIndex].text")
    assert len(labels) >= 3  # all heads, then each head
    other = next(label for label in labels if label != current)
    select.select_option(label=other)
    reader.page.wait_for_timeout(200)
    after = picture.inner_html()
    assert after != before
    assert (f"{other} of" in after) if other.startswith("head") else ("All heads of" in after)
    explorer.locator(".llmbook-ctl-scale input[type=range]").first.evaluate(
        "e => { e.value = '3'; e.dispatchEvent(new Event('input', {bubbles: true})); }")
    reader.page.wait_for_timeout(200)
    assert "scale 3.0" in picture.inner_html()
    assert "need Python" in explorer.inner_text()  # the text box: its saved value and a note
    reader.screenshot("ch03_explorer")


def test_attention_explorer_slider_moves_with_the_keyboard(reader):
    explorer, picture = _attention_explorer(reader)
    slider = explorer.locator(".llmbook-ctl-scale input[type=range]").first
    slider.focus()
    start = float(slider.input_value())
    key, expected = ("ArrowRight", start + 0.1) if start < 4 else ("ArrowLeft", start - 0.1)
    before = picture.inner_html()
    assert f"scale {start:.1f}" in before
    slider.press(key)
    reader.page.wait_for_timeout(150)
    assert float(slider.input_value()) == pytest.approx(expected)
    assert f"scale {expected:.1f}" in picture.inner_html()
    slider.press("End")
    reader.page.wait_for_timeout(150)
    assert "scale 4.0" in picture.inner_html()


def test_equations_are_typeset(reader):
    reader.open("03_attention.html")
    reader.wait_mathjax()
    display = reader.page.locator(".MathJax_Display").filter(has_text="Attention").first
    display.scroll_into_view_if_needed()
    assert display.is_visible() and "softmax" in display.inner_text()
    counts = reader.page.evaluate("""() => {
        const math = [...document.querySelectorAll('article .math.notranslate')];
        return {
            math: math.length,
            typeset: math.filter((m) => m.querySelector('script[type^="math/tex"]') && m.querySelector('.MathJax, .MathJax_Display')).length,
            errors: document.querySelectorAll('.MathJax_Error, .noError, merror').length,
            stix: [...document.fonts].filter((f) => f.family.startsWith('STIXMathJax') && f.status === 'loaded').length,
        }; }""")
    assert counts["math"] > 10 and counts["typeset"] == counts["math"], counts  # every equation drawn
    assert counts["errors"] == 0, counts
    assert counts["stix"] > 0, f"MathJax's STIX web fonts did not load from the local copy: {counts}"
    raw = re.findall(r"\\[(\[]|\$\$|\\(?:frac|sqrt|sum)\b", reader.page.locator("article").inner_text())
    assert raw == [], f"TeX source still visible in the text: {raw[:5]}"


def test_solutions_stay_folded_until_opened(reader):
    """Chapter 3's solutions: one closed line each; the code and what it prints show only once opened."""
    notebook = nbformat.read(REPO / "notebooks" / "03_attention.ipynb", as_version=4)
    n_hidden = sum(is_collapsed(c) for c in notebook.cells)
    assert n_hidden >= 5  # exercises 03.1-03.5
    reader.open("03_attention.html")
    folds = reader.page.locator("details.hide")
    assert folds.count() == n_hidden
    secret = "math.sqrt(q.shape[-1])"  # 03.2's answer: in the page, not shown
    assert secret in reader.page.evaluate("() => document.body.textContent")
    assert secret not in reader.page.evaluate("() => document.body.innerText")
    for i in range(n_hidden):
        fold = folds.nth(i)
        summary = fold.locator(":scope > summary")
        assert fold.get_attribute("open") is None
        assert summary.is_visible() and re.fullmatch(r"Solution to exercise 03\.\d \(click to show\)", summary.inner_text().strip())
        assert not fold.locator(".cell_input").first.is_visible()
    second = folds.nth(1)
    assert second.locator(":scope > summary").inner_text().strip() == "Solution to exercise 03.2 (click to show)"
    second.locator(":scope > summary").click()
    second.locator(".cell_input").first.wait_for(state="visible", timeout=5_000)
    assert secret in second.inner_text()
    assert not folds.nth(2).locator(".cell_input").first.is_visible()  # the others stay closed
    reader.screenshot("ch03_solution_open")


def test_discussions_stay_folded_until_opened(reader):
    """Chapter 8a's discussions (Markdown cells) are closed dropdowns."""
    notebook = nbformat.read(REPO / "notebooks" / "08a_beyond_llama.ipynb", as_version=4)
    discussions = [c for c in notebook.cells if c.cell_type == "markdown" and is_collapsed(c)]
    assert discussions
    reader.open("08a_beyond_llama.html")
    folds = reader.page.locator("details.sd-dropdown")
    assert folds.count() == len(discussions)
    first = folds.first
    assert first.get_attribute("open") is None
    assert first.locator(":scope > summary").inner_text().strip().startswith("Discussion of exercise 08a.")
    body = first.locator(".sd-summary-content")
    assert not body.is_visible()
    first.locator(":scope > summary").click()
    body.wait_for(state="visible", timeout=5_000)
    assert len(body.inner_text().strip()) > 40
