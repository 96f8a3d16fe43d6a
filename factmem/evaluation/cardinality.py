"""Predicate cardinality: which predicates hold several objects at once, and what each choice costs.

A single-valued predicate supersedes the old object when a new one is mentioned; on a predicate
that is really multi-valued (a person speaks several languages, plays for a club and a national
team) that archives facts that are still true. Declaring a predicate multi-valued avoids it, at the
price of leaving changed values active beside the new ones. This module measures both sides.

Ground floor: pandas and numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from factmem.core.codes import DAY, OPEN
from factmem.errors import InputError

__all__ = ["log_registry", "measure_cardinality", "suggest_multi_valued", "supersession_costs"]


def measure_cardinality(truth: pd.DataFrame | None = None, events: pd.DataFrame | None = None, *,
                        threshold: float = 0.2, window_days: float = 30.0) -> pd.DataFrame:
    """Per predicate, how often two objects hold at once for the same subject, and a suggestion.

    From ``truth`` (subject, predicate, object, valid_from, valid_to) when given: ``overlap_share``
    is the share of a predicate's values that start while another value of the same subject is
    still valid. Otherwise from mention patterns in ``events`` (subject, predicate, object, ts): the
    share of object switches that go back to an object mentioned for that subject and predicate
    within ``window_days`` — interleaving, which a value that *changes* does not do.
    ``multi_valued`` suggests declaring the predicate multi-valued (share >= ``threshold``).
    """
    if truth is not None and len(truth):
        t = truth[truth["valid_to"].isna() | (truth["valid_to"] > truth["valid_from"])]  # skip misstatements
        t = t.assign(vt=t["valid_to"].astype("Int64").fillna(OPEN).to_numpy(np.int64))
        t = t.sort_values(["subject", "predicate", "valid_from"], kind="stable")
        same = (t["subject"].to_numpy() == np.roll(t["subject"].to_numpy(), 1)) & \
               (t["predicate"].to_numpy() == np.roll(t["predicate"].to_numpy(), 1))
        same[0] = False
        # running max of valid_to within (subject, predicate), before each row
        grp = np.cumsum(~same)
        vt = t["vt"].to_numpy()
        run_max = pd.Series(vt).groupby(grp).cummax().to_numpy()
        prev_max = np.where(same, np.roll(run_max, 1), np.iinfo(np.int64).min)
        overlap = same & (t["valid_from"].to_numpy(np.int64) < prev_max)
        out = pd.DataFrame({"predicate": t["predicate"].to_numpy(), "overlap": overlap, "later": same,
                            "subject": t["subject"].to_numpy()})
        g = out.groupby("predicate", sort=True)
        res = pd.DataFrame({
            "subjects": g["subject"].nunique(),
            "values": g.size(),
            "changes": g["later"].sum(),
            "overlapping": g["overlap"].sum(),
        })
        res["overlap_share"] = res["overlapping"] / res["values"]
        res["source"] = "truth"
    elif events is not None and len(events):
        e = events.sort_values(["subject", "predicate", "ts"], kind="stable")
        s, p, o = e["subject"].to_numpy(), e["predicate"].to_numpy(), e["object"].to_numpy()
        ts = e["ts"].to_numpy(np.int64)
        same = np.zeros(len(e), bool)
        same[1:] = (s[1:] == s[:-1]) & (p[1:] == p[:-1])
        switch = same.copy()
        switch[1:] &= o[1:] != o[:-1]
        # last mention of this exact triple before this one
        # a group number per triple (not a MultiIndex of tuples: those cost seconds per million mentions)
        tri = pd.DataFrame({"s": s, "p": p, "o": o}).groupby(["s", "p", "o"], sort=False, observed=True).ngroup().to_numpy()
        prev_same_triple = pd.Series(ts).groupby(tri).shift(1).to_numpy(dtype=float)
        back = switch & np.isfinite(prev_same_triple) & (ts - np.nan_to_num(prev_same_triple) <= window_days * DAY)
        out = pd.DataFrame({"predicate": p, "switch": switch, "back": back, "subject": s, "object": o})
        g = out.groupby("predicate", sort=True)
        res = pd.DataFrame({
            "subjects": g["subject"].nunique(),
            "values": out.drop_duplicates(["subject", "predicate", "object"]).groupby("predicate").size(),
            "changes": g["switch"].sum(),
            "overlapping": g["back"].sum(),
        })
        res["overlap_share"] = (res["overlapping"] / res["changes"].where(res["changes"] > 0)).fillna(0.0)
        res["source"] = "mentions"
    else:
        raise InputError("measure_cardinality needs a truth table or events")
    res["multi_valued"] = res["overlap_share"] >= threshold
    return res.reset_index()


def suggest_multi_valued(table: pd.DataFrame) -> frozenset[str]:
    """The predicates :func:`measure_cardinality` suggests declaring multi-valued."""
    return frozenset(table.loc[table["multi_valued"], "predicate"])


def log_registry(dataset) -> frozenset[str]:
    """A log's multi-valued predicates: declared by its scenario, else measured
    (:func:`measure_cardinality` on its truth, or on its mentions without truth). The registry of
    the base that ``tune`` and ``fit`` start from."""
    declared = dataset.multi_valued_predicates
    if declared:
        return frozenset(declared)
    truth = dataset.truth if len(dataset.truth) else None
    if truth is None and not len(dataset.events):
        return frozenset()
    return suggest_multi_valued(measure_cardinality(truth, dataset.events))


def supersession_costs(facts: pd.DataFrame, truth: pd.DataFrame, multi_valued: Iterable[str]) -> pd.DataFrame:
    """Per predicate, what the memory's cardinality choice cost in a replay.

    ``false_supersessions``: facts superseded while their value was still valid (truth).
    ``missed_supersessions``: on multi-valued predicates, a new value inserted while another value
    of the same subject was still active although it had stopped being valid.
    ``facts``: a store's ``memory_facts`` (from ``FactStore.facts``); ``truth``: a dataset's truth.
    """
    multi = frozenset(multi_valued)
    cols = ["predicate", "multi_valued", "facts", "supersessions", "false_supersessions", "false_share",
            "missed_supersessions"]
    if facts.empty:
        return pd.DataFrame(columns=cols)
    tr = truth[["subject", "predicate", "object", "valid_from", "valid_to"]].copy()
    tr["vt"] = tr["valid_to"].astype("Int64").fillna(OPEN).to_numpy(np.int64)
    obs = facts[facts["kind"] != "derived"]

    sup = obs[obs["status"] == "superseded"][["id", "subject", "predicate", "object", "status_changed_at"]]
    sup = sup[sup["status_changed_at"].notna()]
    m = sup.merge(tr, on=["subject", "predicate", "object"])
    at = m["status_changed_at"].astype(np.int64)
    still = m[(m["valid_from"] <= at) & (at < m["vt"])]["id"].unique()
    false_sup = sup[sup["id"].isin(still)].groupby("predicate").size()

    # multi-valued: an insertion beside an active value that had stopped being valid
    mv = obs[obs["predicate"].isin(multi)][["id", "subject", "predicate", "object", "first_seen", "status_changed_at"]]
    missed = pd.Series(dtype=np.int64)
    if len(mv):
        pairs = mv.merge(mv, on=["subject", "predicate"], suffixes=("", "_old"))
        at = pairs["first_seen"]
        end_old = pairs["status_changed_at_old"].astype("Int64").fillna(OPEN).astype(np.int64)
        pairs = pairs[(pairs["object"] != pairs["object_old"]) & (pairs["first_seen_old"] < at) & (end_old > at)]
        pm = pairs.merge(tr.rename(columns={"object": "object_old"}), on=["subject", "predicate", "object_old"])
        at = pm["first_seen"].astype(np.int64)
        ended = pm["vt"] <= at
        valid_now = (pm["valid_from"] <= at) & (at < pm["vt"])
        # the old value ended before the insertion and was not valid again at that moment
        agg = pm.assign(ended=ended, valid_now=valid_now).groupby(["id", "id_old"]).agg(
            ended=("ended", "any"), valid_now=("valid_now", "any"))
        hit = agg[agg["ended"] & ~agg["valid_now"]].reset_index()
        missed = mv.set_index("id").loc[hit["id"].unique(), "predicate"].value_counts() if len(hit) else missed

    g = obs.groupby("predicate")
    out = pd.DataFrame({"facts": g.size(), "supersessions": (obs["status"] == "superseded").groupby(obs["predicate"]).sum()})
    out["false_supersessions"] = false_sup.reindex(out.index).fillna(0).astype(np.int64)
    out["missed_supersessions"] = missed.reindex(out.index).fillna(0).astype(np.int64)
    out["false_share"] = (out["false_supersessions"] / out["supersessions"].where(out["supersessions"] > 0)).fillna(0.0)
    out["multi_valued"] = out.index.isin(multi)
    return out.reset_index()[cols].sort_values("predicate").reset_index(drop=True)
