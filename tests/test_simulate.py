"""Simulation: the store-driven replay and the vectorized kernel agree exactly; abstraction in the loop;
cardinality measures and costs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from factmem.abstraction.oracle import OracleProvider
from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.errors import InputError
from factmem.evaluation.cardinality import measure_cardinality, suggest_multi_valued, supersession_costs
from factmem.evaluation.simulate import Schedule, kernel_beliefs, prepare, simulate

COLS = ["triple", "kind", "start", "end", "reason", "confidence", "rate"]


@pytest.fixture(scope="module")
def tiny():
    return prepare(generate("tiny", seed=11))


def canon(b: pd.DataFrame) -> pd.DataFrame:
    return b[COLS].sort_values(["triple", "start", "end"], kind="stable").reset_index(drop=True)


PARAMS = [
    MemoryParams(),
    MemoryParams(reinforce_base="effective", decay_rate={"episodic": 0.8}),
    MemoryParams(archive_threshold=0.2, reinforce_gain=0.6, retrieval_threshold=0.3),
    MemoryParams(decay_rate={"explicit": 0.0, "user_preference": 0.3}, initial_confidence={"explicit": 0.9}),
    # per-predicate rates: a fast explicit predicate, a never-decaying one, an episodic one slowed down
    MemoryParams(decay_rate_by_predicate={"works_on": 0.4, "born_in": 0.0, "attended": 0.01, "absent": 9.0},
                 archive_threshold=0.1),
]
IDS = ["seed", "effective", "high-threshold", "odd-rates", "per-predicate"]


@pytest.mark.parametrize("params", PARAMS, ids=IDS)
@pytest.mark.parametrize("every", [24.0, 7.0])
def test_kernel_equals_store_replay(tiny, params, every):
    params = params.replace(multi_valued_predicates=tiny.dataset.multi_valued_predicates)
    sched = Schedule(consolidate_every_hours=every, evaluate_every_hours=24)
    run = simulate(tiny, params, sched)
    grid = sched.consolidations(tiny.start, tiny.end)
    kb = kernel_beliefs(tiny, [params], grid)[0]
    pd.testing.assert_frame_equal(canon(run.beliefs), canon(kb), check_exact=True)
    again = tiny.evaluator(sched.checkpoints(tiny.start, tiny.end)).score(kb, params.retrieval_threshold)
    assert again.summary == run.summary
    pd.testing.assert_frame_equal(again.checkpoints, run.checkpoints)
    run.store.close()


def test_many_parameter_sets_at_once_equal_one_at_a_time(tiny):
    grid = Schedule().consolidations(tiny.start, tiny.end)
    ps = [p.replace(multi_valued_predicates=tiny.dataset.multi_valued_predicates) for p in PARAMS]
    together = kernel_beliefs(tiny, ps, grid)
    for p, b in zip(ps, together):
        pd.testing.assert_frame_equal(canon(b), canon(kernel_beliefs(tiny, [p], grid)[0]), check_exact=True)


def test_scoring_sets_that_share_rows_equals_scoring_each_alone(tiny):
    """The evaluator reuses what depends only on the rows' triple and start while the same arrays come
    again (parameter sets replayed together share them); the scores equal a fresh evaluator's, and
    those of the same beliefs as a DataFrame (no sharing)."""
    from factmem.evaluation.metrics import Evaluator
    from factmem.evaluation.simulate import kernel_belief_arrays

    sched = Schedule()
    grid, cps = sched.consolidations(tiny.start, tiny.end), sched.checkpoints(tiny.start, tiny.end)
    ps = [p.replace(multi_valued_predicates=tiny.dataset.multi_valued_predicates) for p in PARAMS]
    arrays = kernel_belief_arrays(tiny, ps, grid)
    assert arrays[0]["triple"] is arrays[1]["triple"]  # what makes the reuse possible
    shared = Evaluator(tiny.truth, tiny.mentions, cps)
    parts = {"first": (0, len(cps) // 2), "second": (len(cps) // 2, len(cps))}
    for p, b in zip(ps, arrays):
        got = shared.score_parts(b, p.retrieval_threshold, parts)
        alone = Evaluator(tiny.truth, tiny.mentions, cps).score_parts(b, p.retrieval_threshold, parts)
        frame = Evaluator(tiny.truth, tiny.mentions, cps).score_parts(pd.DataFrame(b), p.retrieval_threshold, parts)
        for name in parts:
            for other in (alone, frame):
                assert got[name].summary == other[name].summary
                pd.testing.assert_frame_equal(got[name].checkpoints, other[name].checkpoints, check_exact=True)
                pd.testing.assert_frame_equal(got[name].lost, other[name].lost, check_exact=True)
    # the context scorer likewise
    from factmem.evaluation.context import ContextEvaluator

    ctx = ContextEvaluator(tiny, budgets=(3, 20))
    for p, b in zip(ps, arrays):
        got = ctx.score(b, p)
        for other in (ContextEvaluator(tiny, budgets=(3, 20)).score(b, p),
                      ContextEvaluator(tiny, budgets=(3, 20)).score(pd.DataFrame(b), p)):
            assert np.array_equal(got.sums, other.sums)


def test_per_predicate_rates_in_a_batch_of_parameter_sets(tiny):
    """Sets with different per-predicate tables (one overriding what another leaves to the kind) in
    one kernel call: each equals its own store replay, and the rates are the predicate's or the kind's."""
    mvp = tiny.dataset.multi_valued_predicates
    ps = [MemoryParams(multi_valued_predicates=mvp),
          MemoryParams(multi_valued_predicates=mvp, decay_rate_by_predicate={"works_on": 0.002}),
          MemoryParams(multi_valued_predicates=mvp, decay_rate_by_predicate={"lives_in": 1.5, "watched": 0.0},
                       reinforce_base="effective"),
          MemoryParams(multi_valued_predicates=mvp, decay_rate={"explicit": 0.2},
                       decay_rate_by_predicate={"works_on": 0.2})]  # equal to its kind's: same beliefs as by kind
    sched = Schedule()
    grid = sched.consolidations(tiny.start, tiny.end)
    together = kernel_beliefs(tiny, ps, grid)
    predicate = pd.Series(tiny.triples.get_level_values(1))
    for p, b in zip(ps, together):
        run = simulate(tiny, p, sched)
        pd.testing.assert_frame_equal(canon(run.beliefs), canon(b), check_exact=True)
        run.store.close()
        pred = predicate.iloc[b["triple"].to_numpy()].to_numpy()
        kind_rate = p.decay_rate.as_array()[b["kind"].to_numpy()]
        want = [p.decay_rate_by_predicate.get(x, r) for x, r in zip(pred, kind_rate)]
        assert b["rate"].tolist() == want
    assert (together[1]["rate"][predicate.iloc[together[1]["triple"]].to_numpy() == "works_on"] == 0.002).all()
    pd.testing.assert_frame_equal(canon(together[3]), canon(kernel_beliefs(
        tiny, [MemoryParams(multi_valued_predicates=mvp, decay_rate={"explicit": 0.2})], grid)[0]), check_exact=True)
    # the beliefs do change: works_on decaying 25x slower keeps more of its facts believed
    assert not canon(together[0]).equals(canon(together[1]))


def test_simulation_scores_are_sane(tiny):
    run = simulate(tiny, MemoryParams(multi_valued_predicates=tiny.dataset.multi_valued_predicates))
    c = run.checkpoints
    assert len(c) == len(Schedule().checkpoints(tiny.start, tiny.end))
    assert ((c["precision"].dropna() >= 0) & (c["precision"].dropna() <= 1)).all()
    assert (c["believed"] >= c["true_believed"]).all() and (c["lost"].diff().dropna() >= 0).all()
    s = run.summary
    assert 0 < s["log_loss"] < 5 and 0.5 < s["auc"] <= 1 and 0 <= s["brier"] <= 1
    assert not run.trajectories.empty and run.trajectories["fact_id"].nunique() <= 6
    # a memory that never forgets and never supersedes believes more and recalls at least as much
    keep = simulate(tiny, MemoryParams(archive_threshold=0.0, decay_rate={k: 0.0 for k in
                                       ("explicit", "user_preference", "episodic", "derived")},
                                       multi_valued_predicates=tiny.dataset.multi_valued_predicates))
    assert keep.summary["believed"] > s["believed"] and keep.summary["lost"] == 0
    assert keep.summary["recall"] >= s["recall"]
    run.store.close()
    keep.store.close()


def test_abstraction_in_the_loop(tiny):
    # half the answers carry an invented generalization (absent from the truth)
    oracle = OracleProvider(tiny.dataset.generalizations, facts_truth=tiny.dataset.truth, seed=1,
                            error_rates={"invented": 0.5})
    sched = Schedule(abstract_every_days=7)
    run = simulate(tiny, MemoryParams(multi_valued_predicates=tiny.dataset.multi_valued_predicates,
                                      prune_min_reinforcements=1), sched, provider=oracle)
    p = run.passes
    assert len(p) == len(sched.abstractions(tiny.start, tiny.end))
    assert {"created", "reinforced", "skipped", "failed", "pruned", "believed_before", "believed_after"} <= set(p.columns)
    assert p["created"].sum() > 0 and p["pruned"].sum() > 0
    assert (p["believed_after"] <= p["believed_before"] + p["created"]).all()
    derived = run.store.query("SELECT * FROM memory_facts WHERE kind = 'derived'")
    assert len(derived) > 0
    # derived facts that match the planted generalizations count as true; the others (the oracle's
    # invented generalizations) as false: score each group alone and read precision
    gen = tiny.dataset.generalizations
    planted = set(zip(gen["subject"], gen["predicate"], gen["object"]))
    b = run.beliefs[run.beliefs["kind"].eq(3)]
    names = list(tiny.triples) + tiny.extra_triples()  # invented triples get codes past the log's
    matches = np.array([tuple(names[c]) in planted for c in b["triple"]])
    assert matches.any() and (~matches).any()
    cps = sched.checkpoints(tiny.start, tiny.end)
    good = tiny.evaluator(cps).score(b[matches], 0.0)
    held = good.checkpoints["believed"] > 0
    assert held.sum() > 0 and (good.checkpoints["true_believed"] == good.checkpoints["believed"]).all()
    assert good.summary["precision"] == 1.0 and good.summary["stale"] == 0
    bad = tiny.evaluator(cps).score(b[~matches], 0.0)
    assert (bad.checkpoints["true_believed"] == 0).all() and bad.checkpoints["believed"].sum() > 0
    run.store.close()


def test_abstraction_needs_a_provider(tiny):
    with pytest.raises(ValueError, match="needs a provider"):
        simulate(tiny, schedule=Schedule(abstract_every_days=7))


def test_bad_schedule():
    with pytest.raises(ValueError, match="consolidate_every_hours must be a positive number"):
        Schedule(consolidate_every_hours=0)
    with pytest.raises(ValueError, match="abstract_every_days"):
        Schedule(abstract_every_days=-1)


def test_missing_dataset_folder(tmp_path):
    with pytest.raises(InputError, match="nope: no such dataset folder"):
        prepare(tmp_path / "nope")


# -- cardinality ------------------------------------------------------------------------------------------

D = 86400


def truth_frame(rows):
    return pd.DataFrame(rows, columns=["subject", "predicate", "object", "valid_from", "valid_to"]).astype(
        {"valid_to": "Int64"})


def test_cardinality_from_truth():
    t = truth_frame([
        ("ada", "speaks", "fr", 0, None), ("ada", "speaks", "de", 5 * D, None),   # overlap
        ("bob", "speaks", "en", 0, None),
        ("ada", "lives_in", "paris", 0, 10 * D), ("ada", "lives_in", "lyon", 10 * D, None),  # a change
        ("bob", "lives_in", "oslo", 0, None),
    ])
    m = measure_cardinality(t).set_index("predicate")
    assert m.loc["speaks", "overlap_share"] == pytest.approx(1 / 3) and m.loc["speaks", "multi_valued"]
    assert m.loc["lives_in", "overlap_share"] == 0 and not m.loc["lives_in", "multi_valued"]
    assert suggest_multi_valued(m.reset_index()) == {"speaks"}


def test_cardinality_from_mentions():
    e = pd.DataFrame({"subject": ["ada"] * 6 + ["bob"] * 3, "predicate": ["speaks"] * 6 + ["lives_in"] * 3,
                      "object": ["fr", "de", "fr", "de", "fr", "de", "oslo", "rome", "rome"],
                      "ts": [0, D, 2 * D, 3 * D, 4 * D, 5 * D, 0, 50 * D, 51 * D]})
    m = measure_cardinality(events=e).set_index("predicate")
    assert m.loc["speaks", "overlap_share"] == pytest.approx(4 / 5) and m.loc["speaks", "multi_valued"]
    assert m.loc["lives_in", "overlap_share"] == 0
    with pytest.raises(ValueError, match="needs a truth table or events"):
        measure_cardinality()


def test_supersession_costs():
    t = truth_frame([("ada", "speaks", "fr", 0, None), ("ada", "speaks", "de", 5 * D, None),
                     ("ada", "works_on", "x", 0, 8 * D), ("ada", "works_on", "y", 9 * D, None)])
    # single-valued speaks: de supersedes fr though fr is still true -> a false supersession
    facts = pd.DataFrame({
        "id": [1, 2, 3, 4], "subject": ["ada"] * 4, "predicate": ["speaks", "speaks", "works_on", "works_on"],
        "object": ["fr", "de", "x", "y"], "kind": ["explicit"] * 4,
        "status": ["superseded", "active", "active", "active"],
        "status_changed_at": pd.array([6 * D, None, None, None], dtype="Int64"),
        "first_seen": [1, 6 * D, 1, 10 * D],
    })
    c = supersession_costs(facts, t, multi_valued={"works_on"}).set_index("predicate")
    assert c.loc["speaks", "false_supersessions"] == 1 and c.loc["speaks", "false_share"] == 1.0
    # multi-valued works_on: y inserted at 10d beside x, which ended at 8d -> a missed supersession
    assert c.loc["works_on", "missed_supersessions"] == 1 and c.loc["works_on", "multi_valued"]


def test_missed_supersession_boundary():
    """A value whose truth ends exactly when the new value is inserted had stopped being valid at that
    moment (intervals are half-open, [valid_from, valid_to)): leaving it active is a missed
    supersession. One that ends a second later was still valid: not missed."""
    t = truth_frame([("ada", "works_on", "x", 0, 8 * D), ("ada", "works_on", "y", 8 * D, None),
                     ("bob", "works_on", "x", 0, 8 * D + 1), ("bob", "works_on", "y", 8 * D, None)])
    facts = pd.DataFrame({
        "id": [1, 2, 3, 4], "subject": ["ada", "ada", "bob", "bob"], "predicate": ["works_on"] * 4,
        "object": ["x", "y", "x", "y"], "kind": ["explicit"] * 4, "status": ["active"] * 4,
        "status_changed_at": pd.array([None] * 4, dtype="Int64"), "first_seen": [1, 8 * D, 1, 8 * D],
    })
    c = supersession_costs(facts, t, multi_valued={"works_on"}).set_index("predicate")
    assert c.loc["works_on", "missed_supersessions"] == 1  # ada's; bob's x was still valid at 8 d
    # the same moment seen from the single-valued side: y superseding x at exactly 8 d is right, not false
    sup = facts.assign(status=["superseded", "active", "superseded", "active"],
                       status_changed_at=pd.array([8 * D, None, 8 * D, None], dtype="Int64"))
    s = supersession_costs(sup, t, multi_valued=()).set_index("predicate")
    assert s.loc["works_on", "false_supersessions"] == 1  # bob's only
