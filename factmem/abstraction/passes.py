"""The abstraction pass: clusters of observed facts become derived facts through one LLM call each.

One pass (:func:`abstract`, called as ``abstract(store, provider, ...)``):

1. **Clusters** are the active, non-derived facts grouped by subject, in subject order, facts in id
   order. A cluster is *eligible* when it holds at least ``min_cluster`` facts.
2. An eligible cluster is **unchanged** (no call, no write) when no active derived fact linked to a
   fact of that subject is stale and its exact membership, the set of its fact ids, was answered
   for before — how that is known depends on ``link_scope`` (``MemoryParams.link_scope``):

   * ``"cluster"`` (the seed): the membership equals the set of *active* children of an active,
     non-stale derived fact, or the model answered ``[]`` for it (an ``empty`` examined record).
     Active children, not all links: links are never deleted, so after a membership change the
     re-derived fact keeps its links to superseded members, and comparing all links would re-ask
     that cluster on every pass.
   * ``"support"``: a derived fact's children are only its supporting facts, so they say nothing
     about the cluster; the membership must have an examined record (``derived`` or ``empty``)
     instead. A member leaving (superseded, decayed, pruned) or arriving changes the membership; a
     supporting member leaving also stales its parents.
3. Every other eligible cluster gets **one call** ``provider.complete(messages, model=...,
   temperature=...)``: a system prompt (:data:`SYSTEM_PROMPT`, or :data:`SUPPORT_SYSTEM_PROMPT` under
   support links; both versioned by :data:`PROMPT_VERSION`) and a user message holding the cluster as
   JSON (:func:`factmem.abstraction.oracle.cluster_payload`: facts with their store ``id``, or under
   support links with their position ``index``).
4. The answer is **parsed** strictly (:func:`parse_response`, :func:`check_against_cluster`); a
   rejected answer counts the cluster as ``failed``, a ``ProviderError`` as ``skipped``; both write
   nothing and leave the stale flags as they were, so the cluster is retried on the next pass. A
   :class:`~factmem.errors.CassetteMiss` is not a provider failure: it propagates. Under support
   links every item must carry ``"support"``, a non-empty array of fact indices of the prompt
   (integers in ``[0, size)``; repeats collapse): an item whose list is missing, empty, not an array
   of integers, or holds an index out of range **rejects the whole answer** (the cluster is
   ``failed``), as any other malformed item does — the contract stays all-or-nothing, so a cluster
   is either answered (and recorded as examined) or retried.
5. Each accepted item is **remembered** with kind ``derived`` at ``at`` (an identical active derived
   fact is reinforced: ``reinforced``, else ``created``), with evidence ``source="abstraction"``,
   ``session_id="abstraction:<pass_id>"``, ``message_id="cluster:<subject>"``, and **linked** to every
   cluster member (``cluster``) or to the members its ``support`` cites (``support``; a re-derived
   fact keeps its earlier links, so its children are the union of its supports). The membership is
   recorded as examined (``derived`` or ``empty``, :mod:`factmem.store.examined`), and the stale flags
   of the cluster's stale derived facts are cleared. All of one cluster's writes are one
   transaction: an error midway leaves no trace of that cluster.
6. If ``prune``, the active children of every active derived fact reinforced at least
   ``prune_min_reinforcements`` times are **archived** (``status_reason='pruned'``): the prune half of
   ``consolidate``, without its decay half.

**Stale derived facts.** The store marks an active derived fact stale when one of its children is
superseded or archived by decay. The next pass re-examines that subject's cluster (if eligible) even
when the membership would otherwise count as unchanged. Once the model has answered for the cluster
(derived facts or ``[]``), the flags are cleared: *stale* means "its support changed and the model
has not looked again since", not "wrong". A derived fact the model does not re-derive stays active and
decays at the derived rate unless re-derived later. A stale fact whose subject has no eligible cluster
stays stale until it has one.

**Every answer is remembered** (``memory_abstraction_examined``: subject, exact membership, time,
pass, outcome), so a cluster for which the model found nothing is not asked again until its
membership changes, and under support links neither is one it answered: a pass over unchanged
clusters makes no calls, whatever the answers were. Under cluster links the derived answers'
records are kept for audit; the rule reads the links, as it always did.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from factmem.abstraction.answers import (
    SUPPORT_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    DerivedItem,
    build_messages,
    check_against_cluster,
    check_scope,
    parse_response,
    printable,
)
from factmem.abstraction.oracle import PROMPT_VERSION
from factmem.core.codes import LinkScope
from factmem.core.timeutil import resolve_at
from factmem.errors import InputError, ProviderError, ResponseRejected
from factmem.store.factstore import Evidence, FactStore

__all__ = [
    "PROMPT_VERSION",
    "SYSTEM_PROMPT",
    "SUPPORT_SYSTEM_PROMPT",
    "OUTCOMES",
    "COUNTERS",
    "DerivedItem",
    "ClusterOutcome",
    "AbstractResult",
    "abstract",
    "build_messages",
    "cluster_plan",
    "parse_response",
    "check_against_cluster",
    "prune_children",
]


#: Per-cluster outcomes of an eligible cluster.
OUTCOMES: tuple[str, ...] = ("unchanged", "derived", "empty", "skipped", "failed")
#: The counters of a pass, in report order.
COUNTERS: tuple[str, ...] = (
    "clusters", "eligible", "unchanged", "created", "reinforced", "empty", "skipped", "failed", "pruned",
    "calls", "stale_cleared",
)

# --------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClusterOutcome:
    """What the pass did with one eligible cluster.

    ``outcome`` is one of :data:`OUTCOMES`. ``derived_ids``: the derived facts remembered for it
    (created or reinforced), in answer order. ``error_kind``: the ``ProviderError`` kind of a skipped
    cluster, ``"rejected"`` for a failed one. ``response``: the raw answer of a failed cluster.
    ``stale``: the cluster had stale derived facts; ``stale_cleared``: how many flags were cleared.
    ``linked_ids``: per derived fact (aligned with ``derived_ids``), the store ids it was linked to by
    this answer — every member under cluster links, its cited support under support links.
    """

    subject: str
    size: int
    outcome: str
    stale: bool = False
    derived_ids: tuple[int, ...] = ()
    created: int = 0
    reinforced: int = 0
    stale_cleared: int = 0
    error_kind: str | None = None
    error: str | None = None
    response: str | None = None
    linked_ids: tuple[tuple[int, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["derived_ids"] = list(self.derived_ids)
        d["linked_ids"] = [list(ids) for ids in self.linked_ids]
        return d


@dataclass
class AbstractResult:
    """The counters of one pass (see :data:`COUNTERS`) and one :class:`ClusterOutcome` per eligible
    cluster, in subject order.

    ``created``/``reinforced`` count derived facts; ``empty``/``skipped``/``failed``/``unchanged``
    count clusters; ``pruned`` counts children archived by the prune step; ``calls`` is the number of
    provider calls made (``eligible - unchanged``).
    """

    pass_id: str
    at: int
    model: str | None
    clusters: int = 0
    eligible: int = 0
    unchanged: int = 0
    created: int = 0
    reinforced: int = 0
    empty: int = 0
    skipped: int = 0
    failed: int = 0
    pruned: int = 0
    calls: int = 0
    stale_cleared: int = 0
    outcomes: list[ClusterOutcome] = field(default_factory=list)

    def counters(self) -> dict[str, int]:
        """The counters alone, as a plain dict."""
        return {name: int(getattr(self, name)) for name in COUNTERS}

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form: pass id, time, model, counters and per-cluster outcomes."""
        return {"pass_id": self.pass_id, "at": self.at, "model": self.model, **self.counters(),
                "outcomes": [o.to_dict() for o in self.outcomes]}

    def outcomes_frame(self) -> pd.DataFrame:
        """Per-cluster outcomes as a DataFrame (one row per eligible cluster)."""
        cols = list(ClusterOutcome.__dataclass_fields__)
        return pd.DataFrame([o.to_dict() for o in self.outcomes], columns=cols)

    def __str__(self) -> str:
        c = self.counters()
        return (f"abstraction pass {self.pass_id}: {c['clusters']} clusters, {c['eligible']} eligible, "
                f"{c['unchanged']} unchanged, {c['calls']} calls; {c['created']} created, "
                f"{c['reinforced']} reinforced; {c['empty']} empty, {c['skipped']} skipped, {c['failed']} failed; "
                f"{c['pruned']} pruned, {c['stale_cleared']} stale flags cleared")


# --------------------------------------------------------------------------------------------------
# Clusters
# --------------------------------------------------------------------------------------------------

_PLAN_SQL = """
WITH members AS (
    SELECT subject, list(id ORDER BY id) AS ids, count(*) AS size
    FROM memory_facts WHERE status = 'active' AND kind <> 'derived'
    GROUP BY subject
), live AS (  -- the active, non-derived children of each active derived fact
    SELECT l.parent_id, list(c.id ORDER BY c.id) AS ids
    FROM memory_fact_links l
    JOIN memory_facts p ON p.id = l.parent_id
    JOIN memory_facts c ON c.id = l.child_id
    WHERE p.status = 'active' AND p.kind = 'derived'
      AND c.status = 'active' AND c.kind <> 'derived'
    GROUP BY l.parent_id
), matched AS (
    SELECT ids, min(parent_id) AS parent_id FROM live GROUP BY ids
), answered AS (  -- exact clusters the model answered for: any answer, and empty ones
    SELECT subject, member_ids AS ids, bool_or(outcome = 'empty') AS empty
    FROM {examined} GROUP BY subject, member_ids
), stale AS (  -- active stale derived facts, by the subject of their children
    SELECT c.subject, list(DISTINCT p.id ORDER BY p.id) AS stale_ids
    FROM memory_fact_links l
    JOIN memory_facts p ON p.id = l.parent_id
    JOIN memory_facts c ON c.id = l.child_id
    WHERE p.status = 'active' AND p.kind = 'derived' AND p.stale
    GROUP BY c.subject
)
SELECT m.subject, m.size, matched.parent_id AS linked_parent,
       coalesce(stale.stale_ids, []::BIGINT[]) AS stale_ids,
       stale.subject IS NOT NULL AS stale,
       a.subject IS NOT NULL AS answered,
       m.size >= $min_cluster AS eligible,
       CASE WHEN m.size < $min_cluster THEN 'ineligible'
            WHEN stale.subject IS NOT NULL THEN 'examine'
            WHEN $support AND a.subject IS NOT NULL THEN 'unchanged'
            WHEN NOT $support AND (matched.parent_id IS NOT NULL OR coalesce(a.empty, false)) THEN 'unchanged'
            ELSE 'examine' END AS action
FROM members m
LEFT JOIN matched ON matched.ids = m.ids
LEFT JOIN answered a ON a.subject = m.subject AND a.ids = m.ids
LEFT JOIN stale ON stale.subject = m.subject
ORDER BY m.subject
"""


