"""The context rule: which of a person's facts a memory shows the model, in which order.

This is what the budgeted context metrics (:mod:`factmem.evaluation.context`) score and so what
tuning optimizes; :meth:`FactStore.context <factmem.store.factstore.FactStore.context>`, the what-if's
per-person contexts (:func:`factmem.production.compare.contexts_at`) and the Rust export's
``rank_context`` (:mod:`factmem.export.rust`) apply the same rule, with the functions below:

1. **Candidates**: the person's active facts whose effective confidence at ``t``
   (:func:`effective_at`: ``confidence × exp(−decay_rate × max(0, (t − last_reinforced) / 86400))``)
   is at least :func:`context_threshold` = ``max(archive_threshold, retrieval_threshold)``.
2. **Order**: effective confidence, higher first; ties by later ``last_reinforced``, then later
   ``first_seen``, then ``(predicate, object)`` in lexicographic (code point) order
   (:func:`context_tie_keys`, :func:`context_order`).
3. **The context** of budget ``k``: the first ``k``.

A different tie, threshold or time unit changes which facts a context holds and so voids the tuning;
the property test ``tests/test_context_rule.py`` holds the store's contexts to the evaluator's at every
session start of random logs.

>>> import numpy as np
>>> eff = effective_at(np.array([0.5, 0.5, 0.9]), np.array([0.0, 0.0, 0.3]), np.array([10, 20, 0]), 86400 * 3)
>>> [round(float(e), 4) for e in eff]
[0.5, 0.5, 0.3659]
>>> context_order(np.zeros(3, np.int64), eff, np.array([10, 20, 0]), np.array([10, 20, 0]), np.arange(3)).tolist()
[1, 0, 2]
"""

from __future__ import annotations

import numpy as np

from factmem.core.decay import age_days, effective_confidence
from factmem.core.params import MemoryParams

__all__ = ["context_threshold", "effective_at", "context_tie_columns", "context_tie_keys", "context_order", "ranks_within",
           "lexicographic_rank"]


def context_threshold(params: MemoryParams) -> float:
    """The effective confidence a fact needs to enter a context: what the memory keeps (archive
    threshold) and what counts as believed (retrieval threshold), whichever is stricter."""
    return max(params.archive_threshold, params.retrieval_threshold)


def effective_at(confidence, decay_rate, last_reinforced, t) -> np.ndarray:
    """Effective confidence at ``t`` (Unix seconds; arrays broadcast): the seed's read-time decay with
    ages in days as ``(t − last_reinforced) / 86400`` in float64."""
    return effective_confidence(confidence, decay_rate, age_days(t, last_reinforced))


def context_tie_columns(last_reinforced: np.ndarray, first_seen: np.ndarray, po_rank: np.ndarray
                        ) -> tuple[np.ndarray, ...]:
    """The tie keys after effective confidence, most significant first, each ascending: later
    ``last_reinforced``, later ``first_seen``, then ``po_rank`` (the rank of (predicate, object) in
    lexicographic order) — what the compiled top-k (:mod:`factmem.evaluation.topk`) compares."""
    return (-np.asarray(last_reinforced, np.int64), -np.asarray(first_seen, np.int64), np.asarray(po_rank, np.int64))


def context_tie_keys(po_rank: np.ndarray, first_seen: np.ndarray, last_reinforced: np.ndarray
                     ) -> tuple[np.ndarray, ...]:
    """:func:`context_tie_columns` as :func:`numpy.lexsort` takes them (last key most significant)."""
    return context_tie_columns(last_reinforced, first_seen, po_rank)[::-1]


def context_order(group: np.ndarray, effective: np.ndarray, last_reinforced: np.ndarray, first_seen: np.ndarray,
                  po_rank: np.ndarray) -> np.ndarray:
    """Indices of the candidates sorted by ``group`` (a person, or a person at a time) and within it
    in context order; the context of budget ``k`` is each group's first ``k``."""
    return np.lexsort(context_tie_keys(po_rank, first_seen, last_reinforced) + (-np.asarray(effective), group))


def ranks_within(sorted_group: np.ndarray) -> np.ndarray:
    """0, 1, 2, … within each run of equal values of a sorted group array."""
    n = len(sorted_group)
    if not n:
        return np.zeros(0, np.int64)
    start = np.ones(n, bool)
    start[1:] = sorted_group[1:] != sorted_group[:-1]
    pos = np.arange(n)
    return pos - np.maximum.accumulate(np.where(start, pos, 0))


def lexicographic_rank(predicates, objects) -> np.ndarray:
    """Rank of each (predicate, object) pair in lexicographic order — by code point, which is the
    byte order of their UTF-8 (Rust's ``str`` order, SQLite's BINARY collation)."""
    p = np.asarray(predicates, dtype=object).astype(str)
    o = np.asarray(objects, dtype=object).astype(str)
    order = np.lexsort((o, p))
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank
