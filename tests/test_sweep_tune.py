"""Sweeps (equal to one simulation per parameter set, deterministic, on processes and Dask) and tune:
the honest baseline, k-fold over subjects, the bootstrap interval and the promotion rule."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.data.generate import generate
from factmem.errors import InputError
from factmem.evaluation.context import FIELDS, ContextEvaluator
from factmem.evaluation.simulate import Schedule, kernel_beliefs, prepare, simulate
from factmem.export import load_params_file
from factmem.tuning.runs import load_run
from factmem.tuning.settings import Compute, Holdout, Objective, Search
from factmem.tuning.space import Range, assign, random_points, refine_points
from factmem.tuning.sweep import baseline_rows, calibration_columns, fill_calibration, sweep, worker_pool
from factmem.tuning.tune import Comparison, base_params, bootstrap_difference, decide, edge_notes, subject_folds, tune
from tests.conftest import write_tiny

SPACE = {"decay_rate.explicit": [0.01, 0.05], "reinforce_gain": [0.2, 0.5]}
LOCAL = Compute(workers=0, progress=False)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return write_tiny(tmp_path_factory, seed=21)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return prepare(tiny_dir)


def test_sweep_rows_equal_simulations(tiny):
    res = sweep(tiny, SPACE, holdout=Holdout(mode="time"), compute=LOCAL)
    t = res.table
    # row 0: the seed's numbers on the same base as every other row; row 1: the pure seed defaults
    assert t["baseline"].tolist()[:2] == [True, False] and bool(t.loc[1, "seed_defaults"])
    assert res.params[0] == MemoryParams(multi_valued_predicates=tiny.dataset.multi_valued_predicates)
    assert len(t) == 6
    sched = Schedule()
    cps = sched.checkpoints(tiny.start, tiny.end)
    for i in (0, 4):
        p = res.params[i]
        for part, sel in (("train", cps < res.split_at), ("test", cps >= res.split_at)):
            run = simulate(tiny, p, sched, checkpoints=cps[sel])
            for m in ("log_loss", "brier", "auc", "recall", "precision", "believed", "lost"):
                assert t.loc[i, f"{part}.{m}"] == run.summary[m], (i, part, m)
            run.store.close()
        # the context metrics of the time parts equal an evaluator built on those parts
        ctx = ContextEvaluator(tiny, budgets=(20,), parts={"train": (np.iinfo(np.int64).min, res.split_at),
                                                           "test": (res.split_at, np.iinfo(np.int64).max)})
        s = ctx.score(kernel_beliefs(tiny, [p], sched.consolidations(tiny.start, tiny.end))[0], p)
        for part in ("train", "test"):
            assert t.loc[i, f"{part}.utility@20"] == s.summary(part)["utility"]
            assert np.array_equal(res.context[part][i], s.sums[ctx.parts.index(part)])


def test_sweep_is_deterministic_across_executors(tiny_dir):
    a = sweep(tiny_dir, SPACE, compute=Compute(workers=0, progress=False, chunk_size=2))
    b = sweep(tiny_dir, SPACE, compute=Compute(workers=2, progress=False, chunk_size=2))
    pd.testing.assert_frame_equal(a.table, b.table)
    assert np.array_equal(a.context["all"], b.context["all"])
    assert a.table["run_id"].is_unique


def _allocator_set_up() -> tuple[bool, bool]:
    """Whether this process's allocator was already set to keep freed memory, and whether it can be."""
    from factmem.core import allocator

    before = allocator._DONE
    return before, allocator.retain_freed_memory()


def test_sweep_workers_keep_the_memory_they_free():
    # the pool's processes set their allocator up before their first task (where the C library allows
    # it: glibc); this process never does — a process that imports factmem keeps its allocator as it is
    from factmem.core import allocator

    with worker_pool(1) as pool:
        before, possible = pool.submit(_allocator_set_up).result()
    assert before == possible
    assert not allocator._DONE


