"""Replay with consolidations, for one or many parameter sets at once: the compiled wave scan.

This is the engine of ``FactStore.replay`` (one parameter set, a store's initial state) and of
parameter sweeps (many parameter sets, an empty memory). Events are sorted by key and global
order; the scan runs in *waves*: wave ``r`` handles the ``r``-th event of every run (of one object
within a key), and its rows are one contiguous block of the output. The scan is compiled
(:func:`factmem.core.compiled.njit`): one sequential pass over the rows per parameter set, no
Python loop over events, facts or parameter sets.

The scan multiplies, adds and compares as :mod:`factmem.core.decay` does, in the same order of
operations; the only function it does not evaluate itself is ``exp``: numpy's (which
``effective_confidence`` calls) differs from the C library's (a compiled ``exp``) by one ulp in
about 5% of arguments, so every factor ``exp(−rate × max(0, age))`` the scan may need is computed
by numpy before it runs — for each rate the fact before an event may have (a few candidates per
row) — and the scan reads them. :func:`first_archive_time` does the same around its checks.

Between the previous event of a key (or its initial fact) at ``lr`` and the next event at ``t``,
consolidations at times ``T`` in ``(lr, t]`` may archive the key's fact. Effective confidence is
non-increasing in ``T``, so the fact is archived iff it is below the threshold at the last such
consolidation. Events at exactly ``T`` come *after* consolidate(T), as in a replay that ingests
``ts < T`` before consolidating at ``T``.

A new fact's decay rate depends on its parameter set, its kind and — with per-predicate rates
(``MemoryParams.decay_rate_by_predicate``) — its predicate: :meth:`ParamArrays.new_fact_rates` builds
a small ``(rate class, parameter set)`` table (a class is a kind, or a kind with one of the predicates
that some set gives its own rate) and a class per event, so the scan looks a new fact's rate up in
the table and no ``(event, parameter set)`` array of rates is built.

Every number is computed as by the functions of :mod:`factmem.core.decay`, in the same order of
operations as ``remember``/``ingest`` and the SQL of ``consolidate``, so the results are identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from factmem.core.codes import OPEN, SECONDS_PER_DAY, EndReason
from factmem.core.compiled import njit, search_left
from factmem.core.decay import effective_confidence
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
    ``known_archived``: the caller has checked that such a T exists (saves one exponential each)."""
    c, rate, last, threshold, upto = np.broadcast_arrays(
        np.asarray(c, np.float64), np.asarray(rate, np.float64), np.asarray(last, np.int64),
        np.asarray(threshold, np.float64), np.asarray(upto, np.int64))
    shape = c.shape  # plain scalars broadcast to 0-d: worked on as one row, returned as 0-d
    if grid.size == 0 or c.size == 0:
        return np.full(shape, OPEN, np.int64)
    c, rate, last, threshold, upto = (np.ascontiguousarray(a).reshape(-1) for a in (c, rate, last, threshold, upto))
    lo = grid_index(grid, last, "right")  # first T > last
    hi = grid_index(grid, upto, "right")  # past the last T <= upto
    # decay is monotone: archived at all iff below at the last chance (hi - 1). The closed form
    # lands on the answer (g) or next to it: g is it when below there and not at g - 1. One compiled
    # pass gives g and the exponents of those three checks; numpy's exp evaluates them, as
    # effective_at does (its exp is not the C library's); a second pass decides.
    g, exponents = _archive_guess(c, rate, last, threshold, grid, lo, hi)
    np.exp(exponents, out=exponents)
    out, todo = _archive_pick(c, threshold, grid, lo, hi, g, exponents, known_archived)
    if todo.size:  # rounding put the guess off (a few in a million): binary search (vectorized) on those
        lo_, hi_ = lo[todo], hi[todo] - 1
        while True:
            step = lo_ < hi_
            if not step.any():
                break
            mid = (lo_ + hi_) // 2
            b = effective_at(c[todo], rate[todo], grid[mid], last[todo]) < threshold[todo]
            hi_ = np.where(step & b, mid, hi_)
            lo_ = np.where(step & ~b, mid + 1, lo_)
        out[todo] = grid[lo_]
    return out.reshape(shape)


