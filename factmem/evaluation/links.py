"""Abstraction links against the ground truth: which children of derived facts support them, and
what pruning archived that had nothing to do with the generalization.

A dataset's ``generalizations`` table (one row per planted generalization and supporting fact:
``subject, predicate, object, support_predicate, support_object``) says which facts support which
generalization. A **link** (derived parent → child) is *related* when the child states one of the
supporting (predicate, object) pairs of the parent's (subject, predicate, object); a parent that is
no planted generalization (an invented answer) has no related link. A **pruned child** (archived
with ``status_reason = 'pruned'``) is *unrelated* when none of its links to parents is related: it
was archived under a generalization it does not support.

Under ``link_scope = "cluster"`` (the seed) a derived fact is linked to every member of its cluster,
so pruning archives unrelated facts; under ``"support"`` only the facts the model cites.

>>> from factmem.store.factstore import FactStore
>>> import pandas as pd
>>> s = FactStore()
>>> kids = [s.remember("ada", p, o, at=0) for p, o in [("plays", "guitar"), ("lives_in", "oslo")]]
>>> d = s.remember("ada", "is_a", "musician", kind="derived", at=1)
>>> _ = s.link(d, kids, at=1)
>>> gens = pd.DataFrame({"subject": ["ada"], "predicate": ["is_a"], "object": ["musician"],
...                      "support_predicate": ["plays"], "support_object": ["guitar"]})
>>> link_relevance(s, gens)["related"].tolist()
[True, False]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from factmem.errors import InputError
from factmem.store.factstore import FactStore

__all__ = ["LinkSummary", "link_relevance", "pruned_children", "link_summary"]

_GEN_COLUMNS = ("subject", "predicate", "object", "support_predicate", "support_object")

_LINKS_SQL = """
SELECT l.parent_id, l.child_id, c.subject, p.predicate AS parent_predicate, p.object AS parent_object,
       c.predicate, c.object, c.status, c.status_reason
FROM memory_fact_links l
JOIN memory_facts p ON p.id = l.parent_id
JOIN memory_facts c ON c.id = l.child_id
ORDER BY l.parent_id, l.child_id
"""


def _support_pairs(generalizations: pd.DataFrame) -> pd.DataFrame:
    if not isinstance(generalizations, pd.DataFrame):
        raise InputError(f"generalizations must be a pandas DataFrame, got {type(generalizations).__name__}")
    missing = [c for c in _GEN_COLUMNS if c not in generalizations.columns]
    if missing:
        raise InputError(f"generalizations: missing column(s) {missing}; have {list(generalizations.columns)}")
    pairs = generalizations[list(_GEN_COLUMNS)].astype(str).drop_duplicates()
    return pairs.rename(columns={"predicate": "parent_predicate", "object": "parent_object",
                                 "support_predicate": "predicate", "support_object": "object"})


def link_relevance(store: FactStore, generalizations: pd.DataFrame) -> pd.DataFrame:
    """Every link of ``store`` (by parent, then child) with the child's subject, predicate, object,
    status and status_reason, the parent's predicate and object, and ``related`` (the child states a
    supporting fact of the parent's generalization; see the module docstring)."""
    links = store.query(_LINKS_SQL)
    keys = ["subject", "parent_predicate", "parent_object", "predicate", "object"]
    merged = links.merge(_support_pairs(generalizations).assign(related=True), on=keys, how="left")
    merged["related"] = merged["related"].fillna(False).astype(bool)  # a many-to-one merge keeps the order
    return merged


def pruned_children(store: FactStore, generalizations: pd.DataFrame) -> pd.DataFrame:
    """One row per pruned child (by id): its subject, predicate, object, ``parents`` (how many derived
    facts it is linked to) and ``related`` (it supports at least one of them)."""
    links = link_relevance(store, generalizations)
    pruned = links[(links["status_reason"] == "pruned").to_numpy(bool)]
    grouped = pruned.groupby("child_id", sort=True)
    out = grouped[["subject", "predicate", "object"]].first()
    out["parents"] = grouped.size().astype(np.int64)
    out["related"] = grouped["related"].any()
    return out.reset_index().rename(columns={"child_id": "id"})


@dataclass(frozen=True)
class LinkSummary:
    """Counts over a store's abstraction links (see the module docstring)."""

    links: int
    related_links: int
    pruned: int
    pruned_unrelated: int

    @property
    def unrelated_share(self) -> float:
        """Share of the pruned children that were unrelated (NaN when nothing was pruned)."""
        return self.pruned_unrelated / self.pruned if self.pruned else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"unrelated_share": self.unrelated_share}


def link_summary(store: FactStore, generalizations: pd.DataFrame) -> LinkSummary:
    """Links, related links, pruned children and pruned children unrelated to every parent."""
    links = link_relevance(store, generalizations)
    pruned = pruned_children(store, generalizations)
    return LinkSummary(links=int(len(links)), related_links=int(links["related"].sum()),
                       pruned=int(len(pruned)), pruned_unrelated=int((~pruned["related"]).sum()))
