"""Checks on the notebooks' text that catch the classes of mistake the expert reads found.

Each check takes a notebook (a dict as ``nbformat`` reads it) and returns a list of offenders,
``"cell N: ..."``, so a failing test names the cell. ``tests/test_notebook_lint.py`` runs them on
every notebook and shows each one failing on a planted violation. From the shell:

    python tests/notebook_lint.py notebooks/07b_t5_glm.ipynb [...]

The checks:

1. ``roadmap_missing``: every notebook is linked from chapter 0's roadmap (by its file stem) and
   from the README's chapter table.
2. ``bad_cross_references``: "section N", "§N" and "sections N and M" in a notebook's markdown
   name a numbered heading (``## N. ...``) of the same notebook, or of chapter X when the phrase
   says "chapter X's section N" / "section N of chapter X"; "chapter X" names a chapter that
   exists. A section number next to a citation (``Vaswani et al. 2017, §3.2.1``, "the paper's
   section 2.3") is the source's, not the book's, and is not checked.
3. ``leaky_outputs``: committed outputs hold no absolute path of the machine that ran them and no
   library warning on stderr, unless the markdown cell right after it explains the warning.
4. ``unbacked_numbers``: every number in markdown that a run produces is printed by a cell or
   written in a cell's code (an assert, a constant the code uses) of the same notebook. See
   :func:`unbacked_numbers` for what counts as a number and what is exempt (years, sourced
   constants, identifiers such as GPT-2, numbers below 20 written as counts).
5. ``rebound_definitions``: no cell binds, by assignment, a loop, ``with ... as``, ``import ... as``
   or ``del``, a name that an earlier cell defined with ``def``, ``class`` or ``name = lambda ...``
   (running that cell a
   second time would then call the rebound name: the 07b re-run trap). A later ``def`` of the
   same name is allowed (an exercise's solution replaces the reader's placeholder that way).
"""

from __future__ import annotations

import ast
import html
import json
import math
import re
import sys
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _text(x) -> str:
    return "".join(x) if isinstance(x, list) else (x or "")


def chapter_id(stem: str) -> str:
    """``"01c_tokenizer_pathologies"`` -> ``"1c"``, ``"A_performance"`` -> ``"A"``."""
    head = stem.split("_", 1)[0]
    m = re.fullmatch(r"0*(\d+)([a-z]?)", head)
    return f"{int(m.group(1))}{m.group(2)}" if m else head


