"""scripts/build_html.py (make html) without a browser: widget outputs become static HTML, nothing remote stays."""

import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from build_html import remote_references, static_notebook, strip_remote  # noqa: E402


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
