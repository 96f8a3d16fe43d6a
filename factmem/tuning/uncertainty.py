"""How sure a held-out difference is, and how stable a choice is: the numbers a decision rests on.

* :class:`Comparison`: a held-out difference ``a − b`` of the objective, pooled over points (the ratio
  of the summed numerator and denominator over people, never a mean of per-person ratios), with a 95%
  percentile interval;
* :func:`bootstrap_difference`: that comparison from per-subject sums (subject × ``FIELDS``), the
  interval from ``resamples`` seeded resamples of **groups** of people (people who share sessions are
  drawn together; one group per person without groups); a resample with an empty denominator is dropped;
* :func:`selection_stability`: the share of bootstrap resamples of the tuning subjects (whole groups
  at a time) in which a candidate ranks in the top :data:`TOP_SHARE` of the candidates by the
  objective — a statement about that candidate, not about its values. A resample's sums are the
  subjects' rows weighted by how often it drew each, so a block of resamples is one matrix product;
  a candidate within a relative 1e-12 of another counts as tied, not beaten.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from factmem.evaluation.context import FIELDS
from factmem.tuning.sweep import SweepResult

__all__ = ["Comparison", "bootstrap_difference", "selection_stability", "pooled_ratio", "TOP_SHARE"]

#: "within the noise of the best": in this top share of candidates by the objective
TOP_SHARE = 0.05
#: selection stability draws resamples in blocks of at most this many (subject, resample) weights
_STABILITY_CELLS = 4_000_000
_LEVEL = 0.95


@dataclass
class Comparison:
    """A held-out difference ``a − b`` of the objective, pooled over points, with its bootstrap
    interval over groups of subjects (``low``, ``high``; NaN when no resample was drawn); ``groups``:
    how many groups of people (people who share sessions) have a scored point (None: not known)."""

    a: float
    b: float
    difference: float
    low: float
    high: float
    subjects: int
    points: int
    groups: int | None = None

    def excludes_zero(self, lower_is_better: bool) -> bool:
        """Whether the interval lies entirely on the better side of 0."""
        if not math.isfinite(self.low) or not math.isfinite(self.high):
            return False
        return self.high < 0 if lower_is_better else self.low > 0

    def to_dict(self) -> dict[str, float | int | None]:
        return {"a": self.a, "b": self.b, "difference": self.difference, "low": self.low, "high": self.high,
                "subjects": self.subjects, "points": self.points, "groups": self.groups}


def pooled_ratio(rows: np.ndarray, field_name: str) -> float:
    """``field_name`` pooled over the rows (subjects × FIELDS): its summed numerator over the summed
    points (precise contexts for precision); NaN when nothing was scored."""
    num = rows[..., FIELDS.index(field_name)].sum()
    den = rows[..., FIELDS.index("precise" if field_name == "precision" else "points")].sum()
    return float(num / den) if den > 0 else float("nan")


def bootstrap_difference(a: np.ndarray, b: np.ndarray, metric: str, *, resamples: int, seed: int,
                         groups: np.ndarray | None = None) -> Comparison:
    """Pooled ``metric`` of per-subject sums ``a`` minus ``b`` (subject × FIELDS), with a percentile
    interval from ``resamples`` resamples (seeded) of ``groups`` (group index per subject: people who
    share sessions are drawn together; None or one group per person: resamples of subjects)."""
    n = len(a)
    i_num, i_den = FIELDS.index(metric), FIELDS.index("precise" if metric == "precision" else "points")
    va, vb = pooled_ratio(a, metric), pooled_ratio(b, metric)
    points = int(a[:, FIELDS.index("points")].sum())
    scored = a[:, FIELDS.index("points")] > 0
    n_groups = n if groups is None or not n else int(np.max(groups)) + 1
    if n_groups < n:  # whole groups are drawn: resample the groups' sums
        assert groups is not None
        a, b = _group_sums(a, groups, n_groups), _group_sums(b, groups, n_groups)
        scored = a[:, FIELDS.index("points")] > 0
    low = high = float("nan")
    if resamples and n:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n_groups, size=(resamples, n_groups))
        with np.errstate(invalid="ignore", divide="ignore"):
            da = a[idx, i_num].sum(axis=1) / a[idx, i_den].sum(axis=1)
            db = b[idx, i_num].sum(axis=1) / b[idx, i_den].sum(axis=1)
        d = (da - db)[np.isfinite(da - db)]
        if d.size:
            low, high = (float(x) for x in np.quantile(d, [(1 - _LEVEL) / 2, 1 - (1 - _LEVEL) / 2]))
    return Comparison(va, vb, va - vb, low, high, n, points, int(scored.sum()))


def _group_sums(rows: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per-group sums of per-subject rows (subject × FIELDS)."""
    out = np.zeros((n_groups, rows.shape[1]))
    np.add.at(out, groups, rows)
    return out


def selection_stability(res: SweepResult, part: str, budget: int, index: int, *, resamples: int, seed: int,
                        subjects: np.ndarray | None = None, groups: np.ndarray | None = None,
                        rows: np.ndarray | None = None) -> float:
    """Share of bootstrap resamples of the tuning subjects (whole ``groups`` at a time: group index
    per subject of the part) in which candidate ``index`` ranks in the top :data:`TOP_SHARE` of
    candidates by the objective (those ``rows`` marks, default every eligible row)."""
    if not resamples:
        return float("nan")
    eligible = res.eligible() if rows is None else res.eligible() & rows
    rows = np.arange(len(res.subjects[part])) if subjects is None else np.flatnonzero(subjects)
    rng = np.random.default_rng(seed)
    top = max(1, math.ceil(TOP_SHARE * int(eligible.sum())))
    hits = 0
    obj = res.objective
    by_group = None
    if groups is not None and len(rows):
        g = np.asarray(groups)[rows]
        codes, g = np.unique(g, return_inverse=True)
        if len(codes) < len(rows):
            member = np.argsort(g, kind="stable")  # rows by group
            by_group = (g, rows[member], len(codes))

    def draw() -> np.ndarray:
        if by_group is None:
            return rows[rng.integers(0, len(rows), len(rows))]
        g, ordered, n_groups = by_group
        times = np.bincount(rng.integers(0, n_groups, n_groups), minlength=n_groups)
        return np.repeat(ordered, times[np.sort(g)])  # every member of a drawn group, as often as it was drawn

    # a resample's sums are the subjects' rows weighted by how often it drew each: a block of resamples is
    # one product (candidates × subjects) @ (subjects × resamples), not a copy of the drawn rows each
    fields = res.ratio_fields(part, budget)
    num, den = np.ascontiguousarray(fields[..., 0]), np.ascontiguousarray(fields[..., 1])
    n_subjects = num.shape[1]
    block = max(1, min(resamples, _STABILITY_CELLS // max(1, n_subjects)))
    worst = np.inf if obj.lower_is_better else -np.inf
    for a in range(0, resamples, block):
        weights = np.stack([np.bincount(draw(), minlength=n_subjects) for _ in range(a, min(a + block, resamples))])
        w = weights.T.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            v = (num @ w) / (den @ w)  # candidate × resample
        v = np.where(np.isnan(v) | ~eligible[:, None], worst, v)
        # within a relative 1e-12 of the candidate counts as tied with it, not better: the order in which a
        # product adds the same sums must not decide
        own = v[index]
        with np.errstate(invalid="ignore"):
            edge = np.where(np.isfinite(own), own + np.abs(own) * (-1e-12 if obj.lower_is_better else 1e-12), own)
        better = (v < edge) if obj.lower_is_better else (v > edge)
        hits += int((better.sum(axis=0) < top).sum())
    return hits / resamples
