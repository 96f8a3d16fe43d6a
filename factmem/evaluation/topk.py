"""Per-point top-k selection, exact, compiled: the context metrics' ranking of millions of pairs.

The budgeted context metrics (:mod:`factmem.evaluation.context`) rank, at every evaluation point, the
facts held there by effective confidence (higher first), ties broken by further keys, and keep the
first ``k``. This module does that selection compiled (Numba, :mod:`factmem.core.compiled`), exact,
without sorting the pairs:

* :func:`context_top_k` goes point by point (the points of a subject are consecutive, in time
  order) and keeps the states held at the point *sorted*: from one point to the next their values
  are recomputed, the states gone are dropped, the order is repaired by an insertion sort — two
  states change places only where their decay curves cross, so it moves few — and the arrivals are
  merged in. The first ``K`` (``K`` the widest budget) are the point's context; every budget
  ``k <= K`` is their first ``k``, and the position is the rank — the order
  :func:`factmem.core.context_rule.context_order` gives. No pair array is built. It is *lazy*:
  with a rate >= 0 a state's value only falls, so its last value bounds its value now, and a state
  whose bound is below the least of ``K`` values already computed at the point cannot rank among
  its first ``K`` — it keeps its bound, its exponential not computed (on ``large`` 17.6M pairs
  per parameter set, 10.2M exponentials).
* :func:`top_k_masks` takes pairs already enumerated and keeps, per point, a buffer of its best
  ``K`` so far in order (a candidate that beats the last is inserted at its place).

**The order** (:func:`_better`, the one definition): value descending, then the tie keys in
significance order, each ascending (negate a key to prefer larger), then the candidate's index
ascending — the order a stable sort by (point, −value, keys) puts them in.

In :func:`context_top_k` state ``s`` is a candidate at the scored points from ``lo[s]`` while the point's
key is below ``stop[s]`` (keys ascend: the points ``lo[s] … lo[s] + cnt[s] − 1`` when a point's key is its
index and ``stop = lo + cnt``) with effective confidence ``confidence × exp(−rate × max(0, (t − start) / 86400))``
(:func:`factmem.core.context_rule.effective_at`, in the same operations), when it is at least the
context threshold. The tests hold both to a full sort.

>>> import numpy as np
>>> point = np.array([0, 0, 0, 1, 1]); value = np.array([0.5, 0.9, 0.5, 0.2, 0.2])
>>> [m.tolist() for m in top_k_masks(point, value, (1, 2), 2, lambda idx: (-idx,))]
[[False, True, False, False, True], [False, True, True, True, True]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from factmem.core.codes import SECONDS_PER_DAY
from factmem.core.compiled import njit
from factmem.errors import InputError

__all__ = ["top_k_masks", "context_top_k", "TopK"]

TieKeys = Callable[[np.ndarray], tuple[np.ndarray, ...]]

_DAY = float(SECONDS_PER_DAY)


@njit
def _better(v1, i1, v2, i2, keys):  # pragma: no cover - compiled
    """Whether candidate ``i1`` (value ``v1``) ranks before ``i2`` (``v2``): the one order."""
    if v1 != v2:
        return v1 > v2
    for c in range(keys.shape[0]):
        a = keys[c, i1]
        b = keys[c, i2]
        if a != b:
            return a < b
    return i1 < i2


@njit
def _offer(p, i, v, keys, best, best_value, held, k):  # pragma: no cover - compiled
    """Offer candidate ``i`` (value ``v``) to point ``p``'s buffer of its ``k`` best, kept in order."""
    n = held[p]
    if n == k:
        if not _better(v, i, best_value[p, k - 1], best[p, k - 1], keys):
            return
        j = k - 1
    else:
        j = n
        held[p] = n + 1
    # the buffer is in order: the place is the first entry the candidate beats (binary search),
    # then the entries from there shift down one
    a, z = 0, j
    while a < z:
        mid = (a + z) // 2
        if _better(v, i, best_value[p, mid], best[p, mid], keys):
            z = mid
        else:
            a = mid + 1
    for q in range(j, a, -1):
        best[p, q] = best[p, q - 1]
        best_value[p, q] = best_value[p, q - 1]
    best[p, a] = i
    best_value[p, a] = v


@njit
def _insert(states, values, n, state, value, keys):  # pragma: no cover - compiled
    """Put (state, value) into the sorted run ``states[:n]``/``values[:n]`` (slot n is free or its own)."""
    i = n
    while i > 0 and _better(value, state, values[i - 1], states[i - 1], keys):
        states[i] = states[i - 1]
        values[i] = values[i - 1]
        i -= 1
    states[i] = state
    values[i] = value


@njit
def _select_pairs(point, value, keys, n_points, k):  # pragma: no cover - compiled
    best = np.full((n_points, k), -1, np.int64)
    best_value = np.zeros((n_points, k))
    held = np.zeros(n_points, np.int64)
    for i in range(len(point)):
        _offer(point[i], i, value[i], keys, best, best_value, held, k)
    return best, best_value, held


