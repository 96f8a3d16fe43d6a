"""Memories out and in: a FactStore as a SQLite file in the seed's schema, and back.

**The SQLite file** (:func:`export_db`) holds

* ``memory_facts`` and ``memory_fact_links``: the seed's ``CREATE TABLE`` statements verbatim
  (``SEED_FACTS_DDL``, ``SEED_LINKS_DDL`` in :mod:`factmem.export.sqlite_format`), 13 and 3
  columns, nothing added — a production crate opens the file as its own memory;
* ``memory_evidence`` (the seed shows no DDL for it; ``EVIDENCE_DDL``): the seed's provenance
  columns ``fact_id, session_id, message_id, observed_at`` plus an ``id INTEGER PRIMARY KEY`` and
  factmem's ``action`` (insert/reinforce), ``confidence`` (after the event) and ``source``
  (observation/abstraction). factmem's extras are **nullable**, so a crate that knows only the four
  seed columns can keep inserting evidence into the file;
* ``factmem_fact_state(id, status_changed_at, status_reason, stale)``: factmem's three extra fact
  columns, one row only for facts where one of them is set (a fact that left ``active``, or a stale
  derived fact). A production crate ignores the table; it makes the round trip lossless without
  adding a column to the seed's table;
* ``factmem_abstraction_examined(subject, member_ids, examined_at, pass_id, outcome)``: the store's
  record of every cluster membership the abstraction model answered for (``member_ids`` as a JSON
  array, ``outcome`` ``derived`` or ``empty``; :mod:`factmem.store.examined`), which keeps "a pass
  over unchanged clusters makes no calls" true after the round trip. Files written before it hold
  ``factmem_abstraction_empty(subject, member_ids, examined_at, pass_id)`` (empty answers only):
  import reads them as ``empty`` records;
* ``factmem_meta(key, value)``: the file format (``factmem.sqlite/1``), the factmem version, the
  store's parameters as JSON (so an import restores them), their fingerprint (``params_fingerprint``,
  the Rust module's ``PARAMS_FINGERPRINT``) and the consolidation period the memory runs with
  (``consolidate_every_seconds``, default 86400: daily at midnight UTC). ``whatif`` compares both with
  what it replays and says when the file was built otherwise;
* the index ``memory_facts_subject_predicate_status`` on ``memory_facts(subject, predicate, status)``
  (``FACTS_INDEX``): the seed's ``remember`` looks up a (subject, predicate)'s active facts at every
  observation, and without the index each lookup scans the table (the issue that added it measured a
  Rust client over half the bundled log at 1.5 s without it, 0.41 s with it). An index is not a table:
  ``import-db`` reads files with or without it (and with the crate's own indexes);

**Import** (:func:`import_db`) reads such a file — or a production memory that has only the seed's
tables — into a new FactStore file, keeping every row and value as stored (ids, statuses,
confidences, timestamps, supersedes_id). Rows without ``factmem_fact_state`` get
``status_changed_at = NULL``, ``status_reason = NULL``, ``stale = false``. Evidence written by a
production crate has no ``action``, ``confidence`` or ``source``: they stay NULL, as stored, and
:class:`ImportResult` counts them (``as_of`` and ``trajectories`` need the per-observation confidence,
so they have nothing to show for such rows). A production evidence table may lack ``id`` (rowid is
used) and factmem's three extras.

The file is checked before anything is written (:mod:`factmem.export.sqlite_format`); outputs are
written to a temporary file and renamed only on success: a failed export or import leaves nothing behind.

SQLite has no bulk-insert API: the export streams Arrow record batches out of DuckDB and hands each
batch to ``executemany`` (rows built by ``zip`` over the batch's columns, in C); the import reads
``fetchmany`` chunks into Arrow arrays and inserts each table with one DuckDB ``INSERT … SELECT``.
Journaling is off while the temporary file is filled (it is renamed only when complete).

Known limits: SQLite stores NaN as NULL and may store ``-0.0`` as ``0``; a fact with a NaN confidence
or decay rate cannot be exported (the seed's columns are NOT NULL) and is reported.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from factmem import __version__
from factmem.core.params import MemoryParams
from factmem.core.schedule import CONSOLIDATE_EVERY_SECONDS, check_period
from factmem.errors import ExportError, InputError, ProductionDBError, StoreError
from factmem.export.atomic import atomic_write
from factmem.export.document import params_fingerprint
from factmem.export.sqlite_format import (
    EVIDENCE_DDL,
    EVIDENCE_INDEX,
    EVIDENCE_SPEC,
    EXAMINED_DDL,
    EXAMINED_SPEC,
    FACTS_INDEX,
    FACTS_SPEC,
    LINKS_SPEC,
    META_DDL,
    META_FINGERPRINT,
    META_PERIOD,
    SEED_FACTS_DDL,
    SEED_LINKS_DDL,
    SQLITE_FORMAT,
    STATE_DDL,
    STATE_SPEC,
    check_active_keys,
    check_acyclic,
    check_file,
    check_meta,
    open_sqlite,
    read_meta_params,
    text_error,
)
from factmem.store.examined import EXAMINED_TABLE
from factmem.store.factstore import FactStore
from factmem.store.journal import discard_journal
from factmem.store.locking import exclusive

__all__ = ["ExportResult", "ImportResult", "export_db", "import_db", "compare_memories"]

# facts that get a factmem_fact_state row: those with one of factmem's extras set
_HAS_STATE = "status_changed_at IS NOT NULL OR status_reason IS NOT NULL OR stale"
_ARROW = {"INTEGER": pa.int64(), "TEXT": pa.string(), "REAL": pa.float64()}
_CHUNK = 100_000


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_db` wrote."""

    path: Path
    facts: int
    links: int
    evidence: int
    fact_state_rows: int
    seconds: float
    abstraction_examined: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d

    def __str__(self) -> str:
        examined = f", {self.abstraction_examined} examined-cluster records" if self.abstraction_examined else ""
        return (f"wrote {self.path}: {self.facts} facts, {self.links} links, {self.evidence} evidence rows, "
                f"{self.fact_state_rows} factmem_fact_state rows{examined} ({self.seconds:.2f}s)")


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_db` read. ``filled`` counts evidence values completed because the file held
    NULL (production rows): ``{"action": n, "confidence": n, "source": n}``. ``abstraction_examined``:
    examined-cluster records read (legacy empty-answer records included)."""

    path: Path
    facts: int
    links: int
    evidence: int
    fact_state_rows: int
    params_from: str
    filled: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    abstraction_examined: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d

    def __str__(self) -> str:
        filled = ", ".join(f"{k} {v}" for k, v in self.filled.items() if v)
        return (f"wrote {self.path}: {self.facts} facts, {self.links} links, {self.evidence} evidence rows, "
                f"{self.fact_state_rows} factmem_fact_state rows; params from {self.params_from}"
                + (f"; evidence values absent (kept NULL): {filled}" if filled else "")
                + f" ({self.seconds:.2f}s)")


# -- export ----------------------------------------------------------------------------------------------


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not overwrite:
        raise ExportError(f"{out}: already exists; pass overwrite=True (--force) to replace it")


def export_db(store_or_path: FactStore | str | os.PathLike, out_sqlite: str | os.PathLike, *,
              overwrite: bool = False, progress: bool | None = None,
              consolidate_every_seconds: int = CONSOLIDATE_EVERY_SECONDS) -> ExportResult:
    """Write a FactStore (or a store file, opened read-only) to a SQLite file in the seed's schema.

    See the module docstring for the tables. Nothing is written on error; an existing
    ``out_sqlite`` is replaced only with ``overwrite=True``. ``progress``: a bar over rows written
    (None: only on a terminal). ``consolidate_every_seconds``: the consolidation period the memory
    was built (and is to be continued) with, recorded in ``factmem_meta``.
    """
    t0 = time.perf_counter()
    period = check_period(consolidate_every_seconds)
    out = Path(out_sqlite)
    _check_out(out, overwrite)
    own = not isinstance(store_or_path, FactStore)
    if isinstance(store_or_path, FactStore):
        store = store_or_path
    else:
        src = Path(store_or_path)
        if not src.exists():
            raise StoreError(f"{src}: no such store file")
        store = FactStore(src, read_only=True)
    store._lock.acquire()  # a store shared by threads: no write interleaves with the export's reads
    try:
        con = store.db  # raises StoreError when the store is closed
        bad = con.execute(
            "SELECT count(*), min(id) FROM memory_facts WHERE isnan(confidence) OR isnan(decay_rate)").fetchall()[0]
        if bad[0]:
            raise ExportError(f"{out}: {bad[0]} facts have a NaN confidence or decay_rate (first id {bad[1]}); "
                              "the seed's columns are REAL NOT NULL and SQLite stores NaN as NULL")
        counts: dict[str, int] = {}
        examined = store.examined_relation  # the table, or a schema-1 file's empty answers (read-only)
        total = con.execute(f"SELECT (SELECT count(*) FROM memory_facts) + (SELECT count(*) FROM memory_fact_links) "
                            f"+ (SELECT count(*) FROM memory_evidence) "
                            f"+ (SELECT count(*) FROM memory_facts WHERE {_HAS_STATE}) "
                            f"+ (SELECT count(*) FROM {examined})").fetchall()[0][0]
        bar = tqdm(total=total, desc="export-db", unit="row", unit_scale=True,
                   disable=None if progress is None else not progress)

        def write(tmp: Path) -> None:
            sq = sqlite3.connect(tmp, isolation_level=None)
            try:
                sq.execute("PRAGMA journal_mode = OFF")  # a temporary file, renamed only when complete
                sq.execute("PRAGMA synchronous = OFF")
                sq.execute("PRAGMA locking_mode = EXCLUSIVE")
                sq.execute("PRAGMA cache_size = -262144")  # 256 MiB of page cache while loading
                sq.executescript("\n".join((SEED_FACTS_DDL, SEED_LINKS_DDL, EVIDENCE_DDL, STATE_DDL, META_DDL,
                                            EXAMINED_DDL)))
                sq.execute("BEGIN")
                counts["facts"] = _copy(con, sq, bar, "memory_facts", [c for c, _, _ in FACTS_SPEC],
                                        "SELECT {cols} FROM memory_facts ORDER BY id")
                counts["links"] = _copy(con, sq, bar, "memory_fact_links", [c for c, _, _ in LINKS_SPEC],
                                        "SELECT {cols} FROM memory_fact_links ORDER BY parent_id, child_id")
                counts["evidence"] = _copy(con, sq, bar, "memory_evidence", [c for c, _, _ in EVIDENCE_SPEC],
                                           "SELECT {cols} FROM memory_evidence ORDER BY id")
                counts["state"] = _copy(
                    con, sq, bar, "factmem_fact_state", [c for c, _, _ in STATE_SPEC],
                    "SELECT id, status_changed_at, status_reason, CAST(stale AS BIGINT) AS stale FROM memory_facts "
                    f"WHERE {_HAS_STATE} ORDER BY id")
                # the clusters an abstraction model answered for; member ids as a JSON array
                counts["examined"] = _copy(
                    con, sq, bar, "factmem_abstraction_examined", [c for c, _, _ in EXAMINED_SPEC],
                    "SELECT subject, CAST(to_json(member_ids) AS VARCHAR) AS member_ids, examined_at, pass_id, "
                    f"outcome FROM {examined} ORDER BY examined_at, subject, member_ids, outcome, pass_id")
                sq.execute(EVIDENCE_INDEX)  # built once after the load, not row by row
                sq.execute(FACTS_INDEX)
                sq.executemany("INSERT INTO factmem_meta VALUES (?, ?)", [
                    ("format", SQLITE_FORMAT), ("factmem_version", __version__),
                    ("params", store.params.to_json(indent=None)),
                    (META_FINGERPRINT, params_fingerprint(store.params)), (META_PERIOD, str(period))])
                sq.execute("COMMIT")
            finally:
                sq.close()

        try:
            path = atomic_write(out, write)
        finally:
            bar.close()
    finally:
        store._lock.release()
        if own:
            store.close()
    return ExportResult(path, counts["facts"], counts["links"], counts["evidence"], counts["state"],
                        time.perf_counter() - t0, counts["examined"])


def _copy(con, sq: sqlite3.Connection, bar, table: str, cols: list[str], select: str) -> int:
    """Stream a DuckDB query into a SQLite table, one Arrow record batch per ``executemany``."""
    insert = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    n = 0
    # a relation's reader streams (con.execute() would materialize the whole result first)
    with con.sql(select.format(cols=", ".join(cols))).to_arrow_reader(batch_size=_CHUNK) as reader:
        for batch in reader:
            # sqlite3 binds row tuples only; zip transposes the batch's columns in C
            sq.executemany(insert, zip(*(col.to_pylist() for col in batch.columns)))
            n += batch.num_rows
            bar.update(batch.num_rows)
    return n


# -- import ----------------------------------------------------------------------------------------------


def _read_arrow(sq: sqlite3.Connection, bar, sql: str, schema: list[tuple[str, pa.DataType]]) -> pa.Table:
    """A SQLite query as an Arrow table, read in ``fetchmany`` chunks (types already validated)."""
    cur = sq.execute(sql)
    batches = []
    while True:
        rows = cur.fetchmany(_CHUNK)
        if not rows:
            break
        cols = list(zip(*rows))
        batches.append(pa.record_batch([pa.array(c, type=t) for c, (_, t) in zip(cols, schema)],
                                       names=[n for n, _ in schema]))
        bar.update(len(rows))
    if not batches:
        return pa.table({n: pa.array([], type=t) for n, t in schema})
    return pa.Table.from_batches(batches)


def import_db(sqlite_path: str | os.PathLike, out_duckdb: str | os.PathLike, *,
              params: MemoryParams | None = None, overwrite: bool = False,
              progress: bool | None = None, allow_multiple_active: bool = False) -> ImportResult:
    """Read a SQLite memory (a production memory, or a file from :func:`export_db`) into a new
    FactStore file at ``out_duckdb``.

    ``params``: the store's parameters; default those in the file's ``factmem_meta`` table, else the
    seed's. The file is validated first (see the module docstring); on any error nothing is written.
    Besides types and vocabularies, the store's invariants: confidences in [0, 1], decay rates finite
    and >= 0, times in the supported range (years 0001–9999), no reference to a missing fact
    (supersedes_id, links, evidence, fact state), unique evidence ids, a ``factmem_meta`` format this
    factmem reads, and one active fact per (subject, predicate) of a single-valued predicate (under
    the params used) unless ``allow_multiple_active`` keeps such keys as stored (the store handles
    them, as after a predicate stopped being multi-valued). Each violation is a
    :class:`~factmem.errors.ProductionDBError` naming the table, the row and the rule.
    ``overwrite`` replaces an existing ``out_duckdb`` — only while no process has it open (its
    lock is taken first: :func:`factmem.store.locking.exclusive`). ``progress``: a bar over rows
    read (None: only on a terminal).
    """
    t0 = time.perf_counter()
    src, out = Path(sqlite_path), Path(out_duckdb)
    if params is not None and not isinstance(params, MemoryParams):
        raise InputError(f"params must be MemoryParams, got {type(params).__name__}")
    _check_out(out, overwrite)
    sq = open_sqlite(src)
    bar = None
    try:
        info = check_file(src, sq)
        bar = tqdm(total=sum(info["counts"][t] for t in ("memory_facts", "memory_fact_links", "memory_evidence")),
                   desc="import-db", unit="row", unit_scale=True, disable=None if progress is None else not progress)
        check_meta(src, sq, info["tables"])
        saved = read_meta_params(src, sq, info["tables"])
        use = params if params is not None else saved if saved is not None else MemoryParams()
        params_from = "argument" if params is not None else "factmem_meta" if saved is not None else "seed defaults"
        if not allow_multiple_active:
            check_active_keys(src, sq, use.multi_valued_predicates)
        has_state = "factmem_fact_state" in info["tables"]
        state = ("s.status_changed_at, s.status_reason, coalesce(s.stale, 0)" if has_state
                 else "NULL, NULL, 0")
        join = "LEFT JOIN factmem_fact_state s ON s.id = f.id" if has_state else ""
        fact_cols = [c for c, _, _ in FACTS_SPEC]
        facts = _read_arrow(
            sq, bar, f"SELECT {', '.join('f.' + c for c in fact_cols)}, {state} FROM memory_facts f {join} ORDER BY f.id",
            [(c, _ARROW[a]) for c, a, _ in FACTS_SPEC]
            + [("status_changed_at", pa.int64()), ("status_reason", pa.string()), ("stale", pa.int64())])
        links = _read_arrow(sq, bar, "SELECT parent_id, child_id, created_at FROM memory_fact_links "
                                "ORDER BY parent_id, child_id", [(c, pa.int64()) for c, _, _ in LINKS_SPEC])
        ev_present = set(info["evidence_columns"])
        ev_select = ", ".join(c if c in ev_present else ("rowid" if c == "id" else "NULL") for c, _, _ in EVIDENCE_SPEC)
        evidence = _read_arrow(sq, bar, f"SELECT {ev_select} FROM memory_evidence ORDER BY "
                                   f"{'id' if 'id' in ev_present else 'rowid'}",
                               [(c, _ARROW[a]) for c, a, _ in EVIDENCE_SPEC])
        n_state = info["counts"].get("factmem_fact_state", 0)
        # examined clusters: this format's table, and a legacy file's empty answers as 'empty' records
        parts = [f"SELECT subject, member_ids, examined_at, pass_id, {outcome} AS outcome FROM {table}"
                 for table, outcome in (("factmem_abstraction_empty", "'empty'"),
                                        ("factmem_abstraction_examined", "outcome"))
                 if table in info["tables"]]
        examined = None
        if parts:
            examined = _read_arrow(sq, bar, " UNION ALL ".join(parts),
                                   [(c, _ARROW[a]) for c, a, _ in EXAMINED_SPEC])
    except sqlite3.OperationalError as exc:  # text that is not UTF-8: named by table, row and column
        raise text_error(src, sq, exc) from None
    finally:
        sq.close()
        if bar is not None:
            bar.close()

    sup = facts.column("supersedes_id")
    check_acyclic(src, facts.column("id").to_numpy(), sup.fill_null(0).to_numpy(), sup.is_valid().to_numpy(False))
    filled = {
        "action": evidence.column("action").null_count,
        "confidence": evidence.column("confidence").null_count,
        "source": evidence.column("source").null_count,
    }

    def write(tmp: Path) -> None:
        store = FactStore(tmp, params=use)
        try:
            con = store.db
            with store.transaction():
                con.register("_fm_facts", facts)
                # ORDER BY: the store reads facts in storage order and relies on it being id order
                con.execute("INSERT INTO memory_facts SELECT * EXCLUDE (stale), stale <> 0 FROM _fm_facts ORDER BY id")
                con.register("_fm_links", links)
                con.execute("INSERT INTO memory_fact_links SELECT * FROM _fm_links ORDER BY parent_id, child_id")
                con.register("_fm_ev", evidence)
                # production evidence may lack factmem's extras: kept NULL, as stored; counted in `filled`
                con.execute("""
                    INSERT INTO memory_evidence
                    SELECT id, fact_id, session_id, message_id, observed_at, action, confidence, source
                    FROM _fm_ev ORDER BY id""")
                for name in ("_fm_facts", "_fm_links", "_fm_ev"):
                    con.unregister(name)
                if examined is not None and examined.num_rows:
                    con.register("_fm_examined", examined)
                    # member ids sorted, as the store keeps them (the pass compares them with sorted ids)
                    con.execute(f"INSERT INTO {EXAMINED_TABLE} SELECT subject, list_sort(CAST(member_ids AS "
                                "BIGINT[])), examined_at, pass_id, outcome FROM _fm_examined")
                    con.unregister("_fm_examined")
            store._refresh_counters()
        except duckdb.ConstraintException as exc:
            raise ProductionDBError(f"{src}: violates the store's constraints: {str(exc).splitlines()[0]}") from None
        finally:
            store.close()

    with exclusive(out):  # never replace a store another process (or this one) has open
        path = atomic_write(out, write)
        discard_journal(path)  # calls a crashed store left for the file just replaced
    return ImportResult(path, facts.num_rows, links.num_rows, evidence.num_rows, n_state, params_from, filled,
                        time.perf_counter() - t0, 0 if examined is None else examined.num_rows)


# -- comparing a production memory with a replay ------------------------------------------------------------


def compare_memories(production: FactStore | str | os.PathLike, replay: FactStore | str | os.PathLike,
                     at: Any = None) -> pd.DataFrame:
    """Line up two memories (e.g. an imported production memory and a replay of its logs) fact by
    fact: for each (subject, predicate, object), the latest version in each (by first_seen, id).

    Columns: subject, predicate, object, ``where`` (``both``, ``production_only``, ``replay_only``),
    then status, confidence, reinforcement_count and effective_confidence (at ``at``; default the
    latest timestamp in either memory) with suffixes ``_production`` / ``_replay``, and
    ``status_differs`` and ``effective_diff`` (replay − production). Sorted by the triple.
    """
    stores, owned = [], []
    try:
        for s in (production, replay):
            if isinstance(s, FactStore):
                stores.append(s)
            else:
                st = FactStore(Path(s), read_only=True)
                owned.append(st)
                stores.append(st)
        if at is None:
            latest = [s.query("SELECT coalesce(max(greatest(last_reinforced, coalesce(status_changed_at, 0))), 0) AS t "
                              "FROM memory_facts")["t"].iloc[0] for s in stores]
            at = int(max(latest))
        frames = []
        for s in stores:
            f = s.facts(at=at)
            f = f.sort_values(["first_seen", "id"], kind="stable").drop_duplicates(
                ["subject", "predicate", "object"], keep="last")
            frames.append(f[["subject", "predicate", "object", "status", "confidence", "reinforcement_count",
                             "effective_confidence"]])
    finally:
        for s in owned:
            s.close()
    df = frames[0].merge(frames[1], on=["subject", "predicate", "object"], how="outer",
                         suffixes=("_production", "_replay"), indicator="where")
    df["where"] = df["where"].map({"both": "both", "left_only": "production_only", "right_only": "replay_only"})
    df["status_differs"] = (df["status_production"] != df["status_replay"]).to_numpy(bool)
    df["effective_diff"] = df["effective_confidence_replay"] - df["effective_confidence_production"]
    df.attrs["at"] = at
    return df.sort_values(["subject", "predicate", "object"], kind="stable").reset_index(drop=True)
