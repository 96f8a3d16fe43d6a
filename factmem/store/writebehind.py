"""Write-behind: ``remember``, ``ingest`` and ``consolidate`` decided in process, made durable in a
journal, and written to DuckDB set-based, many calls at once, at the next flush.

Why: DuckDB charges every statement a fixed cost (~0.2–0.6 ms) and every statement on
``memory_facts`` a scan of its columns. Written row by row, ``remember`` is four statements (look
up, update or insert the fact, insert its evidence, commit): ~3 ms a call at a million facts. A
day of ``ingest`` plus a ``consolidate`` is eight (a join for the batch's keys' state, inserts,
two updates, consolidate's decay pass over every active fact, two commits): ~40 ms, as slow as the
seed's algorithm row by row on SQLite. Written behind, a call costs its decision in numpy and one
append to the journal with ``fdatasync``, and a flush writes thousands of calls in four statements.

**The contract is unchanged.** What a call does is decided by the same code as the row-by-row
path — :func:`remember_outcome` for ``remember``, the batch kernel for ``ingest``
(:mod:`factmem.engine.kernel`), the engine's decay expression for ``consolidate`` — from the same
numbers (the active facts' rows, as DuckDB returned them, as the calls since left them). The tables
hold the same bytes either way: property-tested against the row-by-row path and the reference
model. Every call is durable when it returns: on a file store it is in the journal, synced, before
it returns; a store that was not closed (a crash, a killed process) applies its journal when it is
next opened, through the same code, from the state the last flush left.

**Consistency.** Whatever reads or writes the tables sees every call made before it:

* every access to the connection — the store's own reads and other writes, ``store.db``,
  ``store.con`` — flushes first, and so do ``close()`` and the start of every write transaction; a
  file store the program never closed is closed (flushed) at a normal interpreter exit, so that
  other tools reading the DuckDB file find every call in its tables;
* the in-process state (:class:`ActiveState`: every active fact's key, object, confidence, count,
  last reinforcement and decay rate, in numpy columns, ~250 bytes a fact) is built from the table
  at the first call and dropped by every write that does not go through it (``replay``, an
  abstraction pass, an explicit ``transaction()``, a non-SELECT ``query()``) and by any use of
  ``store.db`` / ``store.con`` (the caller may write through them); the next call rebuilds it (one
  scan of the active facts: ~0.6 s at a million). A flush keeps it: it writes what the state holds.

**Where it does not apply** (the call is written row by row, as before): inside an explicit
``store.transaction()`` (the caller asked for its calls to commit or roll back together); in a store
with abstraction links (a supersession must mark derived parents stale, and a consolidation prunes,
in the order the calls come); in a read-only store; in a store whose ids are too sparse for a dense
id → row map (an imported production file with ids far beyond its row count); and when the store is
opened with ``write_behind=False``.

**The journal** is ``<store file>.journal``, beside the DuckDB file: a header line naming the store
(``store_id`` in ``factmem_meta``), then one entry per call, each a JSON array on one line that
starts with its sequence number and operation — ``remember`` (its arguments and the fact id it
returned), ``consolidate`` (time, prune, the count it returned) or ``ingest`` (the byte length of
the batch that follows it as an Arrow IPC stream, then a newline) — and the next fact id the call
started from. A flush records the last sequence number it wrote (``journal_applied`` in
``factmem_meta``) in the same transaction as the rows, then empties the journal: a crash between the
two leaves calls the store already holds, and reopening skips them by number. An entry cut short by
a crash is a call that never returned, and is dropped. An in-memory store keeps no journal (nothing
of it survives a crash).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from factmem.core.codes import KINDS, NO_TIME, Status
from factmem.core.decay import age_days, effective_confidence, reinforce
from factmem.core.params import MemoryParams
from factmem.errors import StoreError

__all__ = ["remember_outcome", "Outcome", "ActiveState", "Journal", "JournalEntry", "key_hashes",
           "discard_journal", "FLUSH_CALLS", "FLUSH_ROWS", "JOURNAL_SUFFIX"]

#: flush once this many calls are pending (bounds the work a reopening may redo) ...
FLUSH_CALLS = 4096
#: ... or this many evidence rows (bounds the memory pending writes hold and the journal's size)
FLUSH_ROWS = 262_144
#: the journal's file name is the store's with this appended
JOURNAL_SUFFIX = ".journal"
_JOURNAL_FORMAT = 2
_KEY_SQL = "subject || chr(0) || predicate"
_REASONS = (None, "contradiction", "decay")  # by status code (Status.ACTIVE / SUPERSEDED / ARCHIVED)
_STATUS_WORDS = tuple(Status(i).label for i in range(3))


def _expand(sorted_values: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, j) with ``sorted_values[j] == wanted[i]``, grouped by i: searchsorted ranges, expanded."""
    lo = np.searchsorted(sorted_values, wanted, "left")
    counts = np.searchsorted(sorted_values, wanted, "right") - lo
    total = int(counts.sum())
    which = np.repeat(np.arange(len(wanted)), counts)
    start = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return which, start + np.arange(total)


