"""Whole-column helpers the scorers share: ranges covering indices, membership in sorted keys,
per-group minima, lexicographic ranks (of texts, of session ids), and cutting grouped rows into blocks.

>>> cover_count(4, np.array([0, 1]), np.array([2, 4])).tolist()
[1.0, 2.0, 1.0, 1.0]
>>> member(np.array([2, 5, 9]), np.array([5, 6])).tolist()
[True, False]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factmem.core.compiled import njit
from factmem.core.context_rule import lexicographic_rank
from factmem.errors import InputError

__all__ = ["sorted_unique", "cover_count", "member", "group_min", "lexicographic_rank", "blocks", "session_ranks"]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, ascending — ``np.unique(values)`` by a sort (numpy 2.4's ``np.unique`` hashes
    integers first: ~100x slower on a million distinct int64 keys)."""
    s = np.sort(np.asarray(values), kind="stable")
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def cover_count(n: int, lo: np.ndarray, hi: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """How many [lo, hi) index ranges cover each of 0..n-1 (empty ranges count nothing; with
    ``weights``, their sum); float64."""
    ok = hi > lo
    w = None if weights is None else weights[ok]
    d = np.bincount(lo[ok], weights=w, minlength=n + 1)[: n + 1] - np.bincount(hi[ok], weights=w, minlength=n + 1)[: n + 1]
    return np.cumsum(d[:-1], dtype=np.float64)


def member(sorted_keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Whether each ``query`` value is in ``sorted_keys`` (ascending)."""
    if not len(sorted_keys):
        return np.zeros(len(query), bool)
    pos = np.minimum(np.searchsorted(sorted_keys, query), len(sorted_keys) - 1)
    return sorted_keys[pos] == query


def group_min(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """For each row, the minimum of ``value`` (int64) over the rows of its ``group``."""
    group = np.asarray(group)
    value = np.asarray(value, np.int64)
    if not len(group):
        return np.zeros(0, np.int64)
    if group.dtype.kind in "iu" and 0 <= int(group.min()) and int(group.max()) < 4 * len(group) + 1024:
        codes, n_groups = group.astype(np.int64, copy=False), int(group.max()) + 1  # small ids: their own codes
    else:
        codes, uniq = pd.factorize(group)
        codes, n_groups = codes.astype(np.int64, copy=False), len(uniq)
    return _group_min(codes, value, n_groups)


@njit
def _group_min(codes, value, n_groups):  # pragma: no cover - compiled
    low = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    for i in range(len(codes)):
        if value[i] < low[codes[i]]:
            low[codes[i]] = value[i]
    out = np.empty(len(codes), np.int64)
    for i in range(len(codes)):
        out[i] = low[codes[i]]
    return out


def blocks(group: np.ndarray, cnt: np.ndarray, size: int) -> list[tuple[int, int]]:
    """Cut rows ordered by ``group`` into ranges of whole groups holding about ``size`` of ``cnt``."""
    n = len(group)
    if not n:
        return []
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])  # each group's first row
    before = (np.cumsum(cnt) - cnt)[starts]  # counted before it
    block = before // size
    cuts = starts[np.r_[True, block[1:] != block[:-1]]]
    bounds = np.r_[cuts, n]
    return [(int(x), int(y)) for x, y in zip(bounds[:-1], bounds[1:])]


def session_ranks(sessions) -> tuple[np.ndarray, np.ndarray]:
    """Per mention, the rank of its session id in lexicographic order; and the ids in that order."""
    codes, uniques = pd.factorize(sessions)
    if (codes < 0).any():
        raise InputError(f"{int((codes < 0).sum())} mentions have no session_id")
    names = np.asarray(uniques, dtype=object)
    order = np.argsort(names, kind="stable")  # over distinct sessions, not mentions
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], names[order]
