"""Write-behind for ``remember()``: a call is decided in process, made durable in a journal, and
written to DuckDB with the calls around it, set-based, at the next flush.

Why: a call written row by row is four DuckDB statements (look up, update or insert the fact, insert
its evidence, commit), and each statement costs DuckDB a fixed ~0.2–0.6 ms however small it is —
2.5–3 ms a call at a million facts. Written behind, a call costs its decision in Python and one
append to the journal with ``fdatasync`` (~0.2 ms here), and a flush writes thousands of calls in four
statements.

**The contract is unchanged.** What a call does is decided by :func:`remember_outcome`, the same rule
the row-by-row path runs, from the same numbers (the fact rows as DuckDB returns them), so the
memory holds the same bytes either way (property-tested against the row-by-row path and the
reference model). Every call is durable when it returns: on a file store its arguments are in the
journal, synced, before it returns; a store that was not closed (a crash, a killed process) applies
its journal when it is next opened, through the same rule, from the state the last flush left.

**Consistency.** Whatever reads or writes the database sees every call made before it:

* every access to the connection — the store's own reads and writes, ``store.db``, ``store.con`` —
  flushes first, and so do ``close()`` and the start of every write transaction; a file store the
  program never closed is closed (flushed) at a normal interpreter exit, so that other tools reading
  the DuckDB file find every call in its tables;
* the in-process state (:class:`ActiveState`: every active fact's key, object, confidence, last
  reinforcement and decay rate, ~230 bytes each, plus the facts the calls since touched) is built from the table at
  the first call and dropped by every other write (``ingest``, ``replay``, ``consolidate``, an
  abstraction pass, an explicit ``transaction()``) and by any use of ``store.db`` / ``store.con``
  (the caller may write through them); the next call rebuilds it (one scan of the active facts:
  ~0.6 s at a million). A flush keeps it: it writes what the state already holds.

**Where it does not apply** (the call is written row by row, as before): inside an explicit
``store.transaction()`` (the caller asked for its calls to commit or roll back together); in a store
with abstraction links (a supersession must mark derived parents stale in the order the calls come);
in a read-only store; and when the store is opened with ``write_behind=False``.

**The journal** is ``<store file>.journal``, beside the DuckDB file: a header line naming the store
(``store_id`` in ``factmem_meta``) and one JSON array per call — sequence number, subject,
predicate, object, kind, time, session, message, source, note, and the fact id the call returned.
A flush records the last sequence number it wrote (``journal_applied`` in ``factmem_meta``) in the
same transaction as the rows, then empties the journal: a crash between the two leaves calls the
store already holds, and reopening skips them by number. A line cut short by a crash is a call that
never returned, and is dropped. An in-memory store keeps no journal (nothing of it survives a crash).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from factmem.core.decay import age_days, effective_confidence, reinforce
from factmem.core.params import MemoryParams
from factmem.errors import StoreError
from factmem.store.keyindex import key_hash

__all__ = ["remember_outcome", "Outcome", "ActiveState", "Journal", "JournalEntry", "flush_pending", "settled",
           "discard_journal", "FLUSH_AT", "MAX_TOUCHED", "JOURNAL_SUFFIX"]

#: flush once this many calls are pending (bounds the journal and the work a reopening may redo)
FLUSH_AT = 4096
#: after a flush, drop a state whose overlay of touched facts has grown past this (rebuilt smaller)
MAX_TOUCHED = 200_000
#: the journal's file name is the store's with this appended
JOURNAL_SUFFIX = ".journal"
_JOURNAL_FORMAT = 1
_KEY_SQL = "subject || chr(0) || predicate"


@dataclass(frozen=True)
class Outcome:
    """What one ``remember`` call does: ``action`` is ``reinforce`` (of ``fact_id``) or ``insert`` (a new
    fact, superseding ``superseded`` when not None); ``confidence`` is the fact's afterwards."""

    action: str
    fact_id: int | None
    confidence: float
    superseded: int | None


