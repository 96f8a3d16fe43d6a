"""The checkpoint metrics (``factmem.evaluation.metrics``) against the independent plain-Python scorer
(tests/scorer.py) on random logs: generated ones (``generate("tiny", seed=...)``) and hand-drawn
streams that put times on the boundaries (events at checkpoint and consolidation instants, truth
that ends exactly at a mention, overlapping and touching truth rows of one triple, never-true rows,
timestamps before 1970 and after 2100), scored from both engines' belief states (the store's
evidence log through ``simulate``, the vectorized kernel)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.data.logs import empty_generalizations, make_dataset
from factmem.evaluation.context import ContextEvaluator, context_threshold
from factmem.evaluation.metrics import Evaluator
from factmem.evaluation.simulate import Schedule, kernel_beliefs, prepare, simulate

from . import scorer
from .test_context import _as_dicts, _truth_dicts

DAY = 86400


def plain(P, beliefs: pd.DataFrame) -> tuple[list[dict], list[dict], list[tuple[int, int]]]:
    """Belief states, truth rows and mentions as plain Python values for the scorer."""
    b = beliefs.reset_index(drop=True)
    states = [dict(triple=int(r.triple), kind=int(r.kind), start=int(r.start), end=int(r.end), reason=int(r.reason),
                   confidence=float(r.confidence), rate=float(r.rate)) for r in b.itertuples(index=False)]
    t = P.truth

    def bound(v):
        return None if pd.isna(v) else int(v)

    truth = [dict(triple=int(a), kind=int(k), valid_from=int(f), valid_to=bound(vt), relevant_until=bound(ru))
             for a, k, f, vt, ru in zip(t["triple"], t["kind"], t["valid_from"], t["valid_to"], t["relevant_until"])]
    mentions = list(zip(P.mentions["triple"].astype(int).tolist(), P.mentions["ts"].astype(int).tolist()))
    return states, truth, mentions


def same(got, want, what) -> None:
    if isinstance(want, float) and math.isnan(want):
        assert isinstance(got, float) and math.isnan(got), (what, got, want)
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (what, got, want)
    else:
        assert got == want, (what, got, want)


def assert_agrees(ev, want: dict) -> None:
    """Every number an Evaluation reports equals the scorer's."""
    c = ev.checkpoints
    assert c["t"].tolist() == [r["t"] for r in want["checkpoints"]]
    for key in ("believed", "true_believed", "needed", "stale", "lost", "precision", "recall", "log_loss"):
        for i, (g, w) in enumerate(zip(c[key].tolist(), [r[key] for r in want["checkpoints"]])):
            same(g, w, (key, i))
    assert set(ev.summary) == set(want["summary"]), set(ev.summary) ^ set(want["summary"])
    for key, w in want["summary"].items():
        same(ev.summary[key], w, key)
    lost = ev.lost.to_dict("records")
    assert [(r["triple"], r["archived_at"], r["needed_again_at"], r["why"]) for r in lost] == \
           [(r["triple"], r["archived_at"], r["needed_again_at"], r["why"]) for r in want["lost"]]
    rel = ev.reliability.to_dict("records")
    assert [(r["kind"], r["bin"], r["n"]) for r in rel] == [(r["kind"], r["bin"], r["n"]) for r in want["reliability"]]
    for g, w in zip(rel, want["reliability"]):
        same(g["p_mean"], w["p_mean"], ("reliability p", w["kind"], w["bin"]))
        same(g["y_mean"], w["y_mean"], ("reliability y", w["kind"], w["bin"]))
    by_kind = ev.calibration_by_kind.to_dict("records")
    assert [r["kind"] for r in by_kind] == [r["kind"] for r in want["by_kind"]]
    for g, w in zip(by_kind, want["by_kind"]):
        for key in ("samples", "held", "log_loss", "brier", "rmse_bins", "auc"):
            same(g[key], w[key], (w["kind"], key))


def score_both(P, beliefs, checkpoints, threshold, *, max_samples=2_000_000):
    got = Evaluator(P.truth, P.mentions, checkpoints, max_samples=max_samples).score(beliefs, threshold)
    want = scorer.checkpoint_scores(*plain(P, beliefs), [int(t) for t in checkpoints], threshold,
                                    max_samples=max_samples)
    return got, want


# -- generated logs ---------------------------------------------------------------------------------------

rates = st.sampled_from([0.0, 0.02, 0.1, 0.3, 2.0])


