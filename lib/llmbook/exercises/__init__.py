"""The book's exercise checkers (moved into a package; the next commit splits it by chapter)."""

from ._core import *  # noqa: F401,F403
from ._core import CHAPTERS, KINDS  # noqa: F401