@njit
def _archive_guess(c, rate, last, threshold, grid, lo, hi):  # pragma: no cover - compiled
    """Per fact with a consolidation in ``(last, upto]`` (``lo < hi``): the guess ``g`` — the first
    consolidation at or after ``last + ln(c / threshold) / rate`` days, within ``[lo, hi - 1]`` — and
    the exponents ``−rate × max(0, age)`` of effective_at at ``hi − 1``, ``g`` and ``g − 1`` (rows 0-2)."""
    n = len(c)
    g = np.empty(n, np.int64)
    exponents = np.zeros((3, n))
    for i in range(n):
        a, z = lo[i], hi[i]
        if a >= z:
            g[i] = a
            continue
        with_days = 0.0
        if threshold[i] != 0.0 and rate[i] != 0.0:
            days = np.log(c[i] / threshold[i]) / rate[i]
            if np.isfinite(days) and days > 0:
                with_days = min(days, 1e12) * SECONDS_PER_DAY
        k = search_left(grid, a, z, np.int64(last[i] + with_days))
        k = min(k, z - 1)
        g[i] = k
        for row, at in ((0, z - 1), (1, k), (2, max(k - 1, a))):
            exponents[row, i] = -rate[i] * max(0.0, (grid[at] - last[i]) / SECONDS_PER_DAY)
    return g, exponents


@njit
def _archive_pick(c, threshold, grid, lo, hi, g, factors, known_archived):  # pragma: no cover - compiled
    """The first archive times from the checks of :func:`_archive_guess` (``factors``: its exponents'
    exp): OPEN where not archived, the guess's time where the checks confirm it, and the facts
    whose guess is off (``todo``: their entries are left for a binary search)."""
    n = len(c)
    out = np.full(n, OPEN, np.int64)
    off = np.zeros(n, np.bool_)
    for i in range(n):
        if lo[i] >= hi[i]:
            continue
        ok = known_archived or c[i] * factors[0, i] < threshold[i]
        below_g = c[i] * factors[1, i] < threshold[i]
        below_before = c[i] * factors[2, i] < threshold[i]
        done = ok and below_g and (g[i] == lo[i] or not below_before)
        if done:
            out[i] = grid[g[i]]
        elif ok:
            off[i] = True
    return out, np.flatnonzero(off)


_REINFORCED, _SUPERSEDED, _ARCHIVED, _OPEN = (int(EndReason.REINFORCED), int(EndReason.SUPERSEDED),
                                              int(EndReason.ARCHIVED), int(EndReason.OPEN))


@njit
def _candidates(first, run_start, rate_class, run_cont, init_has, row_of_event, n_classes):  # pragma: no cover - compiled
    """The rate classes the fact current *before* each event may have (see :func:`replay_waves`), per
    row: ``(start, classes, init)`` — row ``x``'s classes are ``classes[start[x]:start[x + 1]]`` (each
    class once) and ``init[x]`` says whether it may be the key's initial fact.

    Before an event inside a run the fact is the run's: inserted by one of the run's earlier events (a
    class each) or, when the run continues the key's initial fact, that fact. Before a run's first
    event it is the previous run's last fact (the same candidates, taken at the previous run's end);
    before a key's first event, the initial fact if the key has one. Two passes: count, then fill."""
    n = len(first)
    start = np.zeros(n + 1, np.int64)
    init = np.zeros(n, np.bool_)
    classes = np.empty(0, np.int64)
    cur = np.empty(n_classes, np.int64)  # the classes of the current run's events so far
    prev = np.empty(n_classes, np.int64)  # ... of the previous run of the key
    for phase in range(2):
        n_cur, n_prev = 0, 0
        cur_cont, prev_cont = False, False
        for e in range(n):
            x = row_of_event[e]
            if first[e]:
                n_cur, n_prev, cur_cont, prev_cont = 0, 0, False, False
                cands, n_cands, with_init = cur, 0, init_has[e]
            elif run_start[e]:
                for k in range(n_cur):
                    prev[k] = cur[k]
                n_prev, prev_cont = n_cur, cur_cont
                cands, n_cands, with_init = prev, n_prev, prev_cont
            else:
                cands, n_cands, with_init = cur, n_cur, cur_cont
            if phase == 0:
                start[x + 1] = n_cands
                init[x] = with_init
            else:
                for k in range(n_cands):
                    classes[start[x] + k] = cands[k]
            if run_start[e]:
                n_cur, cur_cont = 0, run_cont[e]
            seen = False
            for k in range(n_cur):
                if cur[k] == rate_class[e]:
                    seen = True
            if not seen:
                cur[n_cur] = rate_class[e]
                n_cur += 1
        if phase == 0:
            for x in range(n):
                start[x + 1] += start[x]
            classes = np.empty(start[n], np.int64)
    return start, classes, init


