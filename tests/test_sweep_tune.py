"""Sweeps (equal to one simulation per parameter set, deterministic, on processes and Dask) and tune."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.data.generate import generate, write
from factmem.evaluation.simulate import Schedule, prepare, simulate
from factmem.export import load_params_file
from factmem.tuning.runs import load_run
from factmem.tuning.space import Range, random_points
from factmem.tuning.sweep import sweep
from factmem.tuning.tune import decide, tune

SPACE = {"decay_rate.explicit": [0.01, 0.05], "reinforce_gain": [0.2, 0.5]}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    write(generate("tiny", seed=21), d)
    return d


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return prepare(tiny_dir)


def test_sweep_rows_equal_simulations(tiny):
    res = sweep(tiny, SPACE, workers=0, progress=False)
    t = res.table
    assert len(t) == 5 and t["baseline"].tolist() == [True] + [False] * 4
    assert t.loc[0, "decay_rate.explicit"] == 0.05 and t.loc[0, "multi_valued_predicates"] == ""
    sched = Schedule()
    cps = sched.checkpoints(tiny.start, tiny.end)
    for i in (0, 3):
        p = res.params[i]
        for part, sel in (("train", cps < res.split_at), ("test", cps >= res.split_at)):
            run = simulate(tiny, p, sched, checkpoints=cps[sel])
            for m in ("log_loss", "brier", "auc", "recall", "precision", "believed", "lost"):
                assert t.loc[i, f"{part}.{m}"] == run.summary[m], (i, part, m)
            run.store.close()


def test_sweep_is_deterministic_across_executors(tiny_dir):
    a = sweep(tiny_dir, SPACE, workers=0, progress=False, chunk_size=2).table
    b = sweep(tiny_dir, SPACE, workers=2, progress=False, chunk_size=2).table
    pd.testing.assert_frame_equal(a, b)
    assert a["run_id"].is_unique


def test_sweep_on_a_dask_local_cluster_equals_a_local_run(tiny_dir):
    distributed = pytest.importorskip("distributed", reason="the dask extra is part of .[dev]")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            on_dask = sweep(tiny_dir, SPACE, executor=client.get_executor(), progress=False, chunk_size=2).table
    pd.testing.assert_frame_equal(on_dask, sweep(tiny_dir, SPACE, workers=0, progress=False).table)


def test_random_search_is_seeded(tiny):
    space = {"decay_rate.episodic": Range(0.05, 2.0, log=True), "reinforce_base": ["stored", "effective"]}
    a = random_points(space, MemoryParams(), 20, seed=3)
    assert a == random_points(space, MemoryParams(), 20, seed=3) != random_points(space, MemoryParams(), 20, seed=4)
    rates = [p.decay_rate.episodic for p in a]
    assert 0.05 <= min(rates) and max(rates) <= 2.0 and {p.reinforce_base for p in a} == {"stored", "effective"}


def test_holdout_log(tiny, tiny_dir):
    other = prepare(generate("tiny", seed=22))
    res = sweep(tiny, {"reinforce_gain": [0.2]}, holdout=other, workers=0, progress=False)
    run = simulate(other, res.params[1])
    assert res.table.loc[1, "test.log_loss"] == run.summary["log_loss"]
    run.store.close()


@pytest.mark.parametrize("space, message", [
    ({"decay_rate.mood": [0.1]}, "unknown parameter 'decay_rate.mood'"),
    ({"gain": [0.1]}, "unknown parameter 'gain'"),
    ({"reinforce_gain": [0.3, 1.5]}, "reinforce_gain = 1.5 is invalid"),
    ({"decay_rate.episodic": [-1]}, "decay_rate.episodic = -1.0 is invalid"),
    ({"reinforce_gain": []}, "no values to sweep"),
])
def test_bad_spaces_fail_before_any_work(tiny, space, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        sweep(tiny, space, workers=0, progress=False)


def test_bad_objective_and_split(tiny):
    with pytest.raises(ValueError, match="unknown objective 'accuracy'"):
        sweep(tiny, SPACE, objective="accuracy")
    with pytest.raises(ValueError, match="outside the log"):
        sweep(tiny, SPACE, split=10, workers=0, progress=False)


# -- tune -------------------------------------------------------------------------------------------------

def test_promotion_rule():
    assert decide("log_loss", 0.2, 0.5)[0] == "recommended"
    keep, why = decide("log_loss", 0.6, 0.5)
    assert keep == "defaults" and "do not beat the defaults" in why
    assert decide("auc", 0.9, 0.8)[0] == "recommended" and decide("auc", 0.7, 0.8)[0] == "defaults"
    keep, why = decide("log_loss", 0.3, 0.5, current=0.25)
    assert keep == "current" and "worse than the current" in why
    assert decide("log_loss", 0.2, 0.5, current=0.25)[0] == "recommended"
    assert decide("log_loss", 0.2, 0.5, best_is_default=True)[0] == "defaults"


def test_tune_end_to_end(tiny_dir, tmp_path):
    out = tmp_path / "run"
    res = tune(tiny_dir, out=out, space={"decay_rate.explicit": [0.002, 0.05], "reinforce_gain": [0.3, 0.6]},
               workers=0, progress=False)
    for name in ("report.md", "params.toml", "manifest.json", "sweep.parquet", "results.duckdb", "memory.duckdb",
                 "trajectories.png", "heatmap.png", "pareto.png", "calibration.png"):
        assert (out / name).stat().st_size > 0, name
    params, prov = load_params_file(out / "params.toml")
    assert params == res.chosen and prov["dataset_sha256"] == prepare(tiny_dir).sha256
    assert set(prov["metrics"]) >= {"log_loss", "recall"} and set(prov["default_metrics"]) >= {"log_loss"}
    report = (out / "report.md").read_text()
    assert res.decision in report and "Held-out metrics" in report and "![" in report
    man = json.loads((out / "manifest.json").read_text())
    assert man["dataset"]["sha256"] == prov["dataset_sha256"] and man["packages"]["duckdb"]
    assert man["n_params"] == len(res.sweep.params) == 5
    run = load_run(out)
    pd.testing.assert_frame_equal(run.table("sweep"), res.sweep.table)
    best = res.sweep.table.loc[res.best_index]
    assert best["train.log_loss"] == res.sweep.table["train.log_loss"].min()
    assert res.promoted == (best["test.log_loss"] < res.sweep.table.loc[0, "test.log_loss"])


def test_edge_of_range_notes():
    from factmem.tuning.tune import _edge_notes

    space = {"decay_rate.explicit": [0.01, 0.03, 0.05], "reinforce_gain": [0.3, 0.6, 1.0], "decay_rate.episodic": [0.0, 0.3]}
    rec = MemoryParams(decay_rate={"explicit": 0.01, "episodic": 0.0}, reinforce_gain=1.0)
    notes = _edge_notes(space, rec, "grid")
    # explicit at the lower edge of what was searched; gain 1 and rate 0 are the parameters' own limits
    assert len(notes) == 1 and "decay_rate.explicit" in notes[0] and "lower edge" in notes[0]
    inside = MemoryParams(decay_rate={"explicit": 0.03, "episodic": 0.3}, reinforce_gain=0.6)
    notes = _edge_notes(space, inside, "grid")
    assert len(notes) == 1 and "decay_rate.episodic" in notes[0] and "upper edge" in notes[0]
    assert _edge_notes(space, inside, "random") == []