def test_sweep_on_a_dask_local_cluster_equals_a_local_run(tiny_dir):
    distributed = pytest.importorskip("distributed", reason="the dask extra is part of .[dev]")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            on_dask = sweep(tiny_dir, SPACE, compute=Compute(executor=client.get_executor(), progress=False,
                                                             chunk_size=2)).table
    pd.testing.assert_frame_equal(on_dask, sweep(tiny_dir, SPACE, compute=LOCAL).table)


def test_random_search_and_refinement_are_seeded():
    space = {"decay_rate.episodic": Range(0.05, 2.0, log=True), "reinforce_base": ["stored", "effective"],
             "threshold": Range(0.0, 0.2)}
    a = random_points(space, MemoryParams(), 20, seed=3)
    assert a == random_points(space, MemoryParams(), 20, seed=3) != random_points(space, MemoryParams(), 20, seed=4)
    rates = [p.decay_rate.episodic for p in a]
    assert 0.05 <= min(rates) and max(rates) <= 2.0 and {p.reinforce_base for p in a} == {"stored", "effective"}
    # the threshold alias ties the archive threshold to the retrieval threshold
    assert all(p.archive_threshold == p.retrieval_threshold for p in a)
    more = refine_points(space, a[:2], 10, seed=1)
    assert more == refine_points(space, a[:2], 10, seed=1) and len(more) == 10
    assert all(0.05 <= p.decay_rate.episodic <= 2.0 and 0 <= p.archive_threshold <= 0.2 for p in more)


def test_the_baseline_differs_from_candidates_only_in_what_was_searched():
    base = MemoryParams(multi_valued_predicates={"speaks"}, reinforce_base="effective", retrieval_threshold=0.1)
    baseline, defaults = baseline_rows(base, ["decay_rate.explicit", "threshold"])
    assert baseline == assign(base, {"decay_rate.explicit": 0.05, "threshold": 0.05})
    assert baseline.reinforce_base == "effective" and baseline.multi_valued_predicates == {"speaks"}
    assert defaults == MemoryParams()


def test_holdout_log(tiny):
    other = prepare(generate("tiny", seed=22))
    res = sweep(tiny, {"reinforce_gain": [0.2]}, holdout=Holdout(mode="log", log=other), compute=LOCAL)
    run = simulate(other, res.params[2])
    assert res.table.loc[2, "test.log_loss"] == run.summary["log_loss"]
    run.store.close()


def test_a_log_held_out_against_itself_is_built_for_once(monkeypatch):
    # the evaluators and encodings are built side by side in threads: one log given as both the log
    # and the held-out one must still get one checkpoint evaluator and one encoding per multi-valued set
    from factmem.evaluation import simulate as simulate_module
    from factmem.tuning import shared_builds

    log = prepare(generate("tiny", seed=23))
    calls = {"encode": 0, "evaluator": 0}
    encode, evaluator = shared_builds.encode_events, simulate_module.Evaluator

    def counted_encode(*args, **kwargs):
        calls["encode"] += 1
        return encode(*args, **kwargs)

    def counted_evaluator(*args, **kwargs):
        calls["evaluator"] += 1
        return evaluator(*args, **kwargs)

    monkeypatch.setattr(shared_builds, "encode_events", counted_encode)
    monkeypatch.setattr(simulate_module, "Evaluator", counted_evaluator)
    mv = frozenset({"speaks"})
    added, encoded = shared_builds.build_shared(log, log, Schedule(), Objective(), Holdout(mode="log", log=log),
                                                    [mv, mv])
    try:
        assert calls == {"encode": 1, "evaluator": 1}
        assert len(added) == 2 and len(set(added)) == 2  # the train and test parts' context evaluators
        assert encoded == [(id(log), mv)]
    finally:
        for key in added:
            shared_builds.CONTEXT_EVALUATORS.pop(key, None)
        for key in encoded:
            shared_builds.ENCODINGS.pop(key, None)


