"""The state a FactStore's parts share, declared once: the connection, the parameters, the id
counters, the lock, and the transaction every write runs in.

**Threads.** A FactStore may be shared by threads: every call holds the store's re-entrant lock, so
calls run one at a time (a write never interleaves with another write or a read), and
``with store.transaction():`` keeps the lock — other threads wait — until the transaction ends.
The connection itself (``store.db``, ``store.con``) is not guarded: used directly, it is the
caller's business (each access first waits for a flush in progress and writes the calls still held
behind, and makes the next call rebuild its in-process state: see :mod:`factmem.store.writebehind`).
The one thread a store starts itself writes such a flush, holding the connection alone while the
next calls are decided in process; whatever next uses the connection waits for it. For parallel
work, open one store per thread on different files, or read-only stores in other processes.

:class:`~factmem.store.factstore.FactStore` is assembled from parts that each keep to one concern —
:class:`~factmem.store.writes.BatchWrites` (set-based ``ingest`` and ``replay``),
:class:`~factmem.store.writebehind.WriteBehind` (calls held behind: state, journal, flush) and
:class:`~factmem.store.reads.Reads` (queries) — and every part derives from :class:`StoreBase`, so
what each uses is declared here, visible to readers and to type checkers. ``Evidence`` and
``ConsolidateResult``, which several parts build, live here too.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import duckdb
import pandas as pd

from factmem.core.params import MemoryParams
from factmem.errors import StoreError
from factmem.store.keyindex import KeyIndex

if TYPE_CHECKING:
    from factmem.store.active import ActiveState
    from factmem.store.journal import Journal

__all__ = ["StoreBase", "Evidence", "ConsolidateResult"]


@dataclass(frozen=True)
class Evidence:
    """Where a fact was observed: the session and message it came from."""

    session_id: str | None = None
    message_id: str | None = None
    source: str = "observation"


class ConsolidateResult(NamedTuple):
    archived: int
    pruned: int


class StoreBase:
    """Declarations and shared helpers of a fact store (see the module docstring)."""

    path: Path | None
    real_path: Path | None  # os.path.realpath of path, resolved at opening: the file the store writes
    read_only: bool
    recovered_calls: int
    _con: duckdb.DuckDBPyConnection | None
    # write-behind (factmem.store.writebehind)
    write_behind: bool
    _active: ActiveState | None
    _flushing: Any  # the flush being written, or not written yet (factmem.store.writebehind._Flush)
    _journal: Journal | None
    _journal_seq: int
    _replaying: int | None  # the journal entry being re-applied at opening
    _sparse_ids: bool
    _params: MemoryParams
    _next_fact_id: int
    _next_evidence_id: int
    _has_links: bool
    _tx_depth: int
    _lock: threading.RLock
    _keys: KeyIndex

    @property
    def db(self) -> duckdb.DuckDBPyConnection:
        """The open connection, for the caller's own SQL (a closed store raises :class:`StoreError`).
        Every ``remember`` call made so far is in the tables; what the caller writes through it is
        seen by the next call."""
        con = self._db
        self._active = None  # the caller may write: remember() rebuilds its state from the table
        return con

    @property
    def con(self) -> duckdb.DuckDBPyConnection | None:
        """The open connection (None once closed), as :attr:`db`."""
        return None if self._con is None else self.db

    @property
    def _db(self) -> duckdb.DuckDBPyConnection:
        """The connection for the store's own statements: the calls written behind are flushed first."""
        if self._con is None:
            raise StoreError("the store is closed")
        if self._flushing is not None or (self._active is not None and self._active.calls):
            self._flush()  # (and waits for a flush in progress)
        return self._con

    # write-behind (factmem.store.writebehind): defined by FactStore, declared here for the parts
    def _flush(self) -> None:
        raise NotImplementedError

    def _behind_state(self) -> ActiveState | None:
        raise NotImplementedError

    def _journaled(self, op: str, args: tuple, batch: Any = None) -> None:
        raise NotImplementedError

    def _called(self, state: ActiveState) -> None:
        raise NotImplementedError

    def _ingest_behind(self, state: ActiveState, batch: Any) -> Any:
        raise NotImplementedError  # defined by BatchWrites

    def _read(self, sql: str, params: Any = None) -> pd.DataFrame:
        with self._lock:
            return self._db.execute(sql, params or []).df()

    def _scalar(self, sql: str, params: Any = None) -> Any:
        """The single value a one-row, one-column query returns."""
        with self._lock:
            row = self._db.execute(sql, params or []).fetchone()
        assert row is not None, sql  # aggregate queries always return a row
        return row[0]

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO factmem_meta VALUES (?, ?)", [key, value])

    def _refresh_counters(self) -> None:
        self._next_fact_id = int(self._scalar("SELECT coalesce(max(id), 0) + 1 FROM memory_facts"))
        self._next_evidence_id = int(self._scalar("SELECT coalesce(max(id), 0) + 1 FROM memory_evidence"))
        self._has_links = bool(self._scalar("SELECT count(*) FROM memory_fact_links"))

    def _writable(self) -> None:
        if self._con is None:
            raise StoreError("the store is closed")
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only")

    def _transaction(self) -> _Transaction:
        return _Transaction(self)

    def _mark_stale_parents_of(self, child_ids: Sequence[int] | str) -> None:
        """Mark active derived parents of these children stale (ids, or a SQL subquery of ids)."""
        if not self._has_links:
            return
        if isinstance(child_ids, str):
            sub = child_ids
            args: list = []
        else:
            if not len(child_ids):
                return
            sub = "SELECT unnest(?::BIGINT[])"
            args = [list(map(int, child_ids))]
        self._db.execute(
            "UPDATE memory_facts SET stale = true WHERE status = 'active' AND kind = 'derived' AND id IN "
            f"(SELECT parent_id FROM memory_fact_links WHERE child_id IN ({sub}))", args)

    def consolidate(self, at: Any = None, prune: bool = True) -> ConsolidateResult:
        raise NotImplementedError  # defined by FactStore; declared here for the parts that call it

    def close(self) -> None:
        raise NotImplementedError  # defined by FactStore; declared here for the parts that call it


class _Transaction:
    """BEGIN … COMMIT around a write, holding the store's lock throughout; on any error ROLLBACK,
    re-read the id counters and drop the remember() key map (it may name rolled-back ids)."""

    def __init__(self, store: StoreBase):
        self.store = store

    def __enter__(self) -> _Transaction:
        self.store._lock.acquire()  # other threads wait until the outermost transaction ends
        try:
            # Re-entrant: an outer transaction (e.g. one abstraction cluster) contains inner writes.
            if self.store._tx_depth == 0:
                self.store._db.begin()  # (flushes the calls written behind first)
                self.store._active = None  # this write changes what remember()'s state would say
            self.store._tx_depth += 1
        except BaseException:
            self.store._lock.release()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        store = self.store
        try:
            store._tx_depth -= 1
            if store._tx_depth > 0:
                return False
            con = store._db
            if exc_type is None:
                try:
                    con.commit()
                except BaseException:  # a failed commit (disk full) leaves nothing: forget what we counted
                    try:
                        con.rollback()
                    except duckdb.Error:
                        pass  # DuckDB already rolled it back
                    store._keys.reset()
                    store._refresh_counters()
                    raise
                return False
            try:
                con.rollback()
            finally:
                store._keys.reset()
                store._refresh_counters()
            return False
        finally:
            store._lock.release()
