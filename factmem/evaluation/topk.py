"""Per-group top-k selection over millions of (group, value) pairs, exact, in linear time.

The budgeted context metrics (:mod:`factmem.evaluation.context`) rank, at every evaluation point, the
facts held there by effective confidence (higher first), ties broken by further keys, and keep the
first ``k``. Sorting every (point, fact) pair by all those keys (a five-key ``lexsort`` over tens of
millions of pairs) was most of the cost of a sweep. This module selects the same pairs by a *radix
select* on the values' bit patterns, with no sort of the pairs:

* For a non-negative double the IEEE-754 bit pattern is monotone in the value, so the distance
  ``d = bits(1.0) - bits(v)`` orders values exactly (smaller ``d``, larger value) as an integer.
* Level 1 buckets ``d`` into 32 ranges spread over ``[floor, 1]`` (``floor``: the caller's lowest
  possible value). One ``bincount`` over (point, bucket) and a cumulative sum per point give, for each
  point with more than ``k`` pairs, the bucket holding its ``k``-th pair: pairs in better buckets are
  in, pairs in worse ones out, and the *cut bucket*'s pairs are all in when they fit the slots left.
* Otherwise only the cut bucket's pairs go on to the next level, which buckets the next five bits of
  ``d`` the same way, with the slots left — until the pairs still tied share their value exactly (or
  sit below the floor), which are then ranked by :func:`numpy.lexsort` on the caller's tie keys.

Points holding at most ``k`` pairs take every pair without any of this. The result is the set of
pairs a full sort by (point, value descending, tie keys) puts at ranks ``< k``; tests hold it to that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from factmem.errors import InputError

__all__ = ["top_k_masks"]

TieKeys = Callable[[np.ndarray], tuple[np.ndarray, ...]]

_RADIX_BITS = 5
_BUCKETS = 1 << _RADIX_BITS
_MIN_FLOOR = 2.0**-8  # the first level spreads no lower: values below share its last bucket
_ONE_BITS = np.int64(0x3FF0000000000000)  # bits of 1.0


def top_k_masks(point: np.ndarray, value: np.ndarray, budgets: Sequence[int], n_points: int,
                tie_keys: TieKeys, floor: float = 0.0) -> list[np.ndarray]:
    """For each budget ``k``: a boolean mask over the pairs, true for the pairs ranked ``< k`` within
    their point, ranking by ``value`` (descending) and then by ``tie_keys``.

    ``point``: int array, each pair's point in ``[0, n_points)``. ``value``: float64 in ``[0, 1]``.
    ``tie_keys(idx)``: for the pair indices ``idx``, the further sort keys as for
    :func:`numpy.lexsort` (last key most significant; ascending — negate a key to prefer larger),
    applied after the value; called only for pairs whose values are equal at a cut. ``floor``: no
    value is below it (any floor gives the same result; a tight one is faster).
    """
    n = len(point)
    ks = [int(k) for k in budgets]
    count = np.bincount(point, minlength=n_points) if n else np.zeros(n_points, np.int64)
    if not n or not (count > min(ks)).any():
        return [np.ones(n, bool) for _ in ks]
    if not ((value >= 0) & (value <= 1)).all():
        raise InputError("top_k_masks: values must lie in [0, 1] (effective confidences)")
    crowded = count > min(ks)
    dense = np.cumsum(crowded) - 1  # dense rank of each crowded point
    sel = np.flatnonzero(crowded[point])  # pairs at crowded points
    group = dense[point[sel]]
    size = count[crowded]
    dist = _ONE_BITS - value[sel].view(np.int64)
    shift = _first_shift(floor)
    masks = []
    for k in ks:
        mask = np.ones(n, bool)
        if (size > k).any():
            mask[sel] = _radix_select(group, dist, np.minimum(size, k), shift,
                                      lambda j: tie_keys(sel[j]))
        masks.append(mask)
    return masks


def _first_shift(floor: float) -> int:
    """The shift that spreads distances from 1.0 down to ``floor`` over the first level's buckets."""
    low = max(float(floor), _MIN_FLOOR)
    reach = int(_ONE_BITS) - int(np.array(low).view(np.int64))
    return max(0, (reach // _BUCKETS).bit_length())


def _radix_select(group: np.ndarray, dist: np.ndarray, take: np.ndarray, shift: int,
                  tie_keys: TieKeys) -> np.ndarray:
    """Mask of the ``take[g]`` pairs of each group ``g`` with the smallest ``dist`` (ties by
    ``tie_keys``); ``group`` is dense in ``[0, len(take))``."""
    keep = np.zeros(len(group), bool)
    idx = np.arange(len(group))  # the pairs still undecided
    g, want = group, take
    first = True
    while True:
        n_groups = len(want)
        d = dist[idx]
        bucket = np.minimum(d >> shift, _BUCKETS - 1) if first else (d >> shift) & (_BUCKETS - 1)
        hist = np.bincount(g * _BUCKETS + bucket, minlength=n_groups * _BUCKETS).reshape(n_groups, _BUCKETS)
        cum = np.cumsum(hist, axis=1)
        rows = np.arange(n_groups)
        over = cum[:, -1] > want
        cut = np.where(over, (cum < want[:, None]).sum(axis=1), _BUCKETS)  # the bucket of the last pair taken
        cut_c = np.minimum(cut, _BUCKETS - 1)
        left = want - np.where(cut > 0, cum[rows, np.maximum(cut_c - 1, 0)], 0)  # slots for the cut bucket
        split = over & (hist[rows, cut_c] > left)
        cut_of = cut[g]
        at_cut = bucket == cut_of
        go_on = at_cut & split[g]
        keep[idx[(bucket < cut_of) | (at_cut & ~go_on)]] = True
        if not go_on.any():
            return keep
        # the cut buckets that hold more pairs than slots: next level, with the slots left
        idx, g_next = idx[go_on], g[go_on]
        present = np.zeros(n_groups, bool)
        present[g_next] = True
        g, want = (np.cumsum(present) - 1)[g_next], left[present]
        below_floor = first and bool((cut_c[present] == _BUCKETS - 1).any())
        if shift == 0 or below_floor:  # equal values (or values below the floor): rank them exactly
            def exact_keys(j: np.ndarray, rows: np.ndarray = idx) -> tuple[np.ndarray, ...]:
                return tie_keys(rows[j])

            keep[idx] = _rank_exact(g, dist[idx], want, exact_keys)
            return keep
        shift = max(shift - _RADIX_BITS, 0)
        first = False


def _rank_exact(group: np.ndarray, dist: np.ndarray, take: np.ndarray, tie_keys: TieKeys) -> np.ndarray:
    """Mask of the ``take[g]`` first pairs of each group by (``dist``, tie keys), by a full lexsort."""
    order = np.lexsort(tuple(tie_keys(np.arange(len(group)))) + (dist, group))
    grp = group[order]
    start = np.ones(len(order), bool)
    start[1:] = grp[1:] != grp[:-1]
    pos = np.arange(len(order))
    rank = pos - np.maximum.accumulate(np.where(start, pos, 0))
    keep = np.empty(len(group), bool)
    keep[order] = rank < take[grp]
    return keep
