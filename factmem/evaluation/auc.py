"""The AUC of the calibration metrics (:mod:`factmem.evaluation.metrics`): the area under the ROC curve
with sample weights, ties counting half (:func:`weighted_auc`), and the same number computed the way
the checkpoint metrics need it — from the held positives and negatives, each sorted, plus the triples
not held (archived, superseded), which all predict ``eps`` and enter only as counts
(:func:`auc_with_unheld`, :func:`auc_of_sorted`: one merge of the two sorted arrays, compiled; every
term is a whole or half count, so the sum is exact in any order and equals :func:`weighted_auc`).
"""

from __future__ import annotations

import numpy as np

from factmem.core.compiled import njit

__all__ = ["weighted_auc", "auc_with_unheld", "auc_of_sorted"]


def weighted_auc(p: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> float:
    """Area under the ROC curve with sample weights; ties count half."""
    w = np.ones(len(p)) if w is None else w
    vals, inv = np.unique(p, return_inverse=True)
    pos = np.bincount(inv, weights=w * (y == 1), minlength=len(vals))
    neg = np.bincount(inv, weights=w * (y == 0), minlength=len(vals))
    wp, wn = pos.sum(), neg.sum()
    if wp == 0 or wn == 0:
        return float("nan")
    below = np.cumsum(neg) - neg
    return float((pos * (below + 0.5 * neg)).sum() / (wp * wn))


def auc_with_unheld(p: np.ndarray, y: np.ndarray, w_true: float, w_false: float, eps: float) -> float:
    """``weighted_auc`` of the held samples ``p`` (weight 1, ``p >= eps``) plus ``w_true`` positives
    and ``w_false`` negatives at ``eps`` — the same number, by sorting positives and negatives apart
    (no index sort): every term is a whole or half count, so the sum is exact in any order."""
    return auc_of_sorted(np.sort(p[y == 1]), np.sort(p[y == 0]), w_true, w_false, eps)


def auc_of_sorted(pos: np.ndarray, neg: np.ndarray, w_true: float, w_false: float, eps: float) -> float:
    """:func:`auc_with_unheld` from the held positives and negatives, each sorted."""
    wp, wn = len(pos) + float(w_true), len(neg) + float(w_false)
    if wp == 0 or wn == 0:
        return float("nan")
    neg_at_eps = float(np.searchsorted(neg, eps, "right")) + float(w_false)
    total = _auc_pairs(np.asarray(pos, np.float64), np.asarray(neg, np.float64), float(w_false), float(eps)) \
        + float(w_true) * 0.5 * neg_at_eps
    return total / (wp * wn)


@njit
def _auc_pairs(pos, neg, w_false, eps):  # pragma: no cover - compiled
    """Σ over the held positives (ascending) of the negatives below it plus half those equal to it —
    the unheld negatives (``w_false`` of them) sitting at ``eps``, below every other value — by one
    merge of the two sorted arrays."""
    total = 0.0
    below = 0  # negatives < x
    upto = 0  # negatives <= x
    for x in pos:
        while below < len(neg) and neg[below] < x:
            below += 1
        upto = max(upto, below)
        while upto < len(neg) and neg[upto] <= x:
            upto += 1
        if x == eps:
            total += below + 0.5 * ((upto - below) + w_false)
        else:
            total += (below + w_false) + 0.5 * (upto - below)
    return total
