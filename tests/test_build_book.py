"""scripts/build_book.py (make html) without a browser: chapter order, widget outputs become static HTML,
solutions are folded, MathJax is local, nothing remote stays; one small book built with Sphinx."""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from build_book import (HIDE_TAG, StaticWidgets, build, chapters, committed_text, copy_mathjax, explorer_note,  # noqa: E402
                        fold_solutions, front_controls, is_collapsed, read_notebook, remote_references,
                        renderer_script, stage, static_notebook, toc_yaml)


def _model(name, module="@jupyter-widgets/controls", **state):
    return {"model_name": name, "model_module": module, "model_module_version": "2.0.0", "state": state}


def _widget_notebook():
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
    nb, fronts = static_notebook(_widget_notebook())
    assert fronts == 1 and "widgets" not in nb.metadata
    html = nb.cells[0].outputs[0]["data"]["text/html"]
    assert "<b>Demo explorer</b>" in html
    assert 'class="llmbook-static-front"' in html and '"kind":"bars"' in html
    assert "corpus: <code>Shakespeare</code>" in html and "need Python" in html  # saved value + note
    assert "</script><b>" not in html and "<\\/script>" in html  # the JSON cannot close its script tag


def _note(nb) -> str:
    return re.search(r'<div class="llmbook-static-note">([^<]*)</div></div>$', nb.cells[0].outputs[0]["data"]["text/html"])[1]


def test_the_note_says_which_controls_work_in_the_page():
    """UX #20: a bar chart of one frame (chapter 0's) draws no control in the browser, so the note must not
    say that controls drawn with the picture work; a chart with frames has a step slider, which does."""
    assert _note(static_notebook(_widget_notebook())[0]) == (
        "Controls in grey need Python (a running kernel) and show the values saved with the notebook; "
        "the picture is the one saved with it.")
    nb = _widget_notebook()
    front = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]["front"]["state"]
    front["spec"]["frames"] *= 2
    front["spec"]["step_label"] = "position"
    assert _note(static_notebook(nb)[0]).endswith("; the position control drawn with the picture works in this page.")

    def front_only(spec):  # no Python control left, the front view drawing ``spec``
        nb = _widget_notebook()
        state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        state["root"]["state"]["children"].remove("IPY_MODEL_ctl")
        state["front"]["state"]["spec"] = spec
        return _note(static_notebook(nb)[0])

    assert front_only({"kind": "attention", "weights": [[], []], "causal_ok": False}) == \
        "The layer, head and scale controls drawn with the picture work in this page."
    assert front_only({"kind": "panels", "panels": []}) == \
        "The picture is the one saved with the notebook; run the notebook to change it."


def test_front_controls_per_kind():
    assert front_controls({"kind": "positional"}) == ["dims"]
    assert front_controls({"kind": "model_view"}) == ["layer", "head"]
    assert front_controls({"kind": "bpe", "pairs": [["a", "b"]]}) == ["merges"]
    assert front_controls({"kind": "bpe", "pairs": []}) == []
    assert front_controls({"kind": "panels", "top_k": {"label": "top k"}}) == ["top k"]
    assert front_controls({"kind": "attention", "weights": [[]], "causal_ok": True}) == ["head", "scale", "causal mask"]
    assert explorer_note(True, ["dims", "dims"]).endswith("; the dims control drawn with the picture works in this page.")


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   check=True, capture_output=True, timeout=60)


