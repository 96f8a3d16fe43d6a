"""FactStore: the seed's fact memory on DuckDB.

>>> store = FactStore()
>>> fid = store.remember("ada", "prefers", "rust", kind="user_preference", at=0)
>>> store.remember("ada", "prefers", "rust", kind="user_preference", at=86400) == fid
True
>>> round(store.get(fid).confidence, 2)
0.65
>>> store.remember("ada", "prefers", "zig", kind="user_preference", at=2 * 86400)  # supersedes
2
>>> list(store.history("ada", "prefers")["status"])
['superseded', 'active']
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from factmem import __version__
from factmem.core.params import MemoryParams
from factmem.core.timeutil import resolve_at
from factmem.errors import InputError, ParamsError, SchemaVersionError, StoreError, StoreLockedError
from factmem.store.base import ConsolidateResult, Evidence
from factmem.store.calls import MAX_COUNT, check_count, check_remember
from factmem.store.context import ContextReads
from factmem.store.examined import ExaminedRecords, migrate_examined
from factmem.store.journal import Journal, adopt_other_names, journal_path
from factmem.store.keyindex import KeyIndex
from factmem.store.locking import Claim, claim, other_process_message
from factmem.store.reads import Fact, Reads  # noqa: F401 - part of the API
from factmem.store.schema import DDL, SCHEMA_VERSION, effective_sql
from factmem.store.writebehind import WriteBehind, forget_unclosed, remember_outcome
from factmem.store.writes import BatchWrites, IngestResult, ReplayResult  # noqa: F401 - part of the API

__all__ = ["Evidence", "ConsolidateResult", "FactStore", "DUCKDB_CONFIG", "FILE_WRITE_CONFIG"]

#: DuckDB settings of every store connection: never fetch or load an extension behind the user's back
#: (DuckDB would try to download one to read a SQLite file handed to it by mistake).
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False, "autoload_known_extensions": False}
#: Settings of a file store opened for writing. DuckDB checkpoints (rewrites the changed row groups of
#: every table, compressed) whenever its write-ahead log passes ``checkpoint_threshold``: at its default
#: 16 MiB an incremental store (an ingest and a consolidation a day) checkpointed every few weeks of
#: data, and those checkpoints were a third of the time of a year of days. The log is written and
#: synced at every commit either way, so durability is unchanged; closing the store checkpoints, and a
#: store that was not closed replays a longer log when it is next opened.
FILE_WRITE_CONFIG: dict[str, str | bool | int | float | list[str]] = {"checkpoint_threshold": "256MiB"}
_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"  # at offset 8 of every DuckDB database file


class FactStore(BatchWrites, WriteBehind, Reads, ContextReads, ExaminedRecords):
    """A fact memory in DuckDB: in memory (``FactStore()``) or in a file that persists and reopens.

    ``params`` default to those saved in the file (or the seed's for a new store); passing params
    to an existing file replaces the saved ones. ``write_behind=False`` writes every ``remember``,
    ``ingest`` and ``consolidate`` directly, in its own transaction, instead of journaling it and
    writing it set-based with the calls around it (see :mod:`factmem.store.writebehind`).

    One process may hold a file open for writing once (whatever the name: hard links and symlinks
    are recognised); another process gets :class:`~factmem.errors.StoreLockedError` — DuckDB lets
    one process write a file, or several read it, never both. A store may be shared by threads:
    calls run one at a time under the store's lock (see :mod:`factmem.store.base`). Times are Unix
    seconds in years 0001–9999 (negative before 1970).
    """

    def __init__(self, path: str | os.PathLike | None = None, params: MemoryParams | None = None, *,
                 read_only: bool = False, write_behind: bool = True):
        self.path = None if path is None or str(path) == ":memory:" else Path(path)
        # the file itself, resolved once and held: symlinks, a relative name and a later os.chdir
        # cannot make the journal, the lock or the connection name another file
        self.real_path = None if self.path is None else Path(os.path.realpath(self.path))
        self.read_only = read_only
        self.write_behind = bool(write_behind)
        self._claim: Claim | None = None
        self.recovered_calls = 0  # calls of a journal left by a store not closed, applied at this opening
        self._tx_depth = 0
        self._lock = threading.RLock()
        self._keys = KeyIndex()
        self._active = None
        self._flushing = None
        self._journal = Journal(journal_path(self.real_path)) if self.real_path is not None and not read_only \
            else None
        self._journal_seq = 0
        self._replaying = None
        self._sparse_ids = False
        self._con = None
        if self.path is not None and self.real_path is not None:
            _check_file(self.path, read_only)
            self._claim = claim(self.real_path, "read" if read_only else "write")
            if self.real_path.exists():
                try:
                    adopt_other_names(self.real_path, read_only=read_only)  # what a hard link's name left
                except BaseException:
                    self._release()
                    raise
        try:
            self._con = self._connect()
            if self._claim is not None:
                self._claim.bind()  # the file exists now: register its identity too
            self._init_schema(params)
        except BaseException:
            if self._con is not None:
                self._con.close()
                self._con = None
            self._release()
            raise

    # -- opening ---------------------------------------------------------------------------------

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self.path is None:
            return _quiet(duckdb.connect(":memory:", config=DUCKDB_CONFIG))
        try:
            config = DUCKDB_CONFIG if self.read_only else {**DUCKDB_CONFIG, **FILE_WRITE_CONFIG}
            return _quiet(duckdb.connect(str(self.real_path), read_only=self.read_only, config=config))
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                raise StoreLockedError(other_process_message(self.path, msg, self.read_only)) from None
            if "not a valid DuckDB database file" in msg:
                raise StoreError(f"{self.path}: not a DuckDB database file (damaged, or another format)") from None
            raise StoreError(f"{self.path}: cannot open: {msg.splitlines()[0]}") from None
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: not a DuckDB file factmem can open: {str(exc).splitlines()[0]}") from None

    def _init_schema(self, params: MemoryParams | None) -> None:
        tables: set[str] = set()
        if self.path is not None:
            tables = {r[0] for r in self._db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        if "factmem_meta" in tables:
            meta = dict(self._db.execute("SELECT key, value FROM factmem_meta").fetchall())
            raw_version = meta.get("schema_version", "0")
            try:
                version = int(raw_version)
            except ValueError:
                raise SchemaVersionError(f"{self.path}: unknown schema version {raw_version!r} in factmem_meta "
                                         f"(this factmem reads schema {SCHEMA_VERSION})") from None
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path}: written by factmem schema {version} (factmem {meta.get('factmem_version', '?')}); "
                    f"this factmem {__version__} reads schema {SCHEMA_VERSION}. Upgrade factmem to open it."
                )
            if version < 1:
                raise SchemaVersionError(f"{self.path}: unknown schema version {meta.get('schema_version')!r}")
            if version == 1:  # schema 2 records every examined cluster, not only empty answers
                if self.read_only:
                    self._use_legacy_examined(tables)
                else:
                    self._db.begin()
                    migrate_examined(self._db, tables)
                    self._db.commit()
            try:
                saved = MemoryParams.from_json(meta["params"]) if "params" in meta else MemoryParams()
            except ParamsError as exc:
                raise StoreError(f"{self.path}: the parameters saved in factmem_meta are invalid: {exc}") from None
            self._refresh_counters()
            self._params = saved  # the journal's calls were decided under the saved parameters
            self._journal_seq = int(meta.get("journal_applied", "0"))
            self._apply_journal(meta.get("store_id"), meta.get("journal_id"))
            self._params = params if params is not None else saved
            if params is not None and params != saved and not self.read_only:
                self._set_meta("params", params.to_json(indent=None))
        elif tables & {"memory_facts", "memory_evidence", "memory_fact_links"}:
            raise StoreError(f"{self.path}: has memory tables but no factmem metadata; "
                             "use `factmem import-db` to read a production memory")
        else:
            if self.read_only:
                raise StoreError(f"{self.path}: not a factmem store (empty database)")
            self._params = params if params is not None else MemoryParams()
            self._db.begin()
            self._db.execute(DDL)
            self._db.execute("INSERT INTO factmem_meta VALUES (?, ?), (?, ?), (?, ?)", [
                "schema_version", str(SCHEMA_VERSION), "factmem_version", __version__,
                "params", self._params.to_json(indent=None)])
            if self.path is not None:  # the journal's name for the file, made now: not by the first call written behind
                self._db.execute("INSERT INTO factmem_meta VALUES ('store_id', ?)", [uuid.uuid4().hex])
            self._db.commit()
            self._next_fact_id, self._next_evidence_id, self._has_links = 1, 1, False

    @property
    def params(self) -> MemoryParams:
        return self._params

    @params.setter
    def params(self, value: MemoryParams) -> None:
        if not isinstance(value, MemoryParams):
            raise InputError(f"params must be MemoryParams, got {type(value).__name__}")
        with self._lock:
            self._params = value
            if not self.read_only:
                self._set_meta("params", value.to_json(indent=None))

    def close(self) -> None:
        """Close the database; the store is unusable afterwards (waits for other threads' calls)."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before the lock existed
            return
        with lock:
            try:
                con = getattr(self, "_con", None)
                if con is not None:
                    flushed = False
                    try:
                        self._flush()
                        flushed = True
                    finally:
                        if self._flushing is not None:  # (interrupted while waiting for it: it ends first)
                            self._flushing.wait()
                            self._flushing = None
                        con.close()
                        self._con = None
                        self._active = None
                        if self._journal is not None:  # on a failed flush the journal keeps the calls for reopening
                            self._journal.close(remove=flushed)
            finally:  # closed even when the flush failed (a full disk): the file may be opened again
                self._release()
                forget_unclosed(self)

    def _release(self) -> None:
        held = getattr(self, "_claim", None)
        if held is not None:
            held.release()
            self._claim = None

    def __enter__(self) -> FactStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self._release()
        except Exception:
            pass

    def __repr__(self) -> str:
        where = str(self.path) if self.path else "memory"
        return f"FactStore({where!r})"

    # -- writes ------------------------------------------------------------------------------------

    def remember(self, subject: str, predicate: str, object: str, kind: str = "explicit", at: Any = None,
                 evidence: Evidence | None = None, note: str | None = None) -> int:
        """Remember one fact, as the seed does; returns the fact's id.

        Identical active fact → reinforce it; else (unless ``predicate`` is multi-valued) the latest
        active fact with the same subject and predicate is superseded; then a new fact is inserted.
        Durable when it returns; written behind (:mod:`factmem.store.writebehind`) unless the store
        was opened with ``write_behind=False``, the call is inside ``transaction()``, or the store
        has abstraction links — then written row by row. Both give the same rows.
        """
        self._writable()
        ev = evidence or Evidence()
        if not isinstance(ev, Evidence):
            raise InputError(f"evidence must be an Evidence or None, got {evidence!r}")
        # the checks a journal entry of this call gets again at reopening (factmem.store.calls)
        at = check_remember(subject, predicate, object, kind, at, ev.session_id, ev.message_id, ev.source, note)
        with self._lock:
            state = self._behind_state()
            if state is not None:
                return self._remember_behind(state, subject, predicate, object, kind, at, ev, note)
            with self._transaction():
                # every active fact of (subject, predicate): the identical one and the conflicting one
                # are both picked from these (one rule for both paths: remember_outcome)
                out = remember_outcome(self._active_of(subject, predicate), object, predicate, kind, at, self._params)
                if out.action == "reinforce":
                    fid = out.fact_id
                    try:
                        self._db.execute(
                            "UPDATE memory_facts SET confidence = ?, reinforcement_count = reinforcement_count + 1, "
                            "last_reinforced = ? WHERE id = ?", [out.confidence, at, fid])
                    except duckdb.OutOfRangeException:  # the count is at BIGINT's largest: rolled back
                        check_count(np.array([MAX_COUNT]), np.array([fid]))
                        raise
                else:
                    fid = self._next_fact_id
                    self._db.execute(
                        "INSERT INTO memory_facts VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, 'active', ?, NULL, NULL, false)",
                        [fid, subject, predicate, object, note, kind, out.confidence, at, at,
                         self._params.decay_rate_for(kind, predicate), out.superseded])
                    self._next_fact_id += 1
                    self._keys.added(subject, predicate, fid)
                    if out.superseded is not None:
                        self._db.execute(
                            "UPDATE memory_facts SET status = 'superseded', status_changed_at = ?, "
                            "status_reason = 'contradiction' WHERE id = ?", [at, out.superseded])
                        self._keys.removed(out.superseded)
                        self._mark_stale_parents_of([out.superseded])
                self._db.execute(
                    "INSERT INTO memory_evidence VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [self._next_evidence_id, fid, ev.session_id, ev.message_id, at, out.action, out.confidence,
                     ev.source])
                self._next_evidence_id += 1
            return int(fid)  # type: ignore[arg-type]

    def _active_of(self, subject: str, predicate: str) -> list[tuple]:
        """(id, object, confidence, last_reinforced, decay_rate) of the active facts of (subject,
        predicate): the rows the key map names (:mod:`factmem.store.keyindex`), verified here."""
        candidates = self._keys.candidates(self._db, self._next_fact_id, subject, predicate)
        if candidates is None:  # a key with a very long history: scan
            return self._db.execute(
                "SELECT id, object, confidence, last_reinforced, decay_rate FROM memory_facts "
                "WHERE status = 'active' AND subject = ? AND predicate = ?", [subject, predicate]).fetchall()
        if not candidates:
            return []
        cols = "SELECT id, object, confidence, last_reinforced, decay_rate, status, subject, predicate FROM memory_facts"
        if len(candidates) <= 8:  # one point lookup per id: each is pruned to one row group by the id's zone map,
            # where `id IN (a, b)` scans the table (measured 0.6 ms per `id = ?` branch, 2 ms for IN at 1M facts)
            sql = " UNION ALL ".join([f"{cols} WHERE id = ?"] * len(candidates))
        else:
            sql = f"{cols} WHERE id IN ({', '.join('?' * len(candidates))})"
        found = self._db.execute(sql, candidates).fetchall()  # plain columns, compared here
        self._keys.settle([r[0] for r in found if r[5] != "active"])
        return [r[:5] for r in found if r[5] == "active" and r[6] == subject and r[7] == predicate]

    def consolidate(self, at: Any = None, prune: bool = True) -> ConsolidateResult:
        """Archive active facts whose effective confidence at ``at`` is below the archive threshold;
        then, if ``prune``, archive the active children of every active derived fact reinforced at
        least ``prune_min_reinforcements`` times. Idempotent. Returns (archived, pruned)."""
        self._writable()
        at = resolve_at(at)
        p = self._params
        args = {"at": at, "thr": p.archive_threshold}
        due = f"status = 'active' AND {effective_sql('$at')} < $thr"
        archive = "UPDATE memory_facts SET status = 'archived', status_changed_at = $at, status_reason = 'decay' "
        with self._lock:
            state = self._behind_state()
            if state is not None:
                return self._consolidate_behind(state, at, prune)
        with self._transaction():
            pruned = 0
            if not self._has_links:  # the count is all we need: RETURNING costs DuckDB twice the update
                archived = int(self._db.execute(archive + f"WHERE {due}", args).fetchall()[0][0])
            else:  # their derived parents become stale: find them first, then archive exactly those
                ids = self._db.execute(f"SELECT id FROM memory_facts WHERE {due}", args).fetchnumpy()["id"]
                archived = len(ids)
                if archived:
                    self._db.execute(archive + "WHERE id = ANY($ids)", {"at": at, "ids": [int(i) for i in ids]})
                    self._mark_stale_parents_of(list(ids))
                if prune:
                    pruned = self._prune(at)
        return ConsolidateResult(int(archived), int(pruned))

    def link(self, parent_id: int, child_ids: Iterable[int], at: Any = None) -> int:
        """Link a derived fact to the facts it was abstracted from; existing links are kept.

        Returns the number of new links."""
        self._writable()
        at = resolve_at(at)
        kids = pa.table({"child_id": pa.array(sorted({int(c) for c in child_ids}), pa.int64())})  # noqa: F841 (SQL)
        with self._transaction():
            n = self._db.execute(
                "INSERT OR IGNORE INTO memory_fact_links SELECT $p, child_id, $at FROM kids RETURNING child_id",
                {"p": int(parent_id), "at": at}).fetchall()
            self._has_links = self._has_links or bool(n)
        return len(n)

    def set_stale(self, fact_ids: Iterable[int], stale: bool = True) -> None:
        """Set or clear the ``stale`` flag of derived facts (the abstraction pass clears it on re-examination)."""
        self._writable()
        with self._transaction():
            self._db.execute("UPDATE memory_facts SET stale = $v WHERE id IN (SELECT unnest($ids::BIGINT[]))",
                             {"v": bool(stale), "ids": [int(i) for i in fact_ids]})

    def transaction(self):
        """A context manager grouping writes into one transaction (re-entrant); rolled back on error.

        >>> s = FactStore()
        >>> with s.transaction():
        ...     a = s.remember("ada", "uses", "vim", at=0)
        ...     b = s.remember("ada", "uses", "helix", at=1)
        """
        self._writable()
        return self._transaction()

    def _prune(self, at: int) -> int:
        return int(self._db.execute(
            "UPDATE memory_facts SET status = 'archived', status_changed_at = $at, "
            "status_reason = 'pruned' WHERE status = 'active' AND id IN ("
            "  SELECT l.child_id FROM memory_fact_links l JOIN memory_facts d ON d.id = l.parent_id"
            "  WHERE d.kind = 'derived' AND d.status = 'active' AND d.reinforcement_count >= $n"
            ")", {"at": at, "n": self._params.prune_min_reinforcements}).fetchall()[0][0])

    def prune(self, at: Any = None) -> int:
        """Archive (reason ``pruned``) the active children of every active derived fact reinforced at
        least ``prune_min_reinforcements`` times — consolidate's second step alone. Returns how many."""
        self._writable()
        at = resolve_at(at)
        if not self._has_links:
            return 0
        with self._transaction():
            return self._prune(at)


def _check_file(path: Path, read_only: bool) -> None:
    """Refuse, before DuckDB sees it, a path that is not a DuckDB database: a folder, an empty or
    garbled file, a SQLite file (a production memory: ``import-db`` reads those)."""
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a store file")
    if not path.exists():
        if read_only:
            raise StoreError(f"{path}: no such store file")
        return
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise StoreError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if head.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path}: a SQLite database, not a factmem store; read a production memory with "
                         "`factmem import-db` (factmem.export.sqlite.import_db)")
    if len(head) < 12 or head[8:12] != _DUCKDB_MAGIC:
        what = "an empty file" if not head else "not a DuckDB database file (damaged, or another format)"
        raise StoreError(f"{path}: {what}; a store file is made by FactStore or `factmem import-db`")


def _quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """No DuckDB progress bar: the library reports progress itself, and scripts want clean output."""
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.InvalidInputException:
        pass  # inside some Jupyter kernels DuckDB refuses the setting; its bar is harmless there
    return con
