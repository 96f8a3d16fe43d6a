"""Vectorized draws and column helpers of the synthetic generator (:mod:`factmem.data.generate`):
random spells over days, independent hits in windows drawn by geometric gaps (work proportional to
the hits), exponential integer delays, grouped-key starts, and the Arrow string columns the log is
built from. Every draw takes the caller's seeded ``numpy.random.Generator``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["NA", "group_starts", "coverage", "bernoulli_hits", "exp_int", "split_template", "string_column",
           "join_strings", "numbered_ids", "nullable_int"]

NA = np.iinfo(np.int64).max  # "no end" sentinel for relative times


def group_starts(keys: np.ndarray) -> np.ndarray:
    """For a sorted key array: the index of the first row of each row's group."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = keys[1:] != keys[:-1]
    first = np.flatnonzero(new)
    return first[np.cumsum(new) - 1]


def coverage(rng: np.random.Generator, n: int, days: int, per_year: float, mean_days: float) -> np.ndarray:
    """(n, days) mask of days inside randomly placed spells (bursts, absences)."""
    if per_year <= 0 or mean_days <= 0:
        return np.zeros((n, days), dtype=bool)
    counts = rng.poisson(per_year * days / 365.0, size=n)
    owner = np.repeat(np.arange(n), counts)
    s = rng.integers(0, days, size=len(owner))
    length = np.maximum(1, np.ceil(rng.exponential(mean_days, size=len(owner)))).astype(np.int64)
    e = np.minimum(s + length, days)
    diff = np.zeros((n, days + 1), dtype=np.int64)
    np.add.at(diff, (owner, s), 1)
    np.add.at(diff, (owner, e), -1)
    return np.cumsum(diff[:, :days], axis=1) > 0


def bernoulli_hits(lo: np.ndarray, hi: np.ndarray, p: np.ndarray, rng: np.random.Generator, batch: int = 16):
    """Positions in each window ``[lo_i, hi_i)`` hit independently with probability ``p_i``.

    Geometric gaps, drawn ``batch`` at a time for all still-open windows: the work is
    proportional to the hits, not to the window lengths. Returns (window index, position).
    """
    idx = np.flatnonzero((hi > lo) & (p > 0))
    cur = lo[idx] - 1
    out_i, out_x = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    while len(idx):
        gaps = rng.geometric(p[idx][:, None], size=(len(idx), batch))
        pos = cur[:, None] + np.cumsum(gaps, axis=1)
        r, c = np.nonzero(pos < hi[idx][:, None])
        out_i.append(idx[r])
        out_x.append(pos[r, c])
        cur = pos[:, -1]
        keep = cur < hi[idx] - 1
        idx, cur = idx[keep], cur[keep]
    return np.concatenate(out_i), np.concatenate(out_x)


def exp_int(rng: np.random.Generator, mean_seconds: np.ndarray | float, size: int) -> np.ndarray:
    return np.floor(rng.exponential(1.0, size=size) * mean_seconds).astype(np.int64)


def split_template(t: str) -> tuple[str, str]:
    a, b = t.split("{o}")
    return a, b


def string_column(arr: np.ndarray) -> pa.Array:
    return pa.array(arr, type=pa.string())


def join_strings(*parts) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def numbered_ids(prefix: str, n: int, width: int = 0) -> np.ndarray:
    """``prefix`` + 1..n zero-padded to one width (so ids sort like their numbers)."""
    width = max(width, len(str(max(n, 1))))
    num = pc.utf8_lpad(pc.cast(pa.array(np.arange(1, n + 1, dtype=np.int64)), pa.string()), width=width, padding="0")
    return np.asarray(join_strings(pa.scalar(prefix), num).to_numpy(zero_copy_only=False), dtype=object)


def nullable_int(values: np.ndarray) -> pd.arrays.IntegerArray:
    """Int64 with the NA sentinel as missing."""
    na = values == NA
    return pd.arrays.IntegerArray(np.where(na, 0, values).astype(np.int64), na)
