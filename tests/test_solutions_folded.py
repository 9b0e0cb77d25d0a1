"""A solution's answer stays hidden after Run All (issue 34, review 2026-11-26 UX #9).

A solution cell is collapsed, but JupyterLab shows a cell's outputs again when it runs, so
whatever a solution prints or displays lands right under its exercise. Every solution cell
therefore prints and displays only inside ``with solution_output():``
(``llmbook.viz.reveal``), which shows it as one closed ``<details>``. Checked twice:

- in the source: no ``print``, ``display``, ``pprint``, ``.show()`` or ``check(...)`` (which
  prints its verdict, and the verdict can name the answer) call outside such a block (calls
  inside a ``def`` run when the function is called, and are judged by the saved outputs), and
  no bare expression as the cell's last statement (IPython displays it);
- in the saved outputs: nothing on stdout, and every displayed output is the fold.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from llmbook.viz.reveal import PLAIN

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
FOLD = '<details class="llmbook-solution-output">'
SHOWING = {"print", "display", "pprint", "show", "check"}  # check() prints its verdict
# Chapters whose committed solutions still print in the open, being fixed in other changes: strict,
# so the entry has to go in the commit that folds a chapter's solutions.
PENDING: set[str] = set()


def _is_solution_output(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    f = call.func
    return (isinstance(f, ast.Name) and f.id == "solution_output") or (isinstance(f, ast.Attribute) and f.attr == "solution_output")


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def open_output(source: str) -> list[str]:
    """What a solution cell's source shows outside ``solution_output``: ``["line N: print(...)", ...]``.

    >>> open_output("x = 1\\nprint(x)")
    ['line 2: print(...)']
    >>> open_output("with solution_output():\\n    print(1)\\n    plt.show()")
    []
    >>> open_output("def f():\\n    print(1)\\nwith solution_output():\\n    f()")
    []
    >>> open_output("answer = 3\\nanswer")
    ['line 2: the last expression is displayed']
    """
    lines = [("pass" if ln.lstrip().startswith(("%", "!")) else ln) for ln in source.splitlines()]  # IPython magics
    tree = ast.parse("\n".join(lines))
    found: list[str] = []

    def visit(node: ast.AST, folded: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        if isinstance(node, ast.With) and any(_is_solution_output(i) for i in node.items):
            folded = True
        if isinstance(node, ast.Call) and not folded and _called_name(node) in SHOWING:
            found.append(f"line {node.lineno}: {_called_name(node)}(...)")
        for child in ast.iter_child_nodes(node):
            visit(child, folded)

    visit(tree, False)
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr) and not (isinstance(last.value, ast.Call) and _called_name(last.value) in SHOWING):
        found.append(f"line {last.lineno}: the last expression is displayed")
    return found


def open_saved_outputs(cell: dict) -> list[str]:
    """The saved outputs of a solution cell that show something outside the fold."""
    found = []
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream" and out.get("name") == "stdout":
            found.append("printed: " + "".join(out["text"])[:60])
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            html = "".join(data.get("text/html", ""))
            if not html.startswith(FOLD) or "".join(data.get("text/plain", "")) != PLAIN:
                found.append(f"displayed: {sorted(data)}")
    return found


def solution_cells(path: Path) -> list[tuple[int, dict]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(i, c) for i, c in enumerate(nb["cells"])
            if c["cell_type"] == "code" and c.get("metadata", {}).get("llmbook", {}).get("role") == "solution"]


def test_the_checks_catch_an_open_print_and_an_open_figure():
    cell = {"source": "answer = 2\nprint(answer)", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "2\n"},
        {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}]}
    assert open_output(cell["source"]) == ["line 2: print(...)"]
    assert len(open_saved_outputs(cell)) == 2
    folded = {"output_type": "display_data", "data": {"text/html": FOLD + "<summary>x</summary></details>", "text/plain": PLAIN}}
    assert open_saved_outputs({"outputs": [folded, {"output_type": "stream", "name": "stderr", "text": "warn"}]}) == []


def test_every_notebook_with_exercises_is_scanned():
    assert sum(bool(solution_cells(p)) for p in NOTEBOOKS) >= 18


@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(strict=True, reason="solutions not folded yet")] if p.stem in PENDING else [])
    for p in NOTEBOOKS])
def test_solutions_print_and_display_only_inside_the_fold(path):
    problems = []
    for i, cell in solution_cells(path):
        src = "".join(cell["source"])
        problems += [f"cell {i} ({cell['metadata']['llmbook'].get('exercise')}) source {p}" for p in open_output(src)]
        problems += [f"cell {i} ({cell['metadata']['llmbook'].get('exercise')}) saved output {p}" for p in open_saved_outputs(cell)]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def test_the_lint_reads_what_a_solution_printed_inside_the_fold():
    """The notebook lint's 'numbers in the prose are printed by a cell' and 'no machine path in an
    output' checks still see what a solution prints once it is folded (it is in text/html now)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import notebook_lint as L

    fold = {"output_type": "display_data", "data": {"text/plain": PLAIN, "text/html": FOLD
            + "<summary>Show</summary><pre style=\"white-space:pre-wrap\">all 32 items &lt;ok&gt;\nfrom /work/x.py</pre></details>"}}
    code = {"cell_type": "code", "source": "pass", "outputs": [fold]}
    prose = {"cell_type": "markdown", "source": "The solution scores all 32 book items."}
    nb = {"cells": [prose, code]}
    assert 32.0 in L.printed_numbers(nb) and not L.unbacked_numbers(nb)
    assert any("/work/" in b for b in L.leaky_outputs(nb))