def notebook_stems(directory: Path = NOTEBOOKS_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.ipynb"))


def chapter_ids(stems: Iterable[str]) -> set[str]:
    """Every id a reader may write: ``6a`` and also ``6`` when chapter 6 has parts."""
    ids = set()
    for s in stems:
        cid = chapter_id(s)
        ids.add(cid)
        ids.add(re.sub(r"[a-z]$", "", cid))
    return ids


# ------------------------------------------------------------------------------------
# 1. The roadmap
# ------------------------------------------------------------------------------------

def roadmap_missing(intro: dict, readme: str, stems: Iterable[str]) -> list[str]:
    """The notebook stems missing from chapter 0's markdown or from the README."""
    md = "\n".join(_src(c) for c in intro["cells"] if c["cell_type"] == "markdown")
    missing = []
    for stem in stems:
        if stem.startswith("00_"):
            continue
        where = [name for name, text, needle in (("chapter 0's roadmap", md, stem),
                                                  ("the README's table", readme, f"notebooks/{stem}.ipynb"))
                 if needle not in text]
        if where:
            missing.append(f"{stem}: not in {' or '.join(where)}")
    return missing


# ------------------------------------------------------------------------------------
# Markdown with code, maths, links and HTML taken out
# ------------------------------------------------------------------------------------

_STRIP = [
    re.compile(r"```.*?```", re.S),             # fenced code
    re.compile(r"\$\$.*?\$\$", re.S),           # display maths
    re.compile(r"(?<!\\)\$[^$\n]+?(?<!\\)\$"),  # inline maths
    re.compile(r"`[^`\n]*`"),                   # inline code
    re.compile(r"<!--.*?-->", re.S),            # comments
    re.compile(r"<[^>\n]+>"),                   # html tags
    re.compile(r"\]\([^)\s]*\)"),               # link targets (keep the link text)
    re.compile(r"https?://\S+"),
]


def prose(markdown: str) -> str:
    """The markdown's running text: code, maths, links targets and HTML replaced by a space."""
    for pat in _STRIP:
        markdown = pat.sub(lambda m: "]" if m.group(0).startswith("](") else " ", markdown)
    return markdown


def numbered_headings(nb: dict) -> set[str]:
    """``{"1", "2", "9.1", ...}`` from headings such as ``## 2. Title`` or ``## 9.1 Title``."""
    found = set()
    for c in nb["cells"]:
        if c["cell_type"] != "markdown":
            continue
        for line in _src(c).splitlines():
            m = re.match(r"#{1,4}\s+(?:Section\s+)?(\d+(?:\.\d+)*)[.:\s]", line)
            if m:
                found.add(m.group(1))
    return found


# ------------------------------------------------------------------------------------
# 2. Cross-references
# ------------------------------------------------------------------------------------

_CITATION = re.compile(
    r"et al|\b(?:1[89]|20)\d\d\b|paper|'s (?:§|section)|\b(?:Table|Figure|Fig\.|Appendix|Eq\.)|arXiv|"
    r"\b(?:Vaswani|Radford|Brown|Devlin|Raffel|Touvron|Kaplan|Hoffmann|Bahdanau|Sennrich|Kudo|Su|Press|"
    r"Leviathan|Chen|Shazeer|Fedus|Khandelwal|Borgeaud|Lewis|Hu|Rafailov|Ouyang|Xiong|Ba|Ioffe|Gers|Cho|"
    r"Keskar|Holtzman|Dao|Olsson|Wei|Shao)\b|RFC|PEP|Datawhale|so-large-lm|manual|docs?\b|documentation")
_SECTION = re.compile(r"(?:\bsections?|§§?)\s*(\d+(?:\.\d+)*(?:\s*(?:,|and|or|to|-|–)\s*\d+(?:\.\d+)*)*)", re.I)
_CHAPTER = re.compile(r"\bchapters?\s+(\d+[a-d]?|A)\b((?:\s*(?:,|and|or|to|-|–)\s*(?:\d+[a-d]?|A)\b)*)", re.I)
_OTHER_CH = re.compile(r"\bchapter\s+(\d+[a-d]?|A)(?:'s|,)?\s*$", re.I)
_OF_CH = re.compile(r"^\s*(?:of|in)\s+chapter\s+(\d+[a-d]?|A)\b", re.I)


def _split_numbers(group: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)*", group)


def bad_cross_references(nb: dict, stem: str, headings_of: dict[str, set[str]], ids: set[str]) -> list[str]:
    """References to sections that are not numbered headings, and to chapters that do not exist.

    ``headings_of`` maps a chapter id (``"6a"``) to its numbered headings; ``ids`` holds every
    chapter id a reader may write.
    """
    own = chapter_id(stem)
    bad = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "markdown":
            continue
        text = prose(_src(c))
        for m in _CHAPTER.finditer(text):
            for cid in [m.group(1)] + re.findall(r"\d+[a-d]?|A\b", m.group(2) or ""):
                if cid.upper() == "A":
                    cid = "A"
                if cid not in ids:
                    bad.append(f"cell {i}: 'chapter {cid}' names no chapter ({m.group(0).strip()!r})")
        for m in _SECTION.finditer(text):
            before = text[max(0, m.start() - 90):m.start()]
            after = text[m.end():m.end() + 40]
            # the nearest clause before the reference: a citation there makes it the source's section
            clause = re.split(r"[.;:!?]\s|\n\n", before)[-1]
            target = own
            ch = _OTHER_CH.search(before) or _OF_CH.match(after)
            if ch:
                target = ch.group(1)
            elif _CITATION.search(clause) or _CITATION.search(after[:25]):
                continue
            heads = headings_of.get(target)
            if heads is None:
                candidates = [k for k in headings_of if re.sub(r"[a-z]$", "", k) == target]
                if len(candidates) != 1:
                    continue  # "chapter 6's section 3" with 6a/6b/6c: ambiguous, not checked
                heads = headings_of[candidates[0]]
                target = candidates[0]
            for num in _split_numbers(m.group(1)):
                ok = num in heads or f"{target}.{num}" in heads or any(
                    h.startswith(num + ".") for h in heads)
                if not ok:
                    where = "" if target == own else f" of chapter {target}"
                    bad.append(f"cell {i}: {m.group(0).strip()!r} points to no numbered heading{where} "
                               f"(headings: {', '.join(sorted(heads, key=_numkey)) or 'none'})")
    return bad


def _numkey(s: str):
    return [int(x) for x in s.split(".")]


# ------------------------------------------------------------------------------------
# 3. Outputs that leak the build machine
# ------------------------------------------------------------------------------------

_PATH = re.compile(r"(?:/work/|/root/|/home/\w|/tmp/tmp|site-packages/|dist-packages/|/usr/lib/python|\.venv/|"
                   r"[A-Z]:\\\\Users\\\\)")
_WARNING = re.compile(r"\b\w*Warning\b|^WARNING\b|warnings\.warn", re.M)


# What a solution printed, folded by llmbook.viz.reveal.solution_output: HTML <pre> blocks in a <details>.
_FOLD = '<details class="llmbook-solution-output">'
_FOLDED_PRE = re.compile(r"<pre[^>]*>(.*?)</pre>", re.S)


def _output_texts(cell: dict) -> Iterable[tuple[str, str]]:
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            yield out.get("name", "stdout"), _text(out.get("text"))
        elif kind in ("execute_result", "display_data"):
            yield "result", _text(out.get("data", {}).get("text/plain"))
            folded = _text(out.get("data", {}).get("text/html"))
            if folded.startswith(_FOLD):  # the printed text is in the fold, not in text/plain
                yield "stdout", "".join(html.unescape(t) for t in _FOLDED_PRE.findall(folded))
        elif kind == "error":
            yield "error", "\n".join(out.get("traceback", []))


def leaky_outputs(nb: dict) -> list[str]:
    bad = []
    cells = nb["cells"]
    for i, c in enumerate(cells):
        if c["cell_type"] != "code":
            continue
        for kind, text in _output_texts(c):
            m = _PATH.search(text)
            if m:
                line = next(l for l in text.splitlines() if m.group(0) in l)
                bad.append(f"cell {i}: an absolute path of the build machine in the output: {line.strip()[:120]!r}")
            if kind == "stderr" and _WARNING.search(text):
                nxt = cells[i + 1] if i + 1 < len(cells) else None
                explained = nxt is not None and nxt["cell_type"] == "markdown" and re.search(
                    r"\bwarn", _src(nxt), re.I)
                if not explained:
                    line = next(l for l in text.splitlines() if _WARNING.search(l))
                    bad.append(f"cell {i}: a library warning in the output, not explained by the next cell: "
                               f"{line.strip()[:120]!r}")
    return bad


# ------------------------------------------------------------------------------------
# 4. Numbers in the prose that no cell prints
# ------------------------------------------------------------------------------------

# A number in running text: 0.84, 1,500, 30 000, 12.5 %, 3e-4, -0.223. Not part of a word or
# identifier (GPT-2, cl100k, Q4_0, 8-bit, x2, 1e-6 in code), not a version (3.11.7).
_NUMBER = re.compile(
    r"(?<![\w.\-/])(?<!\d,)([-−]?)(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s?(%|‰))?(?![\w\-]|\.\d|,\d{3}|/\d)")
_NUMBER_IN_CODE = re.compile(r"[-−]?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WORDS_OF_SOURCE = re.compile(
    r"et al|\b(?:1[89]|20)\d\d\b|[Pp]aper|\b(?:Table|Figure|Fig\.|Appendix|§)|arXiv|reports?\b|published|"
    r"so-large-lm|Datawhale|model card|documentation|docs\b|the (?:authors|original)|"
    r"according to|quotes?\b|states?\b|Wikipedia|Unicode|UTF-8|IEEE|standard|spec(?:ification)?\b")
_UNITS_OK = re.compile(r"^\s*(?:-?(?:bit|bits|byte|bytes|dimensional|d\b|D\b|gram|grams|way|th|st|nd|rd|x|×))", re.I)


def _sentences(text: str) -> list[tuple[int, str]]:
    out, start = [], 0
    for m in re.finditer(r"(?<=[.!?])\s+(?=[A-Z(\"'*_])|\n\s*\n|\n\s*[-*|]\s|\n#", text):
        out.append((start, text[start:m.start()]))
        start = m.start()
    out.append((start, text[start:]))
    return out


def _value(num: str) -> float:
    return float(num.replace(",", "").replace("−", "-"))


def _decimals(num: str) -> int:
    return len(num.split(".")[1]) if "." in num else 0


def printed_numbers(nb: dict) -> list[float]:
    """Every number that a cell prints (any output text) or writes in its code."""
    vals = []
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        texts = [_src(c)] + [t for _, t in _output_texts(c)]
        for t in texts:
            t = re.sub(r"(\d),(\d{3})", r"\1\2", t)
            t = re.sub(r"(\d),(\d{3})", r"\1\2", t)
            t = re.sub(r"(?<=\d)_(?=\d)", "", t)
            for m in _NUMBER_IN_CODE.finditer(t):
                try:
                    vals.append(float(m.group(0).replace("−", "-")))
                except ValueError:
                    pass
    return vals


def _matches(num: str, pct: bool, printed: list[float]) -> bool:
    """Whether the prose number equals a printed one at the prose's precision."""
    v = abs(_value(num))
    candidates = [v, v / 100] if pct else [v]
    for target in candidates:
        dec = _decimals(num) + (2 if target is not v else 0)
        if "." in num or target is not v:
            tol = 0.5 * 10 ** (-dec) + 1e-12
        else:
            digits = num.replace(",", "").lstrip("-−")
            zeros = len(digits) - len(digits.rstrip("0"))
            tol = 0.5 * 10 ** zeros if zeros and v >= 100 else 0.5
        for p in printed:
            if abs(abs(p) - target) <= tol:
                return True
    return False


def unbacked_numbers(nb: dict) -> list[str]:
    """Numbers in the markdown that no cell of the notebook prints or writes.

    A number counts when it has a decimal point or a percent sign, or is 20 or more (a count
    such as "3 seeds" or "2 layers" is what the prose says, not a result). Exempt: years
    (1900-2099 as a whole number), numbers in headings' numbering, in code, maths and links,
    and numbers in a sentence that names its source (a paper with its year or "et al.", a table
    or section of a paper, a model card, a standard). A number matches a printed one when it
    equals it at the prose's precision (0.84 matches 0.8417; 12.5 % matches 0.125; 30,000
    matches 26,051 only if the prose says 30,000 with one significant digit, which is then an
    honest "about").
    """
    printed = printed_numbers(nb)
    bad = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "markdown":
            continue
        text = prose(_src(c))
        text = re.sub(r"(?m)^(#{1,6}\s+)(?:\d+(?:\.\d+)*\.?)", r"\1", text)   # heading numbers
        text = re.sub(r"(?m)^(\s*)\d+\.(\s)", r"\1\2", text)                     # list numbering
        text = _SECTION.sub(" ", _CHAPTER.sub(" ", text))                          # checked by check 2
        for start, sentence in _sentences(text):
            sourced = bool(_WORDS_OF_SOURCE.search(sentence))
            for m in _NUMBER.finditer(sentence):
                num, pct = m.group(2), bool(m.group(3))
                v = _value(num)
                if not ("." in num or pct or v >= 20):
                    continue
                if re.fullmatch(r"(?:1[89]|20)\d\d", num):
                    continue  # a year
                if _UNITS_OK.match(sentence[m.end():]) and "." not in num:
                    continue  # 64-bit, 128-dimensional, 4x
                if sourced:
                    continue
                if _matches(num, pct, printed):
                    continue
                snippet = sentence[max(0, m.start() - 50):m.end() + 30].replace("\n", " ").strip()
                bad.append(f"cell {i}: {num}{m.group(3) or ''} is printed by no cell: ...{snippet}...")
    return bad


# ------------------------------------------------------------------------------------
# 5. Names that a later cell rebinds
# ------------------------------------------------------------------------------------

def _bound_names(tree: ast.AST) -> list[tuple[str, int, str]]:
    """(name, line, how) for the module-level bindings of a cell other than def/class."""
    out = []

    def targets(node, how):
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.append((n.id, n.lineno, how))

    class V(ast.NodeVisitor):
        def visit_FunctionDef(self, node):  # names inside a function are local
            return

        visit_AsyncFunctionDef = visit_FunctionDef
        visit_Lambda = visit_FunctionDef

        def visit_ClassDef(self, node):
            return

        def visit_Assign(self, node):
            for t in node.targets:
                targets(t, "assignment")
            self.generic_visit(node)

        def visit_AnnAssign(self, node):
            targets(node.target, "assignment")
            self.generic_visit(node)

        def visit_AugAssign(self, node):
            targets(node.target, "assignment")
            self.generic_visit(node)

        def visit_For(self, node):
            targets(node.target, "for loop")
            self.generic_visit(node)

        def visit_With(self, node):
            for item in node.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars, "with ... as")
            self.generic_visit(node)

        def visit_NamedExpr(self, node):
            targets(node.target, "walrus")
            self.generic_visit(node)

        def visit_Import(self, node):
            for a in node.names:
                out.append(((a.asname or a.name).split(".")[0], node.lineno, "import"))

        visit_ImportFrom = visit_Import

        def visit_Delete(self, node):
            for t in node.targets:
                targets(t, "del")

        def visit_ExceptHandler(self, node):
            if node.name:
                out.append((node.name, node.lineno, "except ... as"))
            self.generic_visit(node)

        def visit_ListComp(self, node):  # comprehension variables are local
            return

        visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    V().visit(tree)
    return out