def key_hashes(keys: np.ndarray) -> np.ndarray:
    """int64 hashes of ``subject + "\\0" + predicate`` strings (pandas' SipHash, fixed key: the
    same in every process), vectorized."""
    return pd.util.hash_array(np.asarray(keys, dtype=object), categorize=False).view(np.int64)


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


# numpy columns of the state: name -> dtype (object: Python strings or None)
_COLUMNS: dict[str, Any] = {
    "id": np.int64, "hash": np.int64, "key": object, "object": object, "confidence": np.float64,
    "count": np.int64, "last": np.int64, "rate": np.float64, "status": np.int8, "changed_at": np.int64,
    "in_table": bool, "dirty": bool,
    # needed only to insert a fact a call created (None / 0 for the rows read from the table)
    "subject": object, "predicate": object, "note": object, "kind": np.int8, "first_seen": np.int64,
    "supersedes": np.int64,
}
_NONE = NO_TIME  # a NULL changed_at / supersedes_id (the engine's NO_TIME and NO_REF alike)
_EVIDENCE_SCHEMA = pa.schema([("id", pa.int64()), ("fact_id", pa.int64()), ("session_id", pa.string()),
                              ("message_id", pa.string()), ("observed_at", pa.int64()), ("action", pa.string()),
                              ("confidence", pa.float64()), ("source", pa.string())])