def remember_outcome(rows: Sequence[tuple], object: str, predicate: str, kind: str, at: int,
                     params: MemoryParams) -> Outcome:
    """The seed's rule for one call, given ``rows`` = (id, object, confidence, last_reinforced,
    decay_rate) of every active fact of the call's (subject, predicate): the identical fact is
    reinforced; else (unless the predicate is multi-valued) the latest other one, by
    (last_reinforced, id), is superseded by a new fact. One rule for both write paths."""
    same = max((r for r in rows if r[1] == object), key=lambda r: (r[3], r[0]), default=None)
    if same is not None:
        fid, _, conf, last, rate = same
        base = conf if params.reinforce_base == "stored" else effective_confidence(conf, rate, age_days(at, last))
        return Outcome("reinforce", int(fid), float(reinforce(base, params.reinforce_gain, params.confidence_cap)),
                       None)
    conflict = None
    if predicate not in params.multi_valued_predicates:
        hit = max((r for r in rows if r[1] != object), key=lambda r: (r[3], r[0]), default=None)
        conflict = int(hit[0]) if hit else None
    return Outcome("insert", None, float(params.initial_confidence[kind]), conflict)


@dataclass
class _Touched:
    """A fact the calls since the state was built have touched: its row as it now stands."""

    subject: str
    predicate: str
    object: str
    note: str | None
    kind: str
    confidence: float
    reinforcement_count: int  # for a fact already in the table: reinforcements since the last flush
    first_seen: int
    last_reinforced: int
    decay_rate: float
    status: str = "active"
    supersedes_id: int | None = None
    status_changed_at: int | None = None
    status_reason: str | None = None
    in_table: bool = False  # written by a flush (or read from the table): later flushes UPDATE it


@dataclass
class ActiveState:
    """The active facts of a store, in process: sorted arrays from one scan of the table, plus the
    facts touched since (see the module docstring)."""

    hashes: np.ndarray  # int64 key hash of (subject, predicate), sorted
    ids: np.ndarray
    keys: np.ndarray  # "subject\\0predicate", to rule out hash collisions
    objects: np.ndarray
    confidence: np.ndarray
    last_reinforced: np.ndarray
    decay_rate: np.ndarray
    touched: dict[int, _Touched] = field(default_factory=dict)
    recent: dict[int, list[int]] = field(default_factory=dict)  # key hash -> ids inserted since the scan
    pending: dict[int, None] = field(default_factory=dict)  # ids touched since the last flush, in order
    evidence: list[tuple] = field(default_factory=list)  # rows of memory_evidence since the last flush
    last_seq: int = 0  # the journal number of the last pending call (0: none journaled)
    rows_seen: dict[int, int] = field(default_factory=dict)  # id -> scan row, of the last lookup's facts

    @classmethod
    def build(cls, con: duckdb.DuckDBPyConnection) -> ActiveState:
        got = con.execute(
            f"SELECT md5_number_lower({_KEY_SQL}) AS h, id, {_KEY_SQL} AS k, object, confidence, last_reinforced, "
            "decay_rate FROM memory_facts WHERE status = 'active'").fetchnumpy()
        hashes = np.asarray(got["h"], np.uint64).view(np.int64)
        ids = np.asarray(got["id"], np.int64)
        order = np.lexsort((ids, hashes))
        return cls(hashes[order], ids[order], np.asarray(got["k"], object)[order],
                   np.asarray(got["object"], object)[order], np.asarray(got["confidence"], np.float64)[order],
                   np.asarray(got["last_reinforced"], np.int64)[order], np.asarray(got["decay_rate"], np.float64)[order])

    def active_of(self, subject: str, predicate: str) -> list[tuple]:
        """(id, object, confidence, last_reinforced, decay_rate) of every active fact of the key."""
        h = key_hash(subject, predicate)
        key = subject + "\0" + predicate
        lo, hi = int(np.searchsorted(self.hashes, h, "left")), int(np.searchsorted(self.hashes, h, "right"))
        out: list[tuple] = []
        self.rows_seen.clear()
        for r in range(lo, hi):  # the facts of one key: almost always one
            fid = int(self.ids[r])
            t = self.touched.get(fid)
            if t is not None:
                if t.status == "active" and t.subject == subject and t.predicate == predicate:
                    out.append((fid, t.object, t.confidence, t.last_reinforced, t.decay_rate))
            elif self.keys[r] == key:
                self.rows_seen[fid] = r
                out.append((fid, self.objects[r], float(self.confidence[r]), int(self.last_reinforced[r]),
                            float(self.decay_rate[r])))
        for fid in self.recent.get(h, ()):
            t = self.touched[fid]
            if t.status == "active" and t.subject == subject and t.predicate == predicate:
                out.append((fid, t.object, t.confidence, t.last_reinforced, t.decay_rate))
        return out

    def _touch(self, fid: int) -> _Touched:
        t = self.touched.get(fid)
        if t is None:  # a fact of the scan, found by this call's lookup: copy its row into the overlay
            r = self.rows_seen[fid]
            subject, predicate = str(self.keys[r]).split("\0", 1)
            t = _Touched(subject, predicate, str(self.objects[r]), None, "", float(self.confidence[r]), 0, 0,
                         int(self.last_reinforced[r]), float(self.decay_rate[r]), in_table=True)
            self.touched[fid] = t
        return t

    def apply(self, outcome: Outcome, fact_id: int, evidence_id: int, subject: str, predicate: str, object: str,
              kind: str, at: int, note: str | None, decay_rate: float, session_id: str | None,
              message_id: str | None, source: str) -> None:
        """Record a call's effects (decided by :func:`remember_outcome`) as pending writes."""
        if outcome.action == "reinforce":
            t = self._touch(fact_id)
            t.confidence = outcome.confidence
            t.reinforcement_count += 1
            t.last_reinforced = at
        else:
            if outcome.superseded is not None:
                old = self._touch(outcome.superseded)
                old.status, old.status_changed_at, old.status_reason = "superseded", at, "contradiction"
                self.pending[outcome.superseded] = None
            self.touched[fact_id] = _Touched(subject, predicate, object, note, kind, outcome.confidence, 0, at, at,
                                             decay_rate, supersedes_id=outcome.superseded)
            self.recent.setdefault(key_hash(subject, predicate), []).append(fact_id)
        self.pending[fact_id] = None
        self.evidence.append((evidence_id, fact_id, session_id, message_id, at, outcome.action, outcome.confidence,
                              source))


