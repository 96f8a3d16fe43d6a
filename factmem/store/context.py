"""The context a memory shows the model: ``FactStore.context(subject, k, at)`` and
``FactStore.contexts(k, at)``.

A mixin of :class:`factmem.store.FactStore`, applying the rule the budgeted context metrics score
(:mod:`factmem.core.context_rule`): the subject's ``active`` facts whose effective confidence at
``at`` reaches ``max(archive_threshold, retrieval_threshold)``, by effective confidence (higher
first), ties by later ``last_reinforced``, later ``first_seen``, then (predicate, object) in
lexicographic order; the first ``k``. The candidates are read with one query (the facts' stored
columns); effective confidence and the order are computed with the same numpy functions as the
metrics, so the store's context at a session start is the one tuning scored
(``tests/test_context_rule.py`` holds them equal on random logs).

The context is of the memory as it is: a fact archived or superseded since ``at`` is not in it. For
the context at a session start, consolidate up to that time and ask before writing the session's
observations (as a production client does).

>>> from factmem.store.factstore import FactStore
>>> store = FactStore()
>>> _ = store.remember("ada", "prefers", "rust", kind="user_preference", at=0)
>>> _ = store.remember("ada", "lives_in", "paris", kind="explicit", at=0)
>>> list(store.context("ada", 1, at=86400)["object"])
['rust']
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from factmem.core.context_rule import context_order, context_threshold, effective_at, lexicographic_rank, ranks_within
from factmem.core.timeutil import resolve_at
from factmem.errors import InputError
from factmem.store.base import StoreBase

__all__ = ["ContextReads", "CONTEXT_COLUMNS"]

#: Columns of a context, in order: the fact's stored columns, then its effective confidence and rank.
CONTEXT_COLUMNS: tuple[str, ...] = (
    "subject", "rank", "id", "predicate", "object", "kind", "confidence", "effective_confidence",
    "reinforcement_count", "first_seen", "last_reinforced", "decay_rate", "note")


class ContextReads(StoreBase):
    """The context reads (mixed into FactStore)."""

    def context(self, subject: str, k: int, at: Any = None) -> pd.DataFrame:
        """The ``k`` facts about ``subject`` a context of budget ``k`` holds at ``at`` (default now),
        best first: :data:`CONTEXT_COLUMNS`, ``rank`` 0 first. Fewer when fewer qualify."""
        if not isinstance(subject, str):
            raise InputError(f"subject must be a string, got {type(subject).__name__}")
        return self._contexts(k, at, subject)

    def contexts(self, k: int, at: Any = None) -> pd.DataFrame:
        """Every subject's context of budget ``k`` at ``at`` (default now), by subject then rank."""
        return self._contexts(k, at, None)

    def _contexts(self, k: int, at: Any, subject: str | None) -> pd.DataFrame:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InputError(f"k must be a positive integer (facts in the context), got {k!r}")
        t = resolve_at(at)
        where, args = "status = 'active'", []
        if subject is not None:
            where += " AND subject = ?"
            args.append(subject)
        facts = self._read("SELECT subject, id, predicate, object, kind, confidence, reinforcement_count, first_seen, "
                           f"last_reinforced, decay_rate, note FROM memory_facts WHERE {where}", args)
        conf = facts["confidence"].to_numpy(np.float64)
        last = facts["last_reinforced"].to_numpy(np.int64)
        eff = effective_at(conf, facts["decay_rate"].to_numpy(np.float64), last, t)
        keep = np.flatnonzero(eff >= context_threshold(self._params))
        facts, eff, last = facts.iloc[keep], eff[keep], last[keep]
        group = pd.factorize(facts["subject"].to_numpy(object), sort=True)[0] if len(facts) else np.zeros(0, np.int64)
        order = context_order(group, eff, last, facts["first_seen"].to_numpy(np.int64),
                              lexicographic_rank(facts["predicate"], facts["object"]))
        rank = ranks_within(group[order])
        top = order[rank < int(k)]
        out = facts.iloc[top].reset_index(drop=True)
        out["effective_confidence"] = eff[top]
        out["rank"] = rank[rank < int(k)]
        out = out[list(CONTEXT_COLUMNS)]
        out.attrs["at"] = t
        return out