@settings(max_examples=100)
@given(seed=st.integers(0, 10_000), explicit=rates, episodic=rates, thr=st.sampled_from([0.0, 0.05, 0.2, 0.4]),
       retrieval=st.sampled_from([0.0, 0.05, 0.3]), gain=st.sampled_from([0.3, 1.0]),
       base=st.sampled_from(["stored", "effective"]), multi=st.booleans(), every=st.sampled_from([24.0, 7.0]),
       max_samples=st.sampled_from([2_000_000, 3000]))
def test_metrics_equal_the_scorer_on_generated_logs(seed, explicit, episodic, thr, retrieval, gain, base, multi, every,
                                                     max_samples):
    ds = generate("tiny", seed=seed % 200)
    P = prepare(ds)
    p = MemoryParams(decay_rate={"explicit": explicit, "episodic": episodic}, archive_threshold=thr,
                     retrieval_threshold=retrieval, reinforce_gain=gain, reinforce_base=base,
                     multi_valued_predicates=ds.multi_valued_predicates if multi else frozenset())
    sched = Schedule(consolidate_every_hours=every)
    beliefs = kernel_beliefs(P, [p], sched.consolidations(P.start, P.end))[0]
    got, want = score_both(P, beliefs, sched.checkpoints(P.start, P.end), retrieval, max_samples=max_samples)
    assert_agrees(got, want)


# -- hand-drawn streams -------------------------------------------------------------------------------------

