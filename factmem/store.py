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

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import __version__
from . import kernel as K
from .batch import Batch, load_batch
from .decay import age_days, effective_confidence, reinforce
from .errors import FactNotFoundError, InputError, SchemaVersionError, StoreError, StoreLockedError
from .params import KIND_CODES, KINDS, MemoryParams
from .schema import DDL, EVIDENCE_COLUMNS, FACT_COLUMNS, SCHEMA_VERSION, effective_sql
from .timeutil import resolve_at, to_seconds

# SQL spelling of the kernel's status codes (K.STATUS_*)
_STATUS_SQL = "CASE status WHEN 0 THEN 'active' WHEN 1 THEN 'superseded' ELSE 'archived' END"
_REASON_SQL = "CASE status WHEN 1 THEN 'contradiction' WHEN 2 THEN 'decay' END"

# Paths open for writing in this process: DuckDB would hand a second connect() the same database,
# and two stores numbering ids independently would corrupt it.
_OPEN_PATHS: dict[str, int] = {}
_OPEN_LOCK = threading.Lock()


@dataclass(frozen=True)
class Evidence:
    """Where a fact was observed: the session and message it came from."""

    session_id: str | None = None
    message_id: str | None = None
    source: str = "observation"


@dataclass(frozen=True)
class Fact:
    """One row of ``memory_facts``."""

    id: int
    subject: str
    predicate: str
    object: str
    note: str | None
    kind: str
    confidence: float
    reinforcement_count: int
    first_seen: int
    last_reinforced: int
    decay_rate: float
    status: str
    supersedes_id: int | None
    status_changed_at: int | None
    status_reason: str | None
    stale: bool

    def effective_confidence(self, at: Any) -> float:
        return float(effective_confidence(self.confidence, self.decay_rate, age_days(to_seconds(at), self.last_reinforced)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ConsolidateResult(NamedTuple):
    archived: int
    pruned: int


@dataclass(frozen=True)
class IngestResult:
    """What one ``ingest`` did. ``fact_ids`` is aligned with the input rows."""

    events: int
    inserted: int
    reinforced: int
    superseded: int
    fact_ids: np.ndarray

    def __repr__(self) -> str:
        return (f"IngestResult(events={self.events}, inserted={self.inserted}, "
                f"reinforced={self.reinforced}, superseded={self.superseded})")


@dataclass(frozen=True)
class ReplayResult:
    """What one ``replay`` did."""

    events: int
    inserted: int
    reinforced: int
    superseded: int
    archived: int
    consolidations: int


class FactStore:
    """A fact memory in DuckDB: in memory (``FactStore()``) or in a file that persists and reopens.

    ``params`` default to those saved in the file (or the seed's for a new store); passing params
    to an existing file replaces the saved ones.
    """

    def __init__(self, path: str | os.PathLike | None = None, params: MemoryParams | None = None, *,
                 read_only: bool = False):
        self.path = None if path is None or str(path) == ":memory:" else Path(path)
        self.read_only = read_only
        self._lock_key: str | None = None
        self._tx_depth = 0
        if self.path is not None and not read_only:
            key = str(self.path.resolve())
            with _OPEN_LOCK:
                if key in _OPEN_PATHS:
                    raise StoreLockedError(f"{self.path} is already open for writing in this process; close it first")
                _OPEN_PATHS[key] = 1
            self._lock_key = key
        try:
            self.con = self._connect()
            self._init_schema(params)
        except BaseException:
            self._release()
            raise

    # -- opening ---------------------------------------------------------------------------------

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self.path is None:
            return duckdb.connect(":memory:")
        if self.read_only and not self.path.exists():
            raise StoreError(f"{self.path}: no such store file")
        try:
            return duckdb.connect(str(self.path), read_only=self.read_only)
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                raise StoreLockedError(
                    f"{self.path} is open for writing by another process; close it there, or open this one "
                    f"with read_only=True ({msg.splitlines()[0]})"
                ) from None
            raise StoreError(f"{self.path}: cannot open: {msg}") from None
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: not a DuckDB file factmem can open: {exc}") from None

    def _init_schema(self, params: MemoryParams | None) -> None:
        tables: set[str] = set()
        if self.path is not None:
            tables = {r[0] for r in self.con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}
        if "factmem_meta" in tables:
            meta = dict(self.con.execute("SELECT key, value FROM factmem_meta").fetchall())
            version = int(meta.get("schema_version", "0"))
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path}: written by factmem schema {version} (factmem {meta.get('factmem_version', '?')}); "
                    f"this factmem {__version__} reads schema {SCHEMA_VERSION}. Upgrade factmem to open it."
                )
            if version < 1:
                raise SchemaVersionError(f"{self.path}: unknown schema version {meta.get('schema_version')!r}")
            saved = MemoryParams.from_json(meta["params"]) if "params" in meta else MemoryParams()
            self._params = params if params is not None else saved
            if params is not None and params != saved and not self.read_only:
                self._set_meta("params", params.to_json(indent=None))
            self._refresh_counters()
        elif tables & {"memory_facts", "memory_evidence", "memory_fact_links"}:
            raise StoreError(f"{self.path}: has memory tables but no factmem metadata; "
                             "use `factmem import-db` to read a production memory")
        else:
            if self.read_only:
                raise StoreError(f"{self.path}: not a factmem store (empty database)")
            self._params = params if params is not None else MemoryParams()
            self.con.begin()
            self.con.execute(DDL)
            self.con.execute("INSERT INTO factmem_meta VALUES (?, ?), (?, ?), (?, ?)", [
                "schema_version", str(SCHEMA_VERSION), "factmem_version", __version__,
                "params", self._params.to_json(indent=None)])
            self.con.commit()
            self._next_fact_id, self._next_evidence_id, self._has_links = 1, 1, False

    def _set_meta(self, key: str, value: str) -> None:
        self.con.execute("INSERT OR REPLACE INTO factmem_meta VALUES (?, ?)", [key, value])

    def _refresh_counters(self) -> None:
        self._next_fact_id = self.con.execute("SELECT coalesce(max(id), 0) + 1 FROM memory_facts").fetchone()[0]
        self._next_evidence_id = self.con.execute("SELECT coalesce(max(id), 0) + 1 FROM memory_evidence").fetchone()[0]
        self._has_links = bool(self.con.execute("SELECT count(*) FROM memory_fact_links").fetchone()[0])

    @property
    def params(self) -> MemoryParams:
        return self._params

    @params.setter
    def params(self, value: MemoryParams) -> None:
        if not isinstance(value, MemoryParams):
            raise ValueError(f"params must be MemoryParams, got {type(value).__name__}")
        self._params = value
        if not self.read_only:
            self._set_meta("params", value.to_json(indent=None))

    def close(self) -> None:
        """Close the database; the store is unusable afterwards."""
        con = getattr(self, "con", None)
        if con is not None:
            con.close()
            self.con = None
        self._release()

    def _release(self) -> None:
        if self._lock_key is not None:
            with _OPEN_LOCK:
                _OPEN_PATHS.pop(self._lock_key, None)
            self._lock_key = None

    def __enter__(self) -> "FactStore":
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

    def _writable(self) -> None:
        if self.con is None:
            raise StoreError("the store is closed")
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only")

    def _transaction(self):
        return _Transaction(self)

    def remember(self, subject: str, predicate: str, object: str, kind: str = "explicit", at: Any = None,
                 evidence: Evidence | None = None, note: str | None = None) -> int:
        """Remember one fact, row by row, as the seed does; returns the fact's id.

        Identical active fact → reinforce it; else (unless ``predicate`` is multi-valued) the latest
        active fact with the same subject and predicate is superseded; then a new fact is inserted.
        """
        self._writable()
        for name, value in (("subject", subject), ("predicate", predicate), ("object", object)):
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{name} must be a non-empty string, got {value!r}")
        if kind not in KIND_CODES:
            raise InputError(f"unknown kind {kind!r}; kinds are {', '.join(KINDS)}")
        if note is not None and not isinstance(note, str):
            raise InputError(f"note must be a string or None, got {note!r}")
        at = resolve_at(at)
        ev = evidence or Evidence()
        p = self._params
        with self._transaction():
            # every active fact of (subject, predicate): the identical one and the conflicting one
            # are both picked from these, latest by (last_reinforced, id)
            rows = self.con.execute(
                "SELECT id, object, confidence, last_reinforced, decay_rate FROM memory_facts "
                "WHERE status = 'active' AND subject = ? AND predicate = ?", [subject, predicate]).fetchall()
            same = max((r for r in rows if r[1] == object), key=lambda r: (r[3], r[0]), default=None)
            if same is not None:
                fid, _, conf, last, rate = same
                base = conf if p.reinforce_base == "stored" else effective_confidence(conf, rate, age_days(at, last))
                new_conf = float(reinforce(base, p.reinforce_gain, p.confidence_cap))
                self.con.execute(
                    "UPDATE memory_facts SET confidence = ?, reinforcement_count = reinforcement_count + 1, "
                    "last_reinforced = ? WHERE id = ?", [new_conf, at, fid])
                action = "reinforce"
            else:
                conflict = None
                if predicate not in p.multi_valued_predicates:
                    hit = max((r for r in rows if r[1] != object), key=lambda r: (r[3], r[0]), default=None)
                    conflict = hit[0] if hit else None
                fid = self._next_fact_id
                new_conf = p.initial_confidence[kind]
                self.con.execute(
                    "INSERT INTO memory_facts VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, 'active', ?, NULL, NULL, false)",
                    [fid, subject, predicate, object, note, kind, new_conf, at, at, p.decay_rate[kind], conflict])
                self._next_fact_id += 1
                if conflict is not None:
                    self.con.execute(
                        "UPDATE memory_facts SET status = 'superseded', status_changed_at = ?, "
                        "status_reason = 'contradiction' WHERE id = ?", [at, conflict])
                    self._mark_stale_parents_of([conflict])
                action = "insert"
            self.con.execute(
                "INSERT INTO memory_evidence VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [self._next_evidence_id, fid, ev.session_id, ev.message_id, at, action, new_conf, ev.source])
            self._next_evidence_id += 1
        return int(fid)

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
        self.con.execute(
            "UPDATE memory_facts SET stale = true WHERE status = 'active' AND kind = 'derived' AND id IN "
            f"(SELECT parent_id FROM memory_fact_links WHERE child_id IN ({sub}))", args)

    def ingest(self, events: Any) -> IngestResult:
        """Remember a whole batch at once, set-based.

        ``events``: a DataFrame, an Arrow table or a file (.parquet, .csv, .jsonl) with columns ts,
        subject, predicate, object, kind and optional session_id, message_id, note. The result is
        identical to calling :meth:`remember` for each row in order of (ts, row order). A rejected
        batch changes nothing.
        """
        self._writable()
        batch = events if isinstance(events, Batch) else load_batch(events)
        with self._transaction():
            return self._ingest(batch)

    def _prepare(self, batch: Batch) -> "_Prepared":
        """Encode a batch (keys, objects, global order) and fetch the active facts of its keys."""
        n = len(batch)
        p = self._params
        ts = batch.column("ts").to_numpy()
        rows = np.arange(n, dtype=np.int64)
        if n and (np.diff(ts) >= 0).all():
            gpos = rows  # already in (ts, row) order: the common case of logs
        else:
            gorder = np.lexsort((rows, ts))  # global (ts, row) order
            gpos = np.empty(n, np.int64)
            gpos[gorder] = rows

        s_codes, s_dict = _encode(batch.column("subject"))
        p_codes, p_dict = _encode(batch.column("predicate"))
        o_codes, o_dict = _encode(batch.column("object"))
        p_multi = np.asarray(pc.is_in(p_dict, value_set=pa.array(sorted(p.multi_valued_predicates), pa.string())))
        multi_ev = p_multi[p_codes]
        sp_raw = s_codes * np.int64(len(p_dict)) + p_codes
        sp_codes, sp_uniq = pd.factorize(sp_raw, sort=False)
        k_raw = sp_codes.astype(np.int64) * np.int64(len(o_dict) + 1) + np.where(multi_ev, o_codes + 1, 0)
        key, k_uniq = pd.factorize(k_raw, sort=False)
        key = key.astype(np.int64)
        n_keys = len(k_uniq)
        kind = batch.kind_codes()

        # active facts of the touched (subject, predicate) pairs
        _fm_pairs = pa.table({
            "sp": pa.array(np.arange(len(sp_uniq), dtype=np.int64)),
            "subject": s_dict.take(pa.array(sp_uniq // len(p_dict))),
            "predicate": p_dict.take(pa.array(sp_uniq % len(p_dict))),
        })
        ex = self.con.sql(
            "SELECT q.sp, f.id, f.object, f.confidence, f.reinforcement_count, f.last_reinforced, f.decay_rate "
            "FROM memory_facts f JOIN _fm_pairs q ON f.subject = q.subject AND f.predicate = q.predicate "
            "WHERE f.status = 'active'").to_arrow_table()
        ex_sp = ex.column("sp").to_numpy()
        ex_obj = np.asarray(pc.index_in(ex.column("object"), value_set=o_dict).fill_null(-1), dtype=np.int64)
        ex_multi = p_multi[(sp_uniq[ex_sp] % len(p_dict))] if len(ex_sp) else np.zeros(0, bool)
        ex_kraw = ex_sp * np.int64(len(o_dict) + 1) + np.where(ex_multi, ex_obj + 1, 0)
        ex_key = pd.Index(k_uniq).get_indexer(ex_kraw).astype(np.int64)
        keep = ex_key >= 0  # multi-valued facts whose object is not in the batch are untouched
        order = np.lexsort((gpos, key))
        key_multi = np.zeros(n_keys, bool)
        key_multi[key] = multi_ev
        return _Prepared(
            n=n, n_keys=n_keys, order=order, key=key[order], gpos=gpos[order], obj=o_codes[order].astype(np.int64),
            ts=ts[order], kind=kind[order], key_multi=key_multi,
            ex_key=ex_key[keep], ex_obj=ex_obj[keep], ex_id=ex.column("id").to_numpy()[keep],
            ex_conf=ex.column("confidence").to_numpy()[keep],
            ex_cnt=ex.column("reinforcement_count").to_numpy()[keep],
            ex_last=ex.column("last_reinforced").to_numpy()[keep],
            ex_rate=ex.column("decay_rate").to_numpy()[keep],
        )

    def _ingest(self, batch: Batch) -> IngestResult:
        n = len(batch)
        if n == 0:
            return IngestResult(0, 0, 0, 0, np.empty(0, np.int64))
        p = self._params
        P = self._prepare(batch)
        n_keys, order = P.n_keys, P.order
        sk, sg, so, sts, skind = P.key, P.gpos, P.obj, P.ts, P.kind
        ex_key, ex_obj, ex_id, ex_conf, ex_cnt, ex_last, ex_rate = (
            P.ex_key, P.ex_obj, P.ex_id, P.ex_conf, P.ex_cnt, P.ex_last, P.ex_rate)
        general_key = P.general_keys()
        outcomes: list[tuple[np.ndarray, K.BatchOutcome]] = []
        fast_ev = ~general_key[sk]
        if fast_ev.any():
            state = K.KeyState.empty(n_keys)
            single = ~general_key[ex_key]
            kk = ex_key[single]
            state.has[kk] = True
            state.obj[kk] = ex_obj[single]
            state.id[kk] = ex_id[single]
            state.confidence[kk] = ex_conf[single]
            state.count[kk] = ex_cnt[single]
            state.last_reinforced[kk] = ex_last[single]
            state.decay_rate[kk] = ex_rate[single]
            idx = np.flatnonzero(fast_ev)
            outcomes.append((idx, K.replay_fast(sk[idx], so[idx], sts[idx], skind[idx], sg[idx], state, p)))
        if (~fast_ev).any():
            idx = np.flatnonzero(~fast_ev)
            gen = general_key[ex_key]
            existing = pd.DataFrame({
                "key": ex_key[gen], "obj": ex_obj[gen], "id": ex_id[gen], "confidence": ex_conf[gen],
                "count": ex_cnt[gen], "last_reinforced": ex_last[gen], "decay_rate": ex_rate[gen],
            })
            outcomes.append((idx, K.replay_general(sk[idx], so[idx], sts[idx], skind[idx], sg[idx], P.key_multi,
                                                    existing, p)))

        ev_ref = np.empty(n, np.int64)
        ev_ins = np.empty(n, bool)
        ev_conf = np.empty(n)
        facts = []
        for idx, out in outcomes:
            ev_ref[idx], ev_ins[idx], ev_conf[idx] = out.ref, out.inserted, out.confidence
            f = out.facts.copy()
            new = f["ref"].to_numpy() < 0
            fe = f["first_event"].to_numpy()
            f["row"] = -1
            f.loc[new, "row"] = order[idx[fe[new]]]
            facts.append(f)
        facts = pd.concat(facts, ignore_index=True)
        prov, ids = K.assign_ids(ev_ref, self._next_fact_id)
        ev_id = K.resolve(ev_ref, prov, ids)
        facts["id"] = K.resolve(facts["ref"].to_numpy(), prov, ids)
        facts["supersedes_id"] = K.resolve(facts["supersedes"].to_numpy(), prov, ids)
        self._write_batch(batch, order, ev_id, ev_ins, ev_conf, sg, facts)
        self._next_fact_id += len(ids)
        self._next_evidence_id += n

        fact_ids = np.empty(n, np.int64)
        fact_ids[order] = ev_id
        superseded = int((facts["status"].to_numpy() == K.STATUS_SUPERSEDED).sum())
        return IngestResult(n, int(ev_ins.sum()), int(n - ev_ins.sum()), superseded, fact_ids)

    def _write_batch(self, batch: Batch, order, ev_id, ev_ins, ev_conf, sg, facts: pd.DataFrame) -> None:
        """Insert new facts, update touched ones, append evidence — inside the caller's transaction.

        Status and action strings are spelled by SQL from integer codes: building millions of
        Python strings would cost more than the inserts themselves."""
        t = batch.table
        new = facts[facts["ref"].to_numpy() < 0].sort_values("id")
        if len(new):
            rows = pa.array(new["row"].to_numpy())
            changed = new["status_changed_at"].to_numpy()
            sup = new["supersedes_id"].to_numpy()
            new_tbl = pa.table({
                "id": pa.array(new["id"].to_numpy()),
                "subject": t.column("subject").take(rows),
                "predicate": t.column("predicate").take(rows),
                "object": t.column("object").take(rows),
                "note": t.column("note").take(rows),
                "kind": t.column("kind").take(rows),
                "confidence": pa.array(new["confidence"].to_numpy()),
                "reinforcement_count": pa.array(new["count"].to_numpy()),
                "first_seen": t.column("ts").take(rows),
                "last_reinforced": pa.array(new["last_reinforced"].to_numpy()),
                "decay_rate": pa.array(new["decay_rate"].to_numpy()),
                "status": pa.array(new["status"].to_numpy().astype(np.int8)),
                "supersedes_id": pa.array(sup, mask=sup == K.NO_REF),
                "status_changed_at": pa.array(changed, mask=changed < 0),
            })
            self.con.execute(
                f"INSERT INTO memory_facts SELECT id, subject, predicate, object, note, kind, confidence, "
                f"reinforcement_count, first_seen, last_reinforced, decay_rate, {_STATUS_SQL}, supersedes_id, "
                f"status_changed_at, {_REASON_SQL}, false FROM new_tbl")
        old = facts[facts["ref"].to_numpy() >= 0]
        if len(old):
            changed = old["status_changed_at"].to_numpy()
            codes = old["status"].to_numpy()
            upd = pa.table({
                "id": pa.array(old["id"].to_numpy()),
                "confidence": pa.array(old["confidence"].to_numpy()),
                "reinforcement_count": pa.array(old["count"].to_numpy()),
                "last_reinforced": pa.array(old["last_reinforced"].to_numpy()),
                "status": pa.array(codes.astype(np.int8)),
                "status_changed_at": pa.array(changed, mask=changed < 0),
            })
            self.con.execute(
                "UPDATE memory_facts SET confidence = u.confidence, reinforcement_count = u.reinforcement_count, "
                f"last_reinforced = u.last_reinforced, status = {_STATUS_SQL.replace('status', 'u.status')}, "
                "status_changed_at = coalesce(u.status_changed_at, memory_facts.status_changed_at), "
                f"status_reason = coalesce({_REASON_SQL.replace('status', 'u.status')}, memory_facts.status_reason) "
                "FROM upd u WHERE memory_facts.id = u.id")
            self._mark_stale_parents_of(old["id"].to_numpy()[codes != K.STATUS_ACTIVE])
        # evidence: one row per event, numbered in global order
        by_g = np.argsort(sg, kind="stable")
        in_rows = order[by_g]
        if (in_rows == np.arange(len(in_rows))).all():
            sess, msg, obs = t.column("session_id"), t.column("message_id"), t.column("ts")
        else:
            ev_rows = pa.array(in_rows)
            sess, msg, obs = (t.column(c).take(ev_rows) for c in ("session_id", "message_id", "ts"))
        ev_tbl = pa.table({
            "id": pa.array(self._next_evidence_id + sg[by_g]),
            "fact_id": pa.array(ev_id[by_g]),
            "session_id": sess,
            "message_id": msg,
            "observed_at": obs,
            "inserted": pa.array(ev_ins[by_g]),
            "confidence": pa.array(ev_conf[by_g]),
        })
        self.con.execute(
            "INSERT INTO memory_evidence SELECT id, fact_id, session_id, message_id, observed_at, "
            "CASE WHEN inserted THEN 'insert' ELSE 'reinforce' END, confidence, 'observation' FROM ev_tbl")

    def replay(self, events: Any, consolidate_at: Any, prune: bool = True) -> "ReplayResult":
        """Ingest a log with consolidations at the given times, set-based across the whole span.

        Identical to ``for T in sorted(consolidate_at): ingest(events with ts < T not yet
        ingested); consolidate(T, prune)`` followed by ``ingest(the rest)`` — but computed in one
        pass (:mod:`factmem.waves`) and written at once. When the memory has derived facts with
        links (pruning) or keys holding several active facts, it runs exactly that loop instead.
        """
        self._writable()
        batch = events if isinstance(events, Batch) else load_batch(events)
        grid = np.unique(np.asarray([to_seconds(t, name="consolidate_at") for t in np.asarray(consolidate_at).ravel()]
                                    if np.asarray(consolidate_at).dtype.kind not in "iu"
                                    else np.asarray(consolidate_at, dtype=np.int64).ravel(), dtype=np.int64))
        with self._transaction():
            P = self._prepare(batch) if len(batch) else None
            if self._has_links or (P is not None and P.general_keys().any()) or P is None:
                return self._replay_loop(batch, grid, prune)
            return self._replay_waves(batch, P, grid)

    def _replay_loop(self, batch: Batch, grid: np.ndarray, prune: bool) -> "ReplayResult":
        ts = batch.column("ts").to_numpy()
        totals = np.zeros(4, np.int64)
        archived = 0
        prev = None
        for T in list(grid) + [None]:  # one iteration per consolidation, not per event
            mask = np.ones(len(ts), bool) if T is None else ts < T
            if prev is not None:
                mask &= ts >= prev
            if mask.any():
                r = self._ingest(Batch(batch.table.filter(pa.array(mask)), batch.origin))
                totals += [r.events, r.inserted, r.reinforced, r.superseded]
            if T is not None:
                archived += sum(self.consolidate(int(T), prune=prune))
                prev = T
        return ReplayResult(int(totals[0]), int(totals[1]), int(totals[2]), int(totals[3]), int(archived), len(grid))

    def _replay_waves(self, batch: Batch, P: "_Prepared", grid: np.ndarray) -> "ReplayResult":
        from . import waves as W

        p = self._params
        n, K_ = P.n, P.n_keys
        init = W.InitialState.empty(K_)
        init.has[P.ex_key] = True
        init.obj[P.ex_key] = P.ex_obj
        init.confidence[P.ex_key] = P.ex_conf
        init.last_reinforced[P.ex_key] = P.ex_last
        init.decay_rate[P.ex_key] = P.ex_rate
        init_id = np.full(K_, K.NO_REF, np.int64)
        init_id[P.ex_key] = P.ex_id
        init_cnt = np.zeros(K_, np.int64)
        init_cnt[P.ex_key] = P.ex_cnt
        horizon = int(grid[-1]) if grid.size else None
        res = W.replay_waves(P.key, P.obj, P.ts, P.kind, K_, W.ParamArrays.of([p]), grid, init, horizon=horizon)
        conf, ins, origin, end, reason = (res.in_event_order(a)[0] for a in ("conf", "inserted", "origin", "end", "reason"))
        ev_ref = np.where(origin >= 0, K.provisional_ref(P.gpos[np.maximum(origin, 0)]), init_id[-1 - np.minimum(origin, -1)])

        # one fact per run of equal origins (a fact's events are contiguous in key order)
        start = np.ones(n, bool)
        start[1:] = origin[1:] != origin[:-1]
        fe = np.flatnonzero(start)
        le = np.append(fe[1:], n) - 1
        size = le - fe + 1
        g_origin = origin[fe]
        is_new = g_origin >= 0
        status = np.select([reason[le] == W.REASON_SUPERSEDED, reason[le] == W.REASON_ARCHIVED],
                           [K.STATUS_SUPERSEDED, K.STATUS_ARCHIVED], K.STATUS_ACTIVE)
        changed = np.where(status != K.STATUS_ACTIVE, end[le], -1)
        # a new fact supersedes the state before it when that state ended by contradiction
        first_of_key = np.ones(n, bool)
        first_of_key[1:] = P.key[1:] != P.key[:-1]
        sup = np.full(len(fe), K.NO_REF, np.int64)
        inner = is_new & ~first_of_key[fe]
        prev = fe[inner] - 1
        sup[inner] = np.where(reason[prev] == W.REASON_SUPERSEDED, ev_ref[prev], K.NO_REF)
        at_key_start = is_new & first_of_key[fe]
        kx = P.key[fe[at_key_start]]
        sup[at_key_start] = np.where(init.has[kx] & (res.init_reason[0][kx] == W.REASON_SUPERSEDED), init_id[kx], K.NO_REF)
        rates = p.decay_rate.as_array()
        gkey = -1 - np.minimum(g_origin, -1)
        cols = {
            "ref": ev_ref[fe],
            "confidence": conf[le],
            "count": np.where(is_new, size - 1, init_cnt[gkey] + size),
            "last_reinforced": P.ts[le],
            "decay_rate": np.where(is_new, rates[P.kind[fe]], init.decay_rate[gkey]),
            "status": status,
            "status_changed_at": changed,
            "supersedes": sup,
            "reinforced": np.ones(len(fe), bool),
            "first_event": fe,
        }
        # initial facts of touched keys that ended before being reinforced
        ir = res.init_reason[0]
        gone_k = np.flatnonzero(init.has & ((ir == W.REASON_SUPERSEDED) | (ir == W.REASON_ARCHIVED)))
        # active facts no event touches: archived by a consolidation or left alone
        others = self.con.execute(
            "SELECT id, confidence, reinforcement_count, last_reinforced, decay_rate FROM memory_facts "
            "WHERE status = 'active'").fetchnumpy()
        keep = ~np.isin(others["id"], P.ex_id)
        o_at = W.first_archive_time(others["confidence"][keep], others["decay_rate"][keep],
                                    others["last_reinforced"][keep], p.archive_threshold, grid,
                                    horizon if horizon is not None else np.iinfo(np.int64).min)
        hit = o_at != W.OPEN
        extra = {
            "ref": np.concatenate([init_id[gone_k], others["id"][keep][hit]]),
            "confidence": np.concatenate([init.confidence[gone_k], others["confidence"][keep][hit]]),
            "count": np.concatenate([init_cnt[gone_k], others["reinforcement_count"][keep][hit]]),
            "last_reinforced": np.concatenate([init.last_reinforced[gone_k], others["last_reinforced"][keep][hit]]),
            "decay_rate": np.concatenate([init.decay_rate[gone_k], others["decay_rate"][keep][hit]]),
            "status": np.concatenate([np.where(ir[gone_k] == W.REASON_SUPERSEDED, K.STATUS_SUPERSEDED, K.STATUS_ARCHIVED),
                                      np.full(int(hit.sum()), K.STATUS_ARCHIVED)]),
            "status_changed_at": np.concatenate([res.init_end[0][gone_k], o_at[hit]]),
            "supersedes": np.full(len(gone_k) + int(hit.sum()), K.NO_REF, np.int64),
            "reinforced": np.zeros(len(gone_k) + int(hit.sum()), bool),
            "first_event": np.full(len(gone_k) + int(hit.sum()), -1, np.int64),
        }
        facts = K._facts_frame({k: np.concatenate([cols[k], extra[k]]) for k in cols})
        new = facts["ref"].to_numpy() < 0
        facts["row"] = -1
        facts.loc[new, "row"] = P.order[facts["first_event"].to_numpy()[new]]
        prov, ids = K.assign_ids(ev_ref, self._next_fact_id)
        ev_id = K.resolve(ev_ref, prov, ids)
        facts["id"] = K.resolve(facts["ref"].to_numpy(), prov, ids)
        facts["supersedes_id"] = K.resolve(facts["supersedes"].to_numpy(), prov, ids)
        self._write_batch(batch, P.order, ev_id, ins, conf, P.gpos, facts)
        self._next_fact_id += len(ids)
        self._next_evidence_id += n
        st = facts["status"].to_numpy()
        return ReplayResult(n, int(ins.sum()), int(n - ins.sum()), int((st == K.STATUS_SUPERSEDED).sum()),
                            int((st == K.STATUS_ARCHIVED).sum()), len(grid))

    def consolidate(self, at: Any = None, prune: bool = True) -> ConsolidateResult:
        """Archive active facts whose effective confidence at ``at`` is below the archive threshold;
        then, if ``prune``, archive the active children of every active derived fact reinforced at
        least ``prune_min_reinforcements`` times. Idempotent. Returns (archived, pruned)."""
        self._writable()
        at = resolve_at(at)
        p = self._params
        with self._transaction():
            archived = self.con.execute(
                "UPDATE memory_facts SET status = 'archived', status_changed_at = $at, status_reason = 'decay' "
                f"WHERE status = 'active' AND {effective_sql('$at')} < $thr RETURNING id",
                {"at": at, "thr": p.archive_threshold}).fetchnumpy()["id"]
            pruned = 0
            if self._has_links:
                if len(archived):
                    self._mark_stale_parents_of(list(archived))
                if prune:
                    pruned = self._prune(at)
        return ConsolidateResult(int(len(archived)), int(pruned))

    def link(self, parent_id: int, child_ids: Iterable[int], at: Any = None) -> int:
        """Link a derived fact to the facts it was abstracted from; existing links are kept.

        Returns the number of new links."""
        self._writable()
        at = resolve_at(at)
        kids = pa.table({"child_id": pa.array(sorted({int(c) for c in child_ids}), pa.int64())})
        with self._transaction():
            n = self.con.execute(
                "INSERT OR IGNORE INTO memory_fact_links SELECT $p, child_id, $at FROM kids RETURNING child_id",
                {"p": int(parent_id), "at": at}).fetchall()
            self._has_links = self._has_links or bool(n)
        return len(n)

    def set_stale(self, fact_ids: Iterable[int], stale: bool = True) -> None:
        """Set or clear the ``stale`` flag of derived facts (the abstraction pass clears it on re-examination)."""
        self._writable()
        with self._transaction():
            self.con.execute("UPDATE memory_facts SET stale = $v WHERE id IN (SELECT unnest($ids::BIGINT[]))",
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

    def abstract(self, provider: Any, model: str | None = None, at: Any = None, **options: Any):
        """Run one abstraction pass (see :func:`factmem.abstraction.abstract`)."""
        from .abstraction import abstract

        return abstract(self, provider, model=model, at=at, **options)

    def _prune(self, at: int) -> int:
        return len(self.con.execute(
            "UPDATE memory_facts SET status = 'archived', status_changed_at = $at, "
            "status_reason = 'pruned' WHERE status = 'active' AND id IN ("
            "  SELECT l.child_id FROM memory_fact_links l JOIN memory_facts d ON d.id = l.parent_id"
            "  WHERE d.kind = 'derived' AND d.status = 'active' AND d.reinforcement_count >= $n"
            ") RETURNING id", {"at": at, "n": self._params.prune_min_reinforcements}).fetchall())

    def prune(self, at: Any = None) -> int:
        """Archive (reason ``pruned``) the active children of every active derived fact reinforced at
        least ``prune_min_reinforcements`` times — consolidate's second step alone. Returns how many."""
        self._writable()
        at = resolve_at(at)
        if not self._has_links:
            return 0
        with self._transaction():
            return self._prune(at)

    def record_empty_answer(self, subject: str, member_ids: Iterable[int], at: Any = None,
                            pass_id: str | None = None) -> None:
        """Note that the abstraction model found nothing to generalize in this exact cluster."""
        self._writable()
        with self._transaction():
            self.con.execute("INSERT INTO memory_abstraction_empty VALUES (?, ?, ?, ?)",
                             [subject, sorted(int(i) for i in member_ids), resolve_at(at), pass_id])

    # -- reads ---------------------------------------------------------------------------------------

    def _read(self, sql: str, params: Any = None) -> pd.DataFrame:
        if self.con is None:
            raise StoreError("the store is closed")
        return self.con.execute(sql, params or []).df()

    def facts(self, at: Any = None, status: str | Iterable[str] | None = None) -> pd.DataFrame:
        """Every fact (or those with ``status``), with ``effective_confidence`` at ``at``, by id."""
        at = resolve_at(at)
        where, args = "", {"at": at}
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            bad = [s for s in statuses if s not in ("active", "archived", "superseded")]
            if bad:
                raise ValueError(f"unknown status {bad[0]!r}; statuses are active, archived, superseded")
            if len(statuses) == 1:
                where, args["st"] = "WHERE status = $st", statuses[0]
            else:
                where, args["st"] = "WHERE list_contains($st, status)", statuses
        # Rows are stored in id order (every write appends increasing ids), so no sort is needed.
        return self._read(f"SELECT *, {effective_sql('$at')} AS effective_confidence FROM memory_facts {where}", args)

    def get(self, fact_id: int) -> Fact:
        """One fact by id; raises :class:`FactNotFoundError`."""
        df = self._read("SELECT * FROM memory_facts WHERE id = ?", [int(fact_id)])
        if df.empty:
            raise FactNotFoundError(f"no fact with id {fact_id}")
        rec = df.iloc[0].to_dict()
        for col in ("supersedes_id", "status_changed_at"):
            rec[col] = None if pd.isna(rec[col]) else int(rec[col])
        for col in ("note", "status_reason"):
            rec[col] = None if pd.isna(rec[col]) else rec[col]
        for col in ("id", "reinforcement_count", "first_seen", "last_reinforced"):
            rec[col] = int(rec[col])
        rec["confidence"], rec["decay_rate"], rec["stale"] = float(rec["confidence"]), float(rec["decay_rate"]), bool(rec["stale"])
        return Fact(**rec)

    def history(self, subject: str, predicate: str) -> pd.DataFrame:
        """Every version of (subject, predicate), oldest → newest."""
        return self._read("SELECT * FROM memory_facts WHERE subject = ? AND predicate = ? "
                          "ORDER BY first_seen, id", [subject, predicate])

    def lineage(self, fact_id: int) -> pd.DataFrame:
        """The supersedes chain through ``fact_id``, oldest → newest; ``depth`` is 0 at the fact."""
        self.get(fact_id)
        return self._read("""
            WITH RECURSIVE back(id, depth) AS (
                SELECT ?::BIGINT, 0
                UNION ALL
                SELECT f.supersedes_id, b.depth - 1 FROM back b JOIN memory_facts f ON f.id = b.id
                WHERE f.supersedes_id IS NOT NULL
            ), fwd(id, depth) AS (
                SELECT ?::BIGINT, 0
                UNION ALL
                SELECT f.id, w.depth + 1 FROM fwd w JOIN memory_facts f ON f.supersedes_id = w.id
            )
            SELECT f.*, d.depth FROM (SELECT * FROM back UNION SELECT * FROM fwd) d
            JOIN memory_facts f ON f.id = d.id ORDER BY d.depth""", [int(fact_id), int(fact_id)])

    def evidence(self, fact_id: int | None = None) -> pd.DataFrame:
        """Evidence rows (of one fact, or all), in the order they were recorded."""
        if fact_id is None:
            return self._read("SELECT * FROM memory_evidence ORDER BY id")
        return self._read("SELECT * FROM memory_evidence WHERE fact_id = ? ORDER BY id", [int(fact_id)])

    def children(self, fact_id: int) -> pd.DataFrame:
        """Facts a derived fact was abstracted from."""
        return self._read("SELECT f.*, l.created_at AS linked_at FROM memory_fact_links l "
                          "JOIN memory_facts f ON f.id = l.child_id WHERE l.parent_id = ? ORDER BY f.id", [int(fact_id)])

    def parents(self, fact_id: int) -> pd.DataFrame:
        """Derived facts abstracted from this fact."""
        return self._read("SELECT f.*, l.created_at AS linked_at FROM memory_fact_links l "
                          "JOIN memory_facts f ON f.id = l.parent_id WHERE l.child_id = ? ORDER BY f.id", [int(fact_id)])

    def links(self) -> pd.DataFrame:
        return self._read("SELECT * FROM memory_fact_links ORDER BY parent_id, child_id")

    def as_of(self, at: Any, *, include_inactive: bool = False) -> pd.DataFrame:
        """What the memory believed at ``at``: facts active then, with their confidence, count and
        effective confidence as of ``at``, rebuilt from the evidence log."""
        at = to_seconds(at)
        status_filter = "" if include_inactive else "WHERE status_at = 'active'"
        return self._read(f"""
            WITH ev AS (
                SELECT fact_id, arg_max(confidence, id) AS confidence, max(observed_at) AS last_reinforced,
                       count(*) - 1 AS reinforcement_count
                FROM memory_evidence WHERE observed_at <= $at GROUP BY fact_id
            ), snap AS (
                SELECT f.id, f.subject, f.predicate, f.object, f.note, f.kind,
                       ev.confidence, ev.reinforcement_count, f.first_seen, ev.last_reinforced, f.decay_rate,
                       CASE WHEN f.status_changed_at IS NOT NULL AND f.status_changed_at <= $at
                            THEN f.status ELSE 'active' END AS status_at,
                       f.supersedes_id
                FROM memory_facts f JOIN ev ON ev.fact_id = f.id
            )
            SELECT *, {effective_sql('$at')} AS effective_confidence FROM snap {status_filter} ORDER BY id""",
            {"at": at})

    def trajectories(self, fact_ids: Sequence[int], start: Any, end: Any, step: int = 86400) -> pd.DataFrame:
        """Effective confidence of ``fact_ids`` on the grid start, start+step, … ≤ end (seconds), in one
        query: reinforcements show as jumps; ``status`` is the fact's status at each time."""
        start, end = to_seconds(start, name="start"), to_seconds(end, name="end")
        if int(step) <= 0:
            raise ValueError(f"step must be a positive number of seconds, got {step!r}")
        if end < start:
            raise ValueError(f"end ({end}) is before start ({start})")
        ids = [int(i) for i in fact_ids]
        return self._read("""
            WITH grid AS (SELECT unnest(range($start, $end + 1, $step)) AS t),
            ids AS (SELECT unnest($ids::BIGINT[]) AS fact_id),
            ev AS (SELECT fact_id, observed_at, arg_max(confidence, id) AS confidence
                   FROM memory_evidence WHERE fact_id IN (SELECT fact_id FROM ids)
                   GROUP BY fact_id, observed_at),
            pts AS (SELECT i.fact_id, g.t FROM ids i CROSS JOIN grid g)
            SELECT p.fact_id, p.t, f.kind, f.subject, f.predicate, f.object,
                   e.confidence * exp(-f.decay_rate * greatest(0.0, CAST(p.t - e.observed_at AS DOUBLE) / 86400.0))
                       AS effective_confidence,
                   CASE WHEN e.observed_at IS NULL THEN NULL
                        WHEN f.status_changed_at IS NOT NULL AND f.status_changed_at <= p.t THEN f.status
                        ELSE 'active' END AS status
            FROM pts p ASOF LEFT JOIN ev e ON e.fact_id = p.fact_id AND e.observed_at <= p.t
            JOIN memory_facts f ON f.id = p.fact_id
            ORDER BY p.fact_id, p.t""", {"start": start, "end": end, "step": int(step), "ids": ids})

    def stats(self, at: Any = None) -> pd.DataFrame:
        """Counts of facts by kind and status, with mean effective confidence."""
        at = resolve_at(at)
        return self._read(f"""SELECT kind, status, count(*) AS facts,
                   avg({effective_sql('$at')}) AS mean_effective_confidence
            FROM memory_facts GROUP BY kind, status ORDER BY kind, status""", {"at": at})

    def query(self, sql: str, params: Any = None) -> pd.DataFrame:
        """Run a read query against the store's tables; for exploration in notebooks."""
        return self._read(sql, params)

    def __len__(self) -> int:
        return int(self.con.execute("SELECT count(*) FROM memory_facts").fetchone()[0])


@dataclass
class _Prepared:
    """A batch encoded for the kernels: events sorted by (key, global order), plus the active facts
    (``ex_*``) of the keys it touches."""

    n: int
    n_keys: int
    order: np.ndarray  # sorted position -> input row
    key: np.ndarray
    gpos: np.ndarray
    obj: np.ndarray
    ts: np.ndarray
    kind: np.ndarray
    key_multi: np.ndarray
    ex_key: np.ndarray
    ex_obj: np.ndarray
    ex_id: np.ndarray
    ex_conf: np.ndarray
    ex_cnt: np.ndarray
    ex_last: np.ndarray
    ex_rate: np.ndarray

    def general_keys(self) -> np.ndarray:
        """Keys holding two or more active facts (only after multi_valued_predicates changed)."""
        return np.bincount(self.ex_key, minlength=self.n_keys) >= 2


class _Transaction:
    """BEGIN … COMMIT around a write; on any error ROLLBACK and re-read the id counters."""

    def __init__(self, store: FactStore):
        self.store = store

    def __enter__(self):
        # Re-entrant: an outer transaction (e.g. one abstraction cluster) contains inner writes.
        if self.store._tx_depth == 0:
            self.store.con.begin()
        self.store._tx_depth += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        store = self.store
        store._tx_depth -= 1
        if store._tx_depth > 0:
            return False
        con = store.con
        if exc_type is None:
            con.commit()
            return False
        try:
            con.rollback()
        finally:
            self.store._refresh_counters()
        return False


def _encode(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Dictionary-encode a string column: (int64 codes, dictionary)."""
    enc = pc.dictionary_encode(arr)
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary
