"""Every chapter leads on to the next (review 2026-11-26 UX #3): a reader who finishes a notebook finds,
in its last Markdown cell, a link to the next notebook in reading order (00, 01a, 01b, ..., 09, then the
appendices; file names sort in that order). The last notebook is the end of the path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def closing_links(nb: dict) -> list[str]:
    """The notebook files linked from the last Markdown cell.

    >>> closing_links({"cells": [{"cell_type": "markdown", "source": "Next: [chapter 2](02_architectures.ipynb#top)"},
    ...                          {"cell_type": "code", "source": "x = 1"}]})
    ['02_architectures.ipynb']
    """
    last = [c for c in nb["cells"] if c["cell_type"] == "markdown"][-1]
    return re.findall(r"\]\(\s*(?:\./)?([^)\s#]+\.ipynb)", "".join(last["source"]))


def test_the_path_is_long_enough_to_check():
    assert len(NOTEBOOKS) >= 20 and NOTEBOOKS[0].name.startswith("00_")


@pytest.mark.parametrize("here, following", list(zip(NOTEBOOKS, NOTEBOOKS[1:])), ids=lambda p: p.stem)
def test_each_notebook_ends_with_a_link_to_the_next(here, following):
    links = closing_links(json.loads(here.read_text(encoding="utf-8")))
    assert following.name in links, f"{here.name}'s last Markdown cell links {links}, not {following.name}"