def flush_pending(con: duckdb.DuckDBPyConnection, state: ActiveState, journal_applied: int | None) -> None:
    """Write the pending calls' effects to the table set-based, in one transaction the caller holds
    open: new facts inserted, touched ones updated, evidence appended, and (a file store) the last
    journal number written recorded in ``factmem_meta``. Leaves ``state`` with nothing pending."""
    new = [(fid, state.touched[fid]) for fid in state.pending if not state.touched[fid].in_table]
    old = [(fid, state.touched[fid]) for fid in state.pending if state.touched[fid].in_table]
    if new:
        new_facts = pa.table({  # noqa: F841 - read by DuckDB (replacement scan)
            "id": pa.array([f for f, _ in new], pa.int64()),
            "subject": pa.array([t.subject for _, t in new], pa.string()),
            "predicate": pa.array([t.predicate for _, t in new], pa.string()),
            "object": pa.array([t.object for _, t in new], pa.string()),
            "note": pa.array([t.note for _, t in new], pa.string()),
            "kind": pa.array([t.kind for _, t in new], pa.string()),
            "confidence": pa.array([t.confidence for _, t in new], pa.float64()),
            "reinforcement_count": pa.array([t.reinforcement_count for _, t in new], pa.int64()),
            "first_seen": pa.array([t.first_seen for _, t in new], pa.int64()),
            "last_reinforced": pa.array([t.last_reinforced for _, t in new], pa.int64()),
            "decay_rate": pa.array([t.decay_rate for _, t in new], pa.float64()),
            "status": pa.array([t.status for _, t in new], pa.string()),
            "supersedes_id": pa.array([t.supersedes_id for _, t in new], pa.int64()),
            "status_changed_at": pa.array([t.status_changed_at for _, t in new], pa.int64()),
            "status_reason": pa.array([t.status_reason for _, t in new], pa.string()),
        })
        con.execute("INSERT INTO memory_facts SELECT *, false FROM new_facts ORDER BY id")
    if old:
        touched_facts = pa.table({  # noqa: F841 - read by DuckDB (replacement scan)
            "id": pa.array([f for f, _ in old], pa.int64()),
            "confidence": pa.array([t.confidence for _, t in old], pa.float64()),
            "added": pa.array([t.reinforcement_count for _, t in old], pa.int64()),
            "last_reinforced": pa.array([t.last_reinforced for _, t in old], pa.int64()),
            "status": pa.array([t.status for _, t in old], pa.string()),
            "status_changed_at": pa.array([t.status_changed_at for _, t in old], pa.int64()),
            "status_reason": pa.array([t.status_reason for _, t in old], pa.string()),
        })
        con.execute(
            "UPDATE memory_facts SET confidence = u.confidence, "
            "reinforcement_count = memory_facts.reinforcement_count + u.added, last_reinforced = u.last_reinforced, "
            "status = u.status, status_changed_at = coalesce(u.status_changed_at, memory_facts.status_changed_at), "
            "status_reason = coalesce(u.status_reason, memory_facts.status_reason) "
            "FROM touched_facts u WHERE memory_facts.id = u.id")
    if state.evidence:
        ev = state.evidence
        new_evidence = pa.table({  # noqa: F841 - read by DuckDB (replacement scan)
            "id": pa.array([e[0] for e in ev], pa.int64()),
            "fact_id": pa.array([e[1] for e in ev], pa.int64()),
            "session_id": pa.array([e[2] for e in ev], pa.string()),
            "message_id": pa.array([e[3] for e in ev], pa.string()),
            "observed_at": pa.array([e[4] for e in ev], pa.int64()),
            "action": pa.array([e[5] for e in ev], pa.string()),
            "confidence": pa.array([e[6] for e in ev], pa.float64()),
            "source": pa.array([e[7] for e in ev], pa.string()),
        })
        con.execute("INSERT INTO memory_evidence SELECT * FROM new_evidence ORDER BY id")
    if journal_applied is not None:
        con.execute("INSERT OR REPLACE INTO factmem_meta VALUES ('journal_applied', ?)", [str(journal_applied)])