def test_a_git_checkout_builds_from_the_committed_notebooks(tmp_path, capsys, monkeypatch):
    """UX #14: JupyterLab's autosave (or a reader's edit) must not change the book: a tracked notebook is
    read from HEAD, with a warning naming it; an untracked one, or --working-tree, reads the file."""
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    _git(repo, "init", "-q")
    path = repo / "notebooks" / "05_demo.ipynb"
    nb = _widget_notebook()
    nbformat.write(nb, path)
    _git(repo, "add", "notebooks/05_demo.ipynb")
    _git(repo, "commit", "-q", "-m", "chapter")
    assert committed_text(path, repo) == path.read_text(encoding="utf-8")
    assert read_notebook(path, repo=repo) == (nb, None)  # unchanged: no warning

    edited = _widget_notebook()  # the autosave after a run: the saved widget state lost its explorer
    edited.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"] = {}
    edited.cells[0].source = "explorer  # READER-EDIT"
    nbformat.write(edited, path)
    got, note = read_notebook(path, repo=repo)
    assert got == nb and "READER-EDIT" not in nbformat.writes(got)
    assert "05_demo.ipynb has uncommitted changes" in note and "git HEAD" in note and "--working-tree" in note
    assert read_notebook(path, from_head=False, repo=repo) == (edited, None)

    # stage (what make html runs) keeps the committed explorer and says so on stderr
    import build_book
    monkeypatch.setattr(build_book, "REPO", repo)
    capsys.readouterr()
    assert stage([path], tmp_path / "src") == {"05_demo": (1, 0)}
    assert "05_demo.ipynb has uncommitted changes" in capsys.readouterr().err
    assert stage([path], tmp_path / "src2", from_head=False) == {"05_demo": (0, 0)}
    assert "uncommitted" not in capsys.readouterr().err

    new = repo / "notebooks" / "06_new.ipynb"  # not committed yet: the file, no warning
    nbformat.write(edited, new)
    assert committed_text(new, repo) is None and read_notebook(new, repo=repo) == (edited, None)
    assert committed_text(tmp_path / "elsewhere.ipynb", repo) is None  # outside the checkout
    assert committed_text(path, tmp_path / "not-a-repo") is None


def test_controls_in_a_wrapping_row_stay_side_by_side():
    """The explorers' controls sit in a Box whose layout wraps a row (UX #5); the page keeps that."""
    nb = _widget_notebook()
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    state["root"]["state"]["children"][1] = "IPY_MODEL_controls"
    state["controls"] = _model("BoxModel", children=["IPY_MODEL_ctl"], layout="IPY_MODEL_lay", _dom_classes=["llmbook-controls"])
    state["lay"] = _model("LayoutModel", "@jupyter-widgets/base", flex_flow="row wrap")
    page = static_notebook(nb)[0].cells[0].outputs[0]["data"]["text/html"]
    assert re.search(r'<div class="llmbook-controls" style="display:flex;flex-direction:row;flex-wrap:wrap[^"]*">'
                     r'<div class="llmbook-static-ctl llmbook-ctl-corpus"', page)
    state = _widget_notebook().metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert 'style="display:flex;flex-direction:column"' in StaticWidgets(state).explorer("root")  # a VBox stays a column


def test_unknown_widget_falls_back_to_its_text():
    nb = _widget_notebook()
    nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"] = {}
    nb, fronts = static_notebook(nb)
    assert fronts == 0
    assert "Demo explorer: interactive (corpus)" in nb.cells[0].outputs[0]["data"]["text/html"]


def test_chapters_are_in_reading_order(tmp_path):
    for name in ("A_appendix", "10_reasoning", "01b_x", "09_post", "00_intro", "01a_x", "02b_y", "02_z"):
        (tmp_path / f"{name}.ipynb").write_text("{}")
    assert [p.stem for p in chapters(tmp_path)] == ["00_intro", "01a_x", "01b_x", "02_z", "02b_y", "09_post",
                                                    "10_reasoning", "A_appendix"]
    with pytest.raises(FileNotFoundError, match="no notebooks"):
        chapters(tmp_path / "empty")


def test_toc_lists_the_landing_page_then_every_chapter():
    assert toc_yaml(["00_a", "01a_b"]) == "format: jb-book\nroot: intro\nchapters:\n- file: 00_a\n- file: 01a_b\n"
    with pytest.raises(ValueError, match="stems"):
        toc_yaml(["00_a", "x: y"])


