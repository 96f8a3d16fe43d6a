"""The journal of a store's calls written behind (see :mod:`factmem.store.writebehind`): an
append-only file beside the DuckDB file, ``<store>.journal``.

A header line names the store (``{"factmem_journal": 2, "store_id": ...}``); then one entry per call,
a JSON array on one line: sequence number, operation (``remember``, ``ingest``, ``consolidate``),
the store's next fact id when the call began, then the call's arguments — for ``ingest``, the byte
length of its batch, which follows as an Arrow IPC stream and a newline. Every append is synced
(``fdatasync``) before the call returns; an append that fails leaves nothing of itself in the file.
An entry cut short at the end of the file is a call that never returned: reading drops it. A
damaged entry anywhere else is an error that names its line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from factmem.errors import StoreError

__all__ = ["Journal", "JournalEntry", "discard_journal", "JOURNAL_SUFFIX"]

#: the journal's file name is the store's with this appended
JOURNAL_SUFFIX = ".journal"
_JOURNAL_FORMAT = 2


@dataclass(frozen=True)
class JournalEntry:
    """One journaled call: ``op`` is ``remember``, ``ingest`` or ``consolidate``; ``args`` its
    arguments as journaled; ``next_fact_id`` the store's next id when the call began; ``batch`` the
    events of an ``ingest``."""

    seq: int
    op: str
    next_fact_id: int
    args: tuple
    batch: pa.Table | None = None


class Journal:
    """The append-only file of calls not yet flushed (see the module docstring)."""

    def __init__(self, store_path: Path):
        self.path = Path(str(store_path) + JOURNAL_SUFFIX)
        self._fd: int | None = None
        self._size = 0
        self._header = 0

    def open(self, store_id: str) -> None:
        """Start an empty journal for this store (an existing one must have been applied first)."""
        header = (json.dumps({"factmem_journal": _JOURNAL_FORMAT, "store_id": store_id}) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            os.write(fd, header)
            _sync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._size, self._header = fd, len(header), len(header)

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def append(self, seq: int, op: str, next_fact_id: int, args: tuple, batch: pa.Table | None = None) -> int:
        """Write one call and sync it; on failure nothing of it stays in the file. Returns the
        journal's size before it (:meth:`truncate` undoes the call)."""
        assert self._fd is not None
        if batch is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_table(batch)
            payload = sink.getvalue().to_pybytes()
            args = (len(payload),)
        head = (json.dumps([seq, op, next_fact_id, *args], ensure_ascii=False) + "\n").encode("utf-8")
        data = head + payload + b"\n" if batch is not None else head
        before = self._size
        problem = None
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                problem = f"wrote {written} of {len(data)} bytes"
            else:
                _sync(self._fd)
        except OSError as exc:
            problem = str(exc)
        if problem is not None:
            self.truncate(before)
            raise StoreError(f"{self.path}: cannot write the journal: {problem}")
        self._size += len(data)
        return before

    def truncate(self, size: int) -> None:
        """Cut the journal back to ``size`` bytes (a call that did not complete)."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, size)
            _sync(self._fd)
            self._size = size
        except OSError:
            pass

    def emptied(self) -> None:
        """The calls are in the table: keep only the header."""
        if self._fd is not None and self._size > self._header:
            os.ftruncate(self._fd, self._header)
            _sync(self._fd)
            self._size = self._header

    def close(self, remove: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if remove:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass

    def read(self) -> tuple[dict[str, Any], list[JournalEntry]]:
        """The header and the complete entries of an existing journal (an entry cut short at the end
        is a call that never returned: dropped). A damaged entry elsewhere is an error naming its line."""
        raw = self.path.read_bytes()
        pos, line_no = 0, 0
        header: dict[str, Any] = {}
        entries: list[JournalEntry] = []
        while pos < len(raw):
            end = raw.find(b"\n", pos)
            if end < 0:
                break  # cut short
            line, line_no = raw[pos:end], line_no + 1
            pos = end + 1
            if line_no == 1:
                try:
                    header = json.loads(line)
                except ValueError:
                    header = {}
                if not isinstance(header, dict) or header.get("factmem_journal") != _JOURNAL_FORMAT:
                    raise StoreError(f"{self.path}, line 1: not a factmem journal header: {line[:80]!r}")
                continue
            try:
                seq, op, next_id, *args = json.loads(line)
                problem = None if op in ("remember", "ingest", "consolidate") else f"unknown operation {op!r}"
            except (ValueError, TypeError) as exc:
                problem = str(exc)
            if problem is not None:
                raise StoreError(f"{self.path}, line {line_no}: not a journal entry ({problem}): {line[:80]!r}")
            batch = None
            if op == "ingest":
                size = int(args[0])
                if pos + size + 1 > len(raw):
                    break  # cut short
                try:
                    batch = pa.ipc.open_stream(pa.py_buffer(raw[pos:pos + size])).read_all()
                except pa.ArrowInvalid as exc:
                    raise StoreError(f"{self.path}, line {line_no}: a damaged batch ({exc})") from None
                pos += size + 1
                line_no += 1
            entries.append(JournalEntry(int(seq), op, int(next_id), tuple(args), batch))
        return header, entries


def discard_journal(store_path: Path) -> None:
    """Remove the journal beside a store file that is being replaced (its calls belong to the old one)."""
    try:
        Path(str(store_path) + JOURNAL_SUFFIX).unlink()
    except FileNotFoundError:
        pass


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)