def _check_count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def cluster_plan(store: FactStore, min_cluster: int | None = None,
                 link_scope: LinkScope | None = None) -> pd.DataFrame:
    """What a pass would do with each cluster, without calling anything or writing.

    One row per subject with active non-derived facts, in subject order: ``size``,
    ``linked_parent`` (the lowest-id active derived fact whose active children are exactly the
    cluster, or NA), ``stale_ids`` (active stale derived facts linked to facts of this subject),
    ``stale``, ``answered`` (this exact membership has an examined record), ``eligible`` and
    ``action``: ``ineligible``, ``unchanged`` (eligible, not stale, and under ``link_scope``
    (default ``store.params.link_scope``) ``cluster`` linked or answered ``[]``, under ``support``
    answered) or ``examine``. A stale matching parent is in ``stale_ids`` too, so "linked and not
    stale" is exactly "linked to an active, non-stale derived fact and nothing stale about it".
    """
    min_cluster = _check_count("min_cluster", store.params.min_cluster if min_cluster is None else min_cluster)
    link_scope = check_scope(store.params.link_scope if link_scope is None else link_scope)
    plan = store.query(_PLAN_SQL.format(examined=store.examined_relation),
                       {"min_cluster": min_cluster, "support": link_scope == "support"})
    plan["size"] = plan["size"].astype(np.int64)
    plan["linked_parent"] = plan["linked_parent"].astype("Int64")
    plan["stale_ids"] = [tuple(ids.tolist()) for ids in plan["stale_ids"]]  # per cluster, not per fact
    return plan


