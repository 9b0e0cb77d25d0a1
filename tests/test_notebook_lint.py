"""The classes of mistake the expert reads found, as tests on every notebook (tests/notebook_lint.py).

For each class: one test per notebook (a failure lists the offending cells), and one test that
plants a violation in a small notebook and checks that the class catches it, so none of these
tests can pass by checking nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import notebook_lint as L

STEMS = L.notebook_stems()
PATHS = [L.NOTEBOOKS_DIR / f"{s}.ipynb" for s in STEMS]
HEADINGS = {L.chapter_id(s): L.numbered_headings(L.load(p)) for s, p in zip(STEMS, PATHS)}
IDS = L.chapter_ids(STEMS)


def md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def code(text: str, outputs: list | None = None) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": outputs or [],
            "execution_count": 1}


def out(text: str, name: str = "stdout") -> dict:
    return {"output_type": "stream", "name": name, "text": text}


def nb(*cells) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def report(found: list[str], path: Path) -> str:
    return f"{path.name}:\n  " + "\n  ".join(found)


def test_there_are_notebooks():
    assert len(STEMS) >= 20 and "00_introduction" in STEMS


# 1. Every notebook is on chapter 0's roadmap and in the README's table -------------------

def test_every_notebook_is_on_the_roadmap_and_in_the_readme():
    intro = L.load(L.NOTEBOOKS_DIR / "00_introduction.ipynb")
    readme = (L.ROOT / "README.md").read_text(encoding="utf-8")
    found = L.roadmap_missing(intro, readme, STEMS)
    assert not found, "\n".join(found)


def test_roadmap_catches_a_missing_chapter():
    intro = nb(md("The map: [01a](01a_tokenization.ipynb), [02](02_architectures.ipynb)"))
    readme = "| [x](notebooks/01a_tokenization.ipynb) |"
    found = L.roadmap_missing(intro, readme, ["00_introduction", "01a_tokenization", "02_architectures"])
    assert found == ["02_architectures: not in the README's table"]
    assert L.roadmap_missing(intro, readme + "(notebooks/02_architectures.ipynb)",
                             ["00_introduction", "01a_tokenization", "02_architectures"]) == []


# 2. Cross-references resolve ------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS, ids=STEMS)
def test_cross_references_resolve(path):
    found = L.bad_cross_references(L.load(path), path.stem, HEADINGS, IDS)
    assert not found, report(found, path)


def test_cross_references_catch_planted_violations():
    book = nb(md("# Chapter 3\n## 1. Why\n## 2. How"),
              md("As section 2 shows, and section 4 does not exist. Chapter 12 neither."),
              md("Vaswani et al. (2017, section 3.2.1) compare. Chapter 2's section 5 is checked too."),
              md("Sections 1 and 7 are referenced together. The paper's section 9 is theirs."))
    heads = {"3": L.numbered_headings(book), "2": {"1", "2", "3"}}
    found = L.bad_cross_references(book, "03_attention", heads, {"2", "3"})
    text = "\n".join(found)
    assert "'section 4'" in text and "chapter 12" in text and "of chapter 2" in text
    assert "Sections 1 and 7" in text
    assert "section 2 shows" not in text and "3.2.1" not in text and "section 9" not in text
    assert len(found) == 4, text


# 3. No machine paths, no unexplained warnings ------------------------------------------

@pytest.mark.parametrize("path", PATHS, ids=STEMS)
def test_outputs_hold_no_machine_path_or_library_warning(path):
    found = L.leaky_outputs(L.load(path))
    assert not found, report(found, path)


def test_outputs_check_catches_planted_violations():
    bad = nb(code("x", [out("/home/me/.venv/lib/python3.11/site-packages/torch/nn/x.py:529: UserWarning: old\n",
                            "stderr")]),
             code("y", [out("FutureWarning: something changes\n", "stderr")]),
             code("z", [out("FutureWarning: explained below\n", "stderr")]),
             md("This warning comes from transformers; it is harmless because ..."))
    found = L.leaky_outputs(bad)
    assert len(found) == 3, found  # the path and the warning of cell 0, the warning of cell 1
    assert any("cell 0" in f and "path" in f for f in found)
    assert not any("cell 2" in f for f in found)


# 4. Numbers in the prose are printed by a cell -------------------------------------------

@pytest.mark.parametrize("path", PATHS, ids=STEMS)
def test_prose_numbers_are_printed_by_a_cell(path):
    found = L.unbacked_numbers(L.load(path))
    assert not found, report(found, path)



def test_number_check_catches_planted_violations():
    book = nb(code("print(f'accuracy {0.8417:.4f}, {26051:,} pieces, share 0.125')",
                   [out("accuracy 0.8417, 26,051 pieces, share 0.125\n")]),
              md("The model reaches 0.84, about 30,000 pieces, a share of 12.5 %."),      # all printed
              md("It reaches 0.91 on the test and 4,321 pieces."),                        # neither
              md("GPT-2 small has 124M parameters (Radford et al. 2019); we use 3 seeds, "
                 "64-bit floats, in 2017."),                                                # exempt
              md("## 5. A heading number\nSection 5 says 7 things."))                       # exempt
    found = L.unbacked_numbers(book)
    assert len(found) == 2, found
    assert "0.91" in found[0] and "4,321" in found[1]


# 5. No cell rebinds a function or class that an earlier cell defined --------------------

@pytest.mark.parametrize("path", PATHS, ids=STEMS)
def test_no_cell_rebinds_an_earlier_definition(path):
    found = L.rebound_definitions(L.load(path))
    assert not found, report(found, path)


def test_rebinding_check_catches_the_07b_trap():
    trap = nb(code("pmf = lambda j: 0.5 ** j\nclass Model: pass\ndef f(x):\n    return x"),
              code("for ax, pmf in [(1, [0.1])]:\n    pass"),
              code("Model = 3"),
              code("def f(x):\n    return 2 * x  # a later def (an exercise's solution) is allowed"),
              code("ys = [pmf for pmf in range(3)]  # a comprehension's variable is local"),
              code("def g():\n    f = 1  # local to g\n    return f"))
    found = L.rebound_definitions(trap)
    assert len(found) == 2, found
    assert "'pmf'" in found[0] and "cell 1" in found[0] and "'Model'" in found[1]
