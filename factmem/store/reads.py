"""Reads of a FactStore: every query returns a pandas DataFrame (or a :class:`Fact`).

A mixin of :class:`factmem.store.FactStore`. Effective confidence is computed inside each query
(:func:`factmem.store.schema.effective_sql`), never stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from factmem.core.decay import age_days, effective_confidence
from factmem.core.timeutil import resolve_at, to_seconds
from factmem.errors import FactNotFoundError, InputError
from factmem.store.base import StoreBase
from factmem.store.schema import effective_sql

__all__ = ["Fact", "Reads"]


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


class Reads(StoreBase):
    """The read API (mixed into FactStore)."""

    # -- reads ---------------------------------------------------------------------------------------

    def facts(self, at: Any = None, status: str | Iterable[str] | None = None) -> pd.DataFrame:
        """Every fact (or those with ``status``), with ``effective_confidence`` at ``at``, by id."""
        at = resolve_at(at)
        where, args = "", {"at": at}
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            bad = [s for s in statuses if s not in ("active", "archived", "superseded")]
            if bad:
                raise InputError(f"unknown status {bad[0]!r}; statuses are active, archived, superseded")
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
        """The supersedes chain through ``fact_id``, oldest → newest; ``depth`` is 0 at the fact.
        A chain that loops (a file written by another tool: ``import-db`` refuses one) stops where
        it would visit a fact a second time."""
        self.get(fact_id)
        return self._read("""
            WITH RECURSIVE back(id, depth, seen) AS (
                SELECT ?::BIGINT, 0, [?::BIGINT]
                UNION ALL
                SELECT f.supersedes_id, b.depth - 1, list_append(b.seen, f.supersedes_id)
                FROM back b JOIN memory_facts f ON f.id = b.id
                WHERE f.supersedes_id IS NOT NULL AND NOT list_contains(b.seen, f.supersedes_id)
            ), fwd(id, depth, seen) AS (
                SELECT ?::BIGINT, 0, [?::BIGINT]
                UNION ALL
                SELECT f.id, w.depth + 1, list_append(w.seen, f.id)
                FROM fwd w JOIN memory_facts f ON f.supersedes_id = w.id
                WHERE NOT list_contains(w.seen, f.id)
            ), d AS (SELECT id, min(depth) AS depth FROM (SELECT id, depth FROM back UNION SELECT id, depth FROM fwd)
                     GROUP BY id)
            SELECT f.*, d.depth FROM d JOIN memory_facts f ON f.id = d.id ORDER BY d.depth""",
                          [int(fact_id)] * 4)

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

    #: The most rows :meth:`trajectories` returns unless told otherwise (about 120 bytes each in memory).
    MAX_TRAJECTORY_ROWS = 2_000_000

    def trajectories(self, fact_ids: Sequence[int], start: Any, end: Any, step: int = 86400, *,
                     max_rows: int | None = None) -> pd.DataFrame:
        """Effective confidence of ``fact_ids`` on the grid start, start+step, … ≤ end (seconds):
        reinforcements show as jumps; ``status`` is the fact's status at each time (None before its
        first observation, as is ``effective_confidence``). Rows by (fact_id, t).

        Cost: one row per (fact, grid time) — ``len(fact_ids) × ((end − start) // step + 1)`` rows of
        about 120 bytes in the result — computed with numpy from the facts' evidence (read once, in
        blocks of facts), so time and memory grow with the rows, not with the store. More than
        ``max_rows`` (default :attr:`MAX_TRAJECTORY_ROWS`, two million) is refused with the step that
        would fit: 20 facts every minute over four months are 3.5 million rows (with ``max_rows``
        raised: about 1.5 s and 0.85 GB peak on two shared cores, against 4.6 s and 1.7 GB for the
        window query this replaced); every 10 minutes, 350,000.
        """
        start, end = to_seconds(start, name="start"), to_seconds(end, name="end")
        if isinstance(step, bool) or int(step) != step or int(step) <= 0:
            raise InputError(f"step must be a positive number of seconds, got {step!r}")
        step = int(step)
        if end < start:
            raise InputError(f"end ({end}) is before start ({start})")
        limit = self.MAX_TRAJECTORY_ROWS if max_rows is None else int(max_rows)
        ids = sorted({int(i) for i in fact_ids})
        points = (end - start) // step + 1
        if len(ids) * points > limit:
            fitting = -(-(end - start) // max(limit // max(len(ids), 1) - 1, 1))
            raise InputError(
                f"trajectories: {len(ids)} facts × {points:,} times (every {step} s) = {len(ids) * points:,} rows, "
                f"more than max_rows={limit:,}; use step >= {fitting} s, fewer facts or a shorter span "
                "(or raise max_rows)")
        with self._lock:
            facts = self._db.execute(
                "SELECT id, kind, subject, predicate, object, decay_rate, status, status_changed_at FROM memory_facts "
                "WHERE id IN (SELECT unnest($ids::BIGINT[])) ORDER BY id", {"ids": ids}).df()
            # one observation per (fact, time): the confidence of the last evidence row (NULL-free, as
            # arg_max skips NULLs) — production evidence may lack confidences
            ev = self._db.execute(
                "SELECT fact_id, observed_at AS t, arg_max(confidence, id) AS confidence FROM memory_evidence "
                "WHERE fact_id IN (SELECT unnest($ids::BIGINT[])) AND observed_at <= $end "
                "GROUP BY fact_id, observed_at ORDER BY fact_id, t", {"ids": ids, "end": end}).df()
        grid = np.arange(start, end + 1, step, dtype=np.int64)
        n_f, n_t = len(facts), len(grid)
        fid = facts["id"].to_numpy(np.int64)
        # the last observation at or before each grid time, per fact: one searchsorted over (fact, t)
        ev_fact = np.searchsorted(fid, ev["fact_id"].to_numpy(np.int64))
        ev_t = ev["t"].to_numpy(np.int64)
        # the last known confidence at each observation, within its fact (an observation without one —
        # production evidence — keeps the previous confidence but still resets the age)
        raw_conf = ev["confidence"].astype("float64").to_numpy()
        known_at = np.where(~np.isnan(raw_conf), np.arange(len(ev_t)), -1)
        last_known = pd.Series(known_at).groupby(ev_fact).cummax().to_numpy() if len(ev_t) else known_at
        ev_conf = np.where(last_known >= 0, raw_conf[np.maximum(last_known, 0)], np.nan)
        span = (end - min(start, int(ev_t.min(initial=start)))) + 1
        key_ev = ev_fact.astype(np.int64) * span + (ev_t - (end - span + 1))
        rate_of = facts["decay_rate"].to_numpy(np.float64)
        changed_of = facts["status_changed_at"].astype("float64").to_numpy()
        status_of = facts["status"].to_numpy(object)
        no_status = np.array(None, dtype=object)  # before the first observation
        eff = np.empty(n_f * n_t)
        status = np.empty(n_f * n_t, dtype=object)
        per_block = max(1, (1 << 18) // max(n_t, 1))  # facts per block: about 262k rows of temporaries at once
        for a in range(0, n_f, per_block):  # blocks of facts bound the temporaries' memory
            b = min(a + per_block, n_f)
            row_fact = np.repeat(np.arange(a, b, dtype=np.int64), n_t)
            row_t = np.tile(grid, b - a)
            if len(ev_t):
                pos = np.searchsorted(key_ev, row_fact * span + (row_t - (end - span + 1)), "right") - 1
                has = (pos >= 0) & (ev_fact[np.maximum(pos, 0)] == row_fact)
                pos = np.maximum(pos, 0)
                observed, conf = ev_t[pos], np.where(has, ev_conf[pos], np.nan)
            else:
                has, observed, conf = np.zeros(len(row_t), bool), row_t, np.full(len(row_t), np.nan)
            with np.errstate(invalid="ignore", over="ignore"):
                block_eff = conf * np.exp(-rate_of[row_fact] * np.maximum(0.0, (row_t - observed).astype(np.float64)
                                                                          / 86400.0))
            changed = changed_of[row_fact]
            eff[a * n_t:b * n_t] = np.where(has, block_eff, np.nan)
            status[a * n_t:b * n_t] = np.where(~has, no_status, np.where(~np.isnan(changed) & (changed <= row_t),
                                                                         status_of[row_fact], "active"))
        take = np.repeat(np.arange(n_f, dtype=np.int64), n_t)
        return pd.DataFrame({
            "fact_id": fid[take], "t": np.tile(grid, n_f),
            **{c: pd.Series(facts[c].array.take(take)) for c in ("kind", "subject", "predicate", "object")},
            "effective_confidence": eff,
            "status": pd.array(status, dtype=facts["status"].dtype),
        })

    def stats(self, at: Any = None) -> pd.DataFrame:
        """Counts of facts by kind and status, with mean effective confidence."""
        at = resolve_at(at)
        return self._read(f"""SELECT kind, status, count(*) AS facts,
                   avg({effective_sql('$at')}) AS mean_effective_confidence
            FROM memory_facts GROUP BY kind, status ORDER BY kind, status""", {"at": at})

    def query(self, sql: str, params: Any = None) -> pd.DataFrame:
        """Run a read query against the store's tables; for exploration in notebooks. (A statement
        that is not a SELECT still runs; the next ``remember`` then rebuilds its in-process state.)"""
        with self._lock:
            out = self._read(sql, params)
            try:
                kinds = {s.type for s in self._db.extract_statements(sql)}
            except duckdb.Error:
                kinds = set()
            if kinds - {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}:
                self._active = None
            return out

    def __len__(self) -> int:
        return int(self._scalar("SELECT count(*) FROM memory_facts"))
