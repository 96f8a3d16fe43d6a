"""The mention log of a production memory, rebuilt from its evidence.

A production memory in the seed's schema (a SQLite file; :mod:`factmem.export.sqlite`) carries its own
history: ``memory_evidence`` holds one row per observation (``fact_id``, ``session_id``, ``message_id``,
``observed_at``) and ``memory_facts`` the triples and kinds. :func:`read_production` validates the file
with :func:`factmem.export.sqlite_format.validate_sqlite` (tables, columns, storage classes, kinds, statuses),
then reads it in chunks of rows and returns a :class:`ProductionLog`:

* **Observations** — the evidence rows that are replayed: ``source = 'observation'``, or ``source``
  NULL (a production crate writes no factmem extras) on a fact whose kind is not ``derived``. Each is
  one mention ``(observed_at, subject, predicate, object, kind)`` of its fact's triple. The seed's
  evidence does not record the kind a mention carried: it is its fact's kind (this matters only when
  a replay under other parameters inserts a new fact where production reinforced one of another
  kind). Mentions are ordered by ``(observed_at, evidence id)``: the order the memory saw them in.
* **Not replayed** — evidence of abstraction (``source = 'abstraction'``, or NULL on a derived fact),
  derived facts and ``memory_fact_links``: counted (:attr:`ProductionLog.counts`) and reported.
* **Sessions** are the evidence's ``session_id``; **messages** one per (session, ``message_id``), at
  its first observation. Observations without a session are replayed but start no session (they are
  no evaluation point of the context metrics).

:meth:`ProductionLog.prepared` encodes the log as a :class:`~factmem.evaluation.simulate.PreparedLog`
(no truth), which is what :class:`~factmem.evaluation.context.ContextEvaluator` and
:func:`~factmem.evaluation.simulate.kernel_beliefs` take.

**Bad input** — each a :class:`~factmem.errors.ProductionDBError` naming the file and the problem,
raised before anything is computed: not a SQLite file, not the seed's schema (the validation of
:mod:`factmem.export.sqlite`), an empty evidence table or one without observations, evidence pointing
at facts ``memory_facts`` does not have, an unknown ``source`` value, unreadable ``factmem_meta``
parameters.

**Memory**: strings are read into Arrow and kept dictionary-encoded (pandas categoricals), numbers as
numpy arrays allocated once; nothing holds one Python object per row, and the pages the row-by-row
reading churned through are handed back (:func:`release_memory`). Measured on a 10M-observation file
(``benchmarks/bench_whatif.py``): the read peaks at about 2 GB of resident memory, the whole what-if at
about 3.5 GB.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from factmem.core.codes import KINDS, STATUSES
from factmem.core.params import MemoryParams
from factmem.data.logs import Dataset, empty_generalizations, empty_truth
from factmem.errors import ProductionDBError
from factmem.evaluation.simulate import PreparedLog
from factmem.export.sqlite_format import read_meta, read_meta_params, text_error, validate_sqlite

__all__ = ["OBSERVATION", "ABSTRACTION", "NO_ID", "CHUNK_ROWS", "ProductionLog", "read_production",
           "file_sha256", "release_memory"]

OBSERVATION = "observation"
ABSTRACTION = "abstraction"
#: "no fact" in id columns (``supersedes_id`` NULL)
NO_ID = int(np.iinfo(np.int64).min)
#: rows fetched from SQLite at a time
CHUNK_ROWS = 200_000

# source codes while reading
_SRC_OBS, _SRC_ABS, _SRC_NULL = 0, 1, 2


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(eq=False)
class ProductionLog:
    """A production memory file, read for replay.

    ``facts``: one row per ``memory_facts`` row in id order — ``id``, ``subject``, ``predicate``,
    ``object`` (categoricals), ``kind``, ``confidence``, ``reinforcement_count``, ``first_seen``,
    ``last_reinforced``, ``decay_rate``, ``status``, ``supersedes_id`` (:data:`NO_ID` when NULL),
    ``status_changed_at`` (-1 when unknown or NULL), ``status_reason`` (None when unknown), and
    per fact the number of ``observations`` and of ``abstraction_evidence`` rows.
    ``events``: the observations in replay order — ``evidence_id``, ``fact`` (row of ``facts``),
    ``ts``, ``session_id``, ``message_id`` (categoricals; missing when NULL).
    ``counts``: rows read and what is not replayed. ``saved_params``: the parameters in
    ``factmem_meta`` (a file factmem wrote), else None. ``latest``: the latest time the file records
    (observations, fact times, status changes, links). ``meta``: every ``factmem_meta`` key (the
    parameters' fingerprint and consolidation period among them). ``facts["has_state"]``: the fact has
    a ``factmem_fact_state`` row (a client that does not keep the table writes none for the facts it
    archives or supersedes). ``extra_columns``: columns a deployment added to the seed's tables, per
    table (ignored).
    """

    path: Path
    sha256: str
    size_bytes: int
    tables: list[str]
    facts: pd.DataFrame
    events: pd.DataFrame
    counts: dict[str, int]
    saved_params: MemoryParams | None
    has_fact_state: bool
    latest: int
    meta: dict[str, str] = field(default_factory=dict)
    extra_columns: dict[str, list[str]] = field(default_factory=dict)
    _prepared: dict = field(default_factory=dict, repr=False)

    @property
    def first(self) -> int:
        """Time of the first observation."""
        return int(self.events["ts"].iloc[0])

    @property
    def last(self) -> int:
        """Time of the last observation."""
        return int(self.events["ts"].iloc[-1])

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256, "size_bytes": self.size_bytes,
                "tables": list(self.tables), "counts": dict(self.counts), "first_observation": self.first,
                "last_observation": self.last, "latest": self.latest, "has_fact_state": self.has_fact_state,
                "has_saved_params": self.saved_params is not None, "extra_columns": dict(self.extra_columns)}

    # -- encodings shared by the replays and the context metrics ------------------------------------

    def fact_codes(self, column: str) -> np.ndarray:
        """Integer codes of a categorical fact column (subject, predicate, object, kind)."""
        return np.asarray(self.facts[column].cat.codes, dtype=np.int64)

    def event_codes(self, column: str) -> np.ndarray:
        """Per observation, the code of its fact's ``column``."""
        return self.fact_codes(column)[self.events["fact"].to_numpy()]

    def triple_of_fact(self) -> tuple[np.ndarray, pd.MultiIndex]:
        """Triple code of each fact with observations (-1 for the others) and the triples, as a
        MultiIndex over the facts' subject/predicate/object categories."""
        if "triple" not in self._prepared:
            s, p, o = (self.fact_codes(c) for c in ("subject", "predicate", "object"))
            observed = self.facts["observations"].to_numpy() > 0
            n_p = len(self.facts["predicate"].cat.categories)
            n_o = len(self.facts["object"].cat.categories)
            sp = s * np.int64(n_p) + p
            sp_code, _ = pd.factorize(sp[observed])
            raw = sp_code.astype(np.int64) * np.int64(n_o) + o[observed]
            code, _ = pd.factorize(raw)
            triple = np.full(len(s), -1, np.int64)
            triple[observed] = code
            _, first_of_code = np.unique(code, return_index=True)  # codes number first appearances
            first = np.flatnonzero(observed)[first_of_code]  # a fact of each triple (the first)
            levels = [self.facts[c].cat.categories for c in ("subject", "predicate", "object")]
            triples = pd.MultiIndex(levels=levels, codes=[s[first], p[first], o[first]],
                                    names=["subject", "predicate", "object"], verify_integrity=False)
            self._prepared["triple"] = (triple, triples)
        return self._prepared["triple"]

    def prepared(self, *, sessions_only: bool = False) -> PreparedLog:
        """The rebuilt log as a :class:`PreparedLog` (no truth). ``sessions_only``: only the
        observations with a session (what :class:`~factmem.evaluation.context.ContextEvaluator`
        builds its evaluation points from); triple codes are the same either way."""
        key = "sessions" if sessions_only else "all"
        if key not in self._prepared:
            self._prepared[key] = self._build_prepared(sessions_only)
        return self._prepared[key]

    def _build_prepared(self, sessions_only: bool) -> PreparedLog:
        fact_triple, triples = self.triple_of_fact()
        ev = self.events
        keep = ev["session_id"].notna().to_numpy() if sessions_only else np.ones(len(ev), bool)
        every = bool(keep.all())  # then views, not copies: the log is large
        fact = ev["fact"].to_numpy() if every else ev["fact"].to_numpy()[keep]
        ts = ev["ts"].to_numpy() if every else ev["ts"].to_numpy()[keep]

        def of_fact(column: str) -> pd.Categorical:
            return pd.Categorical.from_codes(self.fact_codes(column)[fact], dtype=self.facts[column].dtype)

        sessions = ev["session_id"].array if every else ev["session_id"].array[keep]
        message_ids = ev["message_id"].array if every else ev["message_id"].array[keep]
        events = pd.DataFrame({
            "ts": ts, "subject": of_fact("subject"), "predicate": of_fact("predicate"), "object": of_fact("object"),
            "kind": of_fact("kind"), "session_id": sessions, "message_id": message_ids,
            "note": pd.Categorical.from_codes(np.full(len(ts), -1, np.int8), categories=pd.Index([], dtype=str)),
        }, copy=False)
        # messages: one per (session, message id) with a session, at its first observation
        sess = np.asarray(sessions.codes, np.int64)
        msg = np.asarray(message_ids.codes, np.int64)
        has = sess >= 0
        n_msg = len(ev["message_id"].cat.categories) + 1
        pair = sess[has] * np.int64(n_msg) + (msg[has] + 1)
        _, first_row = np.unique(pair, return_index=True)  # the first occurrence: events are in time order
        rows = np.flatnonzero(has)[np.sort(first_row)]
        messages = pd.DataFrame({
            "session_id": sessions[rows], "message_id": message_ids[rows],
            "ts": ts[rows], "speaker": pd.Categorical.from_codes(np.zeros(len(rows), np.int8), categories=["user"]),
            "text": pd.Categorical.from_codes(np.zeros(len(rows), np.int8), categories=[""]),
        })
        start, end = self.first, max(self.latest, self.last)
        dataset = Dataset(path=None, events=events, truth=empty_truth(), generalizations=empty_generalizations(),
                          scenario={"start": start, "end": end}, messages=messages, _sha256=self.sha256)
        ev_triple = fact_triple[fact]
        truth = pd.DataFrame({"triple": np.zeros(0, np.int64), "kind": np.zeros(0, np.int64),
                              "valid_from": np.zeros(0, np.int64), "valid_to": pd.array([], dtype="Int64"),
                              "relevant_until": pd.array([], dtype="Int64")})
        return PreparedLog(dataset=dataset, events=events, triples=triples, ev_triple=ev_triple, truth=truth,
                           mentions=pd.DataFrame({"triple": ev_triple, "ts": ts}, copy=False), start=start,
                           end=end)


# -- reading ---------------------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.DatabaseError as exc:  # validate_sqlite opened it a moment ago: rare
        raise ProductionDBError(f"{path}: cannot open: {exc}") from None


def _chunks(sq: sqlite3.Connection, sql: str):
    cur = sq.execute(sql)
    while True:
        rows = cur.fetchmany(CHUNK_ROWS)
        if not rows:
            return
        yield list(zip(*rows))


def _ints(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _floats(values) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def _categorical(parts: list[pa.Array], categories: list[str] | None = None) -> pd.Categorical:
    """Strings read in chunks as one categorical (missing where NULL), without a Python object per row."""
    chunked = pa.chunked_array(parts, type=pa.string())
    if categories is not None:
        codes = pc.index_in(chunked, value_set=pa.array(categories, pa.string()))
        codes_np = np.asarray(codes.fill_null(-1).to_numpy(), dtype=np.int64) if len(chunked) else np.zeros(0, np.int64)
        return pd.Categorical.from_codes(codes_np.astype(np.int32), categories=list(categories))
    if len(chunked) == 0:
        return pd.Categorical.from_codes(np.zeros(0, np.int32), categories=pd.Index([], dtype=str))
    enc = pc.dictionary_encode(chunked).unify_dictionaries()
    dictionary = enc.chunk(0).dictionary if enc.num_chunks else pa.array([], pa.string())
    codes = np.concatenate([np.asarray(c.indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int32)
                            for c in enc.chunks])
    return pd.Categorical.from_codes(codes, categories=pd.Index(dictionary.to_pandas(), dtype=str))


def read_production(path: str | os.PathLike) -> ProductionLog:
    """Validate a production memory file and read it for replay (see the module docstring)."""
    path = Path(path)
    info = validate_sqlite(path)  # ProductionDBError on anything not in the seed's schema
    counts = info["counts"]
    if counts["memory_evidence"] == 0:
        raise ProductionDBError(f"{path}: table memory_evidence is empty: there are no observations to replay")
    tables = info["tables"]
    has_state = "factmem_fact_state" in tables
    ev_cols = set(info["evidence_columns"])
    sq = _connect(path)
    try:
        saved = read_meta_params(path, sq, tables)
        meta = read_meta(path, sq, tables)
        facts = _read_facts(sq, has_state)
        evidence = _read_evidence(path, sq, ev_cols, counts["memory_evidence"])
        link_max = sq.execute("SELECT max(created_at) FROM memory_fact_links").fetchone()[0]
    except sqlite3.OperationalError as exc:  # text that is not UTF-8: named by table, row and column
        raise text_error(path, sq, exc) from None
    finally:
        sq.close()

    # evidence -> fact rows; every fact_id must exist
    fact_ids = facts["id"].to_numpy()
    ev_fact_id = evidence["fact_id"]
    fact_row = np.searchsorted(fact_ids, ev_fact_id)
    np.minimum(fact_row, max(len(fact_ids) - 1, 0), out=fact_row)
    found = fact_ids[fact_row] == ev_fact_id if len(fact_ids) else np.zeros(len(fact_row), bool)
    if not found.all():
        bad = np.flatnonzero(~found)
        i = bad[np.argmin(evidence["evidence_id"][bad])]
        raise ProductionDBError(
            f"{path}: table memory_evidence: column 'fact_id': {len(bad)} rows point at facts memory_facts does "
            f"not have (first: evidence id {int(evidence['evidence_id'][i])} -> fact_id {int(ev_fact_id[i])})")
    del found, ev_fact_id
    evidence.pop("fact_id")
    derived = (np.asarray(facts["kind"].cat.codes)[fact_row] == KINDS.index("derived"))
    src = evidence["source"]
    observation = (src == _SRC_OBS) | ((src == _SRC_NULL) & ~derived)
    n_obs = int(observation.sum())
    if n_obs == 0:
        raise ProductionDBError(f"{path}: table memory_evidence has {len(src)} rows but no observation "
                                "(only abstraction evidence): there is nothing to replay")
    n_facts = len(facts)
    facts["observations"] = np.bincount(fact_row[observation], minlength=n_facts)
    facts["abstraction_evidence"] = np.bincount(fact_row[~observation], minlength=n_facts)

    # observations in the order the memory saw them: (observed_at, evidence id) — usually the
    # order of the rows already (ids grow with time), and then they are kept without a copy
    eid, observed = evidence["evidence_id"], evidence["observed_at"]
    in_order = bool((np.diff(eid) > 0).all() and (np.diff(observed) >= 0).all())
    sel = None if n_obs == len(src) else np.flatnonzero(observation)
    if not in_order:
        sel = np.lexsort((eid, observed)) if sel is None else sel[np.lexsort((eid[sel], observed[sel]))]

    def take(values, rows=sel):
        return values if rows is None else values[rows]

    events = pd.DataFrame({
        "evidence_id": take(eid), "fact": take(fact_row), "ts": take(observed),
        "session_id": take(evidence["session_id"]), "message_id": take(evidence["message_id"]),
    }, copy=False)
    latest_parts = [int(evidence["observed_at"].max()), int(facts["first_seen"].max()),
                    int(facts["last_reinforced"].max()), int(facts["status_changed_at"].max())]
    if link_max is not None:
        latest_parts.append(int(link_max))
    is_derived_fact = np.asarray(facts["kind"].cat.codes) == KINDS.index("derived")
    no_obs = facts["observations"].to_numpy() == 0
    counts_out = {
        "facts": n_facts, "links": int(counts["memory_fact_links"]), "evidence": int(len(src)),
        "observations": n_obs, "abstraction_evidence": int(len(src) - n_obs),
        "evidence_source_null": int((src == _SRC_NULL).sum()),
        "derived_facts": int(is_derived_fact.sum()),
        "facts_without_observations": int((no_obs & ~is_derived_fact).sum()),
        "observations_without_session": int(events["session_id"].isna().sum()),
        "sessions": int(events["session_id"].nunique()),
        "messages": _count_messages(events),
        "subjects": int(pd.unique(facts["subject"].cat.codes[facts["observations"].to_numpy() > 0]).size),
    }
    del evidence, src, observation, sel, eid, observed, fact_row, derived
    release_memory()
    return ProductionLog(path=path, sha256=file_sha256(path), size_bytes=path.stat().st_size, tables=tables,
                         facts=facts, events=events, counts=counts_out, saved_params=saved,
                         has_fact_state=has_state, latest=max(latest_parts), meta=meta,
                         extra_columns=dict(info.get("extra_columns", {})))


def release_memory() -> None:
    """Hand memory freed by a large read back to the operating system.

    SQLite's Python API yields one Python object per value: reading millions of rows churns through
    many short-lived objects, and the allocators keep the freed pages (glibc's heap, Arrow's pool) —
    on a 10M-row file over a gigabyte of resident memory holding nothing. Releasing it keeps the
    what-if's peak within its bound; it changes no result."""
    pa.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        libc_name = ctypes.util.find_library("c")
        if libc_name:
            try:
                trim = ctypes.CDLL(libc_name).malloc_trim
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                return
            trim(0)


def _count_messages(events: pd.DataFrame) -> int:
    """Distinct (session, message id) pairs among observations with a session."""
    sess = np.asarray(events["session_id"].cat.codes, np.int64)
    msg = np.asarray(events["message_id"].cat.codes, np.int64)
    has = sess >= 0
    n_msg = len(events["message_id"].cat.categories) + 1
    return int(np.unique(sess[has] * np.int64(n_msg) + (msg[has] + 1)).size)


def _read_facts(sq: sqlite3.Connection, has_state: bool) -> pd.DataFrame:
    state = "s.status_changed_at, s.status_reason, s.id IS NOT NULL" if has_state else "NULL, NULL, 0"
    join = "LEFT JOIN factmem_fact_state s ON s.id = f.id" if has_state else ""
    sql = (f"SELECT f.id, f.subject, f.predicate, f.object, f.kind, f.confidence, f.reinforcement_count, "
           f"f.first_seen, f.last_reinforced, f.decay_rate, f.status, f.supersedes_id, {state} "
           f"FROM memory_facts f {join} ORDER BY f.id")
    ints: dict[str, list[np.ndarray]] = {c: [] for c in ("id", "reinforcement_count", "first_seen", "last_reinforced",
                                                         "supersedes_id", "status_changed_at", "has_state")}
    floats: dict[str, list[np.ndarray]] = {"confidence": [], "decay_rate": []}
    strings: dict[str, list[pa.Array]] = {c: [] for c in ("subject", "predicate", "object", "kind", "status",
                                                          "status_reason")}
    for cols in _chunks(sq, sql):
        (fid, subj, pred, obj, kind, conf, cnt, first, last, rate, status, sup, changed, why, has_row) = cols
        ints["has_state"].append(_ints(has_row))
        ints["id"].append(_ints(fid))
        ints["reinforcement_count"].append(_ints(cnt))
        ints["first_seen"].append(_ints(first))
        ints["last_reinforced"].append(_ints(last))
        ints["supersedes_id"].append(_ints([NO_ID if v is None else v for v in sup]))
        ints["status_changed_at"].append(_ints([-1 if v is None else v for v in changed]))
        floats["confidence"].append(_floats(conf))
        floats["decay_rate"].append(_floats(rate))
        for name, values in (("subject", subj), ("predicate", pred), ("object", obj), ("kind", kind),
                             ("status", status), ("status_reason", why)):
            strings[name].append(pa.array(values, pa.string()))

    def cat(name: str) -> np.ndarray:
        return np.concatenate(ints[name]) if ints[name] else np.zeros(0, np.int64)

    out = pd.DataFrame({"id": cat("id")})
    for name in ("subject", "predicate", "object"):
        out[name] = _categorical(strings[name])
    out["kind"] = _categorical(strings["kind"], list(KINDS))
    out["confidence"] = np.concatenate(floats["confidence"]) if floats["confidence"] else np.zeros(0)
    for name in ("reinforcement_count", "first_seen", "last_reinforced"):
        out[name] = cat(name)
    out["decay_rate"] = np.concatenate(floats["decay_rate"]) if floats["decay_rate"] else np.zeros(0)
    out["status"] = _categorical(strings["status"], list(STATUSES))
    out["supersedes_id"] = cat("supersedes_id")
    out["status_changed_at"] = cat("status_changed_at")
    out["status_reason"] = _categorical(strings["status_reason"], ["contradiction", "decay", "pruned"])
    out["has_state"] = cat("has_state").astype(bool)
    return out


def _read_evidence(path: Path, sq: sqlite3.Connection, present: set[str], n_rows: int) -> dict[str, Any]:
    """The evidence table in chunks, into arrays allocated once (``n_rows`` from the validation)."""
    id_col = "id" if "id" in present else "rowid"
    src_col = "source" if "source" in present else "NULL"
    sql = f"SELECT {id_col}, fact_id, session_id, message_id, observed_at, {src_col} FROM memory_evidence"
    out = {name: np.empty(n_rows, np.int64) for name in ("evidence_id", "fact_id", "observed_at")}
    sources = np.empty(n_rows, np.int8)
    sessions: list[pa.Array] = []
    messages: list[pa.Array] = []
    value_set = pa.array([OBSERVATION, ABSTRACTION], pa.string())
    at = 0
    for cols in _chunks(sq, sql):
        eid, fid, sess, msg, obs, src = cols
        end = at + len(eid)
        if end > n_rows:  # the file grew since it was validated: a writer is at work
            raise ProductionDBError(f"{path}: table memory_evidence changed while it was read; copy the file first")
        out["evidence_id"][at:end] = eid
        out["fact_id"][at:end] = fid
        out["observed_at"][at:end] = obs
        sessions.append(pa.array(sess, pa.string()))
        messages.append(pa.array(msg, pa.string()))
        s = pa.array(src, pa.string())
        code = np.asarray(pc.index_in(s, value_set=value_set).fill_null(-1).to_numpy(zero_copy_only=False), np.int8)
        unknown = (code < 0) & ~np.asarray(s.is_null().to_numpy(zero_copy_only=False), bool)
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            n = int(sq.execute("SELECT count(*) FROM memory_evidence WHERE source IS NOT NULL AND source NOT IN "
                               "('observation', 'abstraction')").fetchone()[0])
            raise ProductionDBError(
                f"{path}: table memory_evidence: column 'source': unknown value {src[i]!r} at evidence id {eid[i]} "
                f"({n} rows); allowed: observation, abstraction, NULL")
        code[code < 0] = _SRC_NULL
        sources[at:end] = code
        at = end
    if at != n_rows:
        raise ProductionDBError(f"{path}: table memory_evidence changed while it was read; copy the file first")
    return {**out, "source": sources, "session_id": _categorical(sessions), "message_id": _categorical(messages)}
