"""Who may open a store file: one writer per file in this process, and no file replaced under a user.

DuckDB locks a database file against *other processes* (an fcntl lock: one writer, or any number of
readers). Within one process it does not: two connections to one file through two different paths
(a hard link, a symlink, ``./x`` and ``x``) open two databases over the same bytes, and two stores
numbering ids independently corrupt it. So this process keeps a registry of the store files it has
open, keyed by the file's identity — (device, inode) — and, for a file that does not exist yet, by
its resolved path:

* :func:`claim` registers an open (``"write"`` or ``"read"``); a second writer, or a writer beside
  readers, is refused with :class:`~factmem.errors.StoreLockedError`;
* :func:`exclusive` is for replacing a store file (``import-db --force``): nobody in this process may
  have it open, and it takes the same fcntl write lock DuckDB takes, so a writer or reader in another
  process makes it fail instead of losing that process's writes; the lock is held until the
  replacement is done.

fcntl locks belong to the process and are dropped when *any* descriptor of the file is closed, so
:func:`exclusive` opens a descriptor only after checking that this process holds no store on the file.
On a platform without fcntl (Windows) only the in-process registry applies.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from factmem.errors import StoreLockedError

__all__ = ["Claim", "claim", "exclusive", "file_identity", "other_process_message"]

_REGISTRY: dict[tuple, list[str]] = {}  # key -> modes of the stores open on it ("write" / "read")
_LOCK = threading.Lock()


def file_identity(path: Path) -> tuple | None:
    """("inode", device, inode) of an existing file, else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return ("inode", st.st_dev, st.st_ino)


def _keys(path: Path) -> list[tuple]:
    keys: list[tuple] = [("path", str(path.resolve()))]
    ident = file_identity(path)
    if ident is not None:
        keys.append(ident)
    return keys


def _conflict(modes: list[str], mode: str) -> bool:
    return bool(modes) and (mode == "write" or "write" in modes)


@dataclass
class Claim:
    """A store's registration; :meth:`bind` adds the file's identity once the file exists."""

    path: Path
    mode: str
    keys: list[tuple] = field(default_factory=list)

    def bind(self) -> None:
        """Register the file's (device, inode) too (a store that created its file)."""
        ident = file_identity(self.path)
        if ident is None or ident in self.keys:
            return
        with _LOCK:
            if _conflict(_REGISTRY.get(ident, []), self.mode):
                raise StoreLockedError(f"{self.path} is already open in this process under another name "
                                       "(a hard link or a symlink to it); close that store first")
            _REGISTRY.setdefault(ident, []).append(self.mode)
            self.keys.append(ident)

    def release(self) -> None:
        with _LOCK:
            for key in self.keys:
                modes = _REGISTRY.get(key, [])
                if self.mode in modes:
                    modes.remove(self.mode)
                if not modes:
                    _REGISTRY.pop(key, None)
            self.keys = []


def claim(path: Path, mode: str) -> Claim:
    """Register an open of ``path`` for ``mode`` ("write" or "read") in this process, or raise
    :class:`StoreLockedError` if this process already has it open in a conflicting way."""
    keys = _keys(path)
    with _LOCK:
        for key in keys:
            modes = _REGISTRY.get(key, [])
            if _conflict(modes, mode):
                held = "for writing" if "write" in modes else "read-only"
                alias = " under another name (a hard link or a symlink to it)" if key[0] == "inode" and \
                    ("path", str(path.resolve())) not in _REGISTRY else ""
                raise StoreLockedError(f"{path} is already open {held} in this process{alias}; close that store first")
        for key in keys:
            _REGISTRY.setdefault(key, []).append(mode)
    return Claim(path, mode, keys)


def other_process_message(path: Path, duckdb_message: str, read_only: bool) -> str:
    """What to tell a user whose open failed on another process's lock (DuckDB's message has the PID)."""
    pid = re.search(r"PID (\d+)", duckdb_message)
    who = f"another process (PID {pid.group(1)})" if pid else "another process"
    if read_only:
        return (f"{path} is open for writing by {who}: DuckDB cannot open a file another process holds for "
                "writing, not even read-only; close the store there first (or work on a copy of the file)")
    return (f"{path} is open by {who}: DuckDB allows one writing process, or any number of reading ones, "
            "never both; close the store there first")


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold ``path`` so that it can be replaced: no store of this process has it open, and no other
    process has it open through DuckDB (its fcntl lock). A missing file needs nothing."""
    path = Path(path)
    holder = claim(path, "write")  # refuses when this process has it open (any name)
    fd = None
    try:
        if path.exists():
            try:
                import fcntl
            except ImportError:  # pragma: no cover - Windows: the in-process registry only
                fcntl = None  # type: ignore[assignment]
            if fcntl is not None:
                fd = os.open(path, os.O_RDWR)
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    raise StoreLockedError(
                        f"{path} is open in another process (a store reading or writing it); replacing it would "
                        "lose that process's writes — close the store there first") from None
        yield
    finally:
        if fd is not None:
            os.close(fd)  # drops the lock (after the replacement: the path now names the new file)
        holder.release()
