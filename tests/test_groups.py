"""Groups of people who share sessions (factmem.evaluation.groups): found as components, overridden by
a column or a mapping, kept together by folds and bootstrap resamples, counted for promotion."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from factmem.data.generate import generate
from factmem.data.logs import empty_generalizations, empty_truth, make_dataset
from factmem.data.presets import preset
from factmem.errors import InputError
from factmem.evaluation.context import FIELDS
from factmem.evaluation.groups import group_sizes, subject_groups
from factmem.tuning.settings import Holdout, Objective, Search
from factmem.tuning.tune import bootstrap_difference, selection_stability, tune

DAY = 86400


def shared_log(pairs: list[tuple[str, ...]], sessions_each: int = 3):
    """Each tuple of people talks in the same sessions (a conversation of two, or one alone)."""
    rows = []
    for g, people in enumerate(pairs):
        for s in range(sessions_each):
            for i, who in enumerate(people):
                rows.append((s * DAY + g * 60 + i, f"c{g}-{s}", who, "likes", f"x{s}", "explicit"))
    ev = pd.DataFrame(rows, columns=["ts", "session_id", "subject", "predicate", "object", "kind"])
    ev["message_id"] = [f"m{i}" for i in range(len(ev))]
    ev["note"] = ""
    ev["team"] = [who[0] for who in ev["subject"]]  # another column to group by
    msgs = ev[["session_id", "message_id", "ts"]].assign(speaker="user", text="")
    return make_dataset(msgs, ev.drop(columns="team"), empty_truth(), empty_generalizations(),
                        {"start": 0, "end": sessions_each * DAY}), ev


def test_people_who_share_sessions_are_one_group():
    ds, _ = shared_log([("ann", "bo"), ("cy",), ("dee", "eve")])
    subjects = np.array(["ann", "bo", "cy", "dee", "eve", "zed"], dtype=object)  # zed: no mentions
    assert subject_groups(ds, subjects).tolist() == [0, 0, 1, 2, 2, 3]
    assert subject_groups(ds, subjects[::-1]).tolist() == [3, 2, 2, 1, 0, 0]  # numbered by sorted subject
    # chains join: ann–bo in one session, bo–cy in another
    ev = ds.events.copy()
    ev.loc[ev["subject"] == "cy", "session_id"] = ev.loc[ev["subject"] == "bo", "session_id"].iloc[0]
    chained = make_dataset(ds.messages, ev, empty_truth(), empty_generalizations(), ds.scenario)
    assert subject_groups(chained, subjects[:3]).tolist() == [0, 0, 0]
    assert group_sizes(np.array([0, 0, 1, 2, 2, 2])).tolist() == [2, 1, 3]


def test_group_by_overrides_sessions(tmp_path):
    ds, _ = shared_log([("ann", "bo"), ("cy",), ("dee", "eve")])
    subjects = ["ann", "bo", "cy", "dee", "eve"]
    assert subject_groups(ds, subjects, {"ann": "t1", "bo": "t2", "cy": "t1", "dee": "t3", "eve": "t3"}).tolist() \
        == [0, 1, 0, 2, 2]
    f = tmp_path / "groups.csv"
    f.write_text("subject,group\nann,a\nbo,a\ncy,a\ndee,b\neve,c\n")
    assert subject_groups(ds, subjects, f).tolist() == [0, 0, 0, 1, 2]
    assert subject_groups(ds, subjects, "message_id").tolist() == [0, 1, 2, 3, 4]  # every mention its own value
    with pytest.raises(InputError, match="'bo' has no group"):
        subject_groups(ds, subjects, {"ann": 1})
    with pytest.raises(InputError, match="no column 'team'"):
        subject_groups(ds, subjects, "team")
    f.write_text("subject,group\nann,a\nann,b\n")
    with pytest.raises(InputError, match="line 3: subject 'ann' given twice"):
        subject_groups(ds, subjects, f)
    with pytest.raises(InputError, match="no such file"):
        subject_groups(ds, subjects, tmp_path / "missing.csv")


def test_folds_keep_groups_together_and_per_person_folds_are_unchanged():
    ho = Holdout(folds=3, seed=4)
    singles = np.arange(11)
    assert np.array_equal(ho.group_folds(singles), ho.subject_folds(11))  # one group per person: same folds
    groups = np.array([0, 0, 1, 2, 2, 3, 4, 4, 5])
    folds = ho.group_folds(groups)
    for g in np.unique(groups):
        assert len(set(folds[groups == g])) == 1  # a group is never split
    assert set(folds) == {0, 1, 2}
    with pytest.raises(InputError, match="at least 3 groups"):
        ho.group_folds(np.array([0, 0, 1, 1]))


def test_bootstrap_resamples_whole_groups():
    rng = np.random.default_rng(0)
    n = 8
    a = np.zeros((n, len(FIELDS)))
    b = np.zeros((n, len(FIELDS)))
    a[:, FIELDS.index("points")] = b[:, FIELDS.index("points")] = rng.integers(1, 5, n)
    a[:, FIELDS.index("utility")] = rng.random(n)
    b[:, FIELDS.index("utility")] = rng.random(n)
    alone = bootstrap_difference(a, b, "utility", resamples=200, seed=3)
    assert alone == bootstrap_difference(a, b, "utility", resamples=200, seed=3, groups=np.arange(n))
    assert alone.groups == n
    pairs = np.arange(n) // 2
    together = bootstrap_difference(a, b, "utility", resamples=200, seed=3, groups=pairs)
    assert together.groups == 4 and together.subjects == n and together.difference == alone.difference
    # the same as resampling the pairs' sums as four people
    summed = [np.add.reduceat(x, np.arange(0, n, 2), axis=0) for x in (a, b)]
    by_hand = bootstrap_difference(*summed, "utility", resamples=200, seed=3)
    assert (together.low, together.high) == (by_hand.low, by_hand.high)
    assert (together.low, together.high) != (alone.low, alone.high)


def test_two_people_of_one_conversation_are_never_on_both_sides():
    """tiny with its people in pairs by a mapping: every fold holds both of a pair, the report counts
    the pairs, and six pairs are too few groups to promote."""
    ds = generate(preset("tiny", seed=7).replace(personas=12))
    people = sorted(ds.events["subject"].unique())
    pairs = {p: i // 2 for i, p in enumerate(people)}
    res = tune(ds, write=False, search=Search(method="random", n=12, seed=1), objective=Objective(budgets=(10,)),
               holdout=Holdout(folds=3, bootstrap=100, seed=2, group_by=pairs))
    rec = res.primary
    assert rec.versus_baseline.groups == 6 and rec.versus_baseline.subjects == 12
    assert not rec.promoted and rec.decision.startswith("Not promoted: too few to decide — 6 held-out groups")
    folds = Holdout(folds=3, seed=2).group_folds(subject_groups(ds, people, pairs))
    assert all(folds[2 * i] == folds[2 * i + 1] for i in range(6))
    stab = selection_stability(res.sweep, "all", 10, rec.index, resamples=50, seed=1,
                               groups=subject_groups(ds, res.sweep.subjects["all"], pairs))
    assert 0 <= stab <= 1
    alone = tune(ds, write=False, search=Search(method="random", n=12, seed=1), objective=Objective(budgets=(10,)),
                 holdout=Holdout(folds=3, bootstrap=100, seed=2, min_groups=1))
    assert alone.primary.versus_baseline.groups == 12  # everyone has sessions of their own