BASES = [-2_208_988_800, -3 * DAY, 1_700_000_000, 4_102_444_800]  # 1900, just before 1970, 2023, 2100
SUBJECTS, PREDICATES, OBJECTS = ["ada", "bob"], ["likes", "lives_in", "saw"], ["x", "y"]
TRIPLES = [(s, p, o) for s in SUBJECTS for p in PREDICATES for o in OBJECTS]
# offsets (seconds from the log's start) that land on days, half days and just off them
OFFSETS = st.one_of(st.integers(0, 12).map(lambda d: d * DAY), st.integers(0, 24).map(lambda h: h * DAY // 2),
                    st.integers(1, 12 * DAY))


def small_dataset(mentions, truth, start: int, days: int):
    """A dataset from mentions (ts, subject, predicate, object, kind), one session per day, and truth
    rows (subject, predicate, object, kind, valid_from, valid_to, relevant_until[, noise])."""
    ev = pd.DataFrame(mentions, columns=["ts", "subject", "predicate", "object", "kind"])
    ev.insert(1, "session_id", [f"s{(ts - start) // DAY}" for ts in ev["ts"]])
    ev["message_id"] = [f"m{i}" for i in range(len(ev))]
    ev["note"] = ""
    msgs = ev[["session_id", "message_id", "ts"]].assign(speaker="user", text="")
    tr = pd.DataFrame([tuple(r) + (None,) * (8 - len(r)) for r in truth],
                      columns=["subject", "predicate", "object", "kind", "valid_from", "valid_to", "relevant_until",
                               "noise"]).astype({"valid_to": "Int64", "relevant_until": "Int64"})
    return make_dataset(msgs, ev, tr, empty_generalizations(), {"start": start, "end": start + days * DAY})


@st.composite
def hand_logs(draw):
    """A small dataset: mentions at drawn offsets, truth rows per mentioned triple (none, or several:
    overlapping, touching, empty; now and then a remark said in passing: true from its mention on,
    relevant only then, ``noise = irrelevant``), the mentions' kind usually their truth's."""
    base = draw(st.sampled_from(BASES))
    pool = draw(st.lists(st.sampled_from(TRIPLES), min_size=1, max_size=5, unique=True))  # a few, mentioned often
    mentions = draw(st.lists(st.tuples(OFFSETS, st.sampled_from(pool)), min_size=1, max_size=25))
    kinds = {tr: draw(st.sampled_from(KINDS[:3])) for _, tr in mentions}
    truth = []
    for tr, kind in kinds.items():
        truth_kind = draw(st.sampled_from([kind] * 3 + list(KINDS)))
        for _ in range(draw(st.integers(0, 3))):
            start = draw(st.one_of(st.just(-5 * DAY), st.sampled_from([o for o, t in mentions if t == tr]), OFFSETS))
            length = draw(st.one_of(st.none(), st.just(0), OFFSETS))
            relevant = draw(st.one_of(st.none(), OFFSETS)) if truth_kind == "episodic" else None
            if draw(st.integers(0, 5)) == 0:
                truth.append((*tr, truth_kind, base + start, None, base + start, "irrelevant"))
                continue
            truth.append((*tr, truth_kind, base + start, None if length is None else base + start + length,
                          None if relevant is None else base + start + relevant))
    return small_dataset([(base + o, *tr, kinds[tr]) for o, tr in mentions], truth, base, draw(st.integers(6, 16)))


# pinned boundary cases (each found a bug: see the examples on the test below)
T = 1_700_000_000
LOST_AT_THE_INSTANT = small_dataset(  # archived by the day-2 consolidation, mentioned again at day 2
    [(T, "ada", "likes", "x", "explicit"), (T + 2 * DAY, "ada", "likes", "x", "explicit")],
    [("ada", "likes", "x", "explicit", T - DAY, None, None)], T, 5)
OVERLAPPING_TRUTH = small_dataset(  # two rows of one triple that overlap: one stretch of truth
    [(T, "ada", "likes", "x", "explicit"), (T + 3 * DAY, "ada", "likes", "y", "explicit")],
    [("ada", "likes", "x", "explicit", T - DAY, None, None), ("ada", "likes", "x", "explicit", T - DAY, T + 4 * DAY, None),
     ("ada", "likes", "y", "explicit", T + DAY, T + 6 * DAY, None), ("ada", "likes", "y", "explicit", T + 2 * DAY, None, None)],
    T, 8)
UNKNOWN_TRIPLE_HELD = small_dataset(  # x has no truth row and is held; y (a misstatement) is not
    [(T - 3 * DAY, "ada", "likes", "x", "explicit"), (T - 3 * DAY, "ada", "likes", "y", "explicit"),
     (T - 3 * DAY, "ada", "likes", "x", "explicit")],
    [("ada", "likes", "y", "explicit", T - 3 * DAY, T - 3 * DAY, None)], T - 3 * DAY, 3)


hand_params = st.builds(
    lambda rate, thr, retrieval, gain, multi: MemoryParams(
        decay_rate={"explicit": rate, "user_preference": rate / 2}, archive_threshold=thr,
        retrieval_threshold=retrieval, reinforce_gain=gain, multi_valued_predicates=multi),
    rate=st.sampled_from([0.0, 0.3, 1.0, 2.0]), thr=st.sampled_from([0.0, 0.05, 0.2, 0.4]),
    retrieval=st.sampled_from([0.0, 0.05, 0.4, 0.5]), gain=st.sampled_from([0.3, 1.0]),
    multi=st.sampled_from([frozenset(), frozenset({"likes"})]))


def coverage(P, want) -> dict[str, bool]:
    """Which edges an example reaches (shown by pytest --hypothesis-show-statistics)."""
    t = P.truth.sort_values(["triple", "valid_from"])
    end = t["valid_to"].astype("Float64").fillna(np.inf).to_numpy(float)
    same_triple = t["triple"].to_numpy()[1:] == t["triple"].to_numpy()[:-1]
    mention_ts = set(P.mentions["ts"].tolist())
    return {
        "lost": want["summary"]["lost"] > 0,
        "lost, mentioned again at the archival instant": any(r["archived_at"] == r["needed_again_at"] for r in want["lost"]),
        "archived at a mention instant": any(r["archived_at"] in mention_ts for r in want["lost"]),
        "overlapping truth rows": bool((same_triple & (t["valid_from"].to_numpy()[1:] < end[:-1])).any()),
        "stale": want["summary"]["stale"] > 0,
        "calibration stride > 1": want["summary"]["calibration_stride"] > 1,
        "before 1970": P.start < 0,
    }


@settings(max_examples=200)
@example(ds=LOST_AT_THE_INSTANT, p=MemoryParams(decay_rate={"explicit": 2.0}), every=24.0, evaluate=24.0,
         max_samples=2_000_000)
@example(ds=OVERLAPPING_TRUTH, p=MemoryParams(decay_rate={"explicit": 0.3}), every=24.0, evaluate=24.0,
         max_samples=2_000_000)
@example(ds=UNKNOWN_TRIPLE_HELD, p=MemoryParams(decay_rate={"explicit": 0.0}, archive_threshold=0.0), every=24.0,
         evaluate=24.0, max_samples=2_000_000)
@given(ds=hand_logs(), p=hand_params, every=st.sampled_from([24.0, 12.0, 5.0]), evaluate=st.sampled_from([24.0, 6.0]),
       max_samples=st.sampled_from([2_000_000, 40]))
def test_metrics_equal_the_scorer_on_hand_drawn_streams(ds, p, every, evaluate, max_samples):
    P = prepare(ds)
    sched = Schedule(consolidate_every_hours=every, evaluate_every_hours=evaluate)
    beliefs = kernel_beliefs(P, [p], sched.consolidations(P.start, P.end))[0]
    got, want = score_both(P, beliefs, sched.checkpoints(P.start, P.end), p.retrieval_threshold, max_samples=max_samples)
    assert_agrees(got, want)
    for name, hit in coverage(P, want).items():
        if hit:
            event(name)


@settings(max_examples=40)
@given(ds=hand_logs(), p=hand_params, every=st.sampled_from([24.0, 5.0]))
def test_the_store_replay_scores_equal_the_scorer(ds, p, every):
    """simulate(): belief states read back from a FactStore's evidence log, scored; the scorer agrees."""
    P = prepare(ds)
    sched = Schedule(consolidate_every_hours=every)
    run = simulate(P, p, sched, track=0)
    try:
        want = scorer.checkpoint_scores(*plain(P, run.beliefs), sched.checkpoints(P.start, P.end).tolist(),
                                        p.retrieval_threshold)
        assert_agrees(run.evaluation, want)
    finally:
        run.store.close()


def test_parts_are_scored_as_if_alone():
    """score_parts: each part's scores equal the scorer's on that part's checkpoints alone."""
    ds = generate("tiny", seed=5)
    P = prepare(ds)
    p = MemoryParams(multi_valued_predicates=ds.multi_valued_predicates, decay_rate={"explicit": 0.3})
    sched = Schedule()
    cps = sched.checkpoints(P.start, P.end)
    beliefs = kernel_beliefs(P, [p], sched.consolidations(P.start, P.end))[0]
    cut = len(cps) * 2 // 3
    parts = Evaluator(P.truth, P.mentions, cps).score_parts(beliefs, 0.05, {"train": (0, cut), "test": (cut, len(cps))})
    states, truth, mentions = plain(P, beliefs)
    for name, (a, b) in {"train": (0, cut), "test": (cut, len(cps))}.items():
        assert_agrees(parts[name], scorer.checkpoint_scores(states, truth, mentions, cps[a:b].tolist(), 0.05))
    assert parts["test"].summary["lost"] > 0  # the lost window of a later part is exercised


@settings(max_examples=100)
@example(ds=OVERLAPPING_TRUTH, p=MemoryParams(decay_rate={"explicit": 0.0}), budget=1, needed="truth")
@given(ds=hand_logs(), p=hand_params, budget=st.sampled_from([1, 2, 10]), needed=st.sampled_from(["truth", "next-session"]))
def test_context_metrics_equal_the_scorer_on_hand_drawn_streams(ds, p, budget, needed):
    """The budgeted context metrics on the same boundary-heavy streams (overlapping truth rows,
    sessions starting at consolidation instants, timestamps before 1970)."""
    P = prepare(ds)
    if needed == "truth" and not len(ds.truth):
        needed = "next-session"
    sched = Schedule()
    beliefs = kernel_beliefs(P, [p], sched.consolidations(P.start, P.end))[0]
    costs = {"stale": 1.5, "expired": 0.75, "false": 2.0, "unneeded": 0.25}
    ctx = ContextEvaluator(P, budgets=(budget,), costs=costs, needed=needed)
    got = ctx.score(beliefs, p).summary()
    ev = ds.events
    events = [dict(ts=int(a), subject=b, predicate=c, object=d, session_id=e)
              for a, b, c, d, e in zip(ev["ts"], ev["subject"], ev["predicate"], ev["object"], ev["session_id"])]
    points = [(r.session, ctx.subjects[r.subject], int(r.t)) for r in ctx.points.itertuples(index=False)]
    want = scorer.context_scores(points, _as_dicts(P, beliefs), _truth_dicts(P), events, threshold=context_threshold(p),
                                 budget=budget, costs=costs, needed=needed, multi_valued=p.multi_valued_predicates)
    assert got["points"] == want["points"]
    for key in ("utility", "recall", "precision", "hits", "charged", "stale", "expired", "false", "unneeded", "context",
                "needed", "log_loss"):
        same(got[key], want[key], key)