def _parse(src: str) -> ast.AST | None:
    src = "\n".join("" if l.lstrip().startswith(("%", "!")) else l for l in src.splitlines())
    try:
        return ast.parse(src)
    except SyntaxError:
        return None


def rebound_definitions(nb: dict) -> list[str]:
    defined: dict[str, int] = {}
    bad = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] != "code":
            continue
        tree = _parse(_src(c))
        if tree is None:
            continue
        for name, line, how in _bound_names(tree):
            if name in defined and defined[name] < i:
                bad.append(f"cell {i}, line {line}: {how} rebinds {name!r}, which cell {defined[name]} "
                           f"defines as a function or class (re-running cell {i} would break)")
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.setdefault(node.name, i)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        defined.setdefault(t.id, i)
    return bad


# ------------------------------------------------------------------------------------

def lint(path: Path, stems: list[str] | None = None) -> dict[str, list[str]]:
    """Every check's offenders for one notebook."""
    stems = stems or notebook_stems()
    nb = load(path)
    headings_of = {chapter_id(s): numbered_headings(load(NOTEBOOKS_DIR / f"{s}.ipynb")) for s in stems}
    return {
        "cross references": bad_cross_references(nb, Path(path).stem, headings_of, chapter_ids(stems)),
        "leaky outputs": leaky_outputs(nb),
        "unbacked numbers": unbacked_numbers(nb),
        "rebound definitions": rebound_definitions(nb),
    }


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    total = 0
    for p in paths:
        for check, found in lint(p).items():
            for f in found:
                print(f"{p.stem}: {check}: {f}")
            total += len(found)
    intro = load(NOTEBOOKS_DIR / "00_introduction.ipynb")
    for f in roadmap_missing(intro, (ROOT / "README.md").read_text(encoding="utf-8"), notebook_stems()):
        print(f"roadmap: {f}")
        total += 1
    print(f"{total} offenders")
    sys.exit(1 if total else 0)
