"""Reads of a FactStore: every query returns a pandas DataFrame (or a :class:`Fact`).

A mixin of :class:`factmem.store.FactStore`. Effective confidence is computed inside each query
(:func:`factmem.store.schema.effective_sql`), never stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

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
            raise InputError(f"step must be a positive number of seconds, got {step!r}")
        if end < start:
            raise InputError(f"end ({end}) is before start ({start})")
        ids = [int(i) for i in fact_ids]
        # grid points and observations in one stream per fact; each point carries forward the last
        # observation at or before it (a window scan: much faster than an ASOF join on many points)
        return self._read("""
            WITH ids AS (SELECT DISTINCT unnest($ids::BIGINT[]) AS fact_id),
            ev AS (SELECT fact_id, observed_at AS t, arg_max(confidence, id) AS confidence
                   FROM memory_evidence WHERE fact_id IN (SELECT fact_id FROM ids)
                   GROUP BY fact_id, observed_at),
            pts AS (SELECT i.fact_id, g.t, NULL::DOUBLE AS confidence, NULL::BIGINT AS obs, 1 AS is_point
                    FROM ids i CROSS JOIN (SELECT unnest(range($start, $end + 1, $step)) AS t) g
                    UNION ALL
                    SELECT fact_id, t, confidence, t, 0 FROM ev),
            filled AS (SELECT fact_id, t, is_point,
                              last_value(confidence IGNORE NULLS) OVER w AS c,
                              last_value(obs IGNORE NULLS) OVER w AS observed_at
                       FROM pts
                       WINDOW w AS (PARTITION BY fact_id ORDER BY t, is_point
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))
            SELECT p.fact_id, p.t, f.kind, f.subject, f.predicate, f.object,
                   p.c * exp(-f.decay_rate * greatest(0.0, CAST(p.t - p.observed_at AS DOUBLE) / 86400.0))
                       AS effective_confidence,
                   CASE WHEN p.observed_at IS NULL THEN NULL
                        WHEN f.status_changed_at IS NOT NULL AND f.status_changed_at <= p.t THEN f.status
                        ELSE 'active' END AS status
            FROM filled p JOIN memory_facts f ON f.id = p.fact_id
            WHERE p.is_point = 1
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
        return int(self._scalar("SELECT count(*) FROM memory_facts"))
