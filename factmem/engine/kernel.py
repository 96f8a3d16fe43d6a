"""The set-based replay kernel: what a batch of ``remember`` calls does, computed over whole arrays.

Between two consolidations every key evolves on its own — the key is (subject, predicate) for
single-valued predicates and (subject, predicate, object) for multi-valued ones — so a batch is
sorted by key and then by global order (ts, row order), and the sequential part reduces to:

* a run of equal objects within a key is one fact: one insert (or a reinforcement of the key's
  active fact) followed by reinforcements; each new run supersedes the previous run's fact;
* the confidence after each event is a scan within its run, computed in *waves*: wave ``r``
  processes the ``r``-th event of every run at once (numpy over all runs), so the Python loop
  is over ranks, never over events. Each wave applies the very functions of :mod:`factmem.core.decay`
  that ``FactStore.remember`` applies, so the results are bit-for-bit those of the row-by-row path.

Keys whose initial state has two or more active facts (possible only after the set of
multi-valued predicates was changed, or in an imported memory) take :func:`replay_general`,
a wave scan over rank-within-key with the full rule of ``remember`` (docs/design.md, "remember").

A new fact's decay rate is its inserting event's entry of ``new_rate`` (the caller looks it up per
event with :meth:`MemoryParams.decay_rates_for`: the predicate's own rate, else the kind's); a
reinforced fact keeps the rate it was stored with.

New facts get *provisional references* ``-1 - gpos`` (``gpos`` = the inserting event's global
position); :func:`assign_ids` turns them into ids in global event order, exactly as sequential
calls would number them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from factmem.core.codes import NO_TIME, Status
from factmem.core.decay import age_days, effective_confidence, reinforce
from factmem.core.params import MemoryParams
from factmem.errors import InputError

__all__ = ["NO_REF", "NO_OBJ", "KeyState", "BatchOutcome", "FACT_FIELDS", "provisional_ref", "replay_fast", "replay_general",
    "assign_ids", "resolve"]

NO_REF = np.iinfo(np.int64).min  # "no fact" in reference arrays
NO_OBJ = -1  # object code of an existing fact whose object does not occur in the batch



@dataclass
class KeyState:
    """The active fact of each key before the batch (fast path: at most one per key)."""

    has: np.ndarray  # bool[K]
    obj: np.ndarray  # int64[K], NO_OBJ when the object is not in the batch
    id: np.ndarray  # int64[K]
    confidence: np.ndarray  # float64[K]
    count: np.ndarray  # int64[K]
    last_reinforced: np.ndarray  # int64[K]
    decay_rate: np.ndarray  # float64[K]

    @classmethod
    def empty(cls, n_keys: int) -> KeyState:
        return cls(
            has=np.zeros(n_keys, bool),
            obj=np.full(n_keys, NO_OBJ, np.int64),
            id=np.full(n_keys, NO_REF, np.int64),
            confidence=np.zeros(n_keys),
            count=np.zeros(n_keys, np.int64),
            last_reinforced=np.zeros(n_keys, np.int64),
            decay_rate=np.zeros(n_keys),
        )


@dataclass
class BatchOutcome:
    """What a batch did, in references (existing ids >= 0, new facts ``-1 - gpos``).

    Per event (aligned with the input arrays): ``ref``, ``inserted``, ``confidence`` (after the event).
    Per touched fact (``facts``, columns :data:`FACT_FIELDS` as arrays): ref, final confidence, count, last_reinforced, decay_rate, status,
    status_changed_at (NO_TIME = none: a time before 1970 is negative and valid), supersedes (NO_REF = none), reinforced (bool: confidence changed),
    first event index (for new facts, the inserting event).
    """

    ref: np.ndarray
    inserted: np.ndarray
    confidence: np.ndarray
    facts: dict[str, np.ndarray]


def provisional_ref(gpos: np.ndarray) -> np.ndarray:
    return -1 - np.asarray(gpos, dtype=np.int64)


def _new_rates(kind: np.ndarray, new_rate: np.ndarray | None, params: MemoryParams) -> np.ndarray:
    """Per event, the decay rate of a fact it would insert: ``new_rate``, or the kind's rate when the
    parameters have no per-predicate rates (without predicates the kernel cannot look them up)."""
    if new_rate is not None:
        if len(new_rate) != len(kind):
            raise InputError(f"new_rate has {len(new_rate)} entries for {len(kind)} events")
        return np.asarray(new_rate, dtype=np.float64)
    if params.decay_rate_by_predicate:
        raise InputError("these parameters have per-predicate decay rates: pass new_rate "
                         "(MemoryParams.decay_rates_for over the events' kinds and predicates)")
    return params.decay_rate.as_array()[kind]


def _reinforce_base(conf, rate, at, last, params: MemoryParams):
    if params.reinforce_base == "effective":
        return effective_confidence(conf, rate, age_days(at, last))
    return conf


def replay_fast(
    key: np.ndarray,
    obj: np.ndarray,
    ts: np.ndarray,
    kind: np.ndarray,
    gpos: np.ndarray,
    state: KeyState,
    params: MemoryParams,
    new_rate: np.ndarray | None = None,
) -> BatchOutcome:
    """Replay events sorted by (key, gpos) whose keys hold at most one active fact each.

    ``new_rate``: per event, the decay rate of a fact it inserts (see the module docstring)."""
    n = len(key)
    init_conf = params.initial_confidence.as_array()
    rates = _new_rates(kind, new_rate, params)
    gain, cap = params.reinforce_gain, params.confidence_cap
    if n == 0:
        return BatchOutcome(np.empty(0, np.int64), np.empty(0, bool), np.empty(0), _facts_columns({}))

    first = np.ones(n, bool)
    first[1:] = key[1:] != key[:-1]
    prev_obj = np.empty(n, np.int64)
    prev_obj[1:] = obj[:-1]
    first_idx = np.flatnonzero(first)
    fkey = key[first_idx]
    prev_obj[first_idx] = np.where(state.has[fkey], state.obj[fkey], -2)
    inserted = obj != prev_obj

    run_start = inserted | first
    rs = np.flatnonzero(run_start)
    run_len = np.diff(np.append(rs, n))
    run_id = np.cumsum(run_start) - 1
    run_key = key[rs]
    run_new = inserted[rs]
    run_rate = np.where(run_new, rates[rs], state.decay_rate[run_key])

    # -- confidence: wave 0 is each run's first event, wave r its r-th --------------------------
    conf = np.empty(n)
    c_new = init_conf[kind[rs]]
    old = ~run_new
    c0 = c_new.copy()
    if old.any():
        ok = run_key[old]
        base = _reinforce_base(state.confidence[ok], state.decay_rate[ok], ts[rs[old]], state.last_reinforced[ok], params)
        c0[old] = reinforce(base, gain, cap)
    conf[rs] = c0
    stored = params.reinforce_base == "stored"
    alive = np.flatnonzero(run_len > 1)
    if stored:
        # A run at the cap stays there exactly (cap + g*(1-cap) >= cap), so it leaves the scan.
        conf[~run_start] = cap
        alive = alive[c0[alive] < cap]
    r = 1
    while alive.size:
        alive = alive[run_len[alive] > r]
        if not alive.size:
            break
        idx = rs[alive] + r
        base = _reinforce_base(conf[idx - 1], run_rate[alive], ts[idx], ts[idx - 1], params)
        conf[idx] = reinforce(base, gain, cap)
        if stored:
            alive = alive[conf[idx] < cap]
        r += 1

    # -- facts: one per run, plus existing actives superseded before any reinforcement ----------
    last = rs + run_len - 1
    next_same = np.zeros(len(rs), bool)
    next_same[:-1] = run_key[1:] == run_key[:-1]
    status = np.where(next_same, Status.SUPERSEDED, Status.ACTIVE)
    changed_at = np.full(len(rs), NO_TIME, np.int64)
    changed_at[:-1] = np.where(next_same[:-1], ts[rs[1:]], NO_TIME)

    run_ref = np.where(run_new, provisional_ref(gpos[rs]), state.id[run_key])
    prev_same = np.zeros(len(rs), bool)
    prev_same[1:] = next_same[:-1]
    supersedes = np.full(len(rs), NO_REF, np.int64)
    supersedes[1:] = np.where(prev_same[1:], run_ref[:-1], NO_REF)
    # A key whose first event inserts while it holds an active fact supersedes that fact.
    first_run = ~prev_same
    displaced = first_run & run_new & state.has[run_key]
    supersedes[displaced] = state.id[run_key[displaced]]

    facts = {
        "ref": run_ref,
        "confidence": conf[last],
        "count": np.where(run_new, run_len - 1, state.count[run_key] + run_len),
        "last_reinforced": ts[last],
        "decay_rate": run_rate,
        "status": status,
        "status_changed_at": changed_at,
        "supersedes": supersedes,
        "reinforced": np.ones(len(rs), bool),
        "first_event": rs,
    }
    dk = run_key[displaced]
    if dk.size:
        gone = {
            "ref": state.id[dk],
            "confidence": state.confidence[dk],
            "count": state.count[dk],
            "last_reinforced": state.last_reinforced[dk],
            "decay_rate": state.decay_rate[dk],
            "status": np.full(dk.size, Status.SUPERSEDED),
            "status_changed_at": ts[rs[displaced]],
            "supersedes": np.full(dk.size, NO_REF, np.int64),
            "reinforced": np.zeros(dk.size, bool),
            "first_event": np.full(dk.size, -1, np.int64),
        }
        facts = {k: np.concatenate([facts[k], gone[k]]) for k in facts}
    return BatchOutcome(ref=run_ref[run_id], inserted=inserted, confidence=conf, facts=_facts_columns(facts))


#: the columns of :attr:`BatchOutcome.facts`
FACT_FIELDS = ("ref", "confidence", "count", "last_reinforced", "decay_rate", "status",
               "status_changed_at", "supersedes", "reinforced", "first_event")


def _facts_columns(cols: dict) -> dict[str, np.ndarray]:
    if not cols:
        return {k: np.empty(0, np.float64 if k in ("confidence", "decay_rate") else np.int64) for k in FACT_FIELDS}
    return {k: np.asarray(cols[k]) for k in FACT_FIELDS}


def replay_general(
    key: np.ndarray,
    obj: np.ndarray,
    ts: np.ndarray,
    kind: np.ndarray,
    gpos: np.ndarray,
    multi: np.ndarray,
    existing: pd.DataFrame,
    params: MemoryParams,
    new_rate: np.ndarray | None = None,
) -> BatchOutcome:
    """Replay events sorted by (key, gpos) for keys that may hold several active facts.

    ``existing``: the active facts of these keys with columns key, obj, id, confidence, count,
    last_reinforced, decay_rate. ``multi[k]`` says whether key k's predicate is multi-valued.
    ``new_rate``: per event, the decay rate of a fact it inserts.
    The loop runs over ranks within key (wave r = the r-th event of every key), each wave
    vectorized over keys with pandas.
    """
    n = len(key)
    init_conf = params.initial_confidence.as_array()
    rates = _new_rates(kind, new_rate, params)
    gain, cap = params.reinforce_gain, params.confidence_cap

    st = existing[["key", "obj", "id", "confidence", "count", "last_reinforced", "decay_rate"]].copy()
    st = st.rename(columns={"id": "ref"})
    st["is_new"] = False
    st["order"] = st["ref"]  # ties in last_reinforced break by id; new facts sort after old
    st["status"] = Status.ACTIVE
    st["status_changed_at"] = np.int64(NO_TIME)
    st["supersedes"] = NO_REF
    st["reinforced"] = False
    st["first_event"] = np.int64(-1)
    st = st.reset_index(drop=True)

    ev_ref = np.empty(n, np.int64)
    ev_ins = np.zeros(n, bool)
    ev_conf = np.empty(n)
    first = np.ones(n, bool)
    first[1:] = key[1:] != key[:-1]
    rank = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0))
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(rank.max() + 2 if n else 1))
    for r in range(len(bounds) - 1):
        ev = by_rank[bounds[r]:bounds[r + 1]]
        if not ev.size:
            continue
        w = pd.DataFrame({"ev": ev, "key": key[ev], "obj": obj[ev]})
        act = st[st["status"] == Status.ACTIVE]
        # latest active fact per (key, obj) and per key, by (last_reinforced, order)
        act = act.sort_values(["last_reinforced", "is_new", "order"], kind="stable")
        same = act.drop_duplicates(["key", "obj"], keep="last")[["key", "obj"]].reset_index()
        anyk = act.drop_duplicates(["key"], keep="last")[["key"]].reset_index()
        m = w.merge(same, on=["key", "obj"], how="left").merge(
            anyk.rename(columns={"index": "latest"}), on="key", how="left")
        m = m.sort_values("ev", kind="stable")
        evs = m["ev"].to_numpy()
        hit = m["index"].notna().to_numpy()
        # reinforce the matching fact
        if hit.any():
            rows = m["index"].to_numpy()[hit].astype(np.int64)
            e = evs[hit]
            c = st["confidence"].to_numpy()[rows]
            base = _reinforce_base(c, st["decay_rate"].to_numpy()[rows], ts[e],
                                   st["last_reinforced"].to_numpy()[rows], params)
            newc = reinforce(base, gain, cap)
            st.loc[rows, "confidence"] = newc
            st.loc[rows, "count"] = st["count"].to_numpy()[rows] + 1
            st.loc[rows, "last_reinforced"] = ts[e]
            st.loc[rows, "reinforced"] = True
            ev_ref[e] = st["ref"].to_numpy()[rows]
            ev_conf[e] = newc
        miss = ~hit
        if miss.any():
            e = evs[miss]
            latest = m["latest"].to_numpy()[miss]
            sup = np.full(e.size, NO_REF, np.int64)
            can = ~np.isnan(latest) & ~multi[key[e]]
            if can.any():
                rows = latest[can].astype(np.int64)
                st.loc[rows, "status"] = Status.SUPERSEDED
                st.loc[rows, "status_changed_at"] = ts[e[can]]
                sup[can] = st["ref"].to_numpy()[rows]
            refs = provisional_ref(gpos[e])
            c0 = init_conf[kind[e]]
            add = pd.DataFrame({
                "key": key[e], "obj": obj[e], "ref": refs, "confidence": c0,
                "count": np.zeros(e.size, np.int64), "last_reinforced": ts[e], "decay_rate": rates[e],
                "is_new": True, "order": gpos[e], "status": Status.ACTIVE,
                "status_changed_at": np.full(e.size, NO_TIME, np.int64), "supersedes": sup,
                "reinforced": True, "first_event": e,
            })
            st = pd.concat([st, add], ignore_index=True)
            ev_ref[e] = refs
            ev_ins[e] = True
            ev_conf[e] = c0
    touched = st["reinforced"].to_numpy() | (st["status"].to_numpy() != Status.ACTIVE)
    out = st[touched]
    facts = _facts_columns({k: out[k].to_numpy() for k in FACT_FIELDS})
    return BatchOutcome(ref=ev_ref, inserted=ev_ins, confidence=ev_conf, facts=facts)


def assign_ids(refs: np.ndarray, next_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids for provisional references: new facts numbered from ``next_id`` in gpos order.

    Returns (sorted provisional refs, their ids) for use with :func:`resolve`. Linear time: a
    provisional ref is ``-1 - gpos``, so marking each fact's gpos in a mask over the batch lists them
    in gpos order without a sort.
    """
    gpos = _provisional_gpos(refs)
    if not gpos.size:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    seen = np.zeros(int(gpos.max()) + 1, bool)
    seen[gpos] = True
    order = np.flatnonzero(seen)  # gpos of every new fact, ascending
    # -1 - gpos is decreasing in gpos: the largest provisional ref is the earliest insert.
    return -1 - order, next_id + np.arange(order.size, dtype=np.int64)


def resolve(refs: np.ndarray, prov: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Map references to ids (existing ids and NO_REF pass through)."""
    neg = (refs < 0) & (refs != NO_REF)
    if not neg.any():
        return refs.copy()
    gpos = np.where(neg, -1 - refs, 0)  # whole columns, no masked gathers: most refs are provisional
    table = np.full(max(int(gpos.max()), int((-1 - prov).max(initial=-1))) + 1, NO_REF, np.int64)
    table[-1 - prov] = ids  # the id of the fact each gpos inserted
    return np.where(neg, table[gpos], refs)


def _provisional_gpos(refs: np.ndarray) -> np.ndarray:
    neg = (refs < 0) & (refs != NO_REF)
    return -1 - refs[neg]
