"""The book is self-contained: no notebook's prose points to notes the reader does not have.

Issue 11 item 20: sources are cited by name (the Datawhale *so-large-lm* course, the
papers), never as "the notes" / "study notes" / "these notes" / 笔记. One test per
notebook, so a failure names the notebook and quotes the offending line.
"""

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
FORBIDDEN = re.compile(r"\b(?:the|these|study|my|our|course)\s+notes\b|笔记", re.IGNORECASE)


def offending_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if FORBIDDEN.search(line)]


def test_pattern_catches_the_phrasings():
    for bad in ["The notes draw it", "as the study notes say", "these notes'", "学习笔记", "The Notes' example"]:
        assert offending_lines(bad), bad
    for fine in ["the so-large-lm course", "footnotes", "note that", "notes on the plot"]:
        assert not offending_lines(fine), fine


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_markdown_cites_sources_by_name(path):
    nb = nbformat.read(path, as_version=4)
    hits = [f"cell {i}: {line}" for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
            for line in offending_lines(cell.source)]
    assert not hits, f"{path.name} refers to notes the reader does not have:\n" + "\n".join(hits)
