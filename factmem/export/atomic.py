"""Writing files all or nothing: a failed export leaves the destination untouched.

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
>>> write_text(out, "hello").read_text()
'hello'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from factmem.errors import ExportError

__all__ = ["atomic_write", "write_text"]


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it over ``path``.

    On any error the temporary file is removed and ``path`` is untouched: a failed export writes
    nothing. ``OSError`` becomes :class:`ExportError` naming the file."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"{path}: is a directory")
    if not path.parent.is_dir():
        what = "is not a folder" if path.parent.exists() else "does not exist"
        raise ExportError(f"{path}: {path.parent} {what}")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    leftovers = (tmp, tmp.with_name(tmp.name + "-journal"), tmp.with_name(tmp.name + ".wal"))
    for stale in leftovers:  # from a crashed earlier run with the same pid
        if stale.exists():
            stale.unlink()
    try:
        # can we write here at all? (SQLite and DuckDB would say "unable to open database file")
        tmp.open("xb").close()
        tmp.unlink()
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise ExportError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        for leftover in leftovers:
            if leftover.exists():
                leftover.unlink()
    return path


def write_text(path: Path, text: str) -> Path:
    """Write UTF-8 text atomically; a lone surrogate is an :class:`ExportError` naming the file."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start:exc.end]
        raise ExportError(f"{path}: cannot write {bad!r} as UTF-8 (a lone surrogate in a string value)") from None

    def write(tmp: Path) -> None:
        tmp.write_bytes(data)

    return atomic_write(path, write)
