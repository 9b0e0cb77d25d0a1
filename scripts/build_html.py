"""Build the book as static HTML (``make html``): every notebook, from its committed outputs.

Nothing is executed and nothing is fetched: nbconvert exports each notebook as it was
saved, and the page loads no script or style sheet from the internet (require.js and
mermaid, which nbconvert's template takes from a CDN, are left out). Equations are typeset
by a local MathJax: MathJax 2.7 as shipped in the ``jupyter-server-mathjax`` package (a
dependency of the book) is copied to ``<out>/mathjax/`` and each page loads it from there
by a relative address, with its STIX web fonts (no font or script from the network, so the
pages also work opened from disk, ``file://``).

Widget outputs are replaced by HTML made from the widget state the notebook saved
(notebook metadata ``widgets``, ``application/vnd.jupyter.widget-state+json``):

- an explorer drawn by the book's front end (``llmbook.viz.frontend.FrontView``) becomes
  the same renderer, ``render.js``, inlined once per page, drawing from the saved ``spec``
  and selection: its display-only controls (layer, head, scale, causal view, dimensions,
  merge step) work in the static page;
- controls that need Python show their saved value, greyed out, with a note saying so;
- other widgets show what they held (HTML, PNG images).

A collapsed cell (an exercise's solution or discussion: ``jupyter.source_hidden`` in the cell's
metadata, or ``llmbook.role`` "solution" / "discussion") is printed inside a closed ``<details>``
element, input and outputs both: the page shows one line, "Solution to exercise 05.1 (click to
show)", and the answer only when the reader opens it.

Usage: ``python scripts/build_html.py [--out build/html] [notebooks ...]``.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import HTMLExporter

REPO = Path(__file__).resolve().parents[1]
FRONTEND = REPO / "lib" / "llmbook" / "viz" / "frontend"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SELECTION = ("layer", "head", "scale", "causal", "dims", "step", "stale")
BOXES = {"VBoxModel": "column", "BoxModel": "column", "GridBoxModel": "column", "HBoxModel": "row"}
STATIC_CSS = """<style>
.llmbook-static-ctl{color:#777;font-size:13px;margin:2px 0}
.llmbook-static-ctl code{background:#f2f2f2;padding:0 4px;border-radius:3px;white-space:pre-wrap}
.llmbook-static-note{color:#555;font-style:italic;font-size:12.5px;margin:4px 0 8px}
</style>"""
NOTE_PYTHON = ("Controls in grey need Python (a running kernel) and show the values saved with the notebook; "
               "the controls drawn with the picture work in this page.")
NOTE_NO_FRONT = "This explorer needs a running kernel; the picture is the one saved with the notebook."
MATHJAX_DIR = "mathjax"  # beside the pages in the output folder
# MathJax 2's combined TeX configuration as shipped by jupyter-server-mathjax (nbconvert's
# default, TeX-AMS_CHTML-full, is not in that package), plus Safe (no javascript: links in TeX).
MATHJAX_QUERY = "?config=TeX-AMS-MML_HTMLorMML-full,Safe"
# The package ships only the STIX web fonts: use them, never local or image fonts (an image
# font would be looked for under fonts/HTML-CSS/TeX/png, which is not there). The hidden
# MathML copy kept for screen readers (AssistiveMML) would otherwise ask for MathJax's TeX
# fonts (fonts/HTML-CSS/TeX/otf, not shipped either) for letters such as a double-struck R.
MATHJAX_FONTS = """<script type="text/x-mathjax-config">
MathJax.Hub.Config({"HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null}});
</script>
<style>.MJX_Assistive_MathML [mathvariant]{font-family:inherit !important}</style>"""


HIDDEN_ROLES = ("solution", "discussion")
# nbconvert's lab template with every collapsed cell inside a closed <details> element.
TEMPLATE_FILE = "llmbook_static.html.j2"
TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{% block any_cell %}
{%- set summary = cell.metadata.get('llmbook_static', {}).get('summary') -%}
{%- if summary -%}
<details class="llmbook-solution"><summary>{{ summary | e }}</summary>
{{ super() }}
</details>
{%- else -%}
{{ super() }}
{%- endif -%}
{% endblock any_cell %}
"""
SOLUTION_CSS = """<style>
details.llmbook-solution{margin:6px 0 10px;border-left:3px solid #c9c9c9;padding-left:8px}
details.llmbook-solution>summary{cursor:pointer;color:#555;font-style:italic;padding:2px 0;font-family:var(--jp-ui-font-family,sans-serif)}
details.llmbook-solution[open]>summary{margin-bottom:4px}
</style>"""


def is_collapsed(cell) -> bool:
    """Whether the notebook keeps this cell folded: an exercise's solution or its discussion."""
    meta = cell.get("metadata", {})
    return bool(meta.get("jupyter", {}).get("source_hidden")) or meta.get("llmbook", {}).get("role") in HIDDEN_ROLES


def fold_solutions(nb) -> int:
    """Mark every collapsed cell for the template's ``<details>`` (see ``TEMPLATE``); return how many."""
    n = 0
    for cell in nb.cells:
        if not is_collapsed(cell):
            continue
        meta = cell.metadata.get("llmbook", {})
        what = "Discussion of" if meta.get("role") == "discussion" or cell.cell_type == "markdown" else "Solution to"
        exercise = meta.get("exercise")
        summary = f"{what} exercise {exercise}" if exercise else f"{what} the exercise"
        cell.metadata["llmbook_static"] = {"summary": summary + " (click to show)"}
        n += 1
    return n


def _ref(value) -> str | None:
    return value[len("IPY_MODEL_"):] if isinstance(value, str) and value.startswith("IPY_MODEL_") else None


class StaticWidgets:
    """Turns saved widget models into HTML; counts the browser-drawn views it emitted."""

    def __init__(self, state: dict) -> None:
        self.state = state
        self.fronts = 0

    def explorer(self, model_id: str) -> str:
        before = self.fronts
        self._has_python_controls = False
        body = self._node(model_id)
        if not body:
            return ""
        root = self.state.get(model_id, {}).get("state", {})
        if "llmbook-explorer" not in root.get("_dom_classes", []):
            return f'<div class="llmbook-static">{body}</div>'  # e.g. a progress bar: its saved text
        if self.fronts > before:
            note = NOTE_PYTHON if self._has_python_controls else "The controls drawn with the picture work in this page."
        else:
            note = NOTE_NO_FRONT
        return f'<div class="llmbook-static">{body}<div class="llmbook-static-note">{html.escape(note)}</div></div>'

    def _node(self, model_id: str | None) -> str:
        model = self.state.get(model_id or "")
        if model is None:
            return ""
        name, s = model.get("model_name", ""), model.get("state", {})
        classes = " ".join(s.get("_dom_classes", []))
        if model.get("model_module") == "anywidget" and s.get("spec"):
            self.fronts += 1
            data = {"spec": s["spec"], **{k: s[k] for k in SELECTION if k in s}}
            payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
            return ('<div class="llmbook-static-front">'
                    f'<script type="application/json" class="llmbook-static-state">{payload}</script>'
                    '<div class="llmbook-static-mount"></div></div>')
        if name in BOXES:
            inner = "".join(self._node(_ref(c)) for c in s.get("children", []))
            return f'<div class="{html.escape(classes)}" style="display:flex;flex-direction:{BOXES[name]}">{inner}</div>'
        if name in ("HTMLModel", "HTMLMathModel"):
            return s.get("value", "")
        if name == "LabelModel":
            return f"<div>{html.escape(str(s.get('value', '')))}</div>"
        if name == "ImageModel":
            for buf in model.get("buffers", []):
                if buf.get("path") == ["value"] and buf.get("encoding") == "base64":
                    fmt = html.escape(s.get("format", "png"))
                    return f'<img class="{html.escape(classes)}" alt="saved picture" src="data:image/{fmt};base64,{buf["data"]}">'
            return ""
        if name in ("FloatProgressModel", "IntProgressModel") or not (s.get("description") or "llmbook-ctl-" in classes):
            return ""  # a bar without a label (tqdm's): the HTML beside it carries the text
        if ("value" in s or "index" in s) and "description" in s:  # a control: its saved value, greyed out
            self._has_python_controls = True
            label = s.get("description") or classes.replace("llmbook-ctl-", "")
            if "_options_labels" in s and isinstance(s.get("index"), int):  # Dropdown, ToggleButtons: no value saved
                value = s["_options_labels"][s["index"]]
            else:
                value = s.get("value", "")
            return (f'<div class="llmbook-static-ctl {html.escape(classes)}" title="needs a running kernel">'
                    f"{html.escape(str(label))}: <code>{html.escape(str(value))}</code></div>")
        return ""


def static_notebook(nb) -> tuple[object, int]:
    """Replace widget outputs by static HTML; drop the saved widget state. Returns (nb, number of front views)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    widgets = StaticWidgets(state)
    for cell in nb.cells:
        for i, out in enumerate(cell.get("outputs", [])):
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            body = widgets.explorer(data[WIDGET_VIEW].get("model_id", ""))
            text = data.get("text/plain", "")
            if not body:
                body = f'<div class="llmbook-static-note">{html.escape(text or "an interactive widget: run the notebook to use it")}</div>'
            cell.outputs[i] = nbformat.v4.new_output("display_data", data={"text/html": STATIC_CSS + body, "text/plain": text})
    nb.metadata.pop("widgets", None)
    return nb, widgets.fronts


_REMOTE_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S | re.I)
_REMOTE_LINK = re.compile(r"<link\b[^>]*\bhref=[\"']?(?:https?:)?//[^>]*>", re.I)


def mathjax_source() -> Path:
    """The folder holding MathJax.js inside the installed jupyter-server-mathjax package."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise RuntimeError("the static book typesets equations with the MathJax copy in the jupyter-server-mathjax "
                           "package, which is not installed: run `make setup` (or pip install jupyter-server-mathjax)") from None
    static = Path(jupyter_server_mathjax.__file__).resolve().parent / "static"
    needed = [static / "MathJax.js", static / "config" / "TeX-AMS-MML_HTMLorMML-full.js", static / "fonts" / "HTML-CSS" / "STIX-Web"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise RuntimeError(f"jupyter-server-mathjax is installed but its MathJax copy lacks {', '.join(missing)}")
    return static


def copy_mathjax(out: Path) -> Path:
    """Copy MathJax (scripts, configuration, STIX web fonts, licence) into ``out/mathjax``; return that folder."""
    target = out / MATHJAX_DIR
    shutil.copytree(mathjax_source(), target, dirs_exist_ok=True)
    return target


def strip_remote(page: str, keep_mathjax: bool = False) -> str:
    """Remove every script and style sheet that would load from the network (the template's CDN ones).

    ``keep_mathjax``: keep the template's MathJax configuration (MathJax itself is loaded from
    a local copy); otherwise it is dropped too, useless without MathJax."""
    def keep(match: re.Match) -> str:
        tag = match.group(0)
        opening = tag[: tag.index(">") + 1]
        if re.search(r"\bsrc=[\"']?(?:https?:)?//", opening, re.I) or re.search(r"\bsrc=[\"'][\"']", opening):
            return ""  # a CDN script, or one whose address was blanked out above
        if "llmbook-render" not in opening and re.search(r"(?:import\s*\(|from\s+)[\"']https?://|cdnjs|unpkg|jsdelivr", tag):
            return ""
        if "MathJax" in tag and "llmbook-render" not in opening and not keep_mathjax:
            return ""  # its configuration, useless without MathJax itself
        return tag

    return _REMOTE_LINK.sub("", _REMOTE_SCRIPT.sub(keep, page))


def remote_references(page: str) -> list[str]:
    """Script or link tags that still point at the network (must be empty)."""
    tags = re.findall(r"<(?:script|link|img|iframe)\b[^>]*>", page, re.I)
    return [t for t in tags if re.search(r"\b(?:src|href)=[\"']?(?:https?:)?//", t, re.I)]


def build_page(path: Path, mathjax_url: str = "") -> tuple[str, int]:
    """The page of one notebook and its number of browser-drawn views.

    ``mathjax_url``: where the page loads MathJax.js from, relative to the page (a local copy,
    see ``copy_mathjax``); empty: no MathJax, equations show as their TeX source."""
    if re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", mathjax_url, re.I):
        raise ValueError(f"mathjax_url must be a local, relative address, got {mathjax_url!r}")
    nb = nbformat.read(path, as_version=4)
    nb, fronts = static_notebook(nb)
    folded = fold_solutions(nb)
    exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({TEMPLATE_FILE: TEMPLATE})],
                            template_file=TEMPLATE_FILE)
    exporter.mathjax_url = mathjax_url
    exporter.require_js_url = ""
    exporter.jquery_url = ""
    page, _ = exporter.from_notebook_node(nb)
    page = strip_remote(page, keep_mathjax=bool(mathjax_url))
    if mathjax_url:  # the fonts setting goes before MathJax.js, which reads it as it starts
        script = f'<script src="{html.escape(mathjax_url)}">'
        if page.count(script) != 1:
            raise RuntimeError(f"{path.name}: expected nbconvert's template to load MathJax once from {mathjax_url!r}")
        page = page.replace(script, MATHJAX_FONTS + "\n" + script, 1)
    if folded:
        wrapped = page.count('<details class="llmbook-solution">')
        if wrapped != folded:
            raise RuntimeError(f"{path.name}: {folded} collapsed cell(s), but the template folded {wrapped}")
        page = page.replace("</head>", SOLUTION_CSS + "\n</head>", 1)
    if fronts:
        module = (FRONTEND / "render.js").read_text(encoding="utf-8") + "\n" + (FRONTEND / "static.js").read_text(encoding="utf-8")
        page = page.replace("</body>", f'<script type="module" id="llmbook-render">\n{module}\n</script>\n</body>', 1)
    bad = remote_references(page)
    if bad:
        raise RuntimeError(f"{path.name}: the page still loads from the network: {bad[:3]}")
    return page, fronts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to build (default: notebooks/*.ipynb)")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "html", help="output folder (default: build/html)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((REPO / "notebooks").glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        copy_mathjax(args.out)
    except RuntimeError as e:
        parser.exit(1, f"build_html.py: error: {e}\n")
    mathjax_url = f"{MATHJAX_DIR}/MathJax.js{MATHJAX_QUERY}"
    links = []
    for path in paths:
        page, fronts = build_page(path, mathjax_url)
        target = args.out / (path.stem + ".html")
        target.write_text(page, encoding="utf-8")
        links.append(f'<li><a href="{html.escape(target.name)}">{html.escape(path.stem)}</a></li>')
        print(f"{target.relative_to(args.out.parent) if args.out.parent in target.parents else target}: "
              f"{len(page) // 1024} KiB, {fronts} live explorer view(s)")
    index = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>llmbook</title></head><body>"
             "<h1>How large language models work: the static book</h1>"
             "<p>Built from the committed notebooks, no code run. Explorers drawn in the browser respond to their "
             "display-only controls; the rest needs a running kernel (<code>make lab</code>).</p>"
             f"<ul>{''.join(links)}</ul></body></html>")
    (args.out / "index.html").write_text(index, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
