"""Chapter 6a in a real browser: the committed notebook opens and its figures are visible.

The chapter trains eleven models (a couple of minutes on two cores), too slow to Run All in
a browser test, and it has no widget. So the test opens the notebook *without running it*,
as a reader first sees it, scrolls through it (JupyterLab only attaches cells near the
viewport) and checks that every committed figure (the growth plot, the GPT stack diagram,
the ablation plot) renders as a decoded image of a real size.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = "notebooks/06a_build_gpt.ipynb"

# Every attached output image that has decoded: its size and a fingerprint of its data.
_IMAGES_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel .jp-OutputArea-output img')]
    .filter(img => img.complete && img.naturalWidth > 0)
    .map(img => {
        const r = img.getBoundingClientRect();
        return {key: img.src.length + ':' + img.src.slice(-64), w: img.naturalWidth, h: img.naturalHeight,
                shown_w: r.width, shown_h: r.height};
    })"""

_SCROLL_JS = """(dy) => {
    const el = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')
        || document.querySelector('.jp-NotebookPanel .jp-Notebook');
    const before = el.scrollTop;
    el.scrollTop = before + dy;
    return [before, el.scrollTop, el.scrollHeight];
}"""


def committed_figures() -> int:
    nb = json.loads((REPO / NOTEBOOK).read_text(encoding="utf-8"))
    return sum("image/png" in out.get("data", {})
               for cell in nb["cells"] if cell["cell_type"] == "code" for out in cell.get("outputs", []))


def test_ch06a_committed_figures_render(lab):
    expected = committed_figures()
    assert expected >= 3, "the committed notebook should hold its figures (growth, GPT stack, ablation)"
    page = lab.page
    page.goto(f"{lab.server.url}/lab/tree/{NOTEBOOK}", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="attached", timeout=90_000)
    lab._dismiss_toasts()
    lab.wait_idle(timeout_s=90)
    # Nothing ran: no cell shows an execution count from this session.
    assert page.locator(".jp-InputArea-prompt", has_text="[*]").count() == 0

    seen: dict[str, dict] = {}
    for _ in range(400):  # scroll to the end, collecting the images that are attached on the way
        page.wait_for_timeout(150)
        for img in page.evaluate(_IMAGES_JS):
            seen.setdefault(img["key"], img)
        before, after, _ = page.evaluate(_SCROLL_JS, 500)
        if after == before:
            page.wait_for_timeout(500)
            for img in page.evaluate(_IMAGES_JS):
                seen.setdefault(img["key"], img)
            break
    lab.save_screenshot("end_of_notebook")
    assert len(seen) >= expected, f"{len(seen)} of the {expected} committed figures rendered"
    for img in seen.values():
        assert img["w"] >= 200 and img["h"] >= 150, img  # a real figure, not a broken-image icon
        assert img["shown_w"] > 100 and img["shown_h"] > 50, img  # laid out at a visible size