def test_remote_references_finds_what_loads_not_what_links():
    page = ('<script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//cdn.example/x.css">'
            '<img src="http://example.org/a.png"><style>@import "https://fonts.example/f.css";</style>'
            '<a href="https://arxiv.org/abs/1706.03762">the paper</a><script src="_static/local.js"></script>'
            '<svg xmlns="http://www.w3.org/2000/svg"></svg><img src="data:image/png;base64,AAAA">')
    assert len(remote_references(page)) == 4
    assert remote_references("a{background:url('https://x.example/i.png')} b{background:url(data:image/svg+xml,"
                             "%3Csvg xmlns='http://www.w3.org/2000/svg'%3E)}", "css") == ["url('https://"]
    assert remote_references('import("https://unpkg.com/m"); const NS = "http://www.w3.org/2000/svg";', "js") \
        == ['import("https://']
    with pytest.raises(ValueError, match="kind"):
        remote_references("", "pdf")


def test_copy_mathjax_brings_scripts_and_fonts(tmp_path):
    target = copy_mathjax(tmp_path)
    assert target == tmp_path / "_static" / "mathjax"
    assert (target / "MathJax.js").is_file() and (target / "config" / "TeX-AMS-MML_HTMLorMML-full.js").is_file()
    assert any((target / "fonts" / "HTML-CSS" / "STIX-Web" / "woff").glob("*.woff"))
    copy_mathjax(tmp_path)  # a second build over the first one


def test_renderer_is_one_classic_script():
    js = renderer_script()
    body = js.split("\n", 1)[1]
    assert body.startswith("(function () {") and body.rstrip().endswith("})();")
    assert not re.search(r"^\s*(?:import|export)\b", js, re.M)  # no module syntax: runs from file://
    assert "function render(" in js and "function staticModel(" in js
    assert js.index("function render(") < js.index("function staticModel(")  # static.js runs after render.js