def _members(store: FactStore, subjects: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Active non-derived facts of ``subjects``, one id-ordered frame per subject (one query)."""
    if not subjects:
        return {}
    df = store.query(
        "SELECT id, subject, predicate, object, note FROM memory_facts "
        "WHERE status = 'active' AND kind <> 'derived' AND subject IN (SELECT unnest($s::VARCHAR[])) "
        "ORDER BY subject, id", {"s": list(subjects)})
    subj = df["subject"].to_numpy(dtype=object)
    cuts = np.flatnonzero(subj[1:] != subj[:-1]) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(df)]])
    return {subj[a]: df.iloc[a:b].reset_index(drop=True) for a, b in zip(starts, ends)}


# --------------------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------------------

def prune_children(store: FactStore, at: Any = None) -> int:
    """Archive (``status_reason='pruned'``) the active children of every active derived fact
    reinforced at least ``prune_min_reinforcements`` times; the prune half of
    ``FactStore.consolidate``, without archiving by decay. Idempotent. Returns how many."""
    return store.prune(at)


def _write_cluster(store: FactStore, subject: str, members: pd.DataFrame, items: Sequence[DerivedItem],
                   stale_ids: Sequence[int], at: int, pass_id: str, link_scope: LinkScope = "cluster"
                   ) -> tuple[list[int], int, int, int, list[tuple[int, ...]]]:
    """Remember, link, record and un-stale one cluster in one transaction; (ids, created, reinforced,
    cleared, linked ids per derived fact)."""
    member_ids = members["id"].astype(np.int64).tolist()
    linked: list[tuple[int, ...]] = []
    evidence = Evidence(session_id=f"abstraction:{pass_id}", message_id=f"cluster:{subject}", source="abstraction")
    ids: list[int] = []
    created = reinforced = 0
    existing: set[int] = set()
    with store.transaction():
        if items:
            existing = set(store.query(
                "SELECT id FROM memory_facts WHERE status = 'active' AND kind = 'derived' AND subject = ?",
                [subject])["id"].astype(np.int64).tolist())
        for item in items:  # at most max_facts
            fid = store.remember(item.subject, item.predicate, item.object, kind="derived", at=at,
                                 evidence=evidence, note=item.note)
            children = member_ids if link_scope == "cluster" else [member_ids[i] for i in item.support]
            store.link(fid, children, at=at)
            linked.append(tuple(sorted(children)))
            ids.append(fid)
            if fid in existing:
                reinforced += 1
            else:
                created += 1
                existing.add(fid)
        # so that this exact cluster is not asked again (under cluster links, only "[]" is read back)
        store.record_examined(subject, member_ids, "derived" if items else "empty", at=at, pass_id=pass_id)
        if stale_ids:
            store.set_stale(stale_ids, False)
    return ids, created, reinforced, len(stale_ids), linked


# --------------------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------------------

def _check_prompt_version(provider: Any) -> None:
    from factmem.abstraction.cassette import Cassette

    if isinstance(provider, Cassette) and provider.prompt_version != PROMPT_VERSION:
        raise InputError(
            f"cassette {provider.path} keys answers with prompt_version={provider.prompt_version!r}, but this "
            f"abstraction prompt is version {PROMPT_VERSION!r}; build it with "
            "prompt_version=factmem.abstraction.passes.PROMPT_VERSION (answers to another prompt version must not replay)")


def abstract(store: FactStore, provider: Any, model: str | None = None, at: Any = None, *,
             min_cluster: int | None = None, max_facts: int | None = None, prune: bool = True,
             temperature: float | None = None, pass_id: str | None = None,
             progress: bool | None = None, quiet: bool = False,
             link_scope: LinkScope | None = None) -> AbstractResult:
    """Run one abstraction pass over ``store`` with ``provider`` (see the module docstring).

    ``min_cluster``, ``max_facts``, ``temperature`` and ``link_scope`` default to ``store.params``. ``model`` is
    passed to every ``provider.complete`` call (None: the provider's own default). ``at`` (default:
    the wall clock) stamps derived facts, evidence, links and pruning. ``pass_id`` (default
    ``str(at)``) names the pass in evidence as ``session_id="abstraction:<pass_id>"``. ``progress``:
    a tqdm bar over the calls (None: only on a terminal; ``quiet=True`` turns it off).

    Each cluster is committed on its own; if the provider raises something other than
    ``ProviderError`` (a :class:`~factmem.errors.CassetteMiss`, a bug), the clusters already done stay
    written and a rerun continues from there (they are then unchanged).
    """
    p = store.params
    min_cluster = _check_count("min_cluster", p.min_cluster if min_cluster is None else min_cluster)
    max_facts = _check_count("max_facts", p.max_facts if max_facts is None else max_facts)
    temperature = p.temperature if temperature is None else temperature
    link_scope = check_scope(p.link_scope if link_scope is None else link_scope)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not np.isfinite(temperature) \
            or temperature < 0:
        raise InputError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if not callable(getattr(provider, "complete", None)):
        raise InputError(f"provider must have a complete(messages, *, model, temperature) method, got {provider!r}")
    _check_prompt_version(provider)
    at = resolve_at(at)
    pass_id = str(at) if pass_id is None else pass_id
    if not isinstance(pass_id, str) or not pass_id:
        raise InputError(f"pass_id must be a non-empty string, got {pass_id!r}")
    with store.transaction():  # fail now, before any call, if the store is closed or read-only
        pass

    plan = cluster_plan(store, min_cluster, link_scope)
    result = AbstractResult(pass_id=pass_id, at=at, model=model if model is not None else getattr(provider, "model", None))
    result.clusters = int(len(plan))
    result.eligible = int(plan["eligible"].sum())
    todo = plan[plan["action"] == "examine"]
    members = _members(store, todo["subject"].tolist())
    unchanged = set(plan.loc[plan["action"] == "unchanged", "subject"])
    multi = p.multi_valued_predicates

    bar = tqdm(total=len(todo), desc="abstraction", unit="cluster",
               disable=True if quiet else (None if progress is None else not progress))
    try:
        for subject, size, stale_ids in plan.loc[plan["eligible"], ["subject", "size", "stale_ids"]].itertuples(index=False):
            # one iteration per eligible cluster: each costs a provider call, the loop is not the cost
            if subject in unchanged:
                result.unchanged += 1
                result.outcomes.append(ClusterOutcome(subject, int(size), "unchanged"))
                continue
            outcome = _examine(store, provider, subject, members[subject], list(stale_ids), model=model,
                               temperature=temperature, max_facts=max_facts, multi=multi, at=at, pass_id=pass_id,
                               link_scope=link_scope)
            result.calls += 1
            result.outcomes.append(outcome)
            result.created += outcome.created
            result.reinforced += outcome.reinforced
            result.stale_cleared += outcome.stale_cleared
            if outcome.outcome in ("empty", "skipped", "failed"):
                setattr(result, outcome.outcome, getattr(result, outcome.outcome) + 1)
            bar.update(1)
    finally:
        bar.close()
    if prune:
        result.pruned = prune_children(store, at)
    return result


def _examine(store: FactStore, provider: Any, subject: str, members: pd.DataFrame, stale_ids: list[int], *,
             model: str | None, temperature: float, max_facts: int, multi: Iterable[str], at: int,
             pass_id: str, link_scope: LinkScope = "cluster") -> ClusterOutcome:
    """One call for one cluster, then its writes (or none)."""
    size, stale = int(len(members)), bool(stale_ids)
    messages = build_messages(subject, members, max_facts, link_scope)
    try:
        text = provider.complete(messages, model=model, temperature=temperature)
    except ProviderError as exc:
        return ClusterOutcome(subject, size, "skipped", stale, error_kind=exc.kind, error=str(exc))
    try:
        items = parse_response(text, max_facts, subject, size if link_scope == "support" else None)
        check_against_cluster(items, members, multi)
        # an item the store refuses (its own validation) fails this cluster only; the write rolled back
        ids, created, reinforced, cleared, linked = _write_cluster(store, subject, members, items, stale_ids, at,
                                                                   pass_id, link_scope)
    except (ResponseRejected, InputError) as exc:
        return ClusterOutcome(subject, size, "failed", stale, error_kind="rejected", error=str(exc),
                              response=printable(text) if isinstance(text, str) else repr(text))
    return ClusterOutcome(subject, size, "derived" if items else "empty", stale, tuple(ids), created, reinforced,
                          cleared, linked_ids=tuple(linked))
