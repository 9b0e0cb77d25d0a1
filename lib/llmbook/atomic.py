"""Atomic file writes, shared by every file the library saves (checkpoints, tokenizers).

A write goes to a temporary file in the target's folder, which then replaces the target
with ``os.replace``: a reader sees the old file or the new one, never half of one, and a
crash mid-write leaves the old file intact. Two details make the result the same
whoever wrote it:

- the file gets mode 0o644 (``tempfile.mkstemp`` makes it 0o600, private to its owner;
  a saved model or tokenizer is meant to be read by others too);
- a temporary file orphaned by a killed write (``name.<random>.tmp`` beside the target,
  untouched for ``STALE_SECONDS``) is removed by the next write to the same target.

Left out: fsync of the folder (a power cut may lose the rename, never mix two files).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> write_atomic(d / "a.txt", lambda tmp: pathlib.Path(tmp).write_text("hi"))
>>> (d / "a.txt").read_text(), oct((d / "a.txt").stat().st_mode & 0o777)
('hi', '0o644')
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Callable

__all__ = ["write_atomic", "STALE_SECONDS", "FILE_MODE"]

#: A temporary file this long without a change belongs to a dead writer.
STALE_SECONDS = 60.0
#: Mode of every file the library writes (owner read/write, everyone read).
FILE_MODE = 0o644


def _remove_stale_temps(path: Path) -> None:
    now = time.time()
    for tmp in path.parent.glob(f"{path.name}.*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_SECONDS:
                tmp.unlink()
        except OSError:
            pass  # gone already, or not ours to remove: a cleanup must never fail a save


def write_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` to fill a temporary file, then move it to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
