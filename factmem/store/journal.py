"""The journal of a store's calls written behind (see :mod:`factmem.store.writebehind`): an
append-only file beside the DuckDB file, ``<store's real file>.journal``.

**Its name** is the store's *real* file — :func:`os.path.realpath` of the name it was opened by,
resolved once at opening and held — with ``.journal`` appended: a store opened through a symlink,
or by a relative name before an ``os.chdir``, journals beside the file it writes. Hard links have
no real name: opening a file for writing first takes over, in its folder, the journal and DuckDB's
write-ahead log that a store opened by another name of it left (:func:`adopt_other_names`).

**Its format.** A header line names the store and this journal: ``{"factmem_journal": 3,
"store_id": ..., "journal_id": ..., "base": N}`` — ``base`` is the last journal number the store's
tables held when the journal was started. Then one entry per call: the CRC-32 of the entry (8 hex
digits), a space, and a JSON array on one line — sequence number, operation (``remember``,
``ingest``, ``consolidate``), the store's next fact id when the call began, then the call's
arguments; for ``ingest``, the byte length of its batch, which follows as an Arrow IPC stream and a
newline (the checksum covers both). Every append is synced (``fdatasync``) before the call returns;
an append that fails leaves nothing of itself in the file.

**Reading** checks every entry before any is applied: its checksum, then its arguments with the
checks of the call it records (:mod:`factmem.store.calls`; a batch with :func:`load_batch`). An
entry cut short at the end of the file is a call that never returned: dropped. Any other bad entry
is :class:`JournalError` naming the file and the line, and nothing is applied. Journals of
format 2 (no checksum, no ``journal_id``) are still read.
"""

from __future__ import annotations

import json
import os
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from factmem.errors import FactmemError, StoreError, StoreWriteError
from factmem.store.batch import Batch, load_batch
from factmem.store.calls import check_remember, strict_time

__all__ = ["Journal", "JournalEntry", "JournalError", "discard_journal", "journal_path", "adopt_other_names",
           "JOURNAL_SUFFIX"]

#: the journal's file name is the store's real file's with this appended
JOURNAL_SUFFIX = ".journal"
_JOURNAL_FORMAT = 3
_READABLE_FORMATS = (2, 3)
_OPS = ("remember", "ingest", "consolidate")
_WAL_SUFFIX = ".wal"  # DuckDB's write-ahead log: the database's name with this appended
_COMPACTING_SUFFIX = ".compacting"  # the journal's name with this: a new journal being written (:meth:`Journal.emptied`)


class JournalError(StoreError):
    """A journal entry is damaged or records a call the store would refuse: the message names the
    journal file and the line; nothing of the journal was applied."""


@dataclass(frozen=True)
class JournalEntry:
    """One journaled call: ``op`` is ``remember``, ``ingest`` or ``consolidate``; ``args`` its
    arguments as journaled (checked); ``next_fact_id`` the store's next id when the call began;
    ``batch`` the events of an ``ingest``; ``line`` where the entry starts in the file."""

    seq: int
    op: str
    next_fact_id: int
    args: tuple
    batch: Batch | None = None
    line: int = 0


def journal_path(real_store_path: Path) -> Path:
    return Path(str(real_store_path) + JOURNAL_SUFFIX)


def adopt_other_names(real_store_path: Path, *, read_only: bool = False) -> None:
    """Give this name of a file what a store opened by another name of it (a hard link, in the same
    folder) left behind: its journal and DuckDB's write-ahead log (``<name>.wal``), both named after
    the name they were opened by. Renamed to this name's, before DuckDB opens the file, and only
    while no process holds the file (DuckDB's fcntl lock): a live store's files are never touched.
    Two names that both left one are :class:`JournalError` (keep one, move the other away).
    ``read_only``: nothing is renamed; a store that left some is refused (they are not in the file)."""
    folder = real_store_path.parent
    try:
        names = sorted(e.name for e in os.scandir(folder)
                       if e.name.endswith((JOURNAL_SUFFIX, _WAL_SUFFIX)) and e.name != real_store_path.name)
    except OSError:
        return
    found: list[tuple[Path, Path]] = []
    for name in names:
        suffix = JOURNAL_SUFFIX if name.endswith(JOURNAL_SUFFIX) else _WAL_SUFFIX
        other = folder / name[: -len(suffix)]
        if other == real_store_path:
            continue
        try:
            if not (other.is_file() and os.path.samefile(other, real_store_path)):
                continue
        except OSError:
            continue
        found.append((folder / name, Path(str(real_store_path) + suffix)))
    if found and read_only and _unheld(real_store_path):  # (held: DuckDB's lock error says it better)
        raise StoreError(f"{real_store_path}: {found[0][0].name} holds what a store opened under another name of this "
                         "file (a hard link) left unwritten; open it once for writing, or run `factmem store "
                         "recover`, to apply it")
    if not found or not _unheld(real_store_path):
        return
    for left, ours in found:
        if ours.exists():
            raise JournalError(f"{left} and {ours} were both left by stores of one file (a hard link) that were "
                               "not closed; keep one, move the other away")
        os.rename(left, ours)


