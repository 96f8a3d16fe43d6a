"""Replay with consolidations, vectorized over events *and* over parameter sets.

This is the engine of ``FactStore.replay`` (one parameter set, a store's initial state) and of
parameter sweeps (many parameter sets, an empty memory). Events are sorted by key and global
order; the scan runs in *waves*: wave ``r`` handles the ``r``-th event of every key, for every
parameter set at once (2-D numpy arrays ``[param, key]``). The Python loop is over ranks, never
over events, facts or parameter sets.

Between the previous event of a key (or its initial fact) at ``lr`` and the next event at ``t``,
consolidations at times ``T`` in ``(lr, t]`` may archive the key's fact. Effective confidence is
non-increasing in ``T``, so the fact is archived iff it is below the threshold at the last such
consolidation. Events at exactly ``T`` come *after* consolidate(T), as in a replay that ingests
``ts < T`` before consolidating at ``T``.

Every number is computed with the functions of :mod:`factmem.decay` in the same order of
operations as ``remember``/``ingest`` and the SQL of ``consolidate``, so the results are identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .decay import SECONDS_PER_DAY, effective_confidence, reinforce
from .params import MemoryParams

OPEN = np.iinfo(np.int64).max  # a state still active at the end of the replay

# why a fact's state ended
REASON_REINFORCED, REASON_SUPERSEDED, REASON_ARCHIVED, REASON_OPEN = 0, 1, 2, 3


@dataclass(frozen=True)
class ParamArrays:
    """``m`` parameter sets as arrays (the numbers the replay needs)."""

    gain: np.ndarray  # (m,)
    cap: np.ndarray  # (m,)
    threshold: np.ndarray  # (m,)
    effective: np.ndarray  # (m,) bool: reinforce_base == "effective"
    rate: np.ndarray  # (m, 4) by kind code
    initial: np.ndarray  # (m, 4) by kind code

    @classmethod
    def of(cls, params: Sequence[MemoryParams]) -> "ParamArrays":
        return cls(
            gain=np.array([p.reinforce_gain for p in params], dtype=np.float64),
            cap=np.array([p.confidence_cap for p in params], dtype=np.float64),
            threshold=np.array([p.archive_threshold for p in params], dtype=np.float64),
            effective=np.array([p.reinforce_base == "effective" for p in params], dtype=bool),
            rate=np.stack([p.decay_rate.as_array() for p in params]),
            initial=np.stack([p.initial_confidence.as_array() for p in params]),
        )

    def __len__(self) -> int:
        return len(self.gain)


@dataclass
class InitialState:
    """At most one active fact per key before the replay (``has`` False where none)."""

    has: np.ndarray  # (K,) bool
    obj: np.ndarray  # (K,) int64, -1 when its object is not among the events'
    confidence: np.ndarray  # (K,)
    last_reinforced: np.ndarray  # (K,) int64
    decay_rate: np.ndarray  # (K,)

    @classmethod
    def empty(cls, n_keys: int) -> "InitialState":
        return cls(np.zeros(n_keys, bool), np.full(n_keys, -1, np.int64), np.zeros(n_keys),
                   np.zeros(n_keys, np.int64), np.zeros(n_keys))


@dataclass
class WaveResult:
    """Per (parameter set, event), events in the sorted input order.

    ``conf``: confidence after the event. ``inserted``: the event inserted a new fact.
    ``origin``: index of the event that inserted the fact current after this event, or
    ``-1 - key`` for the key's initial fact. ``end``/``reason``: when and why the state after the
    event ends (next event reinforcing or superseding it, archival by a consolidation, or OPEN).
    ``init_end``/``init_reason`` (per parameter set, key): the same for each key's initial fact
    before the key's first event (REASON_REINFORCED when the first event reinforces it).
    """

    conf: np.ndarray
    inserted: np.ndarray
    origin: np.ndarray
    end: np.ndarray
    reason: np.ndarray
    init_end: np.ndarray
    init_reason: np.ndarray


def _eff(c, rate, at, last):
    """Effective confidence with ages computed as in SQL: (at - last) / 86400 in float64."""
    return effective_confidence(c, rate, (at - last) / SECONDS_PER_DAY)


def first_archive_time(c, rate, last, threshold, grid: np.ndarray, upto):
    """First consolidation time T in ``grid`` with ``last < T <= upto`` at which the effective
    confidence is below ``threshold``; OPEN where there is none. All arguments broadcast."""
    c, rate, last, threshold, upto = np.broadcast_arrays(
        np.asarray(c, np.float64), np.asarray(rate, np.float64), np.asarray(last, np.int64),
        np.asarray(threshold, np.float64), np.asarray(upto, np.int64))
    out = np.full(c.shape, OPEN, np.int64)
    if grid.size == 0 or c.size == 0:
        return out
    lo = np.searchsorted(grid, last, side="right")  # first T > last
    hi = np.searchsorted(grid, upto, side="right")  # past the last T <= upto
    has = lo < hi
    if not has.any():
        return out
    below = lambda i: _eff(c, rate, grid[np.minimum(i, grid.size - 1)], last) < threshold  # noqa: E731
    # decay is monotone: binary search (vectorized) for the first time below the threshold, using
    # the very expression consolidate evaluates
    ok = has & below(np.maximum(hi - 1, 0))
    lo_, hi_ = np.where(ok, lo, 0), np.where(ok, hi - 1, 0)
    while True:
        todo = lo_ < hi_
        if not todo.any():
            break
        mid = (lo_ + hi_) // 2
        b = below(mid)
        hi_ = np.where(todo & b, mid, hi_)
        lo_ = np.where(todo & ~b, mid + 1, lo_)
    guess = lo_
    out[ok] = grid[guess[ok]]
    return out


def _archived_by(c, rate, last, upto, threshold, grid: np.ndarray):
    """Whether a consolidation T with ``last < T <= upto`` archives a fact (c, rate, last)."""
    if grid.size == 0:
        return np.zeros(np.broadcast_shapes(np.shape(c), np.shape(upto)), bool)
    pos = np.searchsorted(grid, upto, side="right") - 1
    tlast = np.where(pos >= 0, grid[np.maximum(pos, 0)], np.iinfo(np.int64).min)
    applies = tlast > last
    return applies & (_eff(c, rate, np.where(applies, tlast, last), last) < threshold)


def replay_waves(key: np.ndarray, obj: np.ndarray, ts: np.ndarray, kind: np.ndarray, n_keys: int,
                 params: ParamArrays, grid: np.ndarray, initial: InitialState | None = None,
                 horizon: int | None = None) -> WaveResult:
    """Replay events sorted by (key, global order) with consolidations at ``grid`` (sorted times).

    ``horizon``: consolidations after the last event of a key apply up to this time (default: the
    last grid time).
    """
    n = len(key)
    m = len(params)
    grid = np.asarray(grid, dtype=np.int64)
    init = initial if initial is not None else InitialState.empty(n_keys)
    if horizon is None:
        horizon = int(grid[-1]) if grid.size else np.iinfo(np.int64).min

    # Runs: maximal stretches of one object within a key. A new run always inserts a new fact
    # (the previous one is superseded, or was archived), so the sequential scan only walks
    # within runs: wave r is the r-th event of every run.
    first = np.ones(n, bool)
    first[1:] = key[1:] != key[:-1]
    run_start = first.copy()
    run_start[1:] |= obj[1:] != obj[:-1]
    rs = np.flatnonzero(run_start)
    run_len = np.diff(np.append(rs, n))
    run_key = key[rs]
    cont = first[rs] & init.has[run_key] & (init.obj[run_key] == obj[rs])  # continues the key's initial fact
    perm = np.argsort(-run_len, kind="stable")  # runs by length, descending
    p_len, p_rs, pk = run_len[perm], rs[perm], run_key[perm]
    n_runs = len(rs)

    alive = np.broadcast_to(cont[perm], (m, n_runs)).copy()
    c = np.broadcast_to(init.confidence[pk], (m, n_runs)).copy()
    lr = np.broadcast_to(init.last_reinforced[pk], (m, n_runs)).copy()
    rate = np.broadcast_to(init.decay_rate[pk], (m, n_runs)).copy()
    origin = np.broadcast_to(-1 - pk.astype(np.int64), (m, n_runs)).copy()

    conf = np.empty((m, n))
    inserted = np.empty((m, n), bool)
    origin_out = np.empty((m, n), np.int64)
    archived_before = np.zeros((m, n), bool)

    gain, cap, thr = params.gain[:, None], params.cap[:, None], params.threshold[:, None]
    eff_rows = params.effective
    any_eff = bool(eff_rows.any())
    neg_len = -p_len  # ascending, for searchsorted
    max_len = int(p_len[0]) if n_runs else 0
    for r in range(max_len):  # over ranks within a run, never over events
        nr = int(np.searchsorted(neg_len, -r, side="left"))  # runs longer than r
        idx = p_rs[:nr] + r
        t = ts[idx]
        A, C, L, R = alive[:, :nr].copy(), c[:, :nr], lr[:, :nr], rate[:, :nr]  # A outlives the writes below
        if grid.size and A.any():
            gone = A & _archived_by(C, R, L, t, thr, grid)
            if gone.any():
                A = A & ~gone
                archived_before[:, idx] = gone
        base = C
        if any_eff:
            base = np.where(eff_rows[:, None], _eff(C, R, t, L), C)
        k = kind[idx]
        newc = np.where(A, reinforce(base, gain, cap), params.initial[:, k])
        R_new = np.where(A, R, params.rate[:, k])
        O_new = np.where(A, origin[:, :nr], idx)
        c[:, :nr] = newc
        lr[:, :nr] = t
        rate[:, :nr] = R_new
        origin[:, :nr] = O_new
        alive[:, :nr] = True
        conf[:, idx] = newc
        inserted[:, idx] = ~A
        origin_out[:, idx] = O_new

    # -- when each state ends -------------------------------------------------------------------
    end = np.full((m, n), OPEN, np.int64)
    reason = np.full((m, n), REASON_OPEN, np.int8)
    if n:
        rate_of = _rate_of(origin_out, kind, params, init)
        has_next = np.zeros(n, bool)
        has_next[:-1] = ~first[1:]
        within = np.flatnonzero(has_next & ~np.append(run_start[1:], False))  # next event, same run
        across = np.flatnonzero(has_next & np.append(run_start[1:], False))  # next event starts a run
        if within.size:
            j = within + 1
            arch = archived_before[:, j]
            end[:, within] = ts[j]
            reason[:, within] = np.where(arch, REASON_ARCHIVED, REASON_REINFORCED)
        if across.size:
            j = across + 1
            arch = _archived_by(conf[:, across], rate_of[:, across], ts[across], ts[j], thr, grid)
            end[:, across] = ts[j]
            reason[:, across] = np.where(arch, REASON_ARCHIVED, REASON_SUPERSEDED)
        pi, ei = np.nonzero(reason == REASON_ARCHIVED)
        if pi.size:
            end[pi, ei] = first_archive_time(conf[pi, ei], rate_of[pi, ei], ts[ei], params.threshold[pi],
                                             grid, ts[ei + 1])
        last = np.flatnonzero(~has_next)
        if grid.size and last.size:
            at = first_archive_time(conf[:, last], rate_of[:, last], ts[last][None, :],
                                    params.threshold[:, None], grid, horizon)
            end[:, last] = at
            reason[:, last] = np.where(at != OPEN, REASON_ARCHIVED, REASON_OPEN)

    # -- the initial facts of keys with events --------------------------------------------------
    init_end = np.full((m, n_keys), OPEN, np.int64)
    init_reason = np.full((m, n_keys), REASON_OPEN, np.int8)
    counts = np.bincount(key, minlength=n_keys)
    kk = np.flatnonzero(init.has & (counts > 0))
    if kk.size:
        fpos = np.flatnonzero(first)
        f_of_key = np.full(n_keys, -1, np.int64)
        f_of_key[key[fpos]] = fpos
        fe = f_of_key[kk]
        continues = init.obj[kk] == obj[fe]
        arch_c = archived_before[:, fe]  # continuing: archived before its first event?
        arch_s = _archived_by(init.confidence[kk], init.decay_rate[kk], init.last_reinforced[kk], ts[fe], thr, grid)
        arch = np.where(continues, arch_c, arch_s)
        init_end[:, kk] = ts[fe]
        init_reason[:, kk] = np.where(arch, REASON_ARCHIVED, np.where(continues, REASON_REINFORCED, REASON_SUPERSEDED))
        if arch.any():
            pi, ki = np.nonzero(arch)
            kx = kk[ki]
            init_end[pi, kx] = first_archive_time(init.confidence[kx], init.decay_rate[kx], init.last_reinforced[kx],
                                                  params.threshold[pi], grid, ts[fe[ki]])
    return WaveResult(conf, inserted, origin_out, end, reason, init_end, init_reason)


def _rate_of(origin: np.ndarray, kind: np.ndarray, params: ParamArrays, init: InitialState) -> np.ndarray:
    """Decay rate of the fact current after each event (its inserting event's kind, or the initial fact's)."""
    new = origin >= 0
    rows = np.broadcast_to(np.arange(origin.shape[0])[:, None], origin.shape)
    out = np.empty(origin.shape)
    out[new] = params.rate[rows[new], kind[origin[new]]]
    old = ~new
    if old.any():
        out[old] = init.decay_rate[-1 - origin[old]]
    return out


def grid_between(start: int, end: int, every: int) -> np.ndarray:
    """Times start+every, start+2·every, … ≤ end (consolidations after each full period)."""
    if every <= 0:
        raise ValueError(f"a period must be a positive number of seconds, got {every!r}")
    return np.arange(int(start) + int(every), int(end) + 1, int(every), dtype=np.int64)
