"""Budgeted context metrics: a hand-worked case for each definition of "needed", forgetting that pays,
and the vectorized evaluator against the independent plain-Python scorer on random logs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.data.logs import empty_generalizations, empty_truth, make_dataset
from factmem.errors import InputError
from factmem.evaluation.charges import CHARGE_KINDS, ChargeCosts
from factmem.evaluation.context import ContextEvaluator, context_threshold
from factmem.evaluation.simulate import Schedule, kernel_beliefs, prepare, simulate

from . import scorer

DAY = 86400
T0 = 1_700_000_000


def dataset(mentions, truth=None):
    """A dataset from (ts, session, subject, predicate, object, kind) mentions and truth rows
    (subject, predicate, object, kind, valid_from, valid_to, relevant_until[, noise])."""
    ev = pd.DataFrame(mentions, columns=["ts", "session_id", "subject", "predicate", "object", "kind"])
    ev["message_id"] = [f"m{i}" for i in range(len(ev))]
    ev["note"] = ""
    msgs = ev[["session_id", "message_id", "ts"]].assign(speaker="u", text="")
    tr = empty_truth()
    if truth is not None:
        tr = pd.DataFrame([tuple(r) + (None,) * (8 - len(r)) for r in truth],
                          columns=["subject", "predicate", "object", "kind", "valid_from", "valid_to",
                                   "relevant_until", "noise"])
    return make_dataset(msgs, ev, tr, empty_generalizations(), {"start": T0 - DAY, "end": T0 + 60 * DAY})


def beliefs_of(P, params, every=DAY):
    grid = np.arange(P.start + every, P.end + 1, every, dtype=np.int64)
    return kernel_beliefs(P, [params], grid)[0]


def test_hand_worked_truth_case():
    # ada lives in paris (true until day 10), then rome (true from day 10); she likes tea (true).
    # Sessions: s1 at T0 mentions paris and tea; s2 at day 12 mentions nothing new about lives_in
    # (it mentions tea); s3 at day 20 mentions rome.
    ds = dataset(
        [(T0, "s1", "ada", "lives_in", "paris", "explicit"), (T0 + 1, "s1", "ada", "likes", "tea", "explicit"),
         (T0 + 12 * DAY, "s2", "ada", "likes", "tea", "explicit"),
         (T0 + 20 * DAY, "s3", "ada", "lives_in", "rome", "explicit")],
        [("ada", "lives_in", "paris", "explicit", T0 - DAY, T0 + 10 * DAY, None),
         ("ada", "lives_in", "rome", "explicit", T0 + 10 * DAY, None, None),
         ("ada", "likes", "tea", "explicit", T0 - DAY, None, None)])
    P = prepare(ds)
    never_forget = MemoryParams(decay_rate={"explicit": 0.0})
    ctx = ContextEvaluator(P, budgets=(1, 2), needed="truth")
    s = ctx.score(beliefs_of(P, never_forget), never_forget)
    # points: s1 at T0 (nothing needed yet: excluded), s2 at day 12 (needed: tea; context: paris, tea),
    # s3 at day 20 (needed: tea — rome is true but not yet mentioned; context: paris (stale), tea)
    assert s.summary(budget=2)["points"] == 2
    two = s.summary(budget=2)
    assert two["recall"] == 1.0 and two["context"] == 2.0 and two["stale"] == 1.0 and two["false"] == 0.0
    assert two["utility"] == pytest.approx(0.0)  # (1 hit - 1 stale) / 1 needed, at both points
    assert two["precision"] == pytest.approx(0.5)
    # budget 1: tea was reinforced later (day 12) than paris (T0) and both sit at the same confidence
    # at s2? tea 0.58 after its reinforcement, paris 0.4: tea first
    one = s.summary(budget=1)
    assert one["recall"] == 1.0 and one["stale"] == 0.0 and one["utility"] == 1.0


def test_a_fact_whose_truth_ends_at_its_last_point_is_stale_there():
    # ada lives in paris until exactly day 10, the start of the last session; she likes tea (true
    # throughout). paris is held at s1 (day 5: true, needed, a hit) and at s2 (day 10: no longer
    # true, stale): its flags change at its last point, a truth boundary on the point's instant.
    ds = dataset(
        [(T0, "s0", "ada", "lives_in", "paris", "explicit"), (T0 + 1, "s0", "ada", "likes", "tea", "explicit"),
         (T0 + 5 * DAY, "s1", "ada", "likes", "tea", "explicit"),
         (T0 + 10 * DAY, "s2", "ada", "likes", "tea", "explicit")],
        [("ada", "lives_in", "paris", "explicit", T0 - DAY, T0 + 10 * DAY, None),
         ("ada", "likes", "tea", "explicit", T0 - DAY, None, None)])
    P = prepare(ds)
    never_forget = MemoryParams(decay_rate={"explicit": 0.0})
    bel = beliefs_of(P, never_forget)
    ctx = ContextEvaluator(P, budgets=(2,), needed="truth")
    s = ctx.score(bel, never_forget).summary(budget=2)
    assert s["points"] == 2 and s["hits"] == 1.5 and s["stale"] == 0.5  # day 5: 2 hits; day 10: 1 hit, 1 stale
    want = _scored_independently(P, ctx, bel, never_forget, budget=2, costs=ChargeCosts().to_dict(), needed="truth")
    assert (s["hits"], s["stale"]) == (want["hits"], want["stale"])


def test_a_fact_is_needed_from_the_second_after_its_first_mention():
    # paris is mentioned at T0 (s1), tea at T0 + 1 (s2, a session one second later), tea again at
    # T0 + 2 (s3). Needed from truth means mentioned *before* the point: at s2 (t = T0 + 1) paris
    # is needed and tea (mentioned at that instant) is not; at s3 both are. s1 needs nothing yet.
    ds = dataset(
        [(T0, "s1", "ada", "lives_in", "paris", "explicit"), (T0 + 1, "s2", "ada", "likes", "tea", "explicit"),
         (T0 + 2, "s3", "ada", "likes", "tea", "explicit")],
        [("ada", "lives_in", "paris", "explicit", T0 - DAY, None, None),
         ("ada", "likes", "tea", "explicit", T0 - DAY, None, None)])
    P = prepare(ds)
    never_forget = MemoryParams(decay_rate={"explicit": 0.0})
    bel = beliefs_of(P, never_forget)
    ctx = ContextEvaluator(P, budgets=(5,), needed="truth")
    s = ctx.score(bel, never_forget).summary()
    assert s["points"] == 2 and s["needed"] == pytest.approx(1.5)  # 1 at s2, 2 at s3
    assert s["recall"] == 1.0 and s["context"] == pytest.approx(1.5)  # tea is in the memory only after T0 + 1
    want = _scored_independently(P, ctx, bel, never_forget, budget=5, costs=ChargeCosts().to_dict(), needed="truth")
    assert (s["points"], s["needed"], s["hits"]) == (want["points"], want["needed"], want["hits"])


def test_hand_worked_next_session_case():
    ds = dataset(
        [(T0, "s1", "ada", "lives_in", "paris", "explicit"), (T0 + 1, "s1", "ada", "likes", "tea", "explicit"),
         (T0 + 5 * DAY, "s2", "ada", "lives_in", "rome", "explicit"), (T0 + 5 * DAY + 1, "s2", "ada", "likes", "tea", "explicit"),
         (T0 + 9 * DAY, "s3", "ada", "likes", "jazz", "explicit")])
    P = prepare(ds)
    p = MemoryParams(decay_rate={"explicit": 0.0})
    ctx = ContextEvaluator(P, budgets=(5,), needed="next-session")
    s = ctx.score(beliefs_of(P, p), p)
    # s1 at T0: needed {paris, tea}, the memory is empty: utility 0.
    # s2 at day 5: needed {rome, tea}; context {paris, tea}: tea is a hit; paris is stale (s2 mentions
    # another object for lives_in): utility (1 - 1) / 2 = 0.
    # s3 at day 9: needed {jazz}; context {rome, tea}: no hit; likes is mentioned with another object,
    # so tea counts as stale ("likes" is single-valued by default): utility -1.
    out = s.summary()
    assert out["points"] == 3
    assert out["hits"] == pytest.approx(1 / 3) and out["stale"] == pytest.approx(2 / 3)
    assert out["utility"] == pytest.approx(-1 / 3) and out["recall"] == pytest.approx((0 + 0.5 + 0) / 3)
    # declared multi-valued, tea is no longer charged at s3
    q = p.replace(multi_valued_predicates={"likes"})
    out_multi = ContextEvaluator(P, budgets=(5,), needed="next-session").score(beliefs_of(P, q), q).summary()
    assert out_multi["stale"] == pytest.approx(1 / 3) and out_multi["utility"] == pytest.approx(0.0)


def test_archiving_a_stale_fact_raises_utility():
    """The objective can reward forgetting: the same memory, but one that lets a value no one
    mentions any more fall out of the context, scores higher."""
    ds = dataset(
        [(T0, "s1", "ada", "works_on", "apollo", "explicit"),
         (T0 + DAY, "s2", "ada", "likes", "tea", "explicit")]
        + [(T0 + d * DAY, f"s{d}", "ada", "likes", "tea", "explicit") for d in range(3, 60, 3)],
        [("ada", "works_on", "apollo", "explicit", T0 - DAY, T0 + 5 * DAY, None),
         ("ada", "likes", "tea", "explicit", T0 - DAY, None, None)])
    P = prepare(ds)
    keep = MemoryParams(decay_rate={"explicit": 0.0})
    forget = MemoryParams(decay_rate={"explicit": 0.2})  # apollo: 0.4 e^-0.2d < 0.05 after ~10 days
    ctx = ContextEvaluator(P, budgets=(5,), needed="truth")
    u_keep = ctx.score(beliefs_of(P, keep), keep).summary()
    u_forget = ctx.score(beliefs_of(P, forget), forget).summary()
    assert u_keep["stale"] > 0 and u_forget["stale"] < u_keep["stale"]
    assert u_forget["utility"] > u_keep["utility"]
    assert u_forget["recall"] == u_keep["recall"] == 1.0  # tea is re-mentioned often enough to stay


def test_the_four_charge_kinds_are_counted_apart_and_costed_apart():
    """At day 10 the context holds one needed fact and one of each kind: a value that changed (stale),
    an episode that is over (expired), a misstatement (false), and two true facts nobody needs
    (unneeded): a remark said in passing, and a fact true only since after it was last mentioned."""
    said = [(T0, "s0", "ada", p, o, "episodic" if p == "attends" else "explicit")
            for p, o in [("lives_in", "berlin"), ("attends", "concert"), ("drinks", "coffee"), ("noticed", "rain"),
                         ("likes", "tea"), ("works_on", "x")]]
    ds = dataset(said + [(T0 + 10 * DAY, "s10", "ada", "likes", "tea", "explicit")],
                 [("ada", "lives_in", "berlin", "explicit", T0 - DAY, T0 + 5 * DAY, None),
                  ("ada", "attends", "concert", "episodic", T0 - DAY, None, T0 + 3 * DAY),
                  ("ada", "drinks", "coffee", "explicit", T0, T0, None, "misstatement"),
                  ("ada", "noticed", "rain", "episodic", T0, None, T0, "irrelevant"),
                  ("ada", "likes", "tea", "explicit", T0 - DAY, None, None),
                  ("ada", "works_on", "x", "explicit", T0 + 2 * DAY, None, None)])
    P = prepare(ds)
    keep = MemoryParams(decay_rate=dict.fromkeys(("explicit", "user_preference", "episodic"), 0.0))
    bel = beliefs_of(P, keep)
    s = ContextEvaluator(P, budgets=(10,)).score(bel, keep).summary()
    assert s["points"] == 1 and s["needed"] == 1 and s["hits"] == 1 and s["context"] == 6
    assert (s["stale"], s["expired"], s["false"], s["unneeded"]) == (1, 1, 1, 2)
    assert s["charged"] == 3 and s["utility"] == 1 - 3
    costly = ContextEvaluator(P, budgets=(10,), costs="stale=2,expired=0,false=3,unneeded=0.5").score(bel, keep)
    assert costly.summary()["charged"] == 2 + 0 + 3 + 1 and costly.summary()["utility"] == 1 - 6
    assert ContextEvaluator(P, budgets=(10,)).costs == ChargeCosts()
    ev = ds.events
    events = [dict(ts=int(a), subject=b, predicate=c, object=d, session_id=e)
              for a, b, c, d, e in zip(ev["ts"], ev["subject"], ev["predicate"], ev["object"], ev["session_id"])]
    want = scorer.context_scores([("s10", "ada", T0 + 10 * DAY)], _as_dicts(P, bel), _truth_dicts(P), events,
                                 threshold=context_threshold(keep), budget=10, costs=ChargeCosts().to_dict(),
                                 needed="truth")
    assert {k: want[k] for k in CHARGE_KINDS} == {k: s[k] for k in CHARGE_KINDS}  # the scorer sees the four too


def test_charge_costs_parse_and_reject():
    assert ChargeCosts.parse("") == ChargeCosts() and ChargeCosts.parse(" unneeded = 0.5 ").unneeded == 0.5
    assert ChargeCosts.parse(str(ChargeCosts(2, 0, 1.5, 0.25))) == ChargeCosts(2, 0, 1.5, 0.25)
    for bad, msg in [("stale", "KIND=NUMBER"), ("stale=x", "not a number"), ("stale=1,stale=2", "twice"),
                     ("false=-1", "cost false"), ("unneeded=inf", "cost unneeded")]:
        with pytest.raises(InputError, match=msg):
            ChargeCosts.parse(bad)


def test_the_context_threshold_is_the_stricter_of_the_two():
    assert context_threshold(MemoryParams(archive_threshold=0.2, retrieval_threshold=0.05)) == 0.2
    assert context_threshold(MemoryParams(archive_threshold=0.0, retrieval_threshold=0.1)) == 0.1


def test_bad_settings():
    P = prepare(generate("tiny", seed=1))
    with pytest.raises(InputError, match="budgets"):
        ContextEvaluator(P, budgets=(0,))
    with pytest.raises(InputError, match="needed"):
        ContextEvaluator(P, needed="tomorrow")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="cost stale"):
        ContextEvaluator(P, costs={"stale": -1})
    with pytest.raises(InputError, match="KIND=NUMBER"):
        ContextEvaluator(P, costs="old=1")
    with pytest.raises(InputError, match="unknown kind"):
        ContextEvaluator(P, costs={"wrong": 1.0})
    d = P.dataset
    no_truth = prepare(make_dataset(d.messages, d.events, empty_truth(), empty_generalizations(), d.scenario))
    with pytest.raises(InputError, match="truth"):
        ContextEvaluator(no_truth, needed="truth")
    assert ContextEvaluator(no_truth).needed_mode == "next-session"


def test_sampling_points_is_seeded_and_bounded():
    P = prepare(generate("tiny", seed=2))
    full = ContextEvaluator(P)
    a = ContextEvaluator(P, max_points_per_subject=3, seed=1)
    b = ContextEvaluator(P, max_points_per_subject=3, seed=1)
    assert a.points.equals(b.points)
    assert a.points.groupby("subject").size().max() <= 3 < full.points.groupby("subject").size().max()
    assert a.sampled_from == len(full.points)


def _as_dicts(P, beliefs):
    tri = P.triples
    b = beliefs.reset_index(drop=True)
    codes = b["triple"].to_numpy()
    return [dict(subject=tri[c][0], predicate=tri[c][1], object=tri[c][2], start=int(r.start), end=int(r.end),
                 reason=int(r.reason), confidence=float(r.confidence), rate=float(r.rate), fact=int(r.fact))
            for c, r in zip(codes, b.itertuples(index=False))]


def _truth_dicts(P):
    t = P.dataset.truth

    def bound(v):
        return None if pd.isna(v) else int(v)

    return [dict(subject=s, predicate=p, object=o, valid_from=int(f), valid_to=bound(a), relevant_until=bound(b),
                 noise=None if pd.isna(n) else n)
            for s, p, o, f, a, b, n in zip(t["subject"], t["predicate"], t["object"], t["valid_from"], t["valid_to"],
                                           t["relevant_until"], t["noise"])]


def _scored_independently(P, ctx, beliefs, params, *, budget, costs, needed, multi_valued=frozenset()):
    """The independent scorer's summary of ``beliefs`` at the evaluator's points."""
    ev = P.dataset.events
    events = [dict(ts=int(a), subject=b, predicate=c, object=d, session_id=e)
              for a, b, c, d, e in zip(ev["ts"], ev["subject"], ev["predicate"], ev["object"], ev["session_id"])]
    points = [(r.session, ctx.subjects[r.subject], int(r.t)) for r in ctx.points.itertuples(index=False)]
    return scorer.context_scores(points, _as_dicts(P, beliefs), _truth_dicts(P), events,
                                 threshold=context_threshold(params), budget=budget, costs=costs, needed=needed,
                                 multi_valued=multi_valued)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), rate=st.sampled_from([0.0, 0.02, 0.3, 2.0]),
       thr=st.sampled_from([0.0, 0.05, 0.4]), gain=st.sampled_from([0.3, 1.0]),
       budget=st.sampled_from([1, 3, 10]),
       costs=st.fixed_dictionaries({k: st.sampled_from([0.0, 1.0, 2.5]) for k in CHARGE_KINDS}),
       needed=st.sampled_from(["truth", "next-session"]), multi=st.booleans())
def test_evaluator_equals_the_independent_scorer(seed, rate, thr, gain, budget, costs, needed, multi):
    ds = generate("tiny", seed=seed % 50)
    P = prepare(ds)
    mvp = frozenset(ds.multi_valued_predicates) if multi else frozenset()
    p = MemoryParams(decay_rate={"explicit": rate, "user_preference": rate / 2}, archive_threshold=thr,
                     reinforce_gain=gain, multi_valued_predicates=mvp)
    bel = beliefs_of(P, p)
    ctx = ContextEvaluator(P, budgets=(budget,), costs=costs, needed=needed, max_points_per_subject=12,
                           seed=seed)
    got = ctx.score(bel, p).summary()
    want = _scored_independently(P, ctx, bel, p, budget=budget, costs=costs, needed=needed, multi_valued=mvp)
    assert got["points"] == want["points"]
    for key in ("utility", "recall", "precision", "hits", "charged", *CHARGE_KINDS, "context", "needed"):
        assert (math.isnan(got[key]) and math.isnan(want[key])) or got[key] == pytest.approx(want[key], abs=1e-12), key
    assert (math.isnan(got["log_loss"]) and math.isnan(want["log_loss"])) or \
        got["log_loss"] == pytest.approx(want["log_loss"], rel=1e-12)


def test_the_store_and_the_kernel_give_the_same_context_scores():
    ds = generate("tiny", seed=4)
    P = prepare(ds)
    p = MemoryParams(multi_valued_predicates=ds.multi_valued_predicates, decay_rate={"explicit": 0.1})
    sched = Schedule()
    run = simulate(P, p, sched)
    grid = sched.consolidations(P.start, P.end)
    kern = kernel_beliefs(P, [p], grid)[0]
    ctx = ContextEvaluator(P, budgets=(3, 20))
    a, b = ctx.score(run.beliefs, p), ctx.score(kern, p)
    run.store.close()
    assert np.array_equal(a.sums, b.sums)


def test_each_budget_scores_the_same_whatever_the_others_and_their_order():
    """The kernel walks a point's ranks once and takes each budget's counts at its last rank, in the
    budgets' ascending order: given in any order, alongside any others, a budget scores as alone."""
    P = prepare(generate("tiny", seed=5))
    p = MemoryParams(multi_valued_predicates=P.dataset.multi_valued_predicates)
    beliefs = beliefs_of(P, p)
    together = ContextEvaluator(P, budgets=(20, 3, 8)).score(beliefs, p)
    for k in (20, 3, 8):
        alone = ContextEvaluator(P, budgets=(k,)).score(beliefs, p)
        assert together.summary(budget=k) == alone.summary(budget=k)
    assert together.summary(budget=3)["context"] < together.summary(budget=20)["context"]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 3000), near_share=st.sampled_from([0.0, 0.5, 0.95, 1.0]))