def settled(state: ActiveState) -> None:
    """After a committed flush: what was pending is in the table."""
    for fid in state.pending:
        t = state.touched[fid]
        t.in_table = True
        t.reinforcement_count = 0
    state.pending.clear()
    state.evidence.clear()


@dataclass(frozen=True)
class JournalEntry:
    """One journaled call (see the module docstring)."""

    seq: int
    subject: str
    predicate: str
    object: str
    kind: str
    at: int
    session_id: str | None
    message_id: str | None
    source: str
    note: str | None
    fact_id: int

    def to_line(self) -> bytes:
        return (json.dumps([self.seq, self.subject, self.predicate, self.object, self.kind, self.at, self.session_id,
                            self.message_id, self.source, self.note, self.fact_id], ensure_ascii=False)
                + "\n").encode("utf-8")


class Journal:
    """The append-only file of calls not yet flushed (see the module docstring)."""

    def __init__(self, store_path: Path):
        self.path = Path(str(store_path) + JOURNAL_SUFFIX)
        self._fd: int | None = None
        self._size = 0

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
        self._fd, self._size = fd, len(header)
        self._header = len(header)

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def append(self, entry: JournalEntry) -> None:
        """Write one call and sync it; on failure nothing of it stays in the file."""
        assert self._fd is not None
        line = entry.to_line()
        problem = None
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                problem = f"wrote {written} of {len(line)} bytes"
            else:
                _sync(self._fd)
        except OSError as exc:
            problem = str(exc)
        if problem is not None:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass
            raise StoreError(f"{self.path}: cannot write the journal: {problem}")
        self._size += len(line)

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
        """The header and the complete entries of an existing journal (a cut-short last line is a call
        that never returned: dropped). A damaged line elsewhere is an error naming it."""
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        complete, tail = lines[:-1], lines[-1]  # tail: after the last newline (empty unless cut short)
        del tail
        if not complete:
            return {}, []
        try:
            header = json.loads(complete[0])
        except ValueError:
            header = None
        if not isinstance(header, dict) or header.get("factmem_journal") != _JOURNAL_FORMAT:
            raise StoreError(f"{self.path}, line 1: not a factmem journal header: {complete[0][:80]!r}")
        entries: list[JournalEntry] = []
        for number, line in enumerate(complete[1:], start=2):
            try:
                fields = json.loads(line)
                entries.append(JournalEntry(*fields))
            except (ValueError, TypeError) as exc:
                raise StoreError(f"{self.path}, line {number}: not a journal entry ({exc}): {line[:80]!r}") from None
        return header, entries


def discard_journal(store_path: Path) -> None:
    """Remove the journal beside a store file that is being replaced (its calls belong to the old one)."""
    try:
        Path(str(store_path) + JOURNAL_SUFFIX).unlink()
    except FileNotFoundError:
        pass


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)
