"""What the budgeted context metrics produce (:mod:`factmem.evaluation.context` computes them): the
per-(part, subject, budget) sums of :data:`FIELDS`, held by :class:`ContextScores`, which turns them
into means over evaluation points; the modes of "needed" (:data:`NEEDED_MODES`); and the threshold a
fact's effective confidence must reach to enter a context (:func:`context_threshold`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from factmem.core.context_rule import context_threshold

__all__ = ["Needed", "NEEDED_MODES", "FIELDS", "FIELD_INDEX", "ContextScores", "context_threshold"]

#: ``truth`` needs ground truth; the others are no-truth proxies (``next-session`` in
#: :mod:`factmem.evaluation.context`, the rest in :mod:`factmem.evaluation.proxies`)
Needed = Literal["truth", "next-session", "next-3-sessions", "hindsight", "later-mention", "kind-aware"]
NEEDED_MODES: tuple[Needed, ...] = get_args(Needed)

#: per (part, subject, budget) sums kept by :class:`ContextScores`
FIELDS: tuple[str, ...] = (
    "points",      # evaluation points (with at least one needed fact)
    "needed",      # sum of N
    "hits",        # sum of H: needed facts in the context
    "context",     # sum of C: context size
    "charged",     # sum of S = sum over the four kinds of cost x count (see factmem.evaluation.charges)
    "stale",       # context facts true before t and not at t (truth) / another object mentioned (next-session)
    "expired",     # context facts still true at t, past their relevance (truth mode only)
    "false",       # context facts never true up to t (truth mode only)
    "unneeded",    # context facts true (or, next-session, not mentioned) but not needed
    "utility",     # sum of (H - S) / max(1, N)
    "recall",      # sum of H / N
    "precision",   # sum of H / C over points with C > 0
    "precise",     # number of points with C > 0
    "log_loss",    # sum over context facts of the log loss of p = effective confidence (clipped to
                   # [1e-4, 1 - 1e-4]), y = true and relevant at t (next-session: y = the session needs it)
    "scored",      # number of context facts in log_loss
)
FIELD_INDEX = {name: i for i, name in enumerate(FIELDS)}


@dataclass
class ContextScores:
    """Budgeted context metrics of one parameter set: per-subject sums (see :data:`FIELDS`).

    ``sums[part, subject, budget, field]``; ``curve[part, subject, k - 1]`` = the sum over the
    subject's points of utility@k for k = 1 … ``curve_k`` (None unless asked for)."""

    budgets: tuple[int, ...]
    parts: tuple[str, ...]
    subjects: np.ndarray
    sums: np.ndarray
    curve: np.ndarray | None = None

    def _pick(self, part: str | None, budget: int | None) -> tuple[int, int]:
        p = 0 if part is None else self.parts.index(part)
        b = 0 if budget is None else self.budgets.index(budget)
        return p, b

    def totals(self, part: str | None = None, budget: int | None = None,
               subjects: np.ndarray | None = None) -> np.ndarray:
        """Field sums over subjects (all, or a boolean/index selection; repeats allowed)."""
        p, b = self._pick(part, budget)
        rows = self.sums[p, :, b, :]
        return rows.sum(axis=0) if subjects is None else rows[subjects].sum(axis=0)

    def summary(self, part: str | None = None, budget: int | None = None,
                subjects: np.ndarray | None = None) -> dict[str, float]:
        """Means over evaluation points: utility, recall, precision, and per point the context size,
        needed, hits, the four kinds of charged facts and the cost-weighted charge; log loss over
        context facts."""
        t = self.totals(part, budget, subjects)
        n = t[FIELD_INDEX["points"]]

        def per(field: str, by: float) -> float:
            return float(t[FIELD_INDEX[field]] / by) if by > 0 else float("nan")

        return {
            "utility": per("utility", n), "recall": per("recall", n),
            "precision": per("precision", t[FIELD_INDEX["precise"]]),
            "context": per("context", n), "needed": per("needed", n), "hits": per("hits", n),
            "stale": per("stale", n), "expired": per("expired", n), "false": per("false", n),
            "unneeded": per("unneeded", n), "charged": per("charged", n),
            "log_loss": per("log_loss", t[FIELD_INDEX["scored"]]), "points": float(n),
        }

    def per_subject(self, field: str, part: str | None = None, budget: int | None = None) -> np.ndarray:
        p, b = self._pick(part, budget)
        return self.sums[p, :, b, FIELD_INDEX[field]]
