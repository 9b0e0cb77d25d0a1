"""Figures and widgets. Importing this package applies the book's figure style.

``style`` sets one look (and a font that draws Chinese); ``widget.Explorer`` is the
frame every interactive explorer uses. Each chapter adds one module here with the
static plotting functions and the explorer of its concept; the functions take data
(tensors, token lists), never models. ``diagrams`` draws the architectures themselves
(boxes, arrows and tensor shapes; no data, no external tools). ``reveal.solution_output``
folds what an exercise's solution prints until the reader opens it.
"""

from .style import CJK_FAMILY, PALETTE, cjk_font_path, use_book_style
from .widget import Explorer, figure_to_png, show_static

use_book_style()

__all__ = ["use_book_style", "cjk_font_path", "CJK_FAMILY", "PALETTE", "Explorer", "figure_to_png", "show_static"]
