"""scripts/build_html.py (make html) without a browser: widget outputs become static HTML, nothing remote stays."""

import re
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import pytest  # noqa: E402
from build_html import (build_page, copy_mathjax, fold_solutions, is_collapsed, remote_references,  # noqa: E402
                        static_notebook, strip_remote)


def _model(name, module="@jupyter-widgets/controls", **state):
    return {"model_name": name, "model_module": module, "model_module_version": "2.0.0", "state": state}


def _notebook():
    state = {
        "root": _model("VBoxModel", _dom_classes=["llmbook-explorer"],
                       children=["IPY_MODEL_title", "IPY_MODEL_ctl", "IPY_MODEL_front"]),
        "title": _model("HTMLModel", value="<b>Demo explorer</b>", description=""),
        "ctl": _model("DropdownModel", _dom_classes=["llmbook-ctl-corpus"], description="corpus", index=1,
                      _options_labels=["your text", "Shakespeare"]),
        "front": _model("AnyModel", "anywidget", spec={"kind": "bars", "title": "</script><b>x", "labels": ["a"],
                                                       "frames": [{"label": "", "values": [1.0]}]}, step=0, stale=False),
    }
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("explorer")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "root", "version_major": 2, "version_minor": 0},
        "text/plain": "Demo explorer: interactive (corpus); run the notebook to use it."})]
    nb.cells.append(cell)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state, "version_major": 2,
                                                                             "version_minor": 0}}
    return nb


def test_widget_output_becomes_static_html_with_the_saved_spec():
    nb, fronts = static_notebook(_notebook())
    assert fronts == 1 and "widgets" not in nb.metadata
    html = nb.cells[0].outputs[0]["data"]["text/html"]
    assert "<b>Demo explorer</b>" in html
    assert 'class="llmbook-static-front"' in html and '"kind":"bars"' in html
    assert "corpus: <code>Shakespeare</code>" in html and "need Python" in html  # saved value + note
    assert "</script><b>" not in html and "<\\/script>" in html  # the JSON cannot close its script tag


def test_unknown_widget_falls_back_to_its_text():
    nb = _notebook()
    nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"] = {}
    nb, fronts = static_notebook(nb)
    assert fronts == 0
    assert "Demo explorer: interactive (corpus)" in nb.cells[0].outputs[0]["data"]["text/html"]


def test_remote_scripts_and_links_are_stripped():
    page = ('<head><script src="https://cdnjs.cloudflare.com/x.js"></script><script src=""></script>'
            '<link rel="stylesheet" href="https://cdn.example/x.css"><script>import("https://unpkg.com/m")</script>'
            '<script type="module" id="llmbook-render">const NS = "http://www.w3.org/2000/svg";</script>'
            '<script>var local = 1;</script></head>')
    assert len(remote_references(page)) == 2
    out = strip_remote(page)
    assert remote_references(out) == []
    assert 'id="llmbook-render"' in out and "var local = 1" in out
    assert "cdnjs" not in out and "unpkg" not in out and "cdn.example" not in out


def _math_notebook(tmp_path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("An equation: $$\\mathrm{softmax}(x)_i = e^{x_i} / \\sum_j e^{x_j}$$"))
    path = tmp_path / "math.ipynb"
    nbformat.write(nb, path)
    return path


def test_pages_load_mathjax_from_the_local_copy(tmp_path):
    url = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
    page, _ = build_page(_math_notebook(tmp_path), url)
    assert remote_references(page) == []
    assert page.count(f'<script src="{url}">') == 1
    # the fonts setting (STIX web fonts, the only ones shipped) comes before MathJax.js starts
    assert page.index('webFont: "STIX-Web"') < page.index(f'<script src="{url}">')
    assert "MathJax.Hub.Queue" in page  # the template's typesetting call is kept
    assert "$$\\mathrm{softmax}" in page  # the TeX, for MathJax to find


def test_without_mathjax_the_page_has_no_mathjax_at_all(tmp_path):
    page, _ = build_page(_math_notebook(tmp_path))
    assert "MathJax.js" not in page and "MathJax.Hub" not in page


def test_a_remote_mathjax_is_refused(tmp_path):
    for url in ("https://cdn.example/MathJax.js", "//cdn.example/MathJax.js"):
        with pytest.raises(ValueError, match="local, relative"):
            build_page(_math_notebook(tmp_path), url)


