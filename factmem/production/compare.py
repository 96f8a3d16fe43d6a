"""Current against new parameters on one rebuilt production log: per fact, per subject, over time, and in
the context an agent would assemble.

Both sides are replays of the same observations on the same consolidation schedule
(:mod:`factmem.production.replay`), so every difference is the parameters' doing.

**At a time ``at``** (the memory after every observation up to and including ``at`` and every
consolidation at or before it), each triple mentioned so far is in the state its latest mention left:
*active* (held) while that state has not ended, else *superseded* or *archived*; *believed* when active
with effective confidence ≥ ``retrieval_threshold``. A triple is

* **forgotten** — active under the current parameters, archived under the new ones;
* **kept** — archived under the current parameters, active under the new ones;
* **superseded differently** — superseded under one and not the other;
* **belief** — active under both, believed under one only (the effective confidence crosses the
  retrieval threshold).

**Supersessions that differ**: observations (up to ``at``) at which one side superseded the previous
object and the other did not (its fact had already been archived). **Archivals**: consolidations
archiving a fact, counted per side up to ``at``.

**The context at ``at``** (:func:`contexts_at`): per subject, the first ``k`` of its active facts with
effective confidence ≥ ``max(archive_threshold, retrieval_threshold)``, ranked as the budgeted
context metrics rank them (effective confidence, then later ``last_reinforced``, later
``first_seen``, (predicate, object) in lexicographic order); the facts a subject's context
**gains** and **loses** under the new parameters.

**Over time** (:func:`over_time`): at every checkpoint (daily at midnight UTC by default; at most
:data:`MAX_CHECKPOINTS`, coarser when the log is longer) the held and believed set sizes of each side
with the checkpoint semantics of the metrics (observations before the checkpoint, consolidations at
or before it), and cumulative archivals and supersessions.

**Budgeted context metrics** (:func:`context_sums`): utility@k, recall@k, precision@k and stale@k of
:class:`~factmem.evaluation.context.ContextEvaluator` with a no-truth ``needed`` (production has no
truth: the what-if's setting, a proxy of :mod:`factmem.evaluation.proxies` or ``next-session``). The scoring
runs over groups of subjects so that at most :data:`PAIR_BUDGET` (state, session start) pairs are
held at once; per-subject sums are exactly those of one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from factmem.core.codes import DAY, OPEN, EndReason, Status
from factmem.core.context_rule import context_order, context_threshold, ranks_within
from factmem.core.decay import effective_confidence
from factmem.engine.waves import first_archive_time
from factmem.evaluation.context import ContextEvaluator, ContextScores
from factmem.production.rebuild import ProductionLog, release_memory
from factmem.production.replay import Replay

__all__ = ["PAIR_BUDGET", "EVENT_BLOCK", "MAX_CHECKPOINTS", "CHANGES", "TripleStates", "latest_mentions",
           "triple_states", "changes", "contexts_at", "event_differences", "checkpoints", "over_time", "context_sums",
           "lexicographic_rank"]

#: (belief state, session start) pairs scored at once by :func:`context_sums`
PAIR_BUDGET = 3_000_000
#: observations per block in :func:`over_time`
EVENT_BLOCK = 1_000_000
#: checkpoints of :func:`over_time` at most
MAX_CHECKPOINTS = 2000
#: what a triple's change at ``at`` is called, in order of precedence
CHANGES: tuple[str, ...] = ("forgotten", "kept", "superseded", "belief")

_STATUS_NAMES = np.array([s.label for s in Status], dtype=object)


@dataclass
class TripleStates:
    """One side's state at ``at`` of every triple mentioned up to ``at`` (arrays over ``triples``:
    the triple codes). ``event``: the latest mention; ``status``: :class:`Status` codes."""

    triples: np.ndarray
    event: np.ndarray
    status: np.ndarray
    effective: np.ndarray
    believed: np.ndarray
    held: np.ndarray


def latest_mentions(log: ProductionLog, triple_of_event: np.ndarray, at: int) -> tuple[np.ndarray, np.ndarray]:
    """(triple codes mentioned up to ``at``, the index of each one's latest mention)."""
    n_at = int(np.searchsorted(log.events["ts"].to_numpy(), at, side="right"))
    reversed_triples = triple_of_event[:n_at][::-1]
    triples, first_in_reversed = np.unique(reversed_triples, return_index=True)
    return triples, (n_at - 1 - first_in_reversed).astype(np.int64)


def triple_states(log: ProductionLog, replay: Replay, triples: np.ndarray, latest: np.ndarray, at: int) -> TripleStates:
    """Each triple's state at ``at`` under ``replay`` (see the module docstring)."""
    ts = log.events["ts"].to_numpy()
    held = at < replay.end[latest]
    eff = effective_confidence(replay.conf[latest], replay.rate[latest], (at - ts[latest]) / float(DAY))
    reason = replay.reason[latest]
    status = np.where(held, Status.ACTIVE, np.where(reason == EndReason.SUPERSEDED, Status.SUPERSEDED,
                                                    Status.ARCHIVED)).astype(np.int64)
    believed = held & (eff >= replay.params.retrieval_threshold)
    return TripleStates(triples, latest, status, np.where(held, eff, 0.0), believed, held)


def changes(current: TripleStates, new: TripleStates) -> np.ndarray:
    """Per triple, the name of its change (see :data:`CHANGES`), "" when none."""
    out = np.full(len(current.triples), "", dtype=object)
    rules = (
        ("forgotten", current.held & (new.status == Status.ARCHIVED)),
        ("kept", (current.status == Status.ARCHIVED) & new.held),
        ("superseded", (current.status == Status.SUPERSEDED) != (new.status == Status.SUPERSEDED)),
        ("belief", current.believed != new.believed),
    )
    for name, mask in rules:
        out[(out == "") & mask] = name
    return out


def lexicographic_rank(log: ProductionLog) -> np.ndarray:
    """Rank of each triple's (predicate, object) in lexicographic order (the context's last tie-break)."""
    _, triples = log.triple_of_fact()
    pred_rank = _category_rank(triples.levels[1])[triples.codes[1]]
    obj_rank = _category_rank(triples.levels[2])[triples.codes[2]]
    order = np.lexsort((obj_rank, pred_rank))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _category_rank(categories: pd.Index) -> np.ndarray:
    order = np.argsort(np.asarray(categories, dtype=object).astype(str), kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank


def contexts_at(log: ProductionLog, replay: Replay, states: TripleStates, budget: int,
                subject_of_triple: np.ndarray, po_rank: np.ndarray) -> np.ndarray:
    """Per triple of ``states``: whether it is in its subject's context of ``budget`` facts at ``at``."""
    ts = log.events["ts"].to_numpy()
    e = states.event
    candidate = states.held & (states.effective >= context_threshold(replay.params))
    idx = np.flatnonzero(candidate)
    subj = subject_of_triple[states.triples[idx]]
    last = ts[e[idx]]
    first_seen = ts[replay.origin[e[idx]]]
    order = context_order(subj, states.effective[idx], last, first_seen, po_rank[states.triples[idx]])
    rank = ranks_within(subj[order])
    inside = np.zeros(len(states.triples), bool)
    inside[idx[order[rank < budget]]] = True
    return inside


def event_differences(log: ProductionLog, current: Replay, new: Replay, at: int) -> dict[str, np.ndarray]:
    """Per observation up to ``at``: whether its state was archived / superseded by ``at`` on each
    side, and whether the supersession differs."""
    n_at = int(np.searchsorted(log.events["ts"].to_numpy(), at, side="right"))
    out = {}
    for side, rep in (("current", current), ("new", new)):
        ended = rep.end[:n_at] <= at
        out[f"archived_{side}"] = ended & (rep.reason[:n_at] == EndReason.ARCHIVED)
        out[f"superseded_{side}"] = ended & (rep.reason[:n_at] == EndReason.SUPERSEDED)
    out["supersession_differs"] = out["superseded_current"] != out["superseded_new"]
    return out


def checkpoints(first: int, at: int) -> np.ndarray:
    """Daily checkpoints at midnight UTC in ``(first, at]`` (coarser when there would be more than
    :data:`MAX_CHECKPOINTS`); ``[at]`` when the span holds no midnight."""
    days = max(0, (int(at) - (int(first) // DAY) * DAY) // DAY)
    step = DAY * max(1, -(-days // MAX_CHECKPOINTS))
    start = (int(first) // step) * step
    cps = np.arange(start + step, int(at) + 1, step, dtype=np.int64)
    return cps if cps.size else np.array([int(at)], np.int64)


def over_time(log: ProductionLog, replays: dict[str, Replay], cps: np.ndarray) -> pd.DataFrame:
    """Held and believed set sizes at each checkpoint, cumulative archivals and supersessions, per side."""
    ts = log.events["ts"].to_numpy()
    out = pd.DataFrame({"t": cps, "date": pd.to_datetime(cps, unit="s", utc=True).strftime("%Y-%m-%d %H:%M")})
    n = len(cps)
    for side, rep in replays.items():
        counts = {name: np.zeros(n, np.int64) for name in ("held", "believed", "archived", "superseded")}
        for a in range(0, len(ts), EVENT_BLOCK):  # blocks of observations: counts add up, memory stays flat
            b = min(a + EVENT_BLOCK, len(ts))
            reason, end = rep.reason[a:b], rep.end[a:b]
            by_event = (reason == EndReason.REINFORCED) | (reason == EndReason.SUPERSEDED)
            vis_end = np.where(end == OPEN, OPEN, np.where(by_event, end + 1, end))
            lo = np.searchsorted(cps, ts[a:b], side="right")  # first checkpoint after the observation
            hi = np.searchsorted(cps, vis_end, side="left")  # first checkpoint it is no longer seen at
            below = first_archive_time(rep.conf[a:b], rep.rate[a:b], ts[a:b], rep.params.retrieval_threshold, cps,
                                       int(cps[-1]))
            counts["held"] += _cover(n, lo, hi)
            counts["believed"] += _cover(n, lo, np.minimum(hi, np.searchsorted(cps, below, side="left")))
            for name, code in (("archived", EndReason.ARCHIVED), ("superseded", EndReason.SUPERSEDED)):
                counts[name] += np.bincount(np.searchsorted(cps, end[reason == code], side="left"),
                                            minlength=n + 1)[:n]
        for name, values in counts.items():
            out[f"{name}_{side}"] = np.cumsum(values) if name in ("archived", "superseded") else values
    return out


def _cover(n: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How many ranges [lo, hi) cover each index 0 … n-1."""
    ok = hi > lo
    diff = np.bincount(lo[ok], minlength=n + 1)[: n + 1] - np.bincount(hi[ok], minlength=n + 1)[: n + 1]
    return np.cumsum(diff[:n]).astype(np.int64)


def context_sums(evaluator: ContextEvaluator, beliefs: dict[str, np.ndarray], replay: Replay,
                 subject_of_state: np.ndarray, pair_budget: int = PAIR_BUDGET) -> ContextScores:
    """``evaluator.score`` of one side's belief states, over groups of subjects (see the module docstring).

    ``subject_of_state``: each state's subject as an index into ``evaluator.subjects``."""
    points = evaluator.points
    pt_subject = points["subject"].to_numpy(np.int64)
    pt_t = points["t"].to_numpy(np.int64)
    n_subjects = len(evaluator.subjects)
    # an upper bound of each state's (state, point) pairs: its subject's points while it is seen
    start, end, reason = beliefs["start"], beliefs["end"], beliefs["reason"]
    by_event = (reason == EndReason.REINFORCED) | (reason == EndReason.SUPERSEDED)
    vis_end = np.where(end == OPEN, OPEN, np.where(by_event, end + 1, end))
    tmin = int(min(pt_t.min(initial=0), start.min(initial=0)))
    span = int(max(pt_t.max(initial=0), start.max(initial=0)) - tmin + 2)
    pt_key = pt_subject * span + (pt_t - tmin)  # points are sorted by (subject, t)
    lo = np.searchsorted(pt_key, subject_of_state * span + (np.clip(start + 1, tmin, tmin + span - 1) - tmin), "left")
    hi = np.searchsorted(pt_key, subject_of_state * span + (np.clip(vis_end, tmin, tmin + span - 1) - tmin), "left")
    pairs = np.bincount(subject_of_state, weights=np.maximum(hi - lo, 0), minlength=n_subjects)
    cumulative = np.cumsum(pairs)
    # contiguous groups of subjects, each with at most pair_budget pairs (or one subject)
    bounds = [0]
    while bounds[-1] < n_subjects:
        base = cumulative[bounds[-1] - 1] if bounds[-1] else 0.0
        nxt = int(np.searchsorted(cumulative, base + pair_budget, side="right"))
        bounds.append(min(n_subjects, max(nxt, bounds[-1] + 1)))
    if len(bounds) == 2:
        return evaluator.score(beliefs, replay.params)
    sums = None
    by_subject = np.argsort(subject_of_state, kind="stable")
    cuts = np.searchsorted(subject_of_state[by_subject], bounds)
    for a, b, ca, cb in zip(bounds[:-1], bounds[1:], cuts[:-1], cuts[1:]):  # over groups of subjects
        rows = np.sort(by_subject[ca:cb])
        part = evaluator.score({k: v[rows] for k, v in beliefs.items()}, replay.params)
        if sums is None:
            sums = np.zeros_like(part.sums)
        sums[:, a:b] = part.sums[:, a:b]
        del part, rows
    release_memory()
    assert sums is not None
    return ContextScores(evaluator.budgets, evaluator.parts, evaluator.subjects, sums)