@pytest.mark.parametrize("space, message", [
    ({"decay_rate.mood": [0.1]}, "unknown parameter 'decay_rate.mood'"),
    ({"gain": [0.1]}, "unknown parameter 'gain'"),
    ({"reinforce_gain": [0.3, 1.5]}, "reinforce_gain = 1.5 is invalid"),
    ({"decay_rate.episodic": [-1]}, "decay_rate.episodic = -1.0 is invalid"),
    ({"reinforce_gain": []}, "no values to sweep"),
])
def test_bad_spaces_fail_before_any_work(tiny, space, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(".", r"\.")):
        sweep(tiny, space, compute=LOCAL)


def test_bad_settings():
    with pytest.raises(InputError, match="unknown objective 'accuracy'"):
        Objective(name="accuracy")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="budget"):
        Objective(budgets=(0,))
    with pytest.raises(InputError, match="repeat"):
        Objective(budgets=(5, 5))
    with pytest.raises(InputError, match="cost stale"):
        Objective(costs={"stale": -1})
    assert Objective(costs="unneeded=0.5").to_dict()["costs"] == {"stale": 1.0, "expired": 1.0, "false": 1.0,
                                                                  "unneeded": 0.5}
    with pytest.raises(InputError, match="folds"):
        Holdout(folds=1)
    with pytest.raises(InputError, match="needs log="):
        Holdout(mode="log")
    with pytest.raises(InputError, match="sampler"):
        Search(method="annealing")  # type: ignore[arg-type]


def test_bad_split(tiny):
    with pytest.raises(InputError, match="outside the log"):
        sweep(tiny, SPACE, holdout=Holdout(mode="time", split=10), compute=LOCAL)


def test_whole_memory_objectives_cannot_be_held_out_by_subject(tiny_dir):
    with pytest.raises(InputError, match="per subject"):
        tune(tiny_dir, objective=Objective(name="log_loss"), write=False, compute=LOCAL)


# -- the decision ----------------------------------------------------------------------------------------


def test_subject_folds_are_seeded_and_balanced():
    f = subject_folds(10, 3, seed=1)
    assert np.array_equal(f, subject_folds(10, 3, seed=1)) and sorted(np.bincount(f)) == [3, 3, 4]
    with pytest.raises(InputError, match="at least 3 subjects"):
        subject_folds(2, 3, seed=0)


def _sums(points, utility):
    """Per-subject sums with only points and utility filled."""
    s = np.zeros((len(points), len(FIELDS)))
    s[:, FIELDS.index("points")] = points
    s[:, FIELDS.index("utility")] = utility
    return s


def test_bootstrap_difference_pools_points_and_resamples_subjects():
    a = _sums([10, 20, 30], [6.0, 14.0, 24.0])
    b = _sums([10, 20, 30], [5.0, 12.0, 21.0])
    c = bootstrap_difference(a, b, "utility", resamples=500, seed=0)
    assert c.a == pytest.approx(44 / 60) and c.b == pytest.approx(38 / 60) and c.difference == pytest.approx(6 / 60)
    assert 0 < c.low <= c.difference <= c.high  # every subject gains: every resample does
    again = bootstrap_difference(a, b, "utility", resamples=500, seed=0)
    assert (again.low, again.high) == (c.low, c.high)
    mixed = bootstrap_difference(_sums([10, 10], [9.0, 1.0]), _sums([10, 10], [1.0, 9.0]), "utility",
                                 resamples=500, seed=0)
    assert mixed.difference == 0 and mixed.low < 0 < mixed.high


def test_promotion_rule():
    sure = Comparison(0.8, 0.7, 0.1, 0.05, 0.15, 40, 1000)
    noise = Comparison(0.72, 0.7, 0.02, -0.01, 0.05, 40, 1000)
    assert decide(sure, lower_is_better=False)[0] == "recommended"
    keep, why = decide(noise, lower_is_better=False)
    assert keep == "baseline" and "does not exclude 0" in why
    assert decide(noise, lower_is_better=False, versus_current=sure)[0] == "current"
    keep, why = decide(sure, lower_is_better=False, versus_current=noise)
    assert keep == "current" and "not clearly better than the current" in why
    assert decide(sure, lower_is_better=False, same_as_baseline=True)[0] == "baseline"
    lower = Comparison(0.3, 0.5, -0.2, -0.3, -0.1, 40, 1000)  # e.g. stale@k: lower is better
    assert decide(lower, lower_is_better=True)[0] == "recommended"
    assert decide(lower, lower_is_better=False)[0] == "baseline"