@njit
def _select_states(lo, stop, point_key, confidence, rate, start, keys, t, threshold, day, best, best_value
                   ):  # pragma: no cover - compiled
    """Point by point (in order), the states held there (state ``s`` at the points ``p >= lo[s]`` whose
    ``point_key[p]`` is below ``stop[s]``; the keys ascend, so a state leaves for good) kept sorted:
    ``cur`` holds the candidates of the previous point in its order; at the next point
    their values are recomputed (a value only falls with time, so a state below the threshold never
    returns — unless its rate is negative),
    those gone are dropped, the order is repaired by an insertion sort (orders change only where
    two decay curves cross: few moves), and the arrivals — states whose first point this is, sorted
    among themselves — are merged in. Once ``k`` states at or above the threshold are computed, a
    state whose last value is below the least of them (and whose rate is >= 0: the last value bounds
    the value now) keeps its last value as its sort key, not recomputed: it ranks after those ``k``
    whatever its exact value and its tie keys, so the first ``k`` after the sort are exact (a
    relative margin of 1e-12 in the test covers an exponential rounded the other way). Such a key
    stays a bound at later points. The first ``k`` are the point's best, written to ``best`` and
    ``best_value`` (``(points, k)``, given: a caller scoring many sets reuses them — fresh memory costs
    more to touch than the selection costs to fill), -1 and 0 past the point's ``held``."""
    n_points, n_states = len(t), len(lo)
    k = best.shape[1]
    held = np.zeros(n_points, np.int64)
    cur = np.empty(n_states, np.int64)
    val = np.empty(n_states)
    new = np.empty(n_states, np.int64)
    new_val = np.empty(n_states)
    n_cur = 0
    nxt = 0  # the next state to arrive: states come sorted by their first point
    for p in range(n_points):
        tp = t[p]
        kp = point_key[p]
        # the held states: values at tp, the gone dropped (order kept); once k of them are at or
        # above the threshold, a state whose last value (with a rate >= 0, a bound on its value
        # now) is below the least of those k cannot be among the point's k best: it keeps its
        # last value, not recomputed (a relative margin of 1e-12 covers an exponential rounded
        # the other way)
        m = 0
        n_ok = 0
        floor = np.inf
        j = 0
        while j < n_cur and n_ok < k:  # until k are at or above the threshold: every value computed
            s = cur[j]
            j += 1
            if kp >= stop[s]:  # past its last point (one array read per state)
                continue
            e = confidence[s] * np.exp(-rate[s] * max(0.0, (tp - start[s]) / day))
            if not e >= threshold:
                if rate[s] >= 0:
                    continue
                e = -1.0  # below for now; a negative rate may bring it back
            else:
                n_ok += 1
                floor = min(floor, e)
            cur[m] = s
            val[m] = e
            m += 1
        while j < n_cur:  # the rest (a loop of its own: 5 % faster than one loop testing n_ok at each state)
            s = cur[j]
            e = val[j]
            j += 1
            if kp >= stop[s]:
                continue
            if not (e * (1.0 + 1e-12) < floor and rate[s] >= 0):  # else its last value is kept: a bound
                e = confidence[s] * np.exp(-rate[s] * max(0.0, (tp - start[s]) / day))
                if not e >= threshold:
                    if rate[s] >= 0:
                        continue
                    e = -1.0
            cur[m] = s
            val[m] = e
            m += 1
        n_cur = m
        for j in range(1, n_cur):  # repair the order: insertion sort of a nearly sorted run
            if val[j] < val[j - 1]:
                continue  # in order already (a lower value ranks after): the common case, no call
            _insert(cur, val, j, cur[j], val[j], keys)
        # the arrivals, sorted among themselves
        n_new = 0
        while nxt < n_states and lo[nxt] <= p:
            s = nxt
            nxt += 1
            if kp >= stop[s]:  # held at none of its points
                continue
            e = confidence[s] * np.exp(-rate[s] * max(0.0, (tp - start[s]) / day))
            if not e >= threshold:
                if rate[s] >= 0:
                    continue
                e = -1.0
            _insert(new, new_val, n_new, s, e, keys)
            n_new += 1
        if n_new:  # merge, in place from the back: what ranks before every arrival stays put
            a, b, w = n_cur - 1, n_new - 1, n_cur + n_new - 1
            while b >= 0:
                if a >= 0 and _better(new_val[b], new[b], val[a], cur[a], keys):
                    cur[w] = cur[a]
                    val[w] = val[a]
                    a -= 1
                else:
                    cur[w] = new[b]
                    val[w] = new_val[b]
                    b -= 1
                w -= 1
            n_cur += n_new
        h = 0
        while h < n_cur and h < k and val[h] >= threshold:
            best[p, h] = cur[h]
            best_value[p, h] = val[h]
            h += 1
        held[p] = h
        for r in range(h, k):
            best[p, r] = -1
            best_value[p, r] = 0.0
    return held


@njit
def _flatten(best, best_value, held):  # pragma: no cover - compiled
    total = 0
    for p in range(len(held)):
        total += held[p]
    point = np.empty(total, np.int64)
    rank = np.empty(total, np.int64)
    cand = np.empty(total, np.int64)
    value = np.empty(total)
    i = 0
    for p in range(len(held)):
        for r in range(held[p]):
            point[i] = p
            rank[i] = r
            cand[i] = best[p, r]
            value[i] = best_value[p, r]
            i += 1
    return point, rank, cand, value


