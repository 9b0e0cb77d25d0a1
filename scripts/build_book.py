"""Build the web book (``make html``): every chapter notebook, from its committed outputs, as a
Jupyter Book-style site: a sidebar of chapters, previous/next links, full-text search.

The tool is Jupyter Book's own stack, Sphinx with MyST-NB and the Sphinx Book Theme (pinned in
pyproject.toml's ``book`` extra), driven by ``sphinx-build`` with ``book/conf.py``. This script is
the glue it needs:

1. stage the notebooks into ``<out>-src/`` (beside ``<out>``) with ``book/`` (``conf.py``, ``intro.md``, the
   style sheet) and a ``_toc.yml`` listing the chapters in order;
2. on the way, replace every widget output by HTML made from the widget state the notebook saved
   (notebook metadata ``widgets``), so that nothing needs a widget manager from a CDN:

   - an explorer drawn by the book's front end (``llmbook.viz.frontend.FrontView``) becomes a
     mount point holding its saved ``spec`` and selection, drawn in the page by the same renderer,
     ``render.js`` (with ``static.js``'s stand-in model), written as one classic script into the
     site: its display-only controls (layer, head, scale, causal view, dimensions, merge step)
     work in the page;
   - controls that need Python show their saved value, greyed out, with a note saying so;
   - other widgets show what they held (HTML, PNG images);

3. fold every collapsed cell (an exercise's solution or discussion: ``jupyter.source_hidden`` in
   the cell's metadata, or ``llmbook.role`` "solution" / "discussion"): a code cell gets MyST-NB's
   ``hide-cell`` tag, with "Solution to exercise 05.1 (click to show)" as its prompt; a Markdown
   cell becomes a closed dropdown;
4. run Sphinx (one process), then copy MathJax 2.7 as shipped in the ``jupyter-server-mathjax``
   package into ``<out>/_static/mathjax/`` (scripts, configuration, STIX web fonts), so equations
   are typeset with no network, also from ``file://``;
5. refuse the result if any page, script or style sheet would load something from the network.

Nothing is executed (``nb_execution_mode = "off"``) and nothing is fetched. In a git checkout the
notebooks are read as committed (``HEAD``), so a reader's edits or JupyterLab's autosave never change
the book; a warning names each notebook whose file differs (``--working-tree`` builds from the files).

Usage: ``python scripts/build_book.py [--out build/html] [--working-tree] [notebooks ...]``.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "book"
FRONTEND = REPO / "lib" / "llmbook" / "viz" / "frontend"
STATIC_DIR = "_llmbook_static"  # html_static_path in book/conf.py
RENDER_FILE = "llmbook-render.js"  # html_js_files in book/conf.py
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SELECTION = ("layer", "head", "scale", "causal", "dims", "step", "stale")
BOXES = {"VBoxModel": "column", "BoxModel": "column", "GridBoxModel": "column", "HBoxModel": "row"}
NOTE_PYTHON = "Controls in grey need Python (a running kernel) and show the values saved with the notebook"
NOTE_NO_FRONT = "This explorer needs a running kernel; the picture is the one saved with the notebook."
HIDDEN_ROLES = ("solution", "discussion")
HIDE_TAG = "hide-cell"  # MyST-NB: input and outputs folded behind one prompt


# ---------------------------------------------------------------- the chapters and their order
def chapters(folder: Path = REPO / "notebooks") -> list[Path]:
    """The chapter notebooks in reading order: 00, 01a, 01b, ..., 09, then the appendices (A, B, ...).

    File names sort in that order already (digits before capital letters)."""
    paths = sorted(folder.glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks in {folder}")
    return paths


def toc_yaml(stems: list[str], root: str = "intro") -> str:
    """``_toc.yml`` (sphinx-external-toc's ``jb-book`` format): the landing page, then each chapter."""
    for stem in [root, *stems]:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", stem):
            raise ValueError(f"stems: {stem!r} is not a plain file name")
    lines = ["format: jb-book", f"root: {root}", "chapters:"] + [f"- file: {stem}" for stem in stems]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- folded solutions
def is_collapsed(cell) -> bool:
    """Whether the notebook keeps this cell folded: an exercise's solution or its discussion."""
    meta = cell.get("metadata", {})
    return bool(meta.get("jupyter", {}).get("source_hidden")) or meta.get("llmbook", {}).get("role") in HIDDEN_ROLES


def fold_summary(cell) -> str:
    """The line a folded cell shows: "Solution to exercise 05.1 (click to show)"."""
    meta = cell.metadata.get("llmbook", {})
    what = "Discussion of" if meta.get("role") == "discussion" or cell.cell_type == "markdown" else "Solution to"
    exercise = meta.get("exercise")
    return (f"{what} exercise {exercise}" if exercise else f"{what} the exercise") + " (click to show)"


def fold_solutions(nb) -> int:
    """Fold every collapsed cell (see the module docstring); return how many were folded."""
    n = 0
    for cell in nb.cells:
        if not is_collapsed(cell):
            continue
        summary = fold_summary(cell)
        if cell.cell_type == "code":
            tags = cell.metadata.setdefault("tags", [])
            if HIDE_TAG not in tags:
                tags.append(HIDE_TAG)
            cell.metadata["mystnb"] = {"code_prompt_show": summary, "code_prompt_hide": "Hide the solution"}
        elif cell.cell_type == "markdown":
            # a fence longer than any backtick run inside, so the cell's own code blocks stay whole
            fence = "`" * max(4, 1 + max((len(m) for m in re.findall(r"`+", cell.source)), default=0))
            title = summary.replace("\n", " ")
            cell.source = f"{fence}{{dropdown}} {title}\n:class-container: llmbook-solution\n\n{cell.source}\n{fence}"
        else:
            continue
        n += 1
    return n


# ---------------------------------------------------------------- widgets from their saved state
def _ref(value) -> str | None:
    return value[len("IPY_MODEL_"):] if isinstance(value, str) and value.startswith("IPY_MODEL_") else None


def front_controls(spec: dict) -> list[str]:
    """The controls ``render.js`` draws with a picture of this ``spec`` (they work in the static page).

    A bar chart of one frame and a panels view without a top-k slider draw none (chapter 0's
    next-character chart, say); a one-layer attention map hides its layer menu.

    >>> front_controls({"kind": "bars", "frames": [{}], "step_label": "step"})
    []
    >>> front_controls({"kind": "attention", "weights": [[]], "causal_ok": True})
    ['head', 'scale', 'causal mask']
    """
    kind = spec.get("kind")
    if kind == "attention":
        return (["layer"] if len(spec.get("weights", [])) > 1 else []) + ["head", "scale"] + \
            (["causal mask"] if spec.get("causal_ok") else [])
    if kind == "model_view":
        return ["layer", "head"]
    if kind == "positional":
        return ["dims"]
    if kind == "bpe":
        return ["merges"] if spec.get("pairs") else []
    if kind == "bars":
        return [spec.get("step_label") or "step"] if len(spec.get("frames", [])) > 1 else []
    if kind == "panels":
        return [spec["top_k"].get("label") or "top k"] if spec.get("top_k") else []
    return []


def _names(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def explorer_note(python_controls: bool, fronts: list[str]) -> str:
    """The note under an explorer drawn in the page: which of its controls work here and which need a kernel.

    >>> explorer_note(True, [])
    'Controls in grey need Python (a running kernel) and show the values saved with the notebook; the picture is the one saved with it.'
    >>> explorer_note(False, ["head", "scale"])
    'The head and scale controls drawn with the picture work in this page.'
    """
    fronts = list(dict.fromkeys(fronts))  # once each, in order
    if fronts:
        works = f"the {_names(fronts)} control{'s' if len(fronts) > 1 else ''} drawn with the picture work"
        works += "s" if len(fronts) == 1 else ""
    if python_controls and fronts:
        return f"{NOTE_PYTHON}; {works} in this page."
    if python_controls:
        return f"{NOTE_PYTHON}; the picture is the one saved with it."
    if fronts:
        return f"{works[0].upper()}{works[1:]} in this page."
    return "The picture is the one saved with the notebook; run the notebook to change it."


class StaticWidgets:
    """Turns saved widget models into HTML; counts the browser-drawn views it emitted."""

    def __init__(self, state: dict) -> None:
        self.state = state
        self.fronts = 0

    def explorer(self, model_id: str) -> str:
        before = self.fronts
        self._has_python_controls = False
        self._front_controls: list[str] = []
        body = self._node(model_id)
        if not body:
            return ""
        root = self.state.get(model_id, {}).get("state", {})
        if "llmbook-explorer" not in root.get("_dom_classes", []):
            return f'<div class="llmbook-static">{body}</div>'  # e.g. a progress bar: its saved text
        if self.fronts > before:
            note = explorer_note(self._has_python_controls, self._front_controls)
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
            self._front_controls += front_controls(s["spec"])
            data = {"spec": s["spec"], **{k: s[k] for k in SELECTION if k in s}}
            payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
            return ('<div class="llmbook-static-front">'
                    f'<script type="application/json" class="llmbook-static-state">{payload}</script>'
                    '<div class="llmbook-static-mount"></div></div>')
        if name in BOXES:
            inner = "".join(self._node(_ref(c)) for c in s.get("children", []))
            style = f"display:flex;flex-direction:{BOXES[name]}"
            layout = self.state.get(_ref(s.get("layout")) or "", {}).get("state", {})
            if layout.get("flex_flow") == "row wrap":  # the explorers' controls, side by side
                style = "display:flex;flex-direction:row;flex-wrap:wrap;align-items:center;column-gap:18px"
            return f'<div class="{html.escape(classes)}" style="{style}">{inner}</div>'
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
            cell.outputs[i] = nbformat.v4.new_output("display_data", data={"text/html": body, "text/plain": text})
    nb.metadata.pop("widgets", None)
    return nb, widgets.fronts


def renderer_script() -> str:
    """``render.js`` and ``static.js`` as one classic script (an IIFE), for ``file://`` pages.

    ``render.js`` is an ES module whose only export is ``export default { render };``; Chromium
    refuses a module script loaded from ``file://``, so the export is dropped and the two files
    are wrapped in a function run when the page has been parsed (the script is deferred)."""
    render = (FRONTEND / "render.js").read_text(encoding="utf-8")
    export = "\nexport default { render };"
    if render.count(export) != 1 or re.search(r"^\s*(?:import|export)\b", render.replace(export, ""), re.M):
        raise RuntimeError("render.js must have exactly one export, `export default { render };`, and no import")
    static = (FRONTEND / "static.js").read_text(encoding="utf-8")
    return ("// The book's explorer renderer (lib/llmbook/viz/frontend/render.js, then static.js), as a classic script.\n"
            '(function () {\n"use strict";\n' + render.replace(export, "") + "\n" + static + "\n})();\n")


# ---------------------------------------------------------------- MathJax, offline
def mathjax_source() -> Path:
    """The folder holding MathJax.js inside the installed jupyter-server-mathjax package."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise RuntimeError("the web book typesets equations with the MathJax copy in the jupyter-server-mathjax "
                           "package, which is not installed: run `make setup` (or pip install jupyter-server-mathjax)") from None
    static = Path(jupyter_server_mathjax.__file__).resolve().parent / "static"
    needed = [static / "MathJax.js", static / "config" / "TeX-AMS-MML_HTMLorMML-full.js", static / "fonts" / "HTML-CSS" / "STIX-Web"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise RuntimeError(f"jupyter-server-mathjax is installed but its MathJax copy lacks {', '.join(missing)}")
    return static


def copy_mathjax(out: Path) -> Path:
    """Copy MathJax (scripts, configuration, STIX web fonts, licence) into ``out/_static/mathjax``; return that folder."""
    target = out / "_static" / "mathjax"
    shutil.copytree(mathjax_source(), target, dirs_exist_ok=True)
    return target


# ---------------------------------------------------------------- nothing from the network
_LOADING_TAG = re.compile(r"<(?:script|link|img|iframe|source|video|audio|embed|object)\b[^>]*>", re.I)
_REMOTE_ATTR = re.compile(r"\b(?:src|href|data|srcset)\s*=\s*[\"']?\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)
_REMOTE_CSS = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"'])\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)
_REMOTE_JS = re.compile(r"""(?:import\s*\(|from\s+|fetch\s*\(|importScripts\s*\()\s*["'`](?:https?:)?//""", re.I)


def remote_references(text: str, kind: str = "html") -> list[str]:
    """What in a page (``kind`` "html"), style sheet ("css") or script ("js") would load from the network.

    A link the reader may follow (``<a href="https://...">``) loads nothing and is not counted."""
    if kind == "html":
        found = [t for t in _LOADING_TAG.findall(text) if _REMOTE_ATTR.search(t)]
        return found + [m.group(0) for m in _REMOTE_CSS.finditer(text)]
    if kind == "css":
        return [m.group(0) for m in _REMOTE_CSS.finditer(text)]
    if kind == "js":
        return [m.group(0) for m in _REMOTE_JS.finditer(text)]
    raise ValueError(f"kind must be 'html', 'css' or 'js', got {kind!r}")


def check_offline(out: Path) -> None:
    """Raise if any page, style sheet or script of the site (MathJax's own copy aside) refers to the network."""
    bad = []
    for path in sorted(out.rglob("*")):
        kind = path.suffix.lstrip(".")
        if kind not in ("html", "css", "js") or "mathjax" in path.relative_to(out).parts:
            continue
        for ref in remote_references(path.read_text(encoding="utf-8", errors="replace"), kind):
            bad.append(f"{path.relative_to(out)}: {ref[:120]}")
    if bad:
        raise RuntimeError("the site would load from the network:\n  " + "\n  ".join(bad[:20]))


# ---------------------------------------------------------------- staging and building
def committed_text(path: Path, repo: Path | None = None) -> str | None:
    """The text of ``path`` as committed (git's ``HEAD``), or None when ``repo`` is not a git checkout,
    ``path`` lies outside it, or git does not track it."""
    try:
        repo = (repo or REPO).resolve()
        rel = path.resolve().relative_to(repo)
    except ValueError:
        return None
    try:
        r = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{rel.as_posix()}"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):  # no git on this machine
        return None
    return r.stdout.decode("utf-8") if r.returncode == 0 else None


def read_notebook(path: Path, from_head: bool = True, repo: Path | None = None) -> tuple[object, str | None]:
    """The notebook the book is built from, and a warning when that is not the file as it is on disk.

    In a git checkout the book is the committed book: a tracked notebook is read from ``HEAD``, so a
    reader's edits, or JupyterLab's autosave after running a chapter (which keeps a widget state
    without the new views), never change it; the warning names a notebook whose working copy differs.
    ``from_head=False`` (``--working-tree``), or a notebook git does not track, reads the file.
    ``repo``: the checkout (default: this repository).
    """
    committed = committed_text(path, repo) if from_head else None
    if committed is None:
        return nbformat.read(path, as_version=4), None
    note = None
    if path.read_bytes() != committed.encode("utf-8"):
        note = (f"{path.name} has uncommitted changes (edits, or JupyterLab's autosave after running it): "
                "the book uses its committed version (git HEAD); build with --working-tree to use the file as it is")
    return nbformat.reads(committed, as_version=4), note


def _write_if_changed(path: Path, text: str) -> None:
    """Write only what changed, so that Sphinx rebuilds only the pages whose source changed."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def stage(notebooks: list[Path], src: Path, from_head: bool = True) -> dict[str, tuple[int, int]]:
    """Prepare the Sphinx source folder; return {stem: (explorers drawn in the page, folded cells)}.

    Notebooks come from git's ``HEAD`` when tracked (``read_notebook``); a warning on stderr names each
    notebook whose working copy differs."""
    src.mkdir(parents=True, exist_ok=True)
    shutil.copytree(BOOK, src, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "_build"))
    _write_if_changed(src / STATIC_DIR / RENDER_FILE, renderer_script())
    stems = [p.stem for p in notebooks]
    _write_if_changed(src / "_toc.yml", toc_yaml(stems))
    for old in src.glob("*.ipynb"):  # a notebook built before and not asked for now
        if old.stem not in stems:
            old.unlink()
    counts = {}
    for path in notebooks:
        nb, note = read_notebook(path, from_head)
        if note:
            print(f"build_book.py: warning: {note}", file=sys.stderr)
        nb, fronts = static_notebook(nb)
        folded = fold_solutions(nb)
        _write_if_changed(src / path.name, nbformat.writes(nb) + "\n")
        counts[path.stem] = (fronts, folded)
    return counts


def build(out: Path, notebooks: list[Path], quiet: bool = True, from_head: bool = True) -> dict[str, tuple[int, int]]:
    """Stage, run Sphinx (one process), copy MathJax, check that nothing is remote."""
    from sphinx.cmd.build import build_main

    src = out.parent / (out.name + "-src")
    counts = stage(notebooks, src, from_head)
    # -a: write every page and copy the static files (the renderer, the style sheet) even when no
    # notebook changed; the notebooks are read again only when they changed (the doctrees are kept).
    args = ["-b", "html", "-a", "-d", str(out.parent / (out.name + "-doctrees")), "-j", "1", "-W", "--keep-going",
            str(src), str(out)]
    if quiet:
        args.insert(0, "-q")
    rc = build_main(args)
    if rc != 0:
        raise RuntimeError(f"sphinx-build failed (exit status {rc}); its messages are above")
    copy_mathjax(out)
    check_offline(out)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to build (default: every chapter)")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "html", help="output folder (default: build/html)")
    parser.add_argument("--verbose", action="store_true", help="show Sphinx's progress messages")
    parser.add_argument("--working-tree", action="store_true",
                        help="build from the notebook files as they are, not from their committed versions (git HEAD)")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or chapters()
    missing = [str(p) for p in notebooks if not p.exists()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    start = time.perf_counter()
    try:
        counts = build(args.out.resolve(), notebooks, quiet=not args.verbose, from_head=not args.working_tree)
    except (RuntimeError, ImportError) as e:
        parser.exit(1, f"build_book.py: error: {e}\n")
    for stem, (fronts, folded) in counts.items():
        print(f"{stem}: {fronts} explorer view(s) drawn in the page, {folded} folded solution(s)")
    print(f"web book: {len(counts)} chapters in {args.out / 'intro.html'}, built in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
