"""The in-process state of a store written behind (see :mod:`factmem.store.writebehind`): every
active fact's key, object, confidence, count, last reinforcement and decay rate in numpy columns, plus
every fact the calls since touched or created, and the evidence rows they added.

A fact's rows are found from the hash of its (subject, predicate) —
:func:`~factmem.store.keyhash.key_hashes` (a polynomial over the UTF-8 bytes of the length-prefixed
key :func:`~factmem.store.calls.state_key` modulo 2**64, then SplitMix64's finalizer — the same in
every process, computed from an Arrow array's buffers or from a Python string alike) — through
:class:`~factmem.store.hashchains.HashChains`: per hash, its rows in id order (a row is added to
its hash's chain when the fact is created, O(1)). Rows no longer active stay until ``MERGE_AT``
rows have been appended since the state was last compacted; a flush then drops them and chains the
rest again. A fact's row is found from its id through a dense id → row array (so a store's ids must
be dense enough: :meth:`ActiveState.dense_enough`). Every candidate found by hash is checked against
its key string, so a hash collision cannot mix two keys.

**Opening makes no Python object per fact, and moves no row.** The state is built from the Arrow
columns DuckDB returns, in the table's order: the hashes put together from the subject and
predicate dictionaries (:func:`~factmem.store.keyhash.pair_hashes`: each distinct subject and
predicate hashed once from its buffers), the numbers copied into numpy as they come, the text
columns (key, object) kept as the Arrow arrays read (:class:`~factmem.store.texts.Texts`: a call
reads its few rows from them, spelled then); the chains are built only when first needed — a
batch's lookup, or the single call after ``SCANS_BEFORE_INDEX`` calls that scanned the hashes instead
— so a process that opens a store for one call never builds them. At a million active facts, warm,
the query costs ~0.07 s of CPU, the hashes ~0.06, the chains ~0.13; making a million key and object
strings and hashing them took 0.77–0.96 s two rounds ago.

``consolidate`` keeps, per row, a lower bound of the time its effective confidence falls below the
archive threshold, and tests exactly — with the engine's expression, the one consolidate's SQL
evaluates — only the facts past it. ``flush`` writes what is pending set-based: facts created
(as they now stand), facts touched, evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from factmem.core.codes import NO_TIME, SECONDS_PER_DAY, Status
from factmem.core.decay import days_to_threshold
from factmem.engine.waves import effective_at
from factmem.errors import StoreError
from factmem.store.calls import state_key
from factmem.store.hashchains import HashChains
from factmem.store.keyhash import key_hashes, pair_hashes, state_keys
from factmem.store.schema import KIND_LABELS, REASON_LABELS, STATUS_LABELS, text_column
from factmem.store.texts import KeyTexts, Texts

__all__ = ["ActiveState", "PendingWrite", "key_hashes", "state_keys"]


def _id_order(ids: np.ndarray) -> np.ndarray | None:
    """The order that sorts these distinct ids, or None when they are ascending already (the table's
    order, and a state's rows, are the ids' whenever the store wrote them)."""
    return None if bool((ids[1:] > ids[:-1]).all()) else np.argsort(ids, kind="stable")


def _copy_chunks(into: np.ndarray, column: pa.ChunkedArray) -> None:
    """A numeric column's chunks copied into the start of ``into`` (no concatenated copy between)."""
    at = 0
    for chunk in column.chunks:
        into[at:at + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
        at += len(chunk)


# numpy columns of the state: name -> dtype (object: Python strings or None; _TEXTS: Texts columns)
_COLUMNS: dict[str, Any] = {
    "id": np.int64, "hash": np.int64, "key": object, "object": object, "confidence": np.float64,
    "count": np.int64, "last": np.int64, "rate": np.float64, "status": np.int8, "changed_at": np.int64,
    "in_table": bool, "dirty": bool,
    "chunked": bool,  # created by a batch whose rows wait in ``new_chunks`` (as created) for the flush
    # needed only to insert a fact a call created (None / 0 for the rows read from the table)
    "subject": object, "predicate": object, "note": object, "kind": np.int8, "first_seen": np.int64,
    "supersedes": np.int64,
}
_TEXTS = ("key", "object")  # read from the table for every active fact: Arrow-backed (Texts)
_NONE = NO_TIME  # a NULL changed_at / supersedes_id (the engine's NO_TIME and NO_REF alike)
_FACTS_SCHEMA = pa.schema([
    ("id", pa.int64()), ("subject", pa.string()), ("predicate", pa.string()), ("object", pa.string()),
    ("note", pa.string()), ("kind", pa.string()), ("confidence", pa.float64()), ("reinforcement_count", pa.int64()),
    ("first_seen", pa.int64()), ("last_reinforced", pa.int64()), ("decay_rate", pa.float64()),
    ("status", pa.string()), ("supersedes_id", pa.int64()), ("status_changed_at", pa.int64()),
    ("status_reason", pa.string())])
_EVIDENCE_SCHEMA = pa.schema([("id", pa.int64()), ("fact_id", pa.int64()), ("session_id", pa.string()),
                              ("message_id", pa.string()), ("observed_at", pa.int64()), ("action", pa.string()),
                              ("confidence", pa.float64()), ("source", pa.string())])


def _one_table(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Pending rows as one table in one chunk a column, for one INSERT: the batches' tables keep
    their dictionary-encoded text columns when they all agree (else every table is cast to
    ``schema``'s plain strings). Measured on a flush of 96 days' evidence (262K rows) into a file
    store: 0.15 s of CPU, against 0.22 s for 96 chunks cast to strings."""
    if any(t.schema != tables[0].schema for t in tables[1:]):
        tables = [t.cast(schema) if t.schema != schema else t for t in tables]
    return pa.concat_tables(tables).combine_chunks()


@dataclass
class PendingWrite:
    """The rows one flush writes (:meth:`ActiveState.take_pending`), and :meth:`write` to write them
    inside a transaction the caller holds open."""

    new_facts: pa.Table | None
    touched_facts: pa.Table | None
    evidence: pa.Table | None
    journal_applied: int | None  # the last journal number these rows hold (a file store), else None

    def write(self, con: duckdb.DuckDBPyConnection) -> None:
        """Facts created inserted, facts touched updated, evidence appended, and the journal number
        recorded in ``factmem_meta``."""
        # read by DuckDB by these names (replacement scans)
        new_facts, touched_facts, new_evidence = self.new_facts, self.touched_facts, self.evidence
        if new_facts is not None:
            # in id order: the store reads facts in storage order and relies on it being id order (the
            # batches' rows come in it already, unless single calls' rows follow them: then DuckDB sorts)
            ids = new_facts.column("id").to_numpy()
            ordered = bool((ids[1:] > ids[:-1]).all())
            con.execute("INSERT INTO memory_facts SELECT *, false FROM new_facts" + ("" if ordered else " ORDER BY id"))
        if touched_facts is not None:
            con.execute(
                "UPDATE memory_facts SET confidence = u.confidence, reinforcement_count = u.reinforcement_count, "
                "last_reinforced = u.last_reinforced, status = u.status, "
                "status_changed_at = coalesce(u.status_changed_at, memory_facts.status_changed_at), "
                "status_reason = coalesce(u.status_reason, memory_facts.status_reason) "
                "FROM touched_facts u WHERE memory_facts.id = u.id")
        if new_evidence is not None:
            con.execute("INSERT INTO memory_evidence SELECT * FROM new_evidence")
        if self.journal_applied is not None:
            con.execute("INSERT OR REPLACE INTO factmem_meta VALUES ('journal_applied', ?)", [str(self.journal_applied)])


class ActiveState:
    """The store's active facts in numpy columns, plus every fact the calls since touched or created
    (see the module docstring), found by key hash through :class:`HashChains` (``chains``: None until
    first needed). A flush that has let ``MERGE_AT`` rows be appended since the state was last
    compacted drops the rows no longer active and chains the rest again."""

    #: compact the state (drop the rows no longer active) once this many rows were appended since
    MERGE_AT = 65_536
    #: a state read from the table chains its rows at first need: the first single calls find their
    #: key by a scan of the hashes instead (~0.5 ms at a million rows, against ~0.13 s for the
    #: chains), so a process that opens a store for a call or two never builds them, and one that
    #: makes many pays at most this many scans more
    SCANS_BEFORE_INDEX = 32

    def __init__(self, columns: dict[str, Any], n: int, next_fact_id: int):  # numpy arrays and Texts
        self.col: dict[str, Any] = columns
        self.n = n
        self.n_compacted = n  # the rows when the state was read or last compacted
        self.chains: HashChains | None = None  # every row [0, n) by key hash (built at first need: :meth:`_chains`)
        self.scans_left = self.SCANS_BEFORE_INDEX
        self.row_of_id = np.full(max(next_fact_id, 1) + 1024, -1, np.int64)
        self.row_of_id[columns["id"][:n]] = np.arange(n)
        self.evidence: list[pa.Table] = []  # rows of memory_evidence since the last flush
        self.new_chunks: list[pa.Table] = []  # rows of memory_facts batches created, as they created them
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
        # Arrow columns, hashed from their buffers: no Python object per fact (opening a store of a
        # million facts for one call must not wait for a million strings)
        con.complete()  # a result an earlier execute() left unread would refuse con.sql (whose Arrow is not copied)
        got = con.sql(
            "SELECT id, subject, predicate, object, confidence, reinforcement_count, last_reinforced, decay_rate "
            "FROM memory_facts WHERE status = 'active'").to_arrow_table()
        subjects, predicates = got.column("subject"), got.column("predicate")  # (chunked: never copied whole)
        hashes = pair_hashes(subjects, predicates)
        n = got.num_rows
        if not cls.dense_enough(next_fact_id, n):
            return None
        cap = max(1024, n + n // 4)
        # (np.zeros: pages the calls never write are never touched; the text columns only a created fact
        # needs — subject, predicate, note — hold their None for the table's rows in a column of nulls)
        columns: dict[str, Any] = {
            name: np.zeros(cap, dtype) if dtype is not object else Texts(pa.nulls(n, pa.string()), cap)
            for name, dtype in _COLUMNS.items() if name not in _TEXTS}
        # the rows stay in the table's order (no column gathered): the hash order is an index beside them
        columns["key"] = KeyTexts(subjects, predicates, cap)  # (spelled lazily: a call reads a few rows)
        columns["object"] = Texts(got.column("object"), cap)
        columns["hash"][:n] = hashes
        for name, values in (("id", got.column("id")), ("confidence", got.column("confidence")), ("count", got.column("reinforcement_count")),
                             ("last", got.column("last_reinforced")), ("rate", got.column("decay_rate"))):
            _copy_chunks(columns[name], values)
        columns["in_table"][:n] = True
        columns["changed_at"][:] = _NONE
        columns["supersedes"][:] = _NONE
        return cls(columns, n, next_fact_id)  # (the index sorted at first need)

    # -- finding facts --------------------------------------------------------------------------

    def _chains(self) -> HashChains:
        """The chains of rows ``[0, n)``, built now if not yet — each hash's rows in id order (the
        table's order is the ids' when the store wrote it; a file written otherwise is sorted here)."""
        if self.chains is None:
            c = self.col
            by_id = _id_order(c["id"][:self.n])
            hashes = c["hash"][:self.n]
            self.chains = HashChains.of(hashes if by_id is None else hashes[by_id], by_id)
        return self.chains

    def lookup(self, keys: pa.Array, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Active facts of the :func:`~factmem.store.calls.state_key` strings ``keys`` (:func:`state_keys`;
        ``hashes``: their :func:`key_hashes`): (index into keys, row), in row order within a key (what the
        batch kernel's state join returned, as rows)."""
        if not len(keys):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        query, rows = self._chains().find(hashes)
        active = self.col["status"][rows] == Status.ACTIVE
        query, rows = query[active], rows[active]
        keep = self.col["key"].equal(rows, keys, query)  # the key itself: hashes may collide
        return query[keep], rows[keep]

    def active_of(self, subject: str, predicate: str) -> tuple[int, list[tuple]]:
        """The key's hash, and (id, object, confidence, last_reinforced, decay_rate) of each of its
        active facts: :meth:`lookup` for one key, with scalar searches (a ``remember`` call)."""
        key = state_key(subject, predicate)
        h = int(key_hashes([key])[0])
        c = self.col
        if self.chains is None and self.scans_left > 0:  # not chained yet: a scan (SCANS_BEFORE_INDEX)
            self.scans_left -= 1
            found = np.flatnonzero(c["hash"][:self.n] == h)
            # in id order, as the chains give them (the table's row order need not be the ids')
            rows = found[np.argsort(c["id"][found], kind="stable")].tolist()
        else:
            rows = self._chains().rows_of(h)
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
        if self.chains is not None:
            self.chains.add(np.array([row], np.int64), np.array([key_hash], np.int64))  # (one row: no compiled code)
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
                if isinstance(values, Texts):
                    values.grown(new_cap)
                    continue
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

    def append(self, values: dict[str, np.ndarray], chunk: pa.Table, hashes: np.ndarray) -> np.ndarray:
        """New facts a batch created (the columns lookups and changes use; ``chunk``: their rows of
        ``memory_facts`` as created, written as they are at the flush; ``hashes``: their keys'
        :func:`key_hashes`); returns their rows."""
        k = len(values["id"])
        self._grow(k, int(values["id"].max()) if k else 0)
        rows = np.arange(self.n, self.n + k)
        for name, v in values.items():
            self.col[name][rows] = v
        self.col["hash"][rows] = hashes
        self.col["in_table"][rows] = False
        self.col["dirty"][rows] = False  # until a later call changes them
        self.col["chunked"][rows] = True
        self.new_chunks.append(chunk)
        self.row_of_id[values["id"]] = rows
        self.n += k
        if self.chains is not None:
            self.chains.add(rows, hashes)
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
        """Compact the state once ``MERGE_AT`` rows were appended since it was read or last compacted:
        the facts no longer active are dropped (unless a flush still has to write them), the rest
        kept in id order and chained again."""
        if self.n - self.n_compacted <= self.MERGE_AT:
            return
        c = self.col
        keep = np.flatnonzero((c["status"][:self.n] == Status.ACTIVE) | c["dirty"][:self.n])
        by_id = _id_order(c["id"][keep])
        order = keep if by_id is None else keep[by_id]
        for name in c:
            if isinstance(c[name], Texts):
                c[name] = c[name].reordered(order, self.n)
            else:
                c[name][:len(order)] = c[name][order]
        if len(self.archive_guess):
            self.archive_guess[:len(order)] = self.archive_guess[order]
        self.row_of_id[:] = -1
        self.n = self.n_compacted = len(order)
        self.row_of_id[c["id"][:self.n]] = np.arange(self.n)
        if self.chains is not None:  # the rows are in id order now
            self.chains = HashChains.of(c["hash"][:self.n])

    # -- consolidation ----------------------------------------------------------------------------

    def _guess(self, rows: np.ndarray) -> None:
        """A lower bound of when each fact's effective confidence falls below the threshold (seconds;
        -inf: already below, inf: never): consolidate checks exactly only the facts past it."""
        c = self.col
        conf, rate, last = c["confidence"][rows], c["rate"][rows], c["last"][rows]
        thr = self.archive_threshold
        # a day early, and a relative margin: rounding cannot put the exact crossing before the guess
        guess = last + days_to_threshold(conf, rate, thr) * (SECONDS_PER_DAY * (1 - 1e-9)) - SECONDS_PER_DAY
        guess = np.where(conf < thr, -np.inf, guess)  # below already, even before last_reinforced
        self.archive_guess[rows] = np.where(np.isnan(guess), -np.inf, guess)

    def due(self, at: int, threshold: float) -> np.ndarray:
        """Rows of the active facts whose effective confidence at ``at`` is below ``threshold`` — by
        the engine's expression, the one consolidate's SQL evaluates."""
        c = self.col
        if self.archive_threshold != threshold or len(self.archive_guess) < len(c["id"]):
            self.archive_threshold = threshold
            self.archive_guess = np.full(len(c["id"]), np.inf)
            self._guess(np.arange(self.n))
        cand = np.flatnonzero((self.archive_guess[:self.n] <= at) & (c["status"][:self.n] == Status.ACTIVE))
        below = effective_at(c["confidence"][cand], c["rate"][cand], at, c["last"][cand]) < threshold
        return cand[below]

    # -- flushing ---------------------------------------------------------------------------------

    def take_pending(self, journal_applied: int | None) -> PendingWrite:
        """What the pending calls wrote, as the tables a flush writes — facts created (as they now
        stand), facts touched, evidence; and (a file store) the last journal number they hold — after
        which the state counts them as written (:meth:`settled`). The tables are copies: calls made
        while they are being written change the state, not them."""
        c = self.col
        dirty, chunked, in_table = c["dirty"][:self.n], c["chunked"][:self.n], c["in_table"][:self.n]
        new = np.flatnonzero(dirty & ~in_table & ~chunked)  # created by single calls: written from the columns
        old = np.flatnonzero(dirty & (in_table | chunked))  # changed since the table (or its batch) had them
        tables = list(self.new_chunks)
        if len(new):
            sup = c["supersedes"][new]
            made = pa.table({
                "id": pa.array(c["id"][new]),
                "subject": pa.array(c["subject"][new], pa.string()),
                "predicate": pa.array(c["predicate"][new], pa.string()),
                "object": c["object"].arrow(new),
                "note": pa.array(c["note"][new], pa.string()),
                "kind": text_column(c["kind"][new], KIND_LABELS),
                "first_seen": pa.array(c["first_seen"][new]),
                "decay_rate": pa.array(c["rate"][new]),
                "supersedes_id": pa.array(sup, mask=sup == _NONE),
                **self._changing_columns(new),
            })
            tables.append(made.select(_FACTS_SCHEMA.names).cast(_FACTS_SCHEMA))  # the table's column order
        self._close_evidence_rows()
        pending = PendingWrite(
            new_facts=_one_table(tables, _FACTS_SCHEMA) if tables else None,
            touched_facts=pa.table({"id": pa.array(c["id"][old]), **self._changing_columns(old)}) if len(old) else None,
            evidence=_one_table(self.evidence, _EVIDENCE_SCHEMA) if self.evidence else None,  # in id order already
            journal_applied=journal_applied)
        self.settled()
        return pending

    def _changing_columns(self, rows: np.ndarray) -> dict[str, pa.Array]:
        """The columns calls change, of these rows, spelled as ``memory_facts`` stores them."""
        c = self.col
        status, changed = c["status"][rows], c["changed_at"][rows]
        return {
            "confidence": pa.array(c["confidence"][rows]),
            "reinforcement_count": pa.array(c["count"][rows]),
            "last_reinforced": pa.array(c["last"][rows]),
            "status": text_column(status, STATUS_LABELS),
            "status_changed_at": pa.array(changed, mask=changed == _NONE),
            "status_reason": text_column(status - 1, REASON_LABELS, null=status == Status.ACTIVE),
        }

    def add_evidence(self, rows: pa.Table) -> None:
        """A batch's evidence rows (after those of the single calls before it: the table's order)."""
        self._close_evidence_rows()
        self.evidence.append(rows)

    def _close_evidence_rows(self) -> None:
        """The single calls' evidence rows so far, as one table in ``evidence``."""
        rows = self.evidence_rows
        if not rows:
            return
        self.evidence.append(pa.table({
            "id": pa.array([e[0] for e in rows], pa.int64()),
            "fact_id": pa.array([e[1] for e in rows], pa.int64()),
            "session_id": pa.array([e[2] for e in rows], pa.string()),
            "message_id": pa.array([e[3] for e in rows], pa.string()),
            "observed_at": pa.array([e[4] for e in rows], pa.int64()),
            "action": pa.array([e[5] for e in rows], pa.string()),
            "confidence": pa.array([e[6] for e in rows], pa.float64()),
            "source": pa.array([e[7] for e in rows], pa.string()),
        }, schema=_EVIDENCE_SCHEMA))
        self.evidence_rows = []

    def settled(self) -> None:
        """After a committed flush: what was pending is in the table."""
        c = self.col
        c["in_table"][:self.n] |= c["dirty"][:self.n] | c["chunked"][:self.n]
        c["dirty"][:self.n] = False
        c["chunked"][:self.n] = False
        self.evidence, self.evidence_rows, self.new_chunks, self.calls = [], [], [], 0
        self.maybe_merge()

    def pending_rows(self) -> int:
        return sum(len(t) for t in self.evidence) + len(self.evidence_rows)
