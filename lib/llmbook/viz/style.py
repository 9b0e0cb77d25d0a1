"""One look for every figure in the book, with a font that can draw Chinese.

Matplotlib's default font has no CJK glyphs, so 今天 would come out as empty boxes.
The book registers Noto Sans CJK SC, which the ``mplfonts`` package ships inside its
wheel (no download at run time), and puts it after DejaVu Sans in the fallback list:
Latin text keeps the familiar look and Chinese characters are drawn by Noto.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import warnings

import matplotlib
from matplotlib import font_manager

__all__ = ["use_book_style", "cjk_font_path", "CJK_FAMILY", "PALETTE"]

CJK_FAMILY = "Noto Sans CJK SC"
# A colour-blind-safe qualitative palette (Okabe & Ito), used in this order everywhere.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]


@functools.lru_cache(maxsize=1)
def cjk_font_path() -> str | None:
    """Path of the CJK font file shipped by ``mplfonts``, or None if it is not installed."""
    spec = importlib.util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "fonts", "NotoSansCJKsc-Regular.otf")
    return path if os.path.exists(path) else None


@functools.lru_cache(maxsize=1)
def _register_cjk_font() -> bool:
    path = cjk_font_path()
    if path is None:
        warnings.warn(
            "No CJK font found: Chinese text in figures will show as boxes. "
            "Install it with: pip install mplfonts",
            stacklevel=3,
        )
        return False
    font_manager.fontManager.addfont(path)
    return True


def use_book_style() -> None:
    """Apply the book's figure style (idempotent). Called when ``llmbook.viz`` is imported."""
    has_cjk = _register_cjk_font()
    families = ["DejaVu Sans"] + ([CJK_FAMILY] if has_cjk else [])
    matplotlib.rcParams.update(
        {
            # A list of concrete families (not "sans-serif") makes Matplotlib fall back
            # glyph by glyph: Latin from DejaVu Sans, CJK from Noto Sans CJK SC.
            "font.family": families,
            "axes.unicode_minus": False,
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "figure.figsize": (7.0, 4.0),
            "figure.autolayout": False,
            "figure.constrained_layout.use": True,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.titlesize": 12,
            "axes.labelsize": 11,
            "legend.frameon": False,
            "image.cmap": "viridis",
            "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
            # Fixed hash salt for SVG ids keeps any SVG output stable across runs.
            "svg.hashsalt": "llmbook",
        }
    )
