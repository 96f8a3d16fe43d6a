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

__all__ = ["atomic_write", "write_text", "remove_stale_temporaries"]


def _alive(pid: int) -> bool:
    """Whether a process with this id exists (one we may not signal exists too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, under another user
        return True
    return True


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the temporary files (and their journals) that an export or import of ``path`` killed
    mid-write left beside it (``.<name>.tmp-<pid>``, whose process is gone); returns them."""
    removed: list[Path] = []
    prefix = f".{path.name}.tmp-"
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text = entry.name[len(prefix):].split("-", 1)[0].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _alive(int(pid_text)):
            continue  # another export of this file is running (or the name is not ours)
        try:
            entry.unlink()
            removed.append(entry)
        except OSError:
            pass  # not ours to remove after all (a folder, no permission): leave it
    return removed


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary path beside ``path``, then rename it over ``path``.

    On any error the temporary file is removed and ``path`` is untouched: a failed export writes
    nothing. ``OSError`` becomes :class:`ExportError` naming the file. The temporary file is
    ``.<name>.tmp-<pid>`` (hidden); if a process was killed while writing it, the next call for the
    same ``path`` removes it (and its ``-journal``/``.wal``) once that process is gone."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"{path}: is a directory")
    if not path.parent.is_dir():
        what = "is not a folder" if path.parent.exists() else "does not exist"
        raise ExportError(f"{path}: {path.parent} {what}")
    remove_stale_temporaries(path)
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
