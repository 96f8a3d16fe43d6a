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

A new fact's decay rate depends on its parameter set, its kind and — with per-predicate rates
(``MemoryParams.decay_rate_by_predicate``) — its predicate: :meth:`ParamArrays.new_fact_rates` builds
a small ``(rate class, parameter set)`` table (a class is a kind, or a kind with one of the predicates
that some set gives its own rate) and a class per event, so a wave looks rates up with one fancy
index and no ``(event, parameter set)`` array is ever built.

Every number is computed with the functions of :mod:`factmem.core.decay` in the same order of
operations as ``remember``/``ingest`` and the SQL of ``consolidate``, so the results are identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from factmem.core.codes import OPEN, SECONDS_PER_DAY, EndReason
from factmem.core.decay import effective_confidence, reinforce
from factmem.core.params import MemoryParams
from factmem.core.timeutil import grid_index
from factmem.errors import InputError

__all__ = ["ParamArrays", "InitialState", "WaveResult", "effective_at", "first_archive_time", "replay_waves",
           "grid_between"]

# why a fact's state ended


@dataclass(frozen=True)
class ParamArrays:
    """``m`` parameter sets as arrays (the numbers the replay needs)."""

    gain: np.ndarray  # (m,)
    cap: np.ndarray  # (m,)
    threshold: np.ndarray  # (m,)
    effective: np.ndarray  # (m,) bool: reinforce_base == "effective"
    rate: np.ndarray  # (m, 4) by kind code
    initial: np.ndarray  # (m, 4) by kind code
    #: predicate -> (m,) its own decay rate in each set, NaN where a set leaves it to the kind's rate
    rate_by_predicate: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, params: Sequence[MemoryParams]) -> ParamArrays:
        names = sorted({name for p in params for name in p.decay_rate_by_predicate})
        return cls(
            gain=np.array([p.reinforce_gain for p in params], dtype=np.float64),
            cap=np.array([p.confidence_cap for p in params], dtype=np.float64),
            threshold=np.array([p.archive_threshold for p in params], dtype=np.float64),
            effective=np.array([p.reinforce_base == "effective" for p in params], dtype=bool),
            rate=np.stack([p.decay_rate.as_array() for p in params]),
            initial=np.stack([p.initial_confidence.as_array() for p in params]),
            rate_by_predicate={name: np.array([p.decay_rate_by_predicate.get(name, np.nan) for p in params],
                                              dtype=np.float64) for name in names},
        )

    def __len__(self) -> int:
        return len(self.gain)

    def new_fact_rates(self, kind: np.ndarray, predicate: np.ndarray | None = None,
                       predicate_names: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
        """``(table, rate_class)``: a fact inserted by event ``i`` under parameter set ``j`` gets the
        decay rate ``table[rate_class[i], j]`` — its predicate's own rate in set ``j`` if it has one,
        else its kind's. ``predicate``: per event, a position in ``predicate_names`` (needed only when
        some set has per-predicate rates). Rate class = kind code + kinds × slot, slot 0 for
        predicates no set gives a rate, slot s for the s-th one that some set does."""
        kind = np.asarray(kind, dtype=np.int64)
        by_kind = self.rate.T  # (kinds, m)
        if not self.rate_by_predicate:
            return by_kind.copy(), kind
        if predicate is None:
            raise InputError("these parameter sets have per-predicate decay rates: pass the events' predicates")
        present = [name for name in predicate_names if name in self.rate_by_predicate]
        if not present:
            return by_kind.copy(), kind
        n_kinds = by_kind.shape[0]
        slot_of = {name: s for s, name in enumerate(present, start=1)}
        slots = np.array([slot_of.get(name, 0) for name in predicate_names], dtype=np.int64)  # per predicate
        blocks = [by_kind]
        for name in present:  # a loop over predicates, not events
            own = self.rate_by_predicate[name][None, :]
            blocks.append(np.where(np.isnan(own), by_kind, own))
        return np.concatenate(blocks, axis=0), kind + n_kinds * slots[np.asarray(predicate, dtype=np.int64)]


@dataclass
class InitialState:
    """At most one active fact per key before the replay (``has`` False where none)."""

    has: np.ndarray  # (K,) bool
    obj: np.ndarray  # (K,) int64, -1 when its object is not among the events'
    confidence: np.ndarray  # (K,)
    last_reinforced: np.ndarray  # (K,) int64
    decay_rate: np.ndarray  # (K,)

    @classmethod
    def empty(cls, n_keys: int) -> InitialState:
        return cls(np.zeros(n_keys, bool), np.full(n_keys, -1, np.int64), np.zeros(n_keys),
                   np.zeros(n_keys, np.int64), np.zeros(n_keys))


@dataclass
class WaveResult:
    """Per (parameter set, row): one row per event, in *wave order* (wave 0 of every run, then
    wave 1, ...) — the order the scan writes in; ``event`` maps rows to events.

    ``conf``: confidence after the event. ``inserted``: the event inserted a new fact.
    ``origin``: index of the event that inserted the fact current after this event, or
    ``-1 - key`` for the key's initial fact. ``end``/``reason``: when and why the state after the
    event ends (next event reinforcing or superseding it, archival by a consolidation, or OPEN).
    ``init_end``/``init_reason`` (per parameter set, key): the same for each key's initial fact
    before the key's first event (EndReason.REINFORCED when the first event reinforces it).
    ``rate``: the decay rate of the fact current after each event.
    """

    conf: np.ndarray
    inserted: np.ndarray
    origin: np.ndarray
    end: np.ndarray
    reason: np.ndarray
    init_end: np.ndarray
    init_reason: np.ndarray
    rate: np.ndarray  # decay rate of the fact current after each event
    event: np.ndarray  # (rows,) the event (index into the sorted input) of each row
    row_of_event: np.ndarray  # (events,) the inverse: ``arr[:, row_of_event]`` is in event order

    def in_event_order(self, name: str) -> np.ndarray:
        """A per-row result, reordered to the input's event order."""
        return getattr(self, name)[:, self.row_of_event]


def effective_at(c, rate, at, last):
    """Effective confidence with ages computed as in SQL: (at - last) / 86400 in float64 — the very
    expression consolidate's SQL evaluates (the replay engine and the write-behind state decide
    archival with it)."""
    return effective_confidence(c, rate, (at - last) / SECONDS_PER_DAY)


def first_archive_time(c, rate, last, threshold, grid: np.ndarray, upto, *, known_archived: bool = False):
    """First consolidation time T in ``grid`` with ``last < T <= upto`` at which the effective
    confidence is below ``threshold``; OPEN where there is none. All arguments broadcast.
    ``known_archived``: the caller has checked that such a T exists (saves one pass)."""
    c, rate, last, threshold, upto = np.broadcast_arrays(
        np.asarray(c, np.float64), np.asarray(rate, np.float64), np.asarray(last, np.int64),
        np.asarray(threshold, np.float64), np.asarray(upto, np.int64))
    shape = c.shape  # plain scalars broadcast to 0-d: worked on as one row, returned as 0-d
    if not shape:
        return first_archive_time(c.reshape(1), rate.reshape(1), last.reshape(1), threshold.reshape(1), grid,
                                  upto.reshape(1), known_archived=known_archived).reshape(shape)
    out = np.full(c.shape, OPEN, np.int64)
    if grid.size == 0 or c.size == 0:
        return out
    lo = grid_index(grid, last, "right")  # first T > last
    hi = grid_index(grid, upto, "right")  # past the last T <= upto
    ii = np.nonzero(lo < hi)
    if not ii[0].size:
        return out
    c, rate, last, threshold, lo, hi = c[ii], rate[ii], last[ii], threshold[ii], lo[ii], hi[ii]

    def below(i, rows=slice(None)):  # the very expression consolidate evaluates (on some rows)
        return effective_at(c[rows], rate[rows], grid[np.minimum(i, grid.size - 1)], last[rows]) < threshold[rows]

    # decay is monotone: archived at all iff below at the last chance
    ok = np.ones(c.shape, bool) if known_archived else below(hi - 1)
    # the closed form lands on the answer or next to it; an exact check confirms it
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        days = np.log(c / threshold) / rate
    t_guess = last + np.where(np.isfinite(days) & (days > 0), np.minimum(days, 1e12) * SECONDS_PER_DAY, 0.0)
    g = np.clip(grid_index(grid, t_guess.astype(np.int64), "left"), lo, hi - 1)
    done = ok & below(g) & ((g == lo) | ~below(g - 1))
    todo = np.flatnonzero(ok & ~done)
    if todo.size:  # rounding put the guess off (a few in a million): binary search (vectorized) on those
        lo_, hi_ = lo[todo], hi[todo] - 1
        while True:
            step = lo_ < hi_
            if not step.any():
                break
            mid = (lo_ + hi_) // 2
            b = below(mid, todo)
            hi_ = np.where(step & b, mid, hi_)
            lo_ = np.where(step & ~b, mid + 1, lo_)
        g[todo] = lo_
    res = np.full(c.shape, OPEN, np.int64)
    res[ok] = grid[g[ok]]
    out[ii] = res
    return out


def _archived_by(c, rate, last, upto, threshold, grid: np.ndarray):
    """Whether a consolidation T with ``last < T <= upto`` archives a fact (c, rate, last).

    ``c``, ``rate``: (k, m); ``last``, ``upto``: (k,); ``threshold``: (m,). Effective confidence is
    computed only for the rows a consolidation falls into."""
    out = np.zeros(np.shape(c), bool)
    if grid.size == 0:
        return out
    pos = grid_index(grid, upto, "right") - 1
    tlast = np.where(pos >= 0, grid[np.maximum(pos, 0)], np.iinfo(np.int64).min)
    rows = np.flatnonzero(tlast > last)
    if rows.size:
        out[rows] = effective_at(c[rows], rate[rows], tlast[rows, None], np.asarray(last)[rows, None]) < threshold
    return out


def replay_waves(key: np.ndarray, obj: np.ndarray, ts: np.ndarray, kind: np.ndarray, n_keys: int,
                 params: ParamArrays, grid: np.ndarray, initial: InitialState | None = None,
                 horizon: int | None = None, predicate: np.ndarray | None = None,
                 predicate_names: Sequence[str] = ()) -> WaveResult:
    """Replay events sorted by (key, global order) with consolidations at ``grid`` (sorted times).

    ``horizon``: consolidations after the last event of a key apply up to this time (default: the
    last grid time). ``predicate``/``predicate_names``: each event's predicate as a position in
    ``predicate_names``, for per-predicate decay rates (required when a parameter set has them).
    Results come in *wave order* (see :class:`WaveResult`).
    """
    n = len(key)
    m = len(params)
    rate_table, rate_class = params.new_fact_rates(kind, predicate, predicate_names)
    grid = np.asarray(grid, dtype=np.int64)
    init = initial if initial is not None else InitialState.empty(n_keys)
    if horizon is None:
        horizon = int(grid[-1]) if grid.size else np.iinfo(np.int64).min

    # Runs: maximal stretches of one object within a key. A new run always inserts a new fact
    # (the previous one is superseded, or was archived), so the sequential scan only walks
    # within runs: wave r is the r-th event of every run, and runs longer than r form a prefix
    # of the runs sorted by length. Wave r's rows are written to one contiguous block of the
    # output ("wave order"). The scan's state is [row, parameter set]; the outputs are [parameter
    # set, row] from the start (each set's rows contiguous, as consumers read them): transposing
    # them at the end cost as much as the scan, most of it in first touches of fresh memory.
    first = np.ones(n, bool)
    first[1:] = key[1:] != key[:-1]
    run_start = first.copy()
    run_start[1:] |= obj[1:] != obj[:-1]
    rs = np.flatnonzero(run_start)
    run_len = np.diff(np.append(rs, n))
    run_key = key[rs]
    n_runs = len(rs)
    cont = first[rs] & init.has[run_key] & (init.obj[run_key] == obj[rs])  # continues the key's initial fact
    perm = np.argsort(-run_len, kind="stable")  # runs by length, descending
    p_len, p_rs, pk = run_len[perm], rs[perm], run_key[perm]
    max_len = int(p_len[0]) if n_runs else 0
    nr_of = np.searchsorted(-p_len, -np.arange(max_len + 1), side="left")  # runs longer than r
    offset = np.concatenate([[0], np.cumsum(nr_of[:-1])]).astype(np.int64)
    inv_perm = np.empty(n_runs, np.int64)
    inv_perm[perm] = np.arange(n_runs)
    rid = np.cumsum(run_start) - 1
    row_of_event = offset[np.arange(n) - rs[rid]] + inv_perm[rid]
    event = np.empty(n, np.int64)
    event[row_of_event] = np.arange(n)
    ts_row = ts[event]

    alive = np.repeat(cont[perm][:, None], m, axis=1)
    c = np.repeat(init.confidence[pk][:, None], m, axis=1)
    lr = init.last_reinforced[pk].copy()  # every event sets last_reinforced, whatever the parameters
    rate = np.repeat(init.decay_rate[pk][:, None], m, axis=1)
    origin = np.repeat((-1 - pk.astype(np.int64))[:, None], m, axis=1)

    conf = np.empty((m, n))
    inserted = np.empty((m, n), bool)
    origin_out = np.empty((m, n), np.int64)
    rate_out = np.empty((m, n))
    archived_before = np.zeros((m, n), bool)

    gain, cap, thr = params.gain[None, :], params.cap[None, :], params.threshold[None, :]
    init_by_kind = params.initial.T.copy()  # [kind, param]
    eff_cols = np.flatnonzero(params.effective)
    for r in range(max_len):  # over ranks within a run, never over events
        nr, o = int(nr_of[r]), int(offset[r])
        blk = slice(o, o + nr)
        idx = p_rs[:nr] + r
        t = ts_row[blk]
        A = alive[:nr].copy()  # outlives the writes below
        C, L, R = c[:nr], lr[:nr], rate[:nr]
        if grid.size:
            gone = A & _archived_by(C, R, L, t, thr, grid)
            if gone.any():
                A &= ~gone
                archived_before[:, blk] = gone.T
        base = C
        if eff_cols.size:
            base = C.copy()
            base[:, eff_cols] = effective_at(C[:, eff_cols], R[:, eff_cols], t[:, None], L[:, None])
        k = kind[idx]
        newc = np.where(A, reinforce(base, gain, cap), init_by_kind[k])
        R_new = np.where(A, R, rate_table[rate_class[idx]])
        O_new = np.where(A, origin[:nr], idx[:, None])
        c[:nr] = newc
        conf[:, blk] = newc.T
        lr[:nr] = t
        rate[:nr] = R_new
        rate_out[:, blk] = R_new.T
        origin[:nr] = O_new
        origin_out[:, blk] = O_new.T
        alive[:nr] = True
        inserted[:, blk] = ~A.T

    # -- when each state ends -------------------------------------------------------------------
    end = np.empty((m, n), np.int64)
    reason = np.empty((m, n), np.int8)
    thr1 = params.threshold
    for r in range(max_len):  # the next event of the same run sits in the next wave's block
        nxt = int(nr_of[r + 1])
        a, b = int(offset[r]), int(offset[r + 1]) if r + 1 < max_len else 0
        if nxt:
            end[:, a:a + nxt] = ts_row[b:b + nxt][None, :]
            reason[:, a:a + nxt] = np.where(archived_before[:, b:b + nxt], EndReason.ARCHIVED, EndReason.REINFORCED)
    if n_runs:
        last_row = offset[p_len - 1] + np.arange(n_runs)  # each run's last event, runs in length order
        has_next_run = np.zeros(n_runs, bool)  # by original run index; perm maps length order to it
        has_next_run[:-1] = run_key[1:] == run_key[:-1]
        across = has_next_run[perm]
        lr_a, nx = last_row[across], perm[across] + 1
        t_next = ts[rs[nx]]
        arch = _archived_by(conf[:, lr_a].T, rate_out[:, lr_a].T, ts_row[lr_a], t_next, thr, grid)
        end[:, lr_a] = t_next[None, :]
        reason[:, lr_a] = np.where(arch, EndReason.ARCHIVED, EndReason.SUPERSEDED).T
        # archived before its next event (same run or the next run): when exactly
        is_tail = np.zeros(n, bool)
        tail = last_row[~across]
        is_tail[tail] = True
        pi, ri = np.nonzero((reason == EndReason.ARCHIVED) & ~is_tail[None, :])  # tail rows are set below
        if ri.size:
            end[pi, ri] = first_archive_time(conf[pi, ri], rate_out[pi, ri], ts_row[ri], thr1[pi], grid, end[pi, ri],
                                             known_archived=True)
        # a key's last event: consolidations up to the horizon
        if grid.size:
            at = first_archive_time(conf[:, tail], rate_out[:, tail], ts_row[tail][None, :], thr.T, grid, horizon)
            end[:, tail] = at
            reason[:, tail] = np.where(at != OPEN, EndReason.ARCHIVED, EndReason.OPEN)
        else:
            end[:, tail], reason[:, tail] = OPEN, EndReason.OPEN

    # -- the initial facts of keys with events --------------------------------------------------
    init_end = np.full((n_keys, m), OPEN, np.int64)
    init_reason = np.full((n_keys, m), EndReason.OPEN, np.int8)
    counts = np.bincount(key, minlength=n_keys)
    kk = np.flatnonzero(init.has & (counts > 0))
    if kk.size:
        fpos = np.flatnonzero(first)
        f_of_key = np.full(n_keys, -1, np.int64)
        f_of_key[key[fpos]] = fpos
        fe = f_of_key[kk]
        continues = (init.obj[kk] == obj[fe])[:, None]
        arch_c = archived_before[:, row_of_event[fe]].T  # continuing: archived before its first event?
        ic = np.repeat(init.confidence[kk][:, None], m, axis=1)
        ir = np.repeat(init.decay_rate[kk][:, None], m, axis=1)
        arch_s = _archived_by(ic, ir, init.last_reinforced[kk], ts[fe], thr, grid)
        arch = np.where(continues, arch_c, arch_s)
        init_end[kk] = ts[fe][:, None]
        init_reason[kk] = np.where(arch, EndReason.ARCHIVED, np.where(continues, EndReason.REINFORCED, EndReason.SUPERSEDED))
        ki, pi = np.nonzero(arch)
        if ki.size:
            kx = kk[ki]
            init_end[kx, pi] = first_archive_time(init.confidence[kx], init.decay_rate[kx], init.last_reinforced[kx],
                                                  thr1[pi], grid, ts[fe[ki]])
    return WaveResult(conf, inserted, origin_out, end, reason, init_end.T, init_reason.T, rate_out, event, row_of_event)


def grid_between(start: int, end: int, every: int) -> np.ndarray:
    """Times start+every, start+2·every, … ≤ end (consolidations after each full period)."""
    if every <= 0:
        raise InputError(f"a period must be a positive number of seconds, got {every!r}")
    return np.arange(int(start) + int(every), int(end) + 1, int(every), dtype=np.int64)
