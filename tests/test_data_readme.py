"""Every file in data/README.md's "Files the project makes itself" table exists and says how it was made.

For each row: every listed file exists; every .safetensors / .json file among them records
(safetensors metadata, or a top-level "meta" object in JSON) the exact command written in
the row, the steps, the seed(s) and the data split; numbers the command or the row states
(``--steps N``, ``--seed N``, "(N steps") match the recorded ones. One test per row, named
after its first file, so a failure says which file is out of date.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
README = DATA / "README.md"


def table_rows() -> list[dict]:
    """Rows of the table under '## Files the project makes itself': files, the command, the whole text."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Files the project makes itself", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 4 or cells[0] in ("file", "") or set(cells[0]) <= {"-"}:
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        folder = names[0].rsplit("/", 1)[0] if "/" in names[0] else ""
        files = [n if "/" in n else f"{folder}/{n}" for n in names]
        commands = re.findall(r"`([^`]+)`", cells[2])
        rows.append({"files": files, "command": commands[0] if commands else "", "made_by": cells[2],
                     "stale": "predate" in cells[1] or "predate" in cells[2]})
    return rows


def recorded_meta(path: Path) -> dict:
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        return data.get("meta", {}) if isinstance(data, dict) else {}
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        raw = dict(f.metadata() or {})
    if "llmbook" in raw:  # llmbook.train.save_checkpoint: one JSON blob
        return json.loads(raw["llmbook"]).get("meta", {})
    if "extra" in raw:  # llmbook.bert.save_checkpoint: config and extra, each a JSON blob
        return json.loads(raw["extra"]).get("meta", {})
    return raw


def normalise(command: str) -> list[str]:
    """Split a command; any python interpreter path reads as ``python``."""
    words = shlex.split(command)
    return ["python" if re.fullmatch(r"(\S*/)?python3?(\.\d+)?", w) else w for w in words]


def flag(words: list[str], name: str) -> str | None:
    return words[words.index(name) + 1] if name in words[:-1] else None


ROWS = table_rows()


def test_the_table_is_found():
    assert len(ROWS) >= 5, "data/README.md's 'Files the project makes itself' table was not parsed"


# A row whose text admits that its committed file predates the current script ("The committed
# files predate ...") is expected to fail until the file is re-made; strict, so the admission
# must be removed from data/README.md as soon as the re-made file passes.
STALE = pytest.mark.xfail(strict=True, reason="data/README.md says the committed file predates its script")


@pytest.mark.parametrize("row", [pytest.param(r, marks=STALE) if r["stale"] else r for r in ROWS],
                         ids=[r["files"][0] for r in ROWS])
def test_row_file_exists_and_records_its_command(row):
    for name in row["files"]:
        path = DATA / name
        assert path.is_file(), f"data/{name} is listed in data/README.md but does not exist"
        if path.suffix not in (".safetensors", ".json"):
            continue
        meta = recorded_meta(path)
        for key in ("command", "steps", "split"):
            assert key in meta, f"data/{name} records no {key!r} (see NOTEBOOK_CONVENTIONS: command, steps, seed, split)"
        assert "seed" in meta or "seeds" in meta, f"data/{name} records no 'seed' or 'seeds'"
        assert row["command"], f"data/README.md gives no command (in backticks) for data/{name}"
        table, made = normalise(row["command"]), normalise(str(meta["command"]))
        assert made == table, f"data/{name} was made by {meta['command']!r}, data/README.md says {row['command']!r}"
        steps = str(meta["steps"]).replace(",", "")
        if flag(table, "--steps"):
            assert steps == flag(table, "--steps"), f"data/{name}: steps {steps} vs --steps {flag(table, '--steps')}"
        stated = re.search(r"\(([\d,]+) steps", row["made_by"])
        if stated:
            assert steps == stated.group(1).replace(",", ""), f"data/{name}: steps {steps}, data/README.md says {stated.group(0)}"
        if flag(table, "--seed"):
            assert str(meta.get("seed")) == flag(table, "--seed"), f"data/{name}: seed {meta.get('seed')} vs --seed"
        split = str(meta["split"])
        assert split == "none" or split.startswith(("load_splits(", "load_sentiment(")), \
            f"data/{name}: unexpected split {split!r}"
