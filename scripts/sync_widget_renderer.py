"""Refresh the copy of the browser renderer saved inside each notebook's widget state.

A notebook executed with a browser-drawn explorer saves the anywidget's JavaScript
(``llmbook/viz/frontend/render.js``) in its widget-state metadata, and JupyterLab draws a
saved widget with that copy when no kernel runs. After a change to ``render.js`` those
copies are out of date; this script replaces them with the current file (nothing is
executed, no output changes). ``--check`` only reports, and exits 1 if any copy is stale.

    python scripts/sync_widget_renderer.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RENDER_JS = (ROOT / "lib" / "llmbook" / "viz" / "frontend" / "render.js").read_text(encoding="utf-8")
STATE = "application/vnd.jupyter.widget-state+json"
MARK = "function attentionView"  # a line every version of the book's renderer has


def stale_models(nb: dict) -> list[dict]:
    """The saved states of the book's anywidgets whose renderer differs from the current one."""
    state = nb.get("metadata", {}).get("widgets", {}).get(STATE, {}).get("state", {})
    return [m["state"] for m in state.values()
            if isinstance(m.get("state", {}).get("_esm"), str) and MARK in m["state"]["_esm"]
            and m["state"]["_esm"] != RENDER_JS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report stale copies, change nothing")
    args = ap.parse_args(argv)
    stale = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        models = stale_models(nb)
        if not models:
            continue
        stale += len(models)
        print(f"{path.relative_to(ROOT)}: {len(models)} saved renderer cop{'y' if len(models) == 1 else 'ies'} out of date")
        if not args.check:
            for m in models:
                m["_esm"] = RENDER_JS
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.check and stale:
        print("run `python scripts/sync_widget_renderer.py` to refresh them", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