def test_edge_and_domain_notes():
    space = {"decay_rate.explicit": Range(1e-4, 0.3, log=True), "reinforce_gain": Range(0.05, 1.0),
             "decay_rate.episodic": [0.0, 0.3], "threshold": Range(0.0, 0.3)}
    rec = MemoryParams(decay_rate={"explicit": 1.1e-4, "episodic": 0.0}, reinforce_gain=1.0,
                       archive_threshold=0.1, retrieval_threshold=0.1)
    notes = " ".join(edge_notes(space, rec, "random"))
    assert "decay_rate.explicit" in notes and "lower edge" in notes
    assert "every re-mention jumps to the cap" in notes and "never decay" in notes
    inside = MemoryParams(decay_rate={"explicit": 0.01, "episodic": 0.3}, reinforce_gain=0.6,
                          archive_threshold=0.1, retrieval_threshold=0.1)
    assert edge_notes(space, inside, "random") == []
    assert "upper edge" in " ".join(edge_notes(space, inside, "grid"))  # 0.3 is the largest listed value


def test_a_sweep_without_calibration_differs_only_there_and_fills_chosen_rows_exactly(tiny):
    full = sweep(tiny, SPACE, holdout=Holdout(mode="time"), compute=LOCAL)
    lean = sweep(tiny, SPACE, holdout=Holdout(mode="time"), compute=LOCAL, calibration=False)
    cal = calibration_columns(full.table)
    assert {"train.log_loss", "test.brier", "test.auc", "train.rmse_bins", "test.held_log_loss", "test.samples",
            "train.log_loss.explicit"} <= set(cal)
    assert not any("@" in c for c in cal)  # the context metrics (log_loss@k too) are always scored
    others = [c for c in full.table.columns if c not in cal]
    pd.testing.assert_frame_equal(lean.table[others], full.table[others])
    assert np.array_equal(lean.context["test"], full.context["test"])
    assert lean.table[[c for c in cal if c in lean.table.columns]].isna().all().all()
    filled = fill_calibration(lean, [4, 1, 4], tiny)
    assert not filled.calibration and lean.table["train.log_loss"].isna().all()  # a copy: lean unchanged
    for c in cal:
        assert filled.table.loc[[1, 4], c].tolist() == full.table.loc[[1, 4], c].tolist(), c
        assert filled.table.loc[[0, 2, 3, 5], c].isna().all(), c
    assert fill_calibration(full, [0], tiny) is full  # nothing to fill