def test_copy_mathjax_brings_scripts_and_fonts(tmp_path):
    target = copy_mathjax(tmp_path)
    assert target == tmp_path / "mathjax"
    assert (target / "MathJax.js").is_file() and (target / "config" / "TeX-AMS-MML_HTMLorMML-full.js").is_file()
    assert any((target / "fonts" / "HTML-CSS" / "STIX-Web" / "woff").glob("*.woff"))
    copy_mathjax(tmp_path)  # a second build over the first one


def _exercise_notebook(tmp_path) -> Path:
    """An exercise, its collapsed solution (source and a printed answer) and a collapsed discussion."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("### Exercise 05.1\nWrite `half(d)`."))
    solution = nbformat.v4.new_code_cell("# Solution (click to expand)\ndef half(d):\n    return d / 2  # SOLUTION-SOURCE")
    solution.metadata.update({"jupyter": {"source_hidden": True, "outputs_hidden": True},
                              "llmbook": {"exercise": "05.1", "role": "solution"}})
    solution.outputs = [nbformat.v4.new_output("stream", name="stdout", text="SOLUTION-PRINTED 64\n")]
    discussion = nbformat.v4.new_markdown_cell("**Discussion (after you tried)** DISCUSSION-TEXT")
    discussion.metadata.update({"jupyter": {"source_hidden": True}, "llmbook": {"exercise": "05.1", "role": "discussion"}})
    shown = nbformat.v4.new_code_cell("print('VISIBLE-CELL')")
    shown.outputs = [nbformat.v4.new_output("stream", name="stdout", text="VISIBLE-OUTPUT\n")]
    nb.cells += [solution, discussion, shown]
    path = tmp_path / "exercise.ipynb"
    nbformat.write(nb, path)
    return path


def test_collapsed_cells_are_found_by_their_metadata():
    role_only = nbformat.v4.new_code_cell("x")
    role_only.metadata["llmbook"] = {"role": "solution"}
    hidden_only = nbformat.v4.new_code_cell("x")
    hidden_only.metadata["jupyter"] = {"source_hidden": True}
    exercise = nbformat.v4.new_code_cell("x")
    exercise.metadata["llmbook"] = {"exercise": "00.1", "role": "exercise"}
    assert is_collapsed(role_only) and is_collapsed(hidden_only)
    assert not is_collapsed(exercise) and not is_collapsed(nbformat.v4.new_markdown_cell("text"))


def test_solutions_are_folded_in_closed_details(tmp_path):
    page, _ = build_page(_exercise_notebook(tmp_path))
    # each collapsed cell, input and output, sits inside its own closed <details>; the rest is outside
    blocks = re.findall(r'<details class="llmbook-solution">(.*?)</details>', page, re.S)
    assert len(blocks) == 2 and "<details open" not in page and 'llmbook-solution" open' not in page
    assert "<summary>Solution to exercise 05.1 (click to show)</summary>" in blocks[0]
    assert "SOLUTION-SOURCE" in blocks[0] and "SOLUTION-PRINTED" in blocks[0]
    assert "<summary>Discussion of exercise 05.1 (click to show)</summary>" in blocks[1] and "DISCUSSION-TEXT" in blocks[1]
    outside = re.sub(r'<details class="llmbook-solution">.*?</details>', "", page, flags=re.S)
    for secret in ("SOLUTION-SOURCE", "SOLUTION-PRINTED", "DISCUSSION-TEXT"):
        assert secret not in outside
    assert "VISIBLE-CELL" in outside and "VISIBLE-OUTPUT" in outside and "Exercise 05.1" in outside
    assert "details.llmbook-solution" in page  # its style sheet, inline


def test_chapter_0_shows_no_solution_outside_its_details():
    """On a real chapter: every collapsed cell of the notebook (found by its cell id) is inside a closed <details>."""
    path = REPO / "notebooks" / "00_introduction.ipynb"
    hidden = [c.id for c in nbformat.read(path, as_version=4).cells if c.metadata.get("jupyter", {}).get("source_hidden")]
    assert len(hidden) >= 5  # exercises 00.1-00.5
    page, _ = build_page(path)
    blocks = re.findall(r'<details class="llmbook-solution">(.*?)</details>\s*(?=<div|<details|</main|</body)', page, re.S)
    assert len(blocks) == len(hidden)
    for block, cell_id in zip(blocks, hidden):
        assert f'id="cell-id={cell_id}"' in block
    assert "possible histories: 80^2" in "".join(blocks)  # 00.4's printed answer, folded
    outside = re.sub(r'<details class="llmbook-solution">.*?</details>\s*(?=<div|<details|</main|</body)', "", page, flags=re.S)
    assert not any(f'id="cell-id={cell_id}"' in outside for cell_id in hidden)
    assert "possible histories: 80^2" not in outside
