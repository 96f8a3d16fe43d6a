"""Cardinality measured by replay (factmem.evaluation.cardinality_replay): the supersessions are the
store's ``supersedes_id``, the counts are a user's count against the truth, and the comparison table
shows the replay where repeated mentions make it differ from the change counting."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.data import logs
from factmem.evaluation.cardinality_policy import compare_policies
from factmem.evaluation.cardinality_replay import replay_errors, replay_registry
from factmem.store.factstore import FactStore

DAY = 86400
KEEP_EVERYTHING = {"decay_rate": {"explicit": 0.0, "user_preference": 0.0, "episodic": 0.0, "derived": 0.0},
                   "archive_threshold": 1e-6, "retrieval_threshold": 1e-6}


def _year(y: int) -> int:
    return int((np.datetime64(f"{int(y):04d}-01-01") - np.datetime64("1970-01-01")) / np.timedelta64(1, "s"))


def _overlapping_log(seed: int = 0, people: int = 30):
    """People hold clubs in turn (handed over at year ends) and a national team beside them; every value
    is mentioned again, at random, while it is valid — repeated mentions of overlapping values."""
    rng = np.random.default_rng(seed)
    rows, ev = [], []
    for i in range(people):
        p = f"p{i:02d}"
        start = 1990 + int(rng.integers(0, 5))
        spans = [(f"club{i}a", start, start + 3), (f"club{i}b", start + 3, start + 5), (f"club{i}c", start + 5, None),
                 ("national", start + 1, start + 7)]
        for obj, a, b in spans:
            rows.append((p, "team", obj, a, b))
            stop = _year(b) if b else _year(start + 9)
            times = np.r_[_year(a), _year(a) + rng.integers(1, stop - _year(a), size=int(rng.integers(0, 4)))]
            ev += [(p, "team", obj, int(t)) for t in times]
        rows.append((p, "lang", "pt", 1980, None))
        ev += [(p, "lang", "pt", _year(1991) + int(rng.integers(0, 3000)) * DAY)]
    t = pd.DataFrame(rows, columns=["subject", "predicate", "object", "a", "b"])
    truth = pd.DataFrame({
        "subject": t["subject"], "predicate": t["predicate"], "object": t["object"], "kind": "explicit",
        "valid_from": [_year(a) for a in t["a"]],
        "valid_to": pd.array([_year(b) if pd.notna(b) else None for b in t["b"]], dtype="Int64"),
        "relevant_until": pd.array([None] * len(t), dtype="Int64"), "noise": None,
        "start_period": "year", "end_period": ["year" if pd.notna(b) else None for b in t["b"]],
    })
    events = pd.DataFrame(ev, columns=["subject", "predicate", "object", "ts"]).sort_values("ts", kind="stable")
    events = events.reset_index(drop=True).assign(kind="explicit", note=None)
    events["session_id"] = events["subject"] + "@" + events["ts"].astype(str)
    events["message_id"] = [f"m{i:05d}" for i in range(len(events))]
    messages = events[["session_id", "message_id", "ts"]].assign(speaker="x", text="")
    scenario = {"start": int(events["ts"].min()), "end": int(events["ts"].max()),
                "import": {"start_periods": {"year": len(truth)}}}
    return logs.make_dataset(messages, events, truth, logs.empty_generalizations(), scenario)


def _store_supersessions(ds, multi_valued: frozenset[str]) -> pd.DataFrame:
    """What a user reads from the store: every supersedes_id, as (subject, predicate, old, new, time)."""
    store = FactStore(params=MemoryParams(multi_valued_predicates=multi_valued, **KEEP_EVERYTHING))
    try:
        store.replay(ds.events, consolidate_at=[])
        f = store.facts(at=0)
    finally:
        store.close()
    new = f[f["supersedes_id"].notna()]
    old = f.set_index("id").loc[new["supersedes_id"].astype(np.int64)]
    return pd.DataFrame({"subject": new["subject"].to_numpy(object), "predicate": new["predicate"].to_numpy(object),
                         "old_object": old["object"].to_numpy(object), "new_object": new["object"].to_numpy(object),
                         "ts": new["first_seen"].to_numpy(np.int64)})


@pytest.mark.parametrize("multi", [frozenset(), frozenset({"team"}), frozenset({"lang"})])
def test_replay_supersessions_are_the_stores(multi):
    ds = _overlapping_log()
    ev = ds.events
    rep = replay_registry(ev, ev["predicate"].isin(multi).to_numpy())
    key = ["subject", "predicate", "old_object", "new_object", "ts"]
    mine = rep.supersessions[key].sort_values(key).reset_index(drop=True)
    store = _store_supersessions(ds, multi).sort_values(key).reset_index(drop=True)
    assert len(mine) > 0 or multi == frozenset({"team"})
    pd.testing.assert_frame_equal(mine, store, check_dtype=False)


def test_exempt_objects_and_a_switch_follow_the_rule():
    ev = pd.DataFrame({"ts": [1, 2, 3, 4, 5, 6], "subject": "a", "predicate": "team",
                       "object": ["club1", "national", "club2", "club1", "club3", "national"]})
    stay = (ev["object"] == "national").to_numpy()
    rep = replay_registry(ev, np.zeros(6, bool), stay=stay, join=stay)
    pairs = list(zip(rep.supersessions["old_object"], rep.supersessions["new_object"]))
    # national joins (supersedes nothing) and stays (superseded by nothing); the clubs supersede each other
    assert pairs == [("club1", "club2"), ("club2", "club1"), ("club1", "club3")]
    active = rep.facts[rep.facts["end"] == np.iinfo(np.int64).max]["object"].tolist()
    assert sorted(active) == ["club3", "national"]
    # from a switch at ts 4 on nothing is superseded: club1 comes back beside club2
    rep = replay_registry(ev, np.zeros(6, bool), switch_at=np.full(6, 4))
    assert list(zip(rep.supersessions["old_object"], rep.supersessions["new_object"])) == \
        [("club1", "national"), ("national", "club2")]
    assert sorted(rep.facts[rep.facts["end"] == np.iinfo(np.int64).max]["object"]) == \
        ["club1", "club2", "club3", "national"]


def test_counts_against_the_truth_by_hand():
    ds = _overlapping_log(people=1)
    rep = replay_registry(ds.events, np.zeros(len(ds.events), bool))
    sup, ch = replay_errors(rep, ds.truth, ds.events)
    # an independent count in years: the superseded value still valid if one of its rows began by then
    # and last held in a later year than the supersession's
    t = ds.truth
    first = pd.to_datetime(t["valid_from"], unit="s").dt.year
    last = pd.to_datetime(t["valid_to"].astype("float") - 1, unit="s").dt.year.fillna(10_000)
    at = pd.to_datetime(sup["ts"], unit="s").dt.year
    expect = [bool(((t["object"] == o) & (first <= y) & (last > y)).any()) for o, y in zip(sup["old_object"], at)]
    assert sup["false"].tolist() == expect and any(expect)
    assert not ch["missed"].any()  # single-valued: a held old value is always superseded


def test_compare_shows_the_replay_where_it_differs_from_the_counting():
    ds = _overlapping_log()
    cmp = compare_policies(ds, n_boot=100)
    t = cmp.table.set_index(["policy", "source"])
    seed_rule = t.loc[("seed rule: every predicate single-valued", "-")]
    assert (cmp.table["measured_by"] == "replay").all()
    # the old values' repeated mentions re-insert them and supersede the newer one: the replay sees more
    assert seed_rule["false"] > seed_rule["counted_false"]
    assert seed_rule["gap_pts"] == pytest.approx(seed_rule["error_pct"] - seed_rule["counted_error_pct"])
    # the table's numbers are the replay's: the store's supersessions, judged against the truth
    store = _store_supersessions(ds, frozenset())
    store["ts"] = store["ts"].astype(np.int64)
    rep = replay_registry(ds.events, np.zeros(len(ds.events), bool))
    sup, _ = replay_errors(rep, ds.truth, ds.events)
    assert len(sup) == len(store) and int(seed_rule["false_supersessions"]) == int(sup["false"].sum())
    # a value dropped several times (alternating mentions) is one false value
    assert int(seed_rule["false"]) == sup.loc[sup["false"], "value_row"].nunique() < int(sup["false"].sum())
    assert "replay" in str(cmp) and "counted % (first pass)" in str(cmp)