class ActiveState:
    """The store's active facts in numpy columns, plus every fact the calls since touched or created
    (see the module docstring). Rows ``[0, n_sorted)`` are sorted by key hash; rows appended since
    stay where they are, found through a small sorted index of (hash, row) kept beside them
    (``[n_sorted, n_indexed)``: merged into at every batch), and the last few (``[n_indexed, n)``:
    single calls since the last batch) by comparing their hashes directly. A flush that has let
    ``MERGE_AT`` rows pile up sorts everything again."""

    #: merge the appended rows into the sorted ones beyond this many
    MERGE_AT = 65_536

    def __init__(self, columns: dict[str, np.ndarray], n: int, next_fact_id: int):
        self.col = columns
        self.n = n
        self.n_sorted = self.n_indexed = n
        self.tail_hash = np.empty(0, np.int64)  # the index of rows [n_sorted, n_indexed), by hash
        self.tail_row = np.empty(0, np.int64)
        self.row_of_id = np.full(max(next_fact_id, 1) + 1024, -1, np.int64)
        self.row_of_id[columns["id"][:n]] = np.arange(n)
        self.evidence: list[pa.Table] = []  # rows of memory_evidence since the last flush
        self.evidence_rows: list[tuple] = []  # ... written by remember, one tuple each
        self.calls = 0  # calls since the last flush
        self.last_seq = 0  # the journal number of the last pending call (0: none journaled)
        self.archive_threshold: float | None = None
        self.archive_guess = np.empty(0)

    # -- building -------------------------------------------------------------------------------

    @staticmethod
    def dense_enough(next_fact_id: int, active: int) -> bool:
        """A dense id → row map is affordable (ids of a factmem store are dense; an imported
        production file may number far beyond its rows)."""
        return next_fact_id <= 16 * active + (1 << 24)

    @classmethod
    def build(cls, con: duckdb.DuckDBPyConnection, next_fact_id: int) -> ActiveState | None:
        """The state of a store's table (None when its ids are too sparse: see :meth:`dense_enough`)."""
        got = con.execute(
            f"SELECT id, {_KEY_SQL} AS k, object, confidence, reinforcement_count, last_reinforced, decay_rate "
            "FROM memory_facts WHERE status = 'active'").fetchnumpy()
        keys = np.asarray(got["k"], object)
        hashes = key_hashes(keys)
        ids = np.asarray(got["id"], np.int64)
        n = len(ids)
        if not cls.dense_enough(next_fact_id, n):
            return None
        order = np.lexsort((ids, hashes))
        cap = max(1024, n + n // 4)
        columns = {name: np.zeros(cap, dtype) if dtype is not object else np.full(cap, None, object)
                   for name, dtype in _COLUMNS.items()}
        for name, values in (("id", ids), ("hash", hashes), ("key", keys), ("object", got["object"]),
                             ("confidence", got["confidence"]), ("count", got["reinforcement_count"]),
                             ("last", got["last_reinforced"]), ("rate", got["decay_rate"])):
            columns[name][:n] = np.asarray(values)[order]
        columns["in_table"][:n] = True
        columns["changed_at"][:] = _NONE
        columns["supersedes"][:] = _NONE
        return cls(columns, n, next_fact_id)

    # -- finding facts --------------------------------------------------------------------------

    def _rows_of_hashes(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query index, row) for every row whose key hash equals one of ``hashes``."""
        order = np.argsort(hashes, kind="stable")  # searched in sorted order: twice as fast on large arrays
        wanted = hashes[order]
        position, rows = _expand(self.col["hash"][:self.n_sorted], wanted)
        parts_q, parts_r = [order[position]], [rows]
        if len(self.tail_hash):
            position, at = _expand(self.tail_hash, wanted)
            parts_q.append(order[position])
            parts_r.append(self.tail_row[at])
        if self.n > self.n_indexed:  # the few rows single calls appended since the last batch: compared directly
            recent = self.col["hash"][self.n_indexed:self.n]
            r, position = _expand(wanted, recent)
            parts_q.append(order[position])
            parts_r.append(self.n_indexed + r)
        if len(parts_q) == 1:
            return parts_q[0], parts_r[0]
        return np.concatenate(parts_q), np.concatenate(parts_r)

    def _index_recent(self) -> None:
        """Merge the rows appended since into the sorted tail index (O(tail), no row moves)."""
        if self.n == self.n_indexed:
            return
        rows = np.arange(self.n_indexed, self.n)
        hashes = self.col["hash"][rows]
        order = np.argsort(hashes, kind="stable")
        hashes, rows = hashes[order], rows[order]
        position = np.searchsorted(self.tail_hash, hashes, "right")
        self.tail_hash = np.insert(self.tail_hash, position, hashes)
        self.tail_row = np.insert(self.tail_row, position, rows)
        self.n_indexed = self.n

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Active facts of the ``subject\\0predicate`` strings ``keys``: (index into keys, row), in
        row order within a key (what the batch kernel's state join returned, as rows)."""
        keys = np.asarray(keys, object)
        if not len(keys):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        query, rows = self._rows_of_hashes(key_hashes(keys))
        keep = (self.col["status"][rows] == Status.ACTIVE) & (self.col["key"][rows] == keys[query])
        return query[keep], rows[keep]

    def active_of(self, subject: str, predicate: str) -> tuple[int, list[tuple]]:
        """The key's hash, and (id, object, confidence, last_reinforced, decay_rate) of each of its
        active facts: :meth:`lookup` for one key, with scalar searches (a ``remember`` call)."""
        key = subject + "\0" + predicate
        h = int(key_hashes(np.array([key], object))[0])
        c = self.col
        main = c["hash"][:self.n_sorted]
        rows = list(range(int(main.searchsorted(h, "left")), int(main.searchsorted(h, "right"))))
        if len(self.tail_hash):
            lo, hi = int(self.tail_hash.searchsorted(h, "left")), int(self.tail_hash.searchsorted(h, "right"))
            rows += self.tail_row[lo:hi].tolist()
        if self.n > self.n_indexed:
            rows += (self.n_indexed + np.flatnonzero(c["hash"][self.n_indexed:self.n] == h)).tolist()
        status, keys = c["status"], c["key"]
        return h, [(int(c["id"][r]), c["object"][r], float(c["confidence"][r]), int(c["last"][r]), float(c["rate"][r]))
                   for r in rows if status[r] == Status.ACTIVE and keys[r] == key]

    def append_one(self, key_hash: int, **values: Any) -> int:
        """One new fact (a ``remember`` call), as :meth:`append` with scalars; returns its row."""
        self._grow(1, values["id"])
        row = self.n
        c = self.col
        for name, v in values.items():
            c[name][row] = v
        c["hash"][row], c["in_table"][row], c["dirty"][row] = key_hash, False, True
        self.row_of_id[values["id"]] = row
        self.n += 1
        if self.n - self.n_indexed > 1024:
            self._index_recent()
        if len(self.archive_guess):
            self._guess(np.array([row]))
        return row

    def rows_of(self, ids: np.ndarray | list[int]) -> np.ndarray:
        """Rows of facts the state holds (every active one does)."""
        rows = self.row_of_id[np.asarray(ids, np.int64)]
        if (rows < 0).any():
            raise StoreError(f"internal: facts {np.asarray(ids)[rows < 0][:5].tolist()} are not in the write-behind state")
        return rows

    # -- changing facts -------------------------------------------------------------------------

    def _grow(self, extra: int, max_id: int) -> None:
        cap = len(self.col["id"])
        if self.n + extra > cap:
            new_cap = max(2 * cap, self.n + extra)
            for name, values in self.col.items():
                grown = np.zeros(new_cap, values.dtype) if values.dtype != object else np.full(new_cap, None, object)
                grown[:self.n] = values[:self.n]
                if name in ("changed_at", "supersedes"):
                    grown[self.n:] = _NONE
                self.col[name] = grown
            if len(self.archive_guess):
                self.archive_guess = np.concatenate([self.archive_guess, np.full(new_cap - cap, np.inf)])
        if max_id >= len(self.row_of_id):
            grown_ids = np.full(max(2 * len(self.row_of_id), max_id + 1024), -1, np.int64)
            grown_ids[:len(self.row_of_id)] = self.row_of_id
            self.row_of_id = grown_ids

    def append(self, values: dict[str, np.ndarray]) -> np.ndarray:
        """New facts (every column but hash, in_table, dirty); returns their rows."""
        k = len(values["id"])
        self._grow(k, int(values["id"].max()) if k else 0)
        rows = np.arange(self.n, self.n + k)
        for name, v in values.items():
            self.col[name][rows] = v
        self.col["hash"][rows] = key_hashes(values["key"])
        self.col["in_table"][rows] = False
        self.col["dirty"][rows] = True
        self.row_of_id[values["id"]] = rows
        self.n += k
        if k > 1 or self.n - self.n_indexed > 1024:
            self._index_recent()
        if len(self.archive_guess):
            self._guess(rows)
        return rows

    def update(self, rows: np.ndarray, **values: Any) -> None:
        for name, v in values.items():
            self.col[name][rows] = v
        self.col["dirty"][rows] = True
        if len(self.archive_guess) and ("confidence" in values or "last" in values):
            self._guess(rows)

    def maybe_merge(self) -> None:
        """Sort the appended rows in (the facts no longer active are dropped unless a flush still
        has to write them)."""
        if self.n - self.n_sorted <= self.MERGE_AT:
            return
        c = self.col
        keep = np.flatnonzero((c["status"][:self.n] == Status.ACTIVE) | c["dirty"][:self.n])
        order = keep[np.lexsort((c["id"][keep], c["hash"][keep]))]
        for name in c:
            c[name][:len(order)] = c[name][order]
        if len(self.archive_guess):
            self.archive_guess[:len(order)] = self.archive_guess[order]
        self.row_of_id[:] = -1
        self.n = self.n_sorted = self.n_indexed = len(order)
        self.tail_hash, self.tail_row = np.empty(0, np.int64), np.empty(0, np.int64)
        self.row_of_id[c["id"][:self.n]] = np.arange(self.n)

    # -- consolidation ----------------------------------------------------------------------------

    def _guess(self, rows: np.ndarray) -> None:
        """A lower bound of when each fact's effective confidence falls below the threshold (seconds;
        -inf: already below, inf: never): consolidate checks exactly only the facts past it."""
        c = self.col
        conf, rate, last = c["confidence"][rows], c["rate"][rows], c["last"][rows]
        thr = self.archive_threshold
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            days = np.log(conf / thr) / rate
        guess = last + np.where(np.isfinite(days), days, np.inf) * 86400.0 * (1 - 1e-9) - 86400.0
        guess = np.where(conf < thr, -np.inf, guess)
        guess = np.where((rate <= 0) & ~(conf < thr), np.inf, guess)
        self.archive_guess[rows] = np.where(np.isnan(guess), -np.inf, guess)

    def due(self, at: int, threshold: float) -> np.ndarray:
        """Rows of the active facts whose effective confidence at ``at`` is below ``threshold`` — by
        the engine's expression, the one consolidate's SQL evaluates."""
        from factmem.engine.waves import _eff

        c = self.col
        if self.archive_threshold != threshold or len(self.archive_guess) < len(c["id"]):
            self.archive_threshold = threshold
            self.archive_guess = np.full(len(c["id"]), np.inf)
            self._guess(np.arange(self.n))
        cand = np.flatnonzero((self.archive_guess[:self.n] <= at) & (c["status"][:self.n] == Status.ACTIVE))
        below = _eff(c["confidence"][cand], c["rate"][cand], at, c["last"][cand]) < threshold
        return cand[below]

    # -- flushing ---------------------------------------------------------------------------------

    def pending(self) -> bool:
        return bool(self.calls)

    def flush(self, con: duckdb.DuckDBPyConnection, journal_applied: int | None) -> None:
        """Write the pending calls' effects set-based, inside a transaction the caller holds open:
        facts created inserted (as they now stand), facts touched updated, evidence appended, and (a
        file store) the last journal number written recorded in ``factmem_meta``."""
        c = self.col
        dirty = np.flatnonzero(c["dirty"][:self.n])
        new = dirty[~c["in_table"][dirty]]
        old = dirty[c["in_table"][dirty]]
        if len(new):
            new = new[np.argsort(c["id"][new], kind="stable")]
            status = c["status"][new]
            changed, sup = c["changed_at"][new], c["supersedes"][new]
            new_facts = pa.table({  # noqa: F841 - read by DuckDB (replacement scan)
                "id": pa.array(c["id"][new]),
                "subject": pa.array(c["subject"][new], pa.string()),
                "predicate": pa.array(c["predicate"][new], pa.string()),
                "object": pa.array(c["object"][new], pa.string()),
                "note": pa.array(c["note"][new], pa.string()),
                "kind": pa.array(np.asarray(KINDS, object)[c["kind"][new]], pa.string()),
                "confidence": pa.array(c["confidence"][new]),
                "reinforcement_count": pa.array(c["count"][new]),
                "first_seen": pa.array(c["first_seen"][new]),
                "last_reinforced": pa.array(c["last"][new]),
                "decay_rate": pa.array(c["rate"][new]),
                "status": pa.array(np.asarray(_STATUS_WORDS, object)[status], pa.string()),
                "supersedes_id": pa.array(sup, mask=sup == _NONE),
                "status_changed_at": pa.array(changed, mask=changed == _NONE),
                "status_reason": pa.array(np.asarray(_REASONS, object)[status], pa.string()),
            })
            con.execute("INSERT INTO memory_facts SELECT *, false FROM new_facts")
        if len(old):
            status = c["status"][old]
            changed = c["changed_at"][old]
            touched_facts = pa.table({  # noqa: F841 - read by DuckDB (replacement scan)
                "id": pa.array(c["id"][old]),
                "confidence": pa.array(c["confidence"][old]),
                "reinforcement_count": pa.array(c["count"][old]),
                "last_reinforced": pa.array(c["last"][old]),
                "status": pa.array(np.asarray(_STATUS_WORDS, object)[status], pa.string()),
                "status_changed_at": pa.array(changed, mask=changed == _NONE),
                "status_reason": pa.array(np.asarray(_REASONS, object)[status], pa.string()),
            })
            con.execute(
                "UPDATE memory_facts SET confidence = u.confidence, reinforcement_count = u.reinforcement_count, "
                "last_reinforced = u.last_reinforced, status = u.status, "
                "status_changed_at = coalesce(u.status_changed_at, memory_facts.status_changed_at), "
                "status_reason = coalesce(u.status_reason, memory_facts.status_reason) "
                "FROM touched_facts u WHERE memory_facts.id = u.id")
        chunks = [t.cast(_EVIDENCE_SCHEMA) if t.schema != _EVIDENCE_SCHEMA else t for t in self.evidence]
        if self.evidence_rows:
            rows = self.evidence_rows
            chunks.append(pa.table({
                "id": pa.array([e[0] for e in rows], pa.int64()),
                "fact_id": pa.array([e[1] for e in rows], pa.int64()),
                "session_id": pa.array([e[2] for e in rows], pa.string()),
                "message_id": pa.array([e[3] for e in rows], pa.string()),
                "observed_at": pa.array([e[4] for e in rows], pa.int64()),
                "action": pa.array([e[5] for e in rows], pa.string()),
                "confidence": pa.array([e[6] for e in rows], pa.float64()),
                "source": pa.array([e[7] for e in rows], pa.string()),
            }, schema=_EVIDENCE_SCHEMA))
        if chunks:
            new_evidence = pa.concat_tables(chunks)  # noqa: F841 - read by DuckDB (replacement scan)
            con.execute("INSERT INTO memory_evidence SELECT * FROM new_evidence ORDER BY id")
        if journal_applied is not None:
            con.execute("INSERT OR REPLACE INTO factmem_meta VALUES ('journal_applied', ?)", [str(journal_applied)])

    def settled(self) -> None:
        """After a committed flush: what was pending is in the table."""
        c = self.col
        c["in_table"][:self.n] |= c["dirty"][:self.n]
        c["dirty"][:self.n] = False
        self.evidence, self.evidence_rows, self.calls = [], [], 0
        self.maybe_merge()

    def pending_rows(self) -> int:
        return sum(len(t) for t in self.evidence) + len(self.evidence_rows)


# -- the journal ------------------------------------------------------------------------------------


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