def _unheld(path: Path) -> bool:
    """No process holds ``path`` through DuckDB (its fcntl lock): this process's own check, no
    store of it has the file open either (the caller holds the in-process claim)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no hard links adopted
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # drops the lock: DuckDB takes its own next


def _crc(*parts: bytes) -> str:
    value = 0
    for part in parts:
        value = zlib.crc32(part, value)
    return f"{value:08x}"


class Journal:
    """The append-only file of calls not yet flushed (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None
        self._size = 0
        self._header = 0
        self.journal_id: str | None = None

    def open(self, store_id: str, base: int) -> None:
        """Start an empty journal for this store (an existing one must have been applied first)."""
        journal_id = uuid.uuid4().hex
        header = (json.dumps({"factmem_journal": _JOURNAL_FORMAT, "store_id": store_id, "journal_id": journal_id,
                              "base": int(base)}) + "\n").encode("utf-8")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        except OSError as exc:
            raise StoreWriteError(f"{self.path}: cannot create the journal: {exc.strerror or exc}") from None
        try:
            os.write(fd, header)
            _sync(fd)
        except OSError as exc:
            os.close(fd)
            raise StoreWriteError(f"{self.path}: cannot write the journal: {exc.strerror or exc}") from None
        self._fd, self._size, self._header = fd, len(header), len(header)
        self.journal_id = journal_id

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def append(self, seq: int, op: str, next_fact_id: int, args: tuple, batch: pa.Table | None = None) -> int:
        """Write one call and sync it; on failure nothing of it stays in the file. Returns the
        journal's size before it (:meth:`truncate` undoes the call)."""
        assert self._fd is not None
        payload = b""
        if batch is not None:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_table(batch)
            payload = sink.getvalue().to_pybytes()
            args = (len(payload),)
        body = json.dumps([seq, op, next_fact_id, *args], ensure_ascii=False).encode("utf-8")
        head = _crc(body, payload).encode("ascii") + b" " + body + b"\n"
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
            problem = exc.strerror or str(exc)
        if problem is not None:
            self.truncate(before)
            raise StoreWriteError(f"{self.path}: cannot write the journal: {problem}")
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

    @property
    def size(self) -> int:
        """The journal's length in bytes: where the next call's entry starts."""
        return self._size

    def emptied(self, through: int | None = None) -> None:
        """The calls are in the table — all of them, or (``through``) those whose entries end at that
        byte: keep only the header and the entries after it.

        The entries after are kept by writing the header and them to a new file, synced, renamed over
        the journal, and the folder synced before another call is appended: at every instant the
        journal's name holds either the old file or the new one, and both list every call the
        tables do not hold (the old one more, which reopening skips by number)."""
        if self._fd is None or self._size <= self._header:
            return
        if through is None or through >= self._size:
            try:
                os.ftruncate(self._fd, self._header)
                _sync(self._fd)
            except OSError:
                return  # the entries stay: the store records their numbers as applied, reopening skips them
            self._size = self._header
            return
        if through <= self._header:
            return
        fresh = _compacting(self.path)
        fd = None
        try:
            with open(self.path, "rb") as old:
                data = old.read(self._header)
                old.seek(through)
                data += old.read(self._size - through)
            fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            whole = os.write(fd, data) == len(data)
            if whole:
                _sync(fd)
                os.replace(fresh, self.path)
        except OSError:
            whole = False
        if not whole:  # the journal keeps every entry: reopening skips those the tables hold
            if fd is not None:
                os.close(fd)
            try:
                fresh.unlink()
            except OSError:
                pass
            return
        # the journal's name is the new file's now: calls are appended there
        os.close(self._fd)
        self._fd, self._size = fd, len(data)
        try:
            _sync_folder(self.path.parent)  # before another call is appended: the rename is durable
        except OSError as exc:
            raise StoreWriteError(f"{self.path}: cannot sync the folder after renaming the journal: "
                                  f"{exc.strerror or exc}") from None

    def close(self, remove: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if remove:
            _remove(self.path)

    def read(self) -> tuple[dict[str, Any], list[JournalEntry]]:
        """The header and the complete entries of an existing journal, each checked (see the module
        docstring); an entry cut short at the end is dropped; any other bad entry raises
        :class:`JournalError` naming its line."""
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
                except (ValueError, RecursionError):
                    header = {}
                if not isinstance(header, dict) or header.get("factmem_journal") not in _READABLE_FORMATS:
                    raise JournalError(f"{self.path}, line 1: not a factmem journal header: {line[:80]!r}")
                continue
            where = f"{self.path}, line {line_no}"
            checksum = None
            if header["factmem_journal"] >= 3:
                checksum, _, line = line.partition(b" ")
            try:
                fields = json.loads(line)
            except (ValueError, RecursionError) as exc:  # (RecursionError: nested too deep to be an entry)
                raise JournalError(f"{where}: not a journal entry ({exc}): {line[:80]!r}") from None
            if not isinstance(fields, list) or len(fields) < 3 or fields[1] not in _OPS:
                what = f"unknown operation {fields[1]!r}" if isinstance(fields, list) and len(fields) >= 3 \
                    else "not [sequence, operation, next id, arguments...]"
                raise JournalError(f"{where}: not a journal entry ({what}): {line[:80]!r}")
            seq, op, next_id, *args = fields
            payload = b""
            if op == "ingest":
                if len(args) != 1 or type(args[0]) is not int or args[0] < 0:
                    raise JournalError(f"{where}: an ingest entry must give its batch's byte length, got {args!r}")
                if pos + args[0] + 1 > len(raw):
                    break  # cut short
                payload = raw[pos:pos + args[0]]
                pos += args[0] + 1
            if checksum is not None and checksum != _crc(line, payload).encode("ascii"):
                raise JournalError(f"{where}: the entry does not match its checksum (the journal is damaged): "
                                   f"{line[:80]!r}")
            try:
                entries.append(_checked(seq, op, next_id, args, payload, line_no))
            except FactmemError as exc:
                raise JournalError(f"{where}: {op} entry {seq!r} records a call the store refuses: {exc}") from None
            if op == "ingest":
                line_no += 1
        return header, entries


def _positive(name: str, value: Any) -> int:
    if type(value) is not int or value < 1:
        raise StoreError(f"{name} must be a positive integer, got {value!r}")
    return value


def _checked(seq: Any, op: str, next_id: Any, args: list, payload: bytes, line_no: int) -> JournalEntry:
    """One entry's fields, checked as the call checks its arguments."""
    seq, next_id = _positive("the sequence number", seq), _positive("the next fact id", next_id)
    batch = None
    if op == "remember":
        if len(args) != 10:
            raise StoreError(f"a remember entry holds 10 arguments, got {len(args)}")
        subject, predicate, object, kind, at, session, message, source, note, fid = args
        check_remember(subject, predicate, object, kind, at, session, message, source, note, strict_at=True)
        _positive("the fact id", fid)
    elif op == "consolidate":
        if len(args) != 3:
            raise StoreError(f"a consolidate entry holds 3 arguments, got {len(args)}")
        at, prune, archived = args
        strict_time("at", at)
        if type(prune) is not bool:
            raise StoreError(f"prune must be true or false, got {prune!r}")
        _positive("the count archived", archived)
    else:
        try:
            table = pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
        except (pa.ArrowInvalid, OSError) as exc:
            raise StoreError(f"a damaged batch ({exc})") from None
        batch = load_batch(table)
    return JournalEntry(seq, op, next_id, tuple(args), batch, line_no)


def discard_journal(store_path: Path) -> None:
    """Remove the journal beside a store file that is being replaced (its calls belong to the old one)."""
    _remove(journal_path(Path(os.path.realpath(store_path))))


def _remove(journal: Path) -> None:
    """Remove a journal, and the new journal a crash may have left half-renamed beside it."""
    for name in (journal, _compacting(journal)):
        try:
            name.unlink()
        except FileNotFoundError:
            pass


def _compacting(journal: Path) -> Path:
    """Where :meth:`Journal.emptied` writes the new journal before renaming it over the old one."""
    return Path(str(journal) + _COMPACTING_SUFFIX)


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: fsync of the directory; elsewhere nothing to do)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows opens no directory: its renames are durable as they are
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