def test_tune_end_to_end(tiny_dir, tmp_path):
    out = tmp_path / "run"
    res = tune(tiny_dir, out=out, search=Search(space={"decay_rate.explicit": Range(0.001, 0.3, log=True),
                                                        "threshold": Range(0.0, 0.2)}, n=6, startup=4, seed=2),
               objective=Objective(budgets=(5, 20)), holdout=Holdout(bootstrap=200), compute=LOCAL)
    for name in ("report.md", "params.toml", "params-k5.toml", "params-k20.toml", "manifest.json", "sweep.parquet",
                 "heldout.parquet", "subjects.parquet", "budget_curves.parquet", "results.duckdb", "memory.duckdb",
                 "budget.png", "slices.png", "pareto.png", "calibration.png", "trajectories.png"):
        assert (out / name).stat().st_size > 0, name
    params, prov = load_params_file(out / "params.toml")
    assert params == res.chosen and prov["dataset_sha256"] == prepare(tiny_dir).sha256
    # params.toml holds the first budget's choice; its provenance, that choice's held-out metrics
    assert {"utility_at_5", "recall_at_5", "stale_at_5", "lost"} <= set(prov["metrics"])
    # ... and the judged comparison: against the baseline, never the pure seed defaults
    assert "default_metrics" not in prov and "utility_at_5" in prov["baseline_metrics"]
    j = prov["judgement"]
    r5 = res.recommendations[5]
    assert j["against"] == "baseline" and j["budget"] == 5 and j["difference"] == r5.versus_baseline.difference
    assert (j["low"], j["high"], j["people"]) == (r5.versus_baseline.low, r5.versus_baseline.high, 6)
    assert j["min_effect"] == 0.01 and j["costs"] == "stale=1,expired=1,false=1,unneeded=0" and j["keep"] == r5.keep
    assert prov["baseline_metrics"]["utility_at_5"] == r5.versus_baseline.b
    assert load_params_file(out / "params-k20.toml")[0] == res.recommendations[20].chosen
    report = (out / "report.md").read_text()
    assert report.index("## Decision") < report.index("## Held-out metrics")
    assert res.decision in report and "95% interval" in report and "![" in report
    man = json.loads((out / "manifest.json").read_text())
    assert man["dataset"]["sha256"] == prov["dataset_sha256"] and man["packages"]["duckdb"]
    assert man["n_params"] == len(res.sweep.params) and man["objective"]["budgets"] == [5, 20]
    run = load_run(out)
    pd.testing.assert_frame_equal(run.table("sweep"), res.sweep.table)
    # the recommendation is the best candidate on every subject's data; each fold's choice is the best
    # without that fold's subjects; the held-out number pools each subject under its fold's choice
    # (the recommendation among every searched candidate; fold f among the shared and fixed points and
    # what the studies of the other folds' people proposed)
    rec = res.recommendations[20]
    sw = res.sweep
    studies = sw.table["study"]
    mine = {"all": np.asarray([isinstance(s, str) for s in studies])}
    for f in range(3):
        mine[f"fold-{f}"] = np.asarray([isinstance(s, str) and (s == "" or any(o != f"people-{f}" for o in s.split(",")))
                                        for s in studies])
    ok = sw.eligible()
    assert rec.candidate == int(np.argmax(np.where(ok & mine["all"], sw.objective_values("all", 20), -np.inf)))
    assert sw.table["probe"].any() and not sw.eligible()[sw.table["probe"].to_numpy()].any()
    folds = subject_folds(len(sw.subjects["all"]), 3, 0)
    unidentified = rec.identification.unidentified
    for f, choice in enumerate(rec.fold_choices):  # each fold's best among the others' studies', projected
        best_f = int(np.argmax(np.where(ok & mine[f"fold-{f}"], sw.objective_values("all", 20, folds != f), -np.inf)))
        assert sw.params[choice] == rec.identification.project(sw.params[best_f], res.baseline)
    assert rec.params == rec.identification.project(sw.params[rec.candidate], res.baseline)
    assert all(rec.params.get(n) == res.baseline.get(n) for n in unidentified if n != "threshold")
    rows = sw.context["all"][np.asarray(rec.fold_choices)[folds], np.arange(len(folds)), 1, :]
    assert rec.versus_baseline.a == pytest.approx(rows[:, FIELDS.index("utility")].sum()
                                                  / rows[:, FIELDS.index("points")].sum())
    rule = [rec.versus_baseline, *rec.versus_references.values()]
    assert set(rec.versus_references) == {"empty", "keep-everything"}
    every_run = all(r.keep[20] == "recommended" for r in rec.restarts)
    assert len(rec.restarts) == 3 and [r.seed for r in rec.restarts] == [2, 3, 4]
    # six people, each with sessions of their own: six groups, fewer than min_groups (10): never promoted,
    # whatever the rule on the intervals says
    assert rec.versus_baseline.groups == len(folds) == 6 and not rec.promoted and rec.keep == "baseline"
    assert rec.decision.startswith("Not promoted: too few to decide — 6 held-out groups")
    assert "Rule: promoted only if" in rec.decision  # what the intervals alone would say follows
    assert every_run is False and rule  # no run promotes with six groups and man["promotion"]["min_effect"] == 0.01
    subjects = run.table("subjects")
    assert set(subjects["budget"]) == {5, 20} and len(subjects) == 2 * len(folds)
    curves = run.table("budget_curves")
    at20 = curves[(curves["budget"] == 20) & (curves["k"] == 20)].set_index("params")["value"]
    assert at20["recommended"] == pytest.approx(rec.versus_baseline.a)
    assert at20["baseline"] == pytest.approx(rec.versus_baseline.b)
    # calibration: scored for the rows the report shows (and equal to scoring every row), not the others
    shown = {0, rec.index, res.recommendations[5].index, sw.params.index(MemoryParams())}
    assert sw.table["all.held_log_loss"].notna().to_numpy().nonzero()[0].tolist() == sorted(shown)
    assert man["calibration"] == "the rows the report shows" and "--calibrate-all" in report
    every = sweep(tiny_dir, [sw.params[i] for i in sorted(shown)], compute=LOCAL, include_baseline=False,
                  objective=sw.objective, holdout=sw.holdout)
    for c in calibration_columns(every.table):
        assert sw.table.loc[sorted(shown), c].tolist() == every.table[c].tolist(), c
    assert rec.heldout.set_index("key").loc["held_log_loss", "recommended"] == sw.table.loc[rec.index, "all.held_log_loss"]


