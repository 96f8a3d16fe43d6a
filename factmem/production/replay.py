"""Replays of a production memory's rebuilt log, and the check that they reproduce the file.

**Replay.** :func:`replay_log` runs the rebuilt mention log (:mod:`factmem.production.rebuild`) through
the vectorized engine of ``FactStore.replay`` (:func:`factmem.engine.waves.replay_waves`: set-based,
never event by event) with consolidations at ``grid``, and returns per observation the state it left
(:class:`Replay`): confidence, whether it inserted a fact, the observation that inserted the fact it
belongs to, when and why that state ended, the fact's decay rate. A fact is identified by the
observation that inserted it, so two replays of one log can be compared fact by fact.

**The schedule** (:func:`consolidation_grid`). The seed's schema records no consolidation times: the
replay consolidates at every multiple of ``period`` seconds since the Unix epoch (daily: midnight UTC)
after the first observation and up to ``until`` — by default the latest time the file records, so a
consolidation that archived a fact in production is replayed, and none after the last recorded
change is invented. More than :data:`MAX_CONSOLIDATIONS` is refused (say ``--consolidate-every``).

**Reproduction** (:func:`check_reproduction`). The replay under the parameters production ran must
rebuild the file's facts. Per production fact with observations it checks: the replay inserts it at
its first observation and attributes exactly its evidence rows to it (``evidence``: the fact ids);
``status``; ``confidence`` (within ``rtol = 1e-9``, ``atol = 1e-12``); ``reinforcement_count``;
``first_seen`` and ``last_reinforced``; ``decay_rate`` (within the same tolerance); ``supersedes_id``;
and ``status_changed_at`` where the file has a ``factmem_fact_state`` row for the fact — a client that
does not keep the table (a seed-style crate continuing an exported file) writes none for the facts it
archives or supersedes, and their time is unknown, not wrong (``Reproduction.without_state`` counts the
facts that left ``active`` without a row; the report names the cause). A mismatch is
information, not an error: each failing fact is listed with the checks it fails and a likely cause —
derived facts are not replayed; a fact pruned under a derived fact, or touched by abstraction
evidence, cannot be reproduced without the abstraction; facts of a (subject, predicate) where that
happened earlier inherit the difference; a stored decay rate other than the parameters' says the rows
were written under other parameters; the rest is unexplained (another version or another consolidation
schedule). The report counts them and the comparison goes on with every fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.codes import KIND_CODES, OPEN, EndReason, Status
from factmem.core.params import MemoryParams
from factmem.engine import waves
from factmem.errors import InputError
from factmem.production.rebuild import NO_ID, ProductionLog, release_memory

__all__ = ["MAX_CONSOLIDATIONS", "RTOL", "ATOL", "CHECKS", "CAUSES", "Replay", "consolidation_grid", "encode",
           "replay_log", "Reproduction", "check_reproduction"]

#: more consolidations than this are refused (a daily schedule over ~270 years)
MAX_CONSOLIDATIONS = 100_000
#: tolerances of the float checks (confidence, decay rate)
RTOL = 1e-9
ATOL = 1e-12
#: the per-fact checks of :func:`check_reproduction`, in report order
CHECKS: tuple[str, ...] = ("evidence", "status", "confidence", "reinforcement_count", "first_seen",
                           "last_reinforced", "decay_rate", "supersedes_id", "status_changed_at")
#: likely causes of a failure, in the order they are attributed
CAUSES: dict[str, str] = {
    "pruned": "pruned under a derived fact (abstraction is not replayed)",
    "abstraction_evidence": "touched by abstraction evidence (not replayed)",
    "after_abstraction": "its (subject, predicate) had a fact pruned or touched by abstraction earlier",
    "other_decay_rate": "its stored decay rate is not the current parameters' (written under other parameters)",
    "unexplained": "unexplained (rows written by another version, or another consolidation schedule)",
}


def consolidation_grid(first: int, until: int, period: int) -> np.ndarray:
    """Consolidation times: multiples of ``period`` (seconds since the epoch) in ``(first, until]``."""
    period = int(period)
    if period <= 0:
        raise InputError(f"the consolidation period must be a positive number of seconds, got {period!r}")
    start = (int(first) // period) * period
    n = max(0, (int(until) - start) // period)
    if n > MAX_CONSOLIDATIONS:
        raise InputError(f"consolidating every {period / 3600:g} h from {first} to {until} makes {n} "
                         f"consolidations (more than {MAX_CONSOLIDATIONS}); pass a longer --consolidate-every")
    return waves.grid_between(start, int(until), period)


@dataclass
class Encoded:
    """The rebuilt log encoded for the engine under one set of multi-valued predicates: observations
    sorted by (key, replay order), as the engine takes them, shared by every replay with these keys."""

    order: np.ndarray  # key-sorted position -> observation index
    key: np.ndarray  # key-sorted
    n_keys: int
    obj: np.ndarray  # key-sorted
    ts: np.ndarray  # key-sorted
    kind: np.ndarray  # key-sorted
    predicate: np.ndarray  # key-sorted
    predicate_names: tuple[str, ...]
    previous: np.ndarray  # per observation (replay order): the previous observation of its key, -1 at the first


def encode(log: ProductionLog, multi_valued: frozenset[str] | set[str]) -> Encoded:
    """Keys (subject, predicate — plus object for multi-valued predicates) of the observations."""
    s, p, o = (log.event_codes(c) for c in ("subject", "predicate", "object"))
    names = tuple(str(x) for x in log.facts["predicate"].cat.categories)
    multi = np.isin(np.asarray(names, dtype=object), sorted(multi_valued))[p] if names else np.zeros(len(p), bool)
    n_p, n_o = max(len(names), 1), len(log.facts["object"].cat.categories) + 1
    sp, _ = pd.factorize(s * np.int64(n_p) + p)
    del s
    key, uniq = pd.factorize(sp.astype(np.int64) * np.int64(n_o) + np.where(multi, o + 1, 0))
    del sp, multi
    order = np.argsort(key, kind="stable")  # observations are in replay order already
    key = key[order].astype(np.int64)
    kind_names = list(log.facts["kind"].cat.categories)
    kind_map = np.array([KIND_CODES[k] for k in kind_names], dtype=np.int8)
    previous = np.full(len(key), -1, np.int64)
    same = key[1:] == key[:-1]
    previous[order[1:][same]] = order[:-1][same]
    # objects and predicates fit 32 bits (they are category codes): half the memory on a large log
    return Encoded(order=order, key=key, n_keys=len(uniq), obj=o[order].astype(np.int32),
                   ts=log.events["ts"].to_numpy()[order], kind=kind_map[log.event_codes("kind")[order]],
                   predicate=p[order].astype(np.int32), predicate_names=names, previous=previous)


@dataclass
class Replay:
    """One parameter set's replay of the rebuilt log, per observation (in replay order).

    ``conf``: confidence after the observation; ``inserted``: it inserted a new fact; ``origin``: the
    observation that inserted the fact current after it (the fact's identity); ``end``/``reason``:
    when and why that state ended (:class:`~factmem.core.codes.EndReason`; OPEN = still active at the
    end of ``grid``); ``rate``: the fact's decay rate; ``previous``: the previous observation of the
    same key (-1 at a key's first).
    """

    params: MemoryParams
    grid: np.ndarray
    conf: np.ndarray
    inserted: np.ndarray
    origin: np.ndarray
    end: np.ndarray
    reason: np.ndarray
    rate: np.ndarray
    previous: np.ndarray

    def beliefs(self, log: ProductionLog, triple: np.ndarray) -> dict[str, np.ndarray]:
        """Belief states in the columns :meth:`ContextEvaluator.score` takes (one per observation)."""
        return {"triple": triple, "start": log.events["ts"].to_numpy(), "end": self.end, "reason": self.reason,
                "confidence": self.conf, "rate": self.rate, "fact": self.origin}


def replay_log(log: ProductionLog, params: MemoryParams, grid: np.ndarray, encoded: Encoded | None = None) -> Replay:
    """Replay the rebuilt log under ``params`` with consolidations at ``grid`` (an empty memory first)."""
    enc = encoded if encoded is not None else encode(log, params.multi_valued_predicates)
    release_memory()  # the engine's working arrays are large: start from what is really in use
    order = enc.order
    grid = np.asarray(grid, np.int64)
    res = waves.replay_waves(enc.key, enc.obj, enc.ts, enc.kind, enc.n_keys, waves.ParamArrays.of([params]), grid,
                             horizon=int(grid[-1]) if grid.size else None, predicate=enc.predicate,
                             predicate_names=enc.predicate_names)
    n = len(order)

    def back(name: str, dtype) -> np.ndarray:  # engine rows -> key-sorted positions -> observations
        out = np.empty(n, dtype)
        out[order] = getattr(res, name)[0][res.row_of_event]
        setattr(res, name, None)  # a 10M-observation log: free each engine result once it is moved
        return out

    conf, inserted, end = back("conf", np.float64), back("inserted", bool), back("end", np.int64)
    reason, rate = back("reason", np.int8), back("rate", np.float64)
    origin = order[back("origin", np.int64)]  # key-sorted position of the inserting observation -> observation
    return Replay(params=params, grid=grid, conf=conf, inserted=inserted, origin=origin, end=end, reason=reason,
                  rate=rate, previous=enc.previous)


# -- reproduction ----------------------------------------------------------------------------------------


@dataclass
class Reproduction:
    """How well the replay under the current parameters rebuilds the production file's facts.

    ``failures``: one row per fact that fails any check — id, subject, predicate, object, kind,
    status, the failing checks (``checks``, comma-separated), ``cause`` (a key of :data:`CAUSES`) and the
    replay's values beside production's. ``by_check``/``by_cause``: counts. ``renumbered``: facts whose
    id differs from the one the replay would number them with (derived facts created between
    observations take ids a replay of observations does not hand out)."""

    facts: int
    checked: int
    reproduced: int
    derived: int
    without_observations: int
    renumbered: int
    by_check: dict[str, int]
    by_cause: dict[str, int]
    checks_skipped: list[str]
    failures: pd.DataFrame = field(repr=False)
    without_state: int = 0

    @property
    def failed(self) -> int:
        return self.checked - self.reproduced

    def to_dict(self) -> dict[str, Any]:
        return {"facts": self.facts, "checked": self.checked, "reproduced": self.reproduced, "failed": self.failed,
                "derived": self.derived, "without_observations": self.without_observations,
                "renumbered": self.renumbered, "by_check": dict(self.by_check), "by_cause": dict(self.by_cause),
                "checks_skipped": list(self.checks_skipped), "without_state": self.without_state}


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.isclose(a, b, rtol=RTOL, atol=ATOL) | (a == b)


def check_reproduction(log: ProductionLog, replay: Replay) -> Reproduction:
    """Compare the replay (under the parameters production ran) with the file's facts, fact by fact."""
    facts = log.facts
    n_facts = len(facts)
    fact = log.events["fact"].to_numpy()
    ts = log.events["ts"].to_numpy()
    n = len(fact)
    obs_count = facts["observations"].to_numpy()
    checked = obs_count > 0
    # each fact's first and last observation (observations are in replay order)
    first_ev = np.full(n_facts, n, np.int64)
    np.minimum.at(first_ev, fact, np.arange(n))
    last_ev = np.full(n_facts, -1, np.int64)
    np.maximum.at(last_ev, fact, np.arange(n))
    is_first = first_ev[fact] == np.arange(n)

    # evidence: the replay inserts at the fact's first observation and attributes the same rows to it
    bad_ev = (replay.inserted != is_first) | (fact[replay.origin] != fact)
    ok = {"evidence": np.bincount(fact[bad_ev], minlength=n_facts) == 0}
    fe, le = np.where(checked, first_ev, 0), np.where(checked, last_ev, 0)
    reason = replay.reason[le]
    status = np.select([reason == EndReason.SUPERSEDED, reason == EndReason.ARCHIVED],
                       [Status.SUPERSEDED, Status.ARCHIVED], Status.ACTIVE)
    status_map = np.array([Status[s.upper()] for s in facts["status"].cat.categories], np.int64)
    prod_status = status_map[np.asarray(facts["status"].cat.codes, np.int64)]
    ok["status"] = (status == prod_status) & (reason != EndReason.REINFORCED)
    ok["confidence"] = _close(replay.conf[le], facts["confidence"].to_numpy())
    ok["reinforcement_count"] = obs_count - 1 == facts["reinforcement_count"].to_numpy()
    ok["first_seen"] = ts[fe] == facts["first_seen"].to_numpy()
    ok["last_reinforced"] = ts[le] == facts["last_reinforced"].to_numpy()
    ok["decay_rate"] = _close(replay.rate[fe], facts["decay_rate"].to_numpy())
    # supersedes: the state before the fact's first observation (same key) ended by this contradiction
    prev = replay.previous[fe]
    has_prev = prev >= 0
    prev_c = np.maximum(prev, 0)
    superseded_prev = has_prev & (replay.reason[prev_c] == EndReason.SUPERSEDED)
    sup_id = np.where(superseded_prev, facts["id"].to_numpy()[fact[replay.origin[prev_c]]], NO_ID)
    ok["supersedes_id"] = sup_id == facts["supersedes_id"].to_numpy()
    skipped = []
    # status_changed_at is known only where the file has a factmem_fact_state row: a client that does
    # not keep the table writes none for the facts it archives or supersedes (they are counted apart)
    has_row = facts["has_state"].to_numpy(bool)
    without_state = int((checked & ~has_row & (prod_status != Status.ACTIVE)).sum())
    if log.has_fact_state:
        changed = np.where(status != Status.ACTIVE, replay.end[le], -1)
        ok["status_changed_at"] = ~has_row | (changed == facts["status_changed_at"].to_numpy())
    else:
        skipped.append("status_changed_at")
        ok["status_changed_at"] = np.ones(n_facts, bool)
    all_ok = np.logical_and.reduce([ok[c] for c in CHECKS])
    failed = checked & ~all_ok

    # the id the replay would number each fact with: observation-inserted facts in insertion order
    inserting = np.sort(first_ev[checked])
    replay_id = np.full(n_facts, NO_ID, np.int64)
    replay_id[checked] = 1 + np.searchsorted(inserting, first_ev[checked])
    renumbered = int((checked & (replay_id != facts["id"].to_numpy())).sum())

    cause = _causes(log, failed, replay.params)
    sel = np.flatnonzero(failed)
    # the failing checks of each fact as one string: a loop over the checks, not over facts
    listed = np.full(len(sel), "", dtype=object)
    for c in CHECKS:
        listed = listed + np.where(ok[c][sel], "", c + ", ").astype(object)
    listed = np.asarray(pd.Series(listed, dtype=object).str.removesuffix(", "), dtype=object)
    status_names = np.array([s.label for s in Status], dtype=object)
    failures = pd.DataFrame({
        "id": facts["id"].to_numpy()[sel],
        "subject": facts["subject"].to_numpy()[sel] if sel.size else np.zeros(0, object),
        "predicate": facts["predicate"].to_numpy()[sel] if sel.size else np.zeros(0, object),
        "object": facts["object"].to_numpy()[sel] if sel.size else np.zeros(0, object),
        "kind": facts["kind"].to_numpy()[sel] if sel.size else np.zeros(0, object),
        "checks": listed,
        "cause": cause[sel],
        "status": status_names[prod_status[sel]], "status_replay": status_names[status[sel]],
        "confidence": facts["confidence"].to_numpy()[sel], "confidence_replay": replay.conf[le[sel]],
        "reinforcement_count": facts["reinforcement_count"].to_numpy()[sel],
        "reinforcement_count_replay": obs_count[sel] - 1,
        "decay_rate": facts["decay_rate"].to_numpy()[sel], "decay_rate_replay": replay.rate[fe[sel]],
    })
    by_check = {c: int((checked & ~ok[c]).sum()) for c in CHECKS if c not in skipped}
    by_cause = {c: int((cause[sel] == c).sum()) for c in CAUSES}
    kind_codes = np.asarray(facts["kind"].cat.codes)
    derived = int((kind_codes == list(facts["kind"].cat.categories).index("derived")).sum())
    return Reproduction(
        facts=n_facts, checked=int(checked.sum()), reproduced=int((checked & all_ok).sum()), derived=derived,
        without_observations=int((~checked).sum()) - derived, renumbered=renumbered, by_check=by_check,
        by_cause={k: v for k, v in by_cause.items() if v}, checks_skipped=skipped, failures=failures,
        without_state=without_state)


def _causes(log: ProductionLog, failed: np.ndarray, params: MemoryParams) -> np.ndarray:
    """The likely cause of each fact's failure (see :data:`CAUSES`), attributed in that order."""
    facts = log.facts
    n = len(facts)
    cause = np.full(n, "", dtype=object)
    pruned = (facts["status_reason"] == "pruned").to_numpy(bool)
    touched = facts["abstraction_evidence"].to_numpy() > 0
    # facts of a (subject, predicate) after a pruned or abstraction-touched fact of it
    s = np.asarray(facts["subject"].cat.codes, np.int64)
    p = np.asarray(facts["predicate"].cat.codes, np.int64)
    sp, _ = pd.factorize(s * np.int64(max(len(facts["predicate"].cat.categories), 1)) + p)
    source = pruned | touched
    first_source = np.full(int(sp.max(initial=-1)) + 1, OPEN, np.int64)
    np.minimum.at(first_source, sp[source], facts["first_seen"].to_numpy()[source])
    after = facts["last_reinforced"].to_numpy() >= first_source[sp]
    kind_codes = np.array([KIND_CODES[k] for k in facts["kind"].cat.categories], np.int64)[
        np.asarray(facts["kind"].cat.codes, np.int64)]
    names = [str(x) for x in facts["predicate"].cat.categories]
    current = params.decay_rates_for(kind_codes, p, names)
    other_rate = ~_close(facts["decay_rate"].to_numpy(), current)
    for name, mask in (("pruned", pruned), ("abstraction_evidence", touched), ("after_abstraction", after),
                       ("other_decay_rate", other_rate), ("unexplained", np.ones(n, bool))):
        pick = failed & (cause == "") & mask
        cause[pick] = name
    return cause