class TopK:
    """The selection of each point's best ``k`` (``k`` = :attr:`width`): ``best[p, r]`` the candidate at
    rank ``r`` of point ``p`` (``-1`` past ``held[p]``), ``value[p, r]`` its value."""

    def __init__(self, best: np.ndarray, value: np.ndarray, held: np.ndarray):
        self.best, self.value, self.held = best, value, held
        self.width = best.shape[1]

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(point, rank, candidate, value) of every selected pair, by point then rank."""
        return _flatten(self.best, self.value, self.held)


def _keys(columns: Sequence[np.ndarray], n: int) -> np.ndarray:
    """Tie keys (most significant first) as one (keys, n) int64 array for the compiled order: a key
    a row, each written in one contiguous pass (an (n, keys) array, its columns written with a
    stride, took 2x as long to fill: ~8 against ~4 ms at 1M states; the order reads a state's keys
    only on a tie of values, rare)."""
    if not len(columns):
        return np.zeros((0, n), np.int64)
    return np.stack([np.asarray(c, np.int64) for c in columns])


def top_k_masks(point: np.ndarray, value: np.ndarray, budgets: Sequence[int], n_points: int,
                tie_keys: TieKeys, floor: float = 0.0) -> list[np.ndarray]:
    """For each budget ``k``: a boolean mask over the pairs, true for the pairs ranked ``< k`` within
    their point, ranking by ``value`` (descending) and then by ``tie_keys``.

    ``point``: int array, each pair's point in ``[0, n_points)``. ``value``: float64 in ``[0, 1]``.
    ``tie_keys(idx)``: for the pair indices ``idx``, the further sort keys as for
    :func:`numpy.lexsort` (last key most significant; ascending — negate a key to prefer larger),
    integers. ``floor``: a lower bound of the values (accepted for callers that know one; the
    selection does not need it).
    """
    del floor
    n = len(point)
    ks = [int(k) for k in budgets]
    if not n:
        return [np.ones(0, bool) for _ in ks]
    value = np.asarray(value, np.float64)
    if not ((value >= 0) & (value <= 1)).all():
        raise InputError("top_k_masks: values must lie in [0, 1] (effective confidences)")
    keys = _keys(tuple(tie_keys(np.arange(n)))[::-1], n)
    sel = TopK(*_select_pairs(np.asarray(point, np.int64), value, keys, int(n_points), max(ks)))
    _, rank, pair, _ = sel.pairs()
    masks = []
    for k in ks:
        mask = np.zeros(n, bool)
        mask[pair[rank < k]] = True
        masks.append(mask)
    return masks


def context_top_k(lo: np.ndarray, stop: np.ndarray, confidence: np.ndarray, rate: np.ndarray, start: np.ndarray,
                  tie_columns: Sequence[np.ndarray], t: np.ndarray, threshold: float, k: int,
                  out: tuple[np.ndarray, np.ndarray] | None = None, point_key: np.ndarray | None = None) -> TopK:
    """The ``k`` best states at each of the points ``t`` (Unix seconds; ascending within each state's
    points): state ``s`` is a candidate at the points ``p >= lo[s]`` with ``point_key[p] < stop[s]`` when
    its effective confidence there is at least ``threshold``; ranked by effective confidence, then
    ``tie_columns`` (most significant first, ascending), then state index. States come sorted by ``lo``.

    ``point_key``: ascending integers, one a point (default: the points' indices, so that a state
    held at ``cnt`` points from its first has ``stop = lo + cnt``). The context metrics key a point by
    its (subject, time) and a state's stop by (its subject, its visible end): no search for a
    state's last point.

    ``out``: ``(best, value)`` arrays of shape ``(len(t), k)`` (int64, float64) to write the selection
    to, overwritten — a caller selecting for many parameter sets passes the same ones (the result
    then holds them until the next call)."""
    n = len(lo)
    if n > 1 and (np.diff(lo) < 0).any():
        raise InputError("context_top_k: states must come sorted by their first point (lo)")
    keys = _keys(tie_columns, n)
    shape = (len(t), max(int(k), 1))
    if out is None or out[0].shape != shape or out[1].shape != shape:
        out = (np.empty(shape, np.int64), np.empty(shape, np.float64))
    best, value = out
    keys_of_points = np.arange(len(t), dtype=np.int64) if point_key is None else np.asarray(point_key, np.int64)
    if len(keys_of_points) != len(t) or (len(t) > 1 and (np.diff(keys_of_points) < 0).any()):
        raise InputError("context_top_k: point_key must hold one ascending key a point")
    held = _select_states(np.asarray(lo, np.int64), np.asarray(stop, np.int64), keys_of_points,
                          np.asarray(confidence, np.float64),
                          np.asarray(rate, np.float64), np.asarray(start, np.int64), keys, np.asarray(t, np.int64),
                          float(threshold), _DAY, best, value)
    return TopK(best, value, held)