def test_tune_with_a_time_split_and_current_parameters(tiny_dir):
    current = MemoryParams(decay_rate={"explicit": 0.02})
    res = tune(tiny_dir, search=Search(space={"decay_rate.explicit": [0.001, 0.02, 0.3]}, method="grid"),
               holdout=Holdout(mode="time", bootstrap=100), current=current, write=False, compute=LOCAL)
    rec = res.primary
    assert rec.versus_current is not None and res.sweep.parts == ("train", "test")
    assert rec.index == int(np.argmax(res.sweep.objective_values("train", 20)))
    assert rec.keep in ("recommended", "baseline", "current")


def test_tune_starting_from_fitted_parameters(tiny_dir):
    from factmem import fit

    start = fit(tiny_dir, bootstrap=0).params
    res = tune(tiny_dir, search=Search(space={"decay_rate.explicit": Range(0.001, 0.3, log=True)}, n=4, startup=2),
               holdout=Holdout(bootstrap=100), start=start, write=False, compute=LOCAL)
    rec = res.primary
    assert start in res.sweep.params and "start" in rec.heldout.columns
    assert rec.versus_start is not None
    row = rec.heldout.set_index("key").loc["utility_at_20"]
    assert rec.versus_start.b == pytest.approx(row["start"]) and rec.versus_start.a == pytest.approx(row["recommended"])


def test_base_params_come_from_the_log(tiny):
    assert base_params(tiny).multi_valued_predicates == tiny.dataset.multi_valued_predicates


def test_chunks_keep_predicate_sets_apart_and_give_every_worker_an_even_share():
    from factmem.tuning.sweep import _chunks

    one, other = MemoryParams(), MemoryParams(multi_valued_predicates=frozenset({"likes"}))
    points = [one] * 30 + [other] * 18
    chunks = _chunks(points, Compute(workers=2, chunk_size=16))
    assert sorted(i for c in chunks for i in c) == list(range(48))  # every set once
    assert all(len({points[i].multi_valued_predicates for i in c}) == 1 for c in chunks)
    assert all(c == sorted(c) for c in chunks)
    # 30 sets: 2 chunks of 16 at most -> 2 (a multiple of the workers) of 15; 18 sets: 2 of 9, not 16 + 2
    assert sorted(len(c) for c in chunks) == [9, 9, 15, 15]
    assert [len(c) for c in _chunks([one] * 48, Compute(workers=2, chunk_size=16))] == [12, 12, 12, 12]
    assert [len(c) for c in _chunks([one] * 48, Compute(workers=0, chunk_size=16))] == [16, 16, 16]  # in process
    assert [len(c) for c in _chunks([one], Compute(workers=2, chunk_size=16))] == [1]
