"""The context rule is one rule: ``FactStore.context`` at every session start of random logs equals the
context the budgeted metrics score there (``ContextEvaluator.contexts``) — the same facts, in the same
order, with the same effective confidences, bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factmem.core.context_rule import context_order, lexicographic_rank
from factmem.core.params import MemoryParams
from factmem.data.logs import empty_generalizations, empty_truth, make_dataset
from factmem.errors import InputError
from factmem.evaluation.context import ContextEvaluator
from factmem.evaluation.simulate import kernel_beliefs, prepare
from factmem.store.factstore import FactStore
from factmem.testing.strategies import param_sets

DAY = 86400
T0 = 1_704_067_200  # a midnight UTC

_mention = st.tuples(
    st.sampled_from([0, 0, 60, 3600, DAY, 3 * DAY]),  # gap since the previous mention (0: a tie)
    st.booleans(),  # starts a new session
    st.sampled_from(["ada", "bob"]),
    st.sampled_from(["likes", "lives_in", "uses"]),
    st.sampled_from(["go", "rust", "zig", "é"]),
    st.sampled_from(["explicit", "episodic", "user_preference"]),
)


def _dataset(mentions):
    rows, t, session = [], T0, 0
    for gap, new_session, s, p, o, k in mentions:
        t += gap
        session += bool(new_session or gap >= DAY)
        rows.append((t, f"s{session:03d}", s, p, o, k))
    ev = pd.DataFrame(rows, columns=["ts", "session_id", "subject", "predicate", "object", "kind"])
    ev["message_id"] = [f"m{i}" for i in range(len(ev))]
    ev["note"] = ""
    msgs = ev[["session_id", "message_id", "ts"]].assign(speaker="u", text="")
    return make_dataset(msgs, ev, empty_truth(), empty_generalizations(),
                        {"start": T0, "end": int(ev["ts"].max()) + DAY})


def _store_contexts(P, params, grid, points, k):
    """Replay the log into a FactStore point by point (events before t, consolidations at T <= t) and
    read its context at each point: (point, predicate, object, effective) rows in rank order."""
    store = FactStore(params=params)
    ev = P.events
    ts = ev["ts"].to_numpy()
    done, last_t = 0, None
    out = []
    for i, (subject, t) in enumerate(zip(points["subject_name"], points["t"])):
        if t != last_t:
            hi = int(np.searchsorted(ts, t, "left"))
            lo_g = -np.inf if last_t is None else last_t
            g = grid[(grid > lo_g) & (grid <= t)]
            if hi > done or len(g):
                store.replay(ev.iloc[done:hi], g)
            done, last_t = hi, t
        c = store.context(subject, k, at=int(t))
        out += [(i, r.predicate, r.object, r.effective_confidence, r.rank) for r in c.itertuples()]
    store.close()
    return pd.DataFrame(out, columns=["point", "predicate", "object", "effective_confidence", "rank"])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mentions=st.lists(_mention, min_size=1, max_size=30), params=param_sets(),
       retrieval=st.sampled_from([0.05, 0.3, 0.5]), k=st.integers(1, 4))
def test_store_context_equals_the_evaluators_at_every_session_start(mentions, params, retrieval, k):
    params = params.replace(retrieval_threshold=retrieval)
    P = prepare(_dataset(mentions))
    grid = np.arange(P.start + DAY, P.end + 1, DAY, dtype=np.int64)
    beliefs = kernel_beliefs(P, [params], grid)[0]
    ev = ContextEvaluator(P, budgets=(k,), needed="next-session")
    theirs = ev.contexts(beliefs, params, k)
    # every scored point, in time order (the store moves forward only)
    scored = np.flatnonzero(ev._pt_valid)
    points = ev.points.iloc[scored].assign(subject_name=lambda d: np.asarray(ev.subjects, object)[d["subject"]])
    points = points.sort_values("t", kind="stable")
    ours = _store_contexts(P, params, grid, points, k)
    ours["point"] = points.index.to_numpy()[ours["point"].to_numpy(np.int64)]
    names = P.triples[theirs["triple"].to_numpy()]
    theirs = pd.DataFrame({"point": theirs["point"].to_numpy(), "predicate": names.get_level_values(1),
                           "object": names.get_level_values(2),
                           "effective_confidence": theirs["effective_confidence"].to_numpy(),
                           "rank": theirs["rank"].to_numpy()})
    key = ["point", "rank"]
    a = ours.sort_values(key).reset_index(drop=True)
    b = theirs.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False, check_exact=True)
    # contexts are full where enough facts qualify, and never exceed k
    assert (a.groupby("point").size() <= k).all()


def test_context_order_and_threshold_by_hand():
    """Ties: equal effective confidence goes to the later last_reinforced, then the later first_seen,
    then (predicate, object); facts under max(archive, retrieval threshold) are never shown."""
    p = MemoryParams(decay_rate={"explicit": 0.0, "user_preference": 0.0, "episodic": 0.0},
                     initial_confidence={"explicit": 0.4, "user_preference": 0.4, "episodic": 0.4},
                     retrieval_threshold=0.4)
    store = FactStore(params=p)
    store.remember("ada", "b_pred", "x", kind="explicit", at=T0)
    store.remember("ada", "a_pred", "y", kind="explicit", at=T0)  # same times: (predicate, object) decides
    store.remember("ada", "c_pred", "z", kind="explicit", at=T0 + 10)  # later: first
    store.remember("bob", "likes", "tea", kind="explicit", at=T0)
    ctx = store.context("ada", 2, at=T0 + DAY)
    assert list(ctx["predicate"]) == ["c_pred", "a_pred"] and list(ctx["rank"]) == [0, 1]
    assert list(store.contexts(5, at=T0 + DAY)["subject"]) == ["ada"] * 3 + ["bob"]
    # a threshold above every fact: an empty context, with the columns
    store.params = p.replace(retrieval_threshold=0.41)
    assert store.context("ada", 3, at=T0 + DAY).empty
    with pytest.raises(InputError, match="k must be a positive integer"):
        store.context("ada", 0)
    # the shared order helper, on its own: effective first, then the tie keys
    order = context_order(np.zeros(3, np.int64), np.array([0.5, 0.5, 0.6]), np.array([1, 2, 0]), np.zeros(3, np.int64),
                          lexicographic_rank(["a", "b", "c"], ["x", "x", "x"]))
    assert order.tolist() == [2, 1, 0]