def _exercise_notebook() -> nbformat.NotebookNode:
    """An exercise, its collapsed solution (source and a printed answer), a collapsed discussion, a visible cell."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells.append(nbformat.v4.new_markdown_cell("# Chapter 5 · Demo\n\n### Exercise 05.1\nWrite `half(d)`: "
                                                  "$$\\mathrm{softmax}(x)_i = e^{x_i} / \\sum_j e^{x_j}$$"))
    solution = nbformat.v4.new_code_cell("# Solution (click to expand)\ndef half(d):\n    return d / 2  # SOLUTION-SOURCE")
    solution.metadata.update({"jupyter": {"source_hidden": True, "outputs_hidden": True},
                              "llmbook": {"exercise": "05.1", "role": "solution"}, "tags": ["nbval-ignore-output"]})
    solution.outputs = [nbformat.v4.new_output("stream", name="stdout", text="SOLUTION-PRINTED 64\n")]
    discussion = nbformat.v4.new_markdown_cell("**Discussion (after you tried)** DISCUSSION-TEXT\n\n````python\n```\n````")
    discussion.metadata.update({"jupyter": {"source_hidden": True}, "llmbook": {"exercise": "05.1", "role": "discussion"}})
    shown = nbformat.v4.new_code_cell("print('VISIBLE-CELL')")
    shown.outputs = [nbformat.v4.new_output("stream", name="stdout", text="VISIBLE-OUTPUT\n")]
    nb.cells += [solution, discussion, shown]
    return nb


def test_collapsed_cells_are_found_by_their_metadata():
    role_only = nbformat.v4.new_code_cell("x")
    role_only.metadata["llmbook"] = {"role": "solution"}
    hidden_only = nbformat.v4.new_code_cell("x")
    hidden_only.metadata["jupyter"] = {"source_hidden": True}
    exercise = nbformat.v4.new_code_cell("x")
    exercise.metadata["llmbook"] = {"exercise": "00.1", "role": "exercise"}
    assert is_collapsed(role_only) and is_collapsed(hidden_only)
    assert not is_collapsed(exercise) and not is_collapsed(nbformat.v4.new_markdown_cell("text"))


def test_fold_solutions_tags_code_and_wraps_markdown():
    nb = _exercise_notebook()
    assert fold_solutions(nb) == 2
    heading, solution, discussion, shown = nb.cells
    assert solution.metadata["tags"] == ["nbval-ignore-output", HIDE_TAG]
    assert solution.metadata["mystnb"]["code_prompt_show"] == "Solution to exercise 05.1 (click to show)"
    # the dropdown's fence is longer than the four backticks inside the discussion
    assert discussion.source.startswith("`````{dropdown} Discussion of exercise 05.1 (click to show)\n")
    assert discussion.source.endswith("\n`````") and "DISCUSSION-TEXT" in discussion.source
    assert HIDE_TAG not in shown.metadata.get("tags", []) and heading.source.startswith("# Chapter 5")


def test_a_small_book_builds_offline_with_folded_solutions(tmp_path):
    """Sphinx on one chapter: its page and the landing page, the solution folded, MathJax from the local copy."""
    path = tmp_path / "05_demo.ipynb"
    nbformat.write(_exercise_notebook(), path)
    out = tmp_path / "html"
    counts = build(out, [path])
    assert counts == {"05_demo": (0, 2)}
    page = (out / "05_demo.html").read_text(encoding="utf-8")
    assert remote_references(page) == []
    assert page.count('src="_static/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"') == 1
    assert (out / "_static" / "mathjax" / "MathJax.js").is_file()
    assert 'class="math notranslate nohighlight"' in page  # the equation, for MathJax to typeset
    # every secret sits inside a closed <details>; the rest is outside
    folds = re.findall(r"<details\b(?![^>]*\bopen\b)[^>]*>.*?</details>", page, re.S)
    assert len(folds) == 2
    assert "Solution to exercise 05.1 (click to show)" in folds[0]
    assert "SOLUTION-SOURCE" in folds[0] and "SOLUTION-PRINTED" in folds[0]
    assert "Discussion of exercise 05.1 (click to show)" in folds[1] and "DISCUSSION-TEXT" in folds[1]
    outside = re.sub(r"<details\b.*?</details>", "", page, flags=re.S)
    for secret in ("SOLUTION-SOURCE", "SOLUTION-PRINTED", "DISCUSSION-TEXT"):
        assert secret not in outside
    assert "VISIBLE-CELL" in outside and "VISIBLE-OUTPUT" in outside and "Exercise 05.1" in outside
    # the landing page and the chapter, linked both ways in order
    intro = (out / "intro.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", intro)  # the code block is highlighted word by word
    assert "make lab" in text and "make test" in text
    assert re.search(r'<a class="right-next"\s+href="05_demo.html"', intro)
    assert re.search(r'<a class="left-prev"\s+href="intro.html"', page)
    assert "searchindex.js" in (out / "search.html").read_text(encoding="utf-8")
    # a second build with no notebook changed still writes the site's own static files (Sphinx
    # skips them when nothing is out of date, unless told to write everything)
    # (in a fresh process, as make html runs it: in this one Sphinx would see a new configuration)
    (out / "_static" / "llmbook-render.js").unlink()
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_book.py"), "--out", str(out), str(path)],
                   check=True, capture_output=True, timeout=300)
    assert "function staticModel(" in (out / "_static" / "llmbook-render.js").read_text(encoding="utf-8")


def test_chapter_3_shows_no_solution_outside_a_fold():
    """On a real chapter: every collapsed cell of the notebook gets the fold tag, and nothing else does."""
    path = REPO / "notebooks" / "03_attention.ipynb"
    nb = nbformat.read(path, as_version=4)
    hidden = [c.id for c in nb.cells if is_collapsed(c)]
    assert len(hidden) >= 5  # exercises 03.1-03.5
    assert fold_solutions(nb) == len(hidden)
    tagged = [c.id for c in nb.cells if HIDE_TAG in c.metadata.get("tags", [])]
    assert tagged == hidden
