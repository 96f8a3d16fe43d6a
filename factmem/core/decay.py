"""Pure, vectorized math of the memory model (numpy over whole arrays).

Every function accepts scalars or arrays and broadcasts. The store and the replay kernel
call these same functions, so the numbers a fast path produces are bit-for-bit those of
the row-by-row path.

>>> round(float(effective_confidence(0.4, 0.30, 2.31)), 3)  # an episodic fact after ~2.3 days
0.2
>>> [round(float(c), 3) for c in reinforce_sequence(0.4, 3)]
[0.4, 0.58, 0.706, 0.794]
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from factmem.core.codes import KINDS, SECONDS_PER_DAY
from factmem.core.params import MemoryParams

__all__ = ["LN2", "age_days", "effective_confidence", "reinforce", "reinforce_closed_form",
    "reinforce_sequence", "reinforcements_to_cap", "half_life_days", "days_to_threshold", "kind_table"]

LN2 = math.log(2.0)


def age_days(at, last_reinforced):
    """Days between ``last_reinforced`` and ``at`` (integer Unix seconds), possibly negative."""
    return (np.asarray(at, dtype=np.int64) - np.asarray(last_reinforced, dtype=np.int64)) / SECONDS_PER_DAY


def effective_confidence(confidence, decay_rate, age_days):
    """``confidence * exp(-decay_rate * max(0, age_days))`` — the seed's read-time decay."""
    c = np.asarray(confidence, dtype=np.float64)
    rate = np.asarray(decay_rate, dtype=np.float64)
    age = np.maximum(0.0, np.asarray(age_days, dtype=np.float64))
    return c * np.exp(-rate * age)


def reinforce(base, gain, cap):
    """One reinforcement: ``min(cap, base + gain * (1 - base))``."""
    b = np.asarray(base, dtype=np.float64)
    return np.minimum(cap, b + gain * (1.0 - b))


def reinforce_closed_form(c0, n, gain, cap):
    """Confidence after ``n`` reinforcements with the stored base, in closed form:
    ``min(cap, 1 - (1 - c0) * (1 - gain) ** n)``.

    Equal to applying :func:`reinforce` ``n`` times up to floating-point rounding (a few ulp).
    """
    c0 = np.asarray(c0, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    capped = np.minimum(cap, 1.0 - (1.0 - c0) * (1.0 - gain) ** n)
    return np.where(n <= 0, c0, capped)


def reinforce_sequence(c0: float, n: int, gain: float = 0.3, cap: float = 0.99) -> np.ndarray:
    """``[c0, c1, ..., cn]``: the confidence after each of ``n`` reinforcements (stored base)."""
    out = np.empty(n + 1, dtype=np.float64)
    out[0] = c0
    for i in range(n):  # n is a count of reinforcements of one fact, not a loop over facts
        out[i + 1] = reinforce(out[i], gain, cap)
    return out


def reinforcements_to_cap(c0, gain, cap):
    """Number of reinforcements (stored base) after which confidence sits at ``cap``."""
    c0 = np.asarray(c0, dtype=np.float64)
    if cap >= 1.0:
        return np.full(c0.shape, np.inf) if c0.shape else np.inf
    with np.errstate(divide="ignore"):
        n = np.log((1.0 - cap) / (1.0 - c0)) / np.log(1.0 - gain) if gain < 1 else np.ones_like(c0)
    return np.maximum(0, np.ceil(n))


def half_life_days(decay_rate):
    """Days for effective confidence to halve: ``ln 2 / rate`` (inf for a zero rate)."""
    rate = np.asarray(decay_rate, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(rate > 0, LN2 / np.where(rate > 0, rate, 1.0), np.inf)


def days_to_threshold(confidence, decay_rate, threshold):
    """Days until ``confidence`` decays below ``threshold``: ``ln(c / threshold) / rate``.

    0 when already below; inf when the rate is zero (or the threshold is zero).
    """
    c = np.asarray(confidence, dtype=np.float64)
    rate = np.asarray(decay_rate, dtype=np.float64)
    thr = np.asarray(threshold, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        days = np.log(c / thr) / rate
    days = np.where(c <= thr, 0.0, days)
    return np.where((rate <= 0) | (thr <= 0), np.where(c <= thr, 0.0, np.inf), days)


def kind_table(params: MemoryParams | None = None) -> pd.DataFrame:
    """Per-kind summary: rate, initial confidence, half-life, days until archival without reinforcement.

    >>> kind_table().loc["episodic", "half_life_days"].round(2)
    np.float64(2.31)
    """
    p = params or MemoryParams()
    rate = p.decay_rate.as_array()
    c0 = p.initial_confidence.as_array()
    capped = np.full(len(KINDS), float(p.confidence_cap))
    return pd.DataFrame(
        {
            "decay_rate": rate,
            "initial_confidence": c0,
            "half_life_days": half_life_days(rate),
            "days_to_archive": days_to_threshold(c0, rate, p.archive_threshold),
            "days_to_archive_at_cap": days_to_threshold(capped, rate, p.archive_threshold),
            "reinforcements_to_cap": reinforcements_to_cap(c0, p.reinforce_gain, p.confidence_cap),
        },
        index=pd.Index(KINDS, name="kind"),
    )