@njit(inline=True)
def _slot(classes, first, cls):  # pragma: no cover - compiled
    """Where class ``cls`` sits among a row's candidate classes ``classes[first:]`` (it is there)."""
    k = 0
    while classes[first + k] != cls:
        k += 1
    return k


@njit
def _scan(nr_of, offset, t_row, ev_row, kind_row, class_row, class_of_event, first_row, run_key, run_cont, across_rows,
          across_prev, init_has, init_conf, init_rate, arch_row, start, classes, arch_base, arch_init,
          arch_table, eff_base, eff_init, eff_table, eff_col, gain, cap, thr, init_by_kind, rate_table,
          conf, rate_out, origin_out, inserted, end, reason, init_end, init_reason):  # pragma: no cover - compiled
    """The sequential part of :func:`replay_waves`, one parameter set at a time: the waves (rank ``r``
    of every run, rows ``offset[r] …``), then each run's end where the next run of its key begins
    (``across_rows``: those runs' first rows; ``across_prev``: the previous run's last rows)."""
    m = len(gain)
    n_runs = len(run_key)
    c = np.empty(n_runs)
    rate = np.empty(n_runs)
    origin = np.empty(n_runs, np.int64)
    cls = np.empty(n_runs, np.int64)
    for j in range(m):
        g, cp, th, ej = gain[j], cap[j], thr[j], eff_col[j]
        for r in range(len(nr_of) - 1):
            o = offset[r]
            for i in range(nr_of[r]):
                x = o + i
                t = t_row[x]
                alive = False
                if r == 0:
                    if first_row[x] and init_has[run_key[i]]:  # the key's initial fact meets its first event
                        k = run_key[i]
                        c[i], rate[i], origin[i], cls[i] = init_conf[k], init_rate[k], -1 - k, -1
                        gone = arch_row[x] and init_conf[k] * arch_init[x] < th
                        alive = run_cont[i] and not gone
                        init_end[j, k] = t
                        init_reason[j, k] = _ARCHIVED if gone else (_REINFORCED if run_cont[i] else _SUPERSEDED)
                else:
                    gone = arch_row[x] and c[i] * (arch_init[x] if cls[i] < 0 else
                                                   arch_table[j, arch_base[x] + _slot(classes, start[x], cls[i])]) < th
                    alive = not gone
                    prev = offset[r - 1] + i
                    end[j, prev] = t
                    reason[j, prev] = _ARCHIVED if gone else _REINFORCED
                if alive:
                    base = c[i]
                    if ej >= 0:  # reinforce_base "effective": the decayed confidence
                        base = base * (eff_init[x] if cls[i] < 0 else
                                       eff_table[ej, eff_base[x] + _slot(classes, start[x], cls[i])])
                    grown = base + g * (1.0 - base)
                    c[i] = grown if grown < cp else cp
                else:
                    c[i] = init_by_kind[kind_row[x], j]
                    rate[i] = rate_table[class_row[x], j]
                    origin[i] = ev_row[x]
                    cls[i] = class_row[x]
                conf[j, x] = c[i]
                rate_out[j, x] = rate[i]
                origin_out[j, x] = origin[i]
                inserted[j, x] = not alive
        for a in range(len(across_rows)):  # a run's last fact meets the next run's first event
            x, prev = across_rows[a], across_prev[a]
            o_prev = origin_out[j, prev]
            pc = class_of_event[o_prev] if o_prev >= 0 else -1
            gone = arch_row[x] and conf[j, prev] * (arch_init[x] if pc < 0 else
                                                    arch_table[j, arch_base[x] + _slot(classes, start[x], pc)]) < th
            end[j, prev] = t_row[x]
            reason[j, prev] = _ARCHIVED if gone else _SUPERSEDED


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
    rate_table = np.ascontiguousarray(rate_table, dtype=np.float64)
    rate_class = np.ascontiguousarray(rate_class, dtype=np.int64)
    grid = np.asarray(grid, dtype=np.int64)
    init = initial if initial is not None else InitialState.empty(n_keys)
    if horizon is None:
        horizon = int(grid[-1]) if grid.size else np.iinfo(np.int64).min

    # Runs: maximal stretches of one object within a key. A new run always inserts a new fact
    # (the previous one is superseded, or was archived), so the sequential scan only walks
    # within runs: wave r is the r-th event of every run, and runs longer than r form a prefix
    # of the runs sorted by length. Wave r's rows are written to one contiguous block of the
    # output ("wave order"); the outputs are [parameter set, row] (each set's rows contiguous, as
    # consumers read them), so the scan writes every output sequentially.
    key = np.asarray(key, dtype=np.int64)
    ts = np.asarray(ts, dtype=np.int64)
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
    p_len, pk = run_len[perm], run_key[perm]
    max_len = int(p_len[0]) if n_runs else 0
    nr_of = np.searchsorted(-p_len, -np.arange(max_len + 1), side="left").astype(np.int64)  # runs longer than r
    offset = np.concatenate([[0], np.cumsum(nr_of[:-1])]).astype(np.int64)
    inv_perm = np.empty(n_runs, np.int64)
    inv_perm[perm] = np.arange(n_runs)
    rid = np.cumsum(run_start) - 1
    row_of_event = offset[np.arange(n) - rs[rid]] + inv_perm[rid]
    event = np.empty(n, np.int64)
    event[row_of_event] = np.arange(n)
    ts_row = ts[event]
    key_row = key[event]
    first_row = first[event]

    # The fact current before each event (the scan's state) decays from the previous event of its
    # key, or from the initial fact's last reinforcement. Its rate is the rate of the event that
    # inserted it: one of few candidates per row (:func:`_candidates`). Every exponential the scan
    # needs — ``exp(−rate × max(0, age))`` at the last consolidation before the event (archival) and
    # at the event (the "effective" reinforcement base) — is computed here, by numpy, for every
    # candidate: the very expression of ``effective_confidence``, whose ``np.exp`` may differ from the
    # C library's (a compiled ``exp``) by one ulp. The scan multiplies and compares, as it did.
    start, classes, init_cand = _candidates(first, run_start, rate_class, cont[rid], init.has[key], row_of_event,
                                            rate_table.shape[0])
    n_cands = np.diff(start)
    has_prev = ~first_row | init.has[key_row]
    last_row = np.where(first_row, init.last_reinforced[key_row], ts[np.maximum(event - 1, 0)])
    init_rate_row = init.decay_rate[key_row]

    by_set = np.ascontiguousarray(rate_table.T)  # [set, class]

    def factors(rows: np.ndarray, at: np.ndarray, sets: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For ``rows`` (at times ``at``): each row's first position in the table of factors, the
        initial fact's factor per row (where it is a candidate) and the factors of every candidate
        class under the parameter sets ``sets`` ([set, position])."""
        age = np.maximum(0.0, (at - last_row[rows]) / SECONDS_PER_DAY)  # effective_at's age, then its max
        base = np.zeros(n, np.int64)
        counts = n_cands[rows]
        first_pos = np.cumsum(counts) - counts
        base[rows] = first_pos
        from_init = np.zeros(n)
        mine = init_cand[rows]
        from_init[rows[mine]] = np.exp(-init_rate_row[rows[mine]] * age[mine])
        pairs = np.repeat(start[rows] - first_pos, counts) + np.arange(int(counts.sum()))
        # exp(-rate * age) as effective_confidence computes it, in place: negate, multiply, exp
        # (np.take gives a C-ordered table, 3x faster than by_set[sets][:, idx], whose result is
        # F-ordered for several sets: then the scan was compiled twice, once per layout)
        table = np.take(by_set[sets], classes[pairs], axis=1)
        np.negative(table, out=table)
        np.multiply(table, np.repeat(age, counts)[None, :], out=table)
        np.exp(table, out=table)
        return base, from_init, table

    arch_row = np.zeros(n, bool)
    if grid.size:
        pos = grid_index(grid, ts_row, "right") - 1  # the last consolidation at or before each event
        t_last = np.where(pos >= 0, grid[np.maximum(pos, 0)], np.iinfo(np.int64).min)
        arch_row = has_prev & (t_last > last_row)
        ax = np.flatnonzero(arch_row)
        arch_base, arch_init, arch_table = factors(ax, t_last[ax], slice(None))
    else:
        arch_base, arch_init, arch_table = np.zeros(n, np.int64), np.zeros(n), np.zeros((m, 0))
    eff_cols = np.flatnonzero(params.effective)
    eff_col = np.full(m, -1, np.int64)
    eff_col[eff_cols] = np.arange(eff_cols.size)
    if eff_cols.size:
        # a reinforcement: inside a run, or a run's first event continuing the initial fact
        ex = np.flatnonzero(~run_start[event] | (first_row & cont[rid][event]))
        eff_base, eff_init, eff_table = factors(ex, ts_row[ex], eff_cols)
    else:
        eff_base, eff_init, eff_table = np.zeros(n, np.int64), np.zeros(n), np.zeros((1, 0))

    conf = np.empty((m, n))
    inserted = np.empty((m, n), bool)
    origin_out = np.empty((m, n), np.int64)
    rate_out = np.empty((m, n))
    end = np.empty((m, n), np.int64)
    reason = np.empty((m, n), np.int8)
    init_end = np.full((m, n_keys), OPEN, np.int64)
    init_reason = np.full((m, n_keys), EndReason.OPEN, np.int8)
    across_rows = np.flatnonzero(run_start[event] & ~first_row)  # a run's first row, after a run of its key
    across_prev = row_of_event[event[across_rows] - 1]
    kind64 = np.asarray(kind, dtype=np.int64)
    _scan(nr_of, offset, ts_row, event, kind64[event], rate_class[event], rate_class, first_row, pk, cont[perm],
          across_rows, across_prev, init.has, np.asarray(init.confidence, np.float64),
          np.asarray(init.decay_rate, np.float64), arch_row, start, classes, arch_base, arch_init, arch_table,
          eff_base, eff_init, eff_table, eff_col, params.gain, params.cap, params.threshold,
          np.ascontiguousarray(params.initial.T), rate_table, conf, rate_out, origin_out, inserted, end, reason,
          init_end, init_reason)

    # -- when each state ends (the scan gave every state followed by an event of its key) ---------
    thr1 = params.threshold
    if n:
        is_tail = np.zeros(n, bool)  # a key's last event
        is_tail[row_of_event[np.append(np.flatnonzero(first)[1:], n) - 1]] = True
        tail = np.flatnonzero(is_tail)
        # archived before its next event (same run or the next run): when exactly
        pi, ri = np.nonzero((reason == EndReason.ARCHIVED) & ~is_tail[None, :])  # tail rows are set below
        if ri.size:
            end[pi, ri] = first_archive_time(conf[pi, ri], rate_out[pi, ri], ts_row[ri], thr1[pi], grid, end[pi, ri],
                                             known_archived=True)
        # a key's last event: consolidations up to the horizon
        if grid.size:
            at = first_archive_time(conf[:, tail], rate_out[:, tail], ts_row[tail][None, :], thr1[:, None], grid,
                                    horizon)
            end[:, tail] = at
            reason[:, tail] = np.where(at != OPEN, EndReason.ARCHIVED, EndReason.OPEN)
        else:
            end[:, tail], reason[:, tail] = OPEN, EndReason.OPEN

    # -- the initial facts archived before their key's first event: when exactly ---------------------
    pi, kx = np.nonzero(init_reason == EndReason.ARCHIVED)
    if kx.size:
        init_end[pi, kx] = first_archive_time(init.confidence[kx], init.decay_rate[kx], init.last_reinforced[kx],
                                              thr1[pi], grid, init_end[pi, kx])
    return WaveResult(conf, inserted, origin_out, end, reason, init_end, init_reason, rate_out, event, row_of_event)


def grid_between(start: int, end: int, every: int) -> np.ndarray:
    """Times start+every, start+2·every, … ≤ end (consolidations after each full period)."""
    if every <= 0:
        raise InputError(f"a period must be a positive number of seconds, got {every!r}")
    return np.arange(int(start) + int(every), int(end) + 1, int(every), dtype=np.int64)