def test_the_context_log_loss_equals_a_sum_of_logs(seed, n, near_share):
    """The kernel multiplies the facts' ``f`` (``p`` or ``1 − p``) where ``f <= 0.989`` and takes the
    product's log once per budget, renormalizing before it underflows, and adds the others' logs one by
    one (:func:`~factmem.evaluation.context_kernels.context_sums`): on one point's context of up to 3000
    facts, most of them of a small loss each (``f`` > 0.989) or not, true or not, every budget's loss
    equals the sum of each fact's ``−log f`` (``math.fsum``) to 1e-12, relative."""
    from factmem.evaluation.context_kernels import NO_BREAKS, SLOTS, TRUE, context_sums
    from factmem.evaluation.context_scores import FIELD_INDEX, FIELDS

    rng = np.random.default_rng(seed)
    true = rng.random(n) < 0.7
    near = rng.random(n) < near_share  # a small loss: p just below 1 when true, just above 0 when not
    small = rng.uniform(1e-5, 0.011, n)
    value = np.where(near, np.where(true, 1.0 - small, small), rng.uniform(0.0, 1.0, n))
    budgets = np.array(sorted({1, 5, 64, n, max(1, n // 3)}), np.int64)
    flags = (1 + true * TRUE).astype(np.int8)  # code 1 (a hit), true and relevant now or not
    sums = np.zeros((1, len(budgets), len(FIELDS)))
    context_sums(np.arange(n, dtype=np.int64)[None, :], value[None, :], np.array([n]), flags, np.zeros(n, np.int64),
                 np.zeros(0, np.int64), np.zeros(0, bool), False, NO_BREAKS, np.zeros(1, np.int64), budgets, 1e-4,
                 np.array([n], np.float64), np.zeros(1, np.int64), np.zeros(4), SLOTS, sums)
    eps = 1e-4
    clipped = np.clip(value, eps, 1 - eps)
    for b, k in enumerate(budgets):
        want = math.fsum(-math.log(q) if y else -math.log1p(-q) for q, y in zip(clipped[:k], true[:k]))
        assert sums[0, b, FIELD_INDEX["log_loss"]] == pytest.approx(want, rel=1e-12, abs=0), int(k)
