"""The search on Optuna: samplers, one study per fold's people (no fold's choice sees its held-out people),
study.db readable by Optuna and equal to sweep.parquet, seeded and reproducible, Dask, importances."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.tuning.decision import Promotion
from factmem.tuning.search import corner_points, distributions, in_space, local_points, make_sampler
from factmem.tuning.settings import DEFAULT_SPACE, Compute, Holdout, Objective, Search
from factmem.tuning.space import Range, refine_points
from factmem.tuning.studies import load_studies, parameter_importances, save_studies
from factmem.tuning.tune import subject_folds, tune
from tests.conftest import write_tiny

LOCAL = Compute(workers=0, progress=False, chunk_size=4)
SPACE = {"decay_rate.explicit": Range(0.001, 0.3, log=True), "threshold": Range(0.0, 0.2)}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return write_tiny(tmp_path_factory, seed=21)


@pytest.fixture(scope="module")
def run(tiny_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tpe"
    # min_effect 0: every searched name is identified, so the choices are the searched rows themselves
    res = tune(tiny_dir, out=out, search=Search(space=SPACE, n=6, startup=3, seed=1), objective=Objective(budgets=(5, 20)),
               holdout=Holdout(bootstrap=50), compute=LOCAL, promotion=Promotion(min_effect=0.0, restarts=2))
    return res, out


def test_spaces_map_onto_optuna_distributions():
    d = distributions({"decay_rate.episodic": Range(0.01, 1.0, log=True), "threshold": Range(0.0, 0.2),
                       "reinforce_base": ["stored", "effective"]})
    assert d["decay_rate.episodic"] == optuna.distributions.FloatDistribution(0.01, 1.0, log=True)
    assert d["threshold"] == optuna.distributions.FloatDistribution(0.0, 0.2)
    assert d["reinforce_base"] == optuna.distributions.CategoricalDistribution(["stored", "effective"])
    assert in_space(SPACE, MemoryParams()) and not in_space(SPACE, MemoryParams(decay_rate={"explicit": 0.5}))
    # the alias ties the two thresholds: a point where they differ is not in the space
    assert not in_space(SPACE, MemoryParams(retrieval_threshold=0.1))


def test_the_shared_start_opens_with_the_corners(run):
    pts = corner_points(DEFAULT_SPACE, MemoryParams())
    kinds = ("explicit", "user_preference", "episodic")
    assert len(pts) == 2 * len(kinds) + 2 and all(in_space(DEFAULT_SPACE, p) for p in pts)
    for i, kind in enumerate(kinds):  # the corner: one kind shown and never decaying ...
        for p in pts[2 * i: 2 * i + 2]:
            assert p.decay_rate[kind] == DEFAULT_SPACE[f"decay_rate.{kind}"].low
            assert p.initial_confidence[kind] == DEFAULT_SPACE[f"initial_confidence.{kind}"].high
            # ... the other kinds starting below the threshold
            assert all(p.initial_confidence[o] < p.archive_threshold == p.retrieval_threshold == 0.3
                       for o in kinds if o != kind)
        assert pts[2 * i].reinforce_gain == MemoryParams().reinforce_gain and pts[2 * i + 1].reinforce_gain == 0.05
    keep = pts[-2]  # everything kept, then the centre
    assert keep.archive_threshold == 0 and all(keep.decay_rate[k] == DEFAULT_SPACE[f"decay_rate.{k}"].low
                                               for k in kinds)
    assert pts[-1].reinforce_gain == pytest.approx(0.525) and pts[-1].decay_rate.explicit == pytest.approx(
        math.sqrt(1e-4 * 0.3))
    # a space without kinds' pairs has only its centre; the run's shared start holds it, scored beside the
    # studies: every study may choose it (study ""), none is told it (it would pull the sampler to it)
    res, _ = run
    (centre,) = corner_points(SPACE, res.baseline)
    row = res.sweep.params.index(centre)
    assert res.sweep.table.loc[row, "study"] == "" and Search().corners and not Search(corners=False).corners
    assert all(t.user_attrs["row"] != row for n, s in res.studies.studies.items() if n != "all" for t in s.trials)
    # the summary study (all tuning data, proposes nothing) holds it with its all-data score
    assert row in [t.user_attrs["row"] for t in res.studies.studies["all"].trials]


def test_local_draws_refine_each_studys_own_best(run):
    # the draws are refine_points around the 3 best trials by the value the study was told, clamped into the space
    study = optuna.create_study(direction="minimize")
    pts = [MemoryParams(decay_rate={"explicit": x}) for x in (0.3, 0.001, 0.01, 0.2, 0.05)]
    for i, v in enumerate((5.0, 1.0, 3.0, 2.0, 4.0)):
        t = study.ask(distributions(SPACE))
        t.set_user_attr("row", i)
        study.tell(t, v)
    draws = local_points(study, pts, SPACE, 7, seed=4)
    assert len(draws) == 7 and all(in_space(SPACE, p) for p in draws) and draws == local_points(study, pts, SPACE, 7, 4)
    near = refine_points(SPACE, [pts[1], pts[3], pts[2]], 7, 4, scale=0.1)
    assert [p.decay_rate.explicit for p in draws] == pytest.approx([p.decay_rate.explicit for p in near])
    assert local_points(optuna.create_study(), pts, SPACE, 7, 4) == []  # nothing told yet
    # in a run: half of each round's own proposals (batches of 4, then 2: 2 + 1), marked, the study's own rows
    res, _ = run
    table = res.sweep.table
    for name, study in res.studies.studies.items():
        if name == "all":  # the summary study proposes nothing
            assert not any(t.user_attrs.get("local") for t in study.trials)
            continue
        local = [t for t in study.trials if t.user_attrs.get("local")]
        assert len(local) == 3 and all(name in table.loc[t.user_attrs["row"], "study"].split(",") for t in local)
    assert Search().local == 0.5 and Search.from_dict({**Search().to_dict(), "local": 0.25}).local == 0.25
    with pytest.raises(InputError, match="local"):
        Search(local=1.5)


def test_unknown_or_unavailable_samplers_and_ranges_in_a_grid(tiny_dir):
    with pytest.raises(InputError, match="sampler"):
        Search(method="annealing")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="grid search needs lists"):
        tune(tiny_dir, search=Search(space=SPACE, method="grid"), write=False, compute=LOCAL)
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match=r"factmem\[gp\]"):
            make_sampler("gp", 0)
    else:
        assert isinstance(make_sampler("gp", 0), optuna.samplers.GPSampler)


def test_every_study_in_study_db_matches_sweep_parquet(run):
    res, out = run
    from factmem.tuning.runs import load_run

    table = load_run(out).table("sweep")  # sweep.parquet, its columns read back under the library's names
    pd.testing.assert_frame_equal(table, res.sweep.table)
    names = [s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{out / 'study.db'}")]
    assert names == ["all", "people-0", "people-1", "people-2"]
    folds = subject_folds(len(res.sweep.subjects["all"]), 3, 0)
    searched_rows = [i for i in np.flatnonzero(~table["probe"].to_numpy() & res.sweep.eligible())
                     if in_space(SPACE, res.sweep.params[i])]
    for name in names:
        study = optuna.load_study(study_name=name, storage=f"sqlite:///{out / 'study.db'}")
        trials = study.get_trials(states=[optuna.trial.TrialState.COMPLETE])
        assert study.user_attrs["budget"] == 5 and study.user_attrs["sampler"] == "tpe"
        subjects = None if name == "all" else folds == int(name[-1])  # a study is told its own fold's people
        values = res.sweep.objective_values("all", 5, subjects)
        if name == "all":
            # the summary: every searched candidate in the space (fixed, corners, shared, every study's own)
            assert [t.user_attrs["row"] for t in trials] == searched_rows
        else:
            # the fixed points first (baseline enqueued), then the start's 2 shared random draws (its third point,
            # the space's centre, is scored beside the studies) and 6 proposals of its own, every one a row of
            # sweep.parquet
            assert len(trials) == 1 + 2 + 6 and trials[0].user_attrs["row"] == 0
        for t in trials:
            row = table.iloc[t.user_attrs["row"]]
            assert t.user_attrs["run_id"] == row["run_id"]
            assert t.params["decay_rate.explicit"] == row["decay_rate.explicit"]
            assert t.params["threshold"] == row["archive_threshold"] == row["retrieval_threshold"]
            assert t.value == values[t.user_attrs["row"]] == t.user_attrs["utility@5"]
            if name == "all":
                assert t.value == row["all.utility@5"] and t.user_attrs["recall@20"] == row["all.recall@20"]
                assert t.user_attrs["study"] == row["study"]
            else:
                # a proposed row belongs to the study that proposed it (the fixed and shared rows to every study)
                assert (row["study"] == "") == (t.number < 3) and (t.number < 3 or name in row["study"].split(","))
    searched = ~table["probe"]  # the identification probes come after the search, chosen by no study
    assert table["study"][searched].map(lambda s: isinstance(s, str)).all() and table["study"][~searched].isna().all()
    proposed = table["study"][searched & (table["study"] != "")]
    assert len(proposed) == 3 * 6 or proposed.str.contains(",").any()
    assert np.array_equal(res.importances["parameter"], sorted(SPACE))
    assert list(res.importances.columns) == ["parameter", "all", "max", "identified"]  # the all-data study's
    report = (out / "report.md").read_text()
    # the importances beside the identification, then the account of the search
    assert report.index("## Identification") < report.index("PED-ANOVA") < report.index("## The search")
    assert f"`{res.importances.sort_values('max', ascending=False)['parameter'].iloc[0]}` |" in report


def test_no_fold_chooses_a_candidate_its_own_peoples_study_alone_proposed(run):
    res, _ = run
    studies = res.sweep.table["study"]
    for rec in res.recommendations.values():
        assert rec.identification is not None and not rec.identification.unidentified
        for f, row in enumerate(rec.fold_choices):
            # shared, or proposed by a study told only other folds' people (perhaps also by fold f's)
            assert studies[row] == "" or any(o != f"people-{f}" for o in studies[row].split(","))
        assert isinstance(studies[rec.index], str)  # the recommendation: any searched candidate
    from factmem.tuning.search import study_rows

    table = pd.DataFrame({"study": ["", "people-0", "people-1", "people-0,people-2", None]})
    assert study_rows(table, "people-0").tolist() == [True, True, False, True, False]
    assert study_rows(table, "fold-0").tolist() == [True, False, True, True, False]
    assert study_rows(table, "fold-1").tolist() == [True, True, False, True, False]
    assert study_rows(table, "all").tolist() == [True, True, True, True, False]


def test_the_search_is_seeded_and_reproducible(tiny_dir, run):
    res, _ = run
    again = tune(tiny_dir, search=Search(space=SPACE, n=6, startup=3, seed=1), objective=Objective(budgets=(5, 20)),
                 holdout=Holdout(bootstrap=50), compute=LOCAL, write=False,
                 promotion=Promotion(min_effect=0.0, restarts=2))
    pd.testing.assert_frame_equal(again.sweep.table, res.sweep.table)
    assert np.array_equal(again.sweep.context["all"], res.sweep.context["all"])
    other = tune(tiny_dir, search=Search(space=SPACE, n=6, startup=3, seed=2), objective=Objective(budgets=(5, 20)),
                 holdout=Holdout(bootstrap=50), compute=LOCAL, write=False)
    assert other.sweep.params[2:] != res.sweep.params[2:]


@pytest.mark.parametrize("sampler", ["cmaes", "random", "grid"])
def test_each_sampler_runs_with_a_study_per_folds_people(tiny_dir, sampler):
    space = {"decay_rate.explicit": [0.001, 0.02, 0.3], "reinforce_gain": [0.2, 0.6]} if sampler == "grid" else SPACE
    res = tune(tiny_dir, search=Search(space=space, method=sampler, n=5, startup=2, seed=3), holdout=Holdout(bootstrap=0),
               compute=LOCAL, write=False, promotion=Promotion(restarts=1))
    studies = res.studies
    assert studies is not None and list(studies.studies) == ["all", "people-0", "people-1", "people-2"]
    counts = {n: len(s.get_trials(states=[optuna.trial.TrialState.COMPLETE])) for n, s in studies.studies.items()
              if n != "all"}
    searched = res.sweep.table[~res.sweep.table["probe"]]  # the identification probes come after the search
    if sampler == "grid":  # exact: every combination, shared by every study (the baseline is not on the grid)
        assert set(counts.values()) == {6} and len(searched) == 6 + 2
        assert any("outside the searched space" in n for n in res.notes)
    elif sampler == "random":  # drawn without looking at scores: one shared pool
        assert set(counts.values()) == {1 + 5} and (searched["study"] == "").all()
    else:  # a start of two (the space's centre beside the studies, one shared draw), then five of each study's own
        assert set(counts.values()) == {1 + 1 + 5} and (searched["study"] != "").sum() >= 5


def test_the_dask_executor_replays_the_batches(tiny_dir):
    distributed = pytest.importorskip("distributed", reason="the dask extra is part of .[dev]")
    settings = dict(search=Search(space=SPACE, n=4, startup=2, seed=5), holdout=Holdout(bootstrap=0), write=False,
                    promotion=Promotion(restarts=1))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            on_dask = tune(tiny_dir, compute=Compute(executor=client.get_executor(), progress=False, chunk_size=4),
                           **settings)
    local = tune(tiny_dir, compute=LOCAL, **settings)
    pd.testing.assert_frame_equal(on_dask.sweep.table, local.sweep.table)


def test_importances_name_a_parameter_that_matters_in_no_study(tmp_path):
    studies = {}
    for name, seed in (("all", 0), ("fold-0", 1)):
        study = optuna.create_study(study_name=name, direction="maximize", sampler=optuna.samplers.RandomSampler(seed))
        study.optimize(lambda t: -(t.suggest_float("x", 0, 1) - 0.3) ** 2 + 0 * t.suggest_float("y", 0, 1), 60)
        studies[name] = study
    imp = parameter_importances(studies).set_index("parameter")
    assert imp.loc["x", "identified"] and not imp.loc["y", "identified"]
    assert imp.loc["x", "all"] > 0.9 and math.isclose(imp.loc["x", "all"] + imp.loc["y", "all"], 1.0)
    # the same from a study.db written and read back
    save_studies(studies, tmp_path / "study.db")
    pd.testing.assert_frame_equal(parameter_importances(tmp_path / "study.db").set_index("parameter"), imp)
    back = load_studies(tmp_path / "study.db")
    assert [t.params for t in back["all"].trials] == [t.params for t in studies["all"].trials]


@pytest.mark.slow
def test_resume_equals_one_run_with_the_total_budget(tiny_dir, run, tmp_path, capsys):
    from factmem.cli.main import main
    from factmem.tuning.runs import load_run

    res, first = run  # 6 candidates per study in batches of 4: the last batch was short
    assert main(["tune", "--resume", str(first), "--n", "2", "--out", str(tmp_path / "more"), "-q",
                 "--workers", "0"]) == 0
    more = load_run(tmp_path / "more")
    assert more.manifest["search"]["n"] == 8 and "not the same as one run" in (tmp_path / "more" / "report.md").read_text()
    # whole batches: 4, then 4 more, is one run of 8 (the same candidates, scores, choices and report numbers)
    settings = dict(search=Search(space=SPACE, n=4, startup=2, seed=1), objective=Objective(budgets=(5, 20)),
                    holdout=Holdout(bootstrap=50), compute=LOCAL)
    tune(tiny_dir, out=tmp_path / "a", **settings)
    assert main(["tune", "--resume", str(tmp_path / "a"), "--n", "4", "-q", "--workers", "0"]) == 0  # in place
    once = tune(tiny_dir, out=tmp_path / "b", **{**settings, "search": Search(space=SPACE, n=8, startup=2, seed=1)})
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    pd.testing.assert_frame_equal(a.table("sweep"), b.table("sweep"))
    pd.testing.assert_frame_equal(a.table("importances"), b.table("importances"))
    assert a.manifest["recommendations"] == b.manifest["recommendations"]
    assert "the same as one run with the total budget" in (tmp_path / "a" / "report.md").read_text()
    for name in once.studies.studies:
        ta = optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'a' / 'study.db'}").trials
        tb = optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'b' / 'study.db'}").trials
        assert [(t.params, t.value, t.user_attrs) for t in ta] == [(t.params, t.value, t.user_attrs) for t in tb]
    assert not list(tmp_path.glob(".a.resuming"))
    # the runs side by side: `runs list` finds them, `runs compare` reads their decisions from the manifests
    import json

    capsys.readouterr()
    assert main(["runs", "list", str(tmp_path), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["result"]["runs"]
    assert {r["run"] for r in listed} == {str(tmp_path / n) for n in ("a", "b", "more")}
    assert {r["sampler"] for r in listed} == {"tpe"} and all(r["decision"].endswith("(k = 5)") for r in listed)
    assert main(["runs", "compare", str(tmp_path / "a"), str(tmp_path / "more"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["result"]["runs"]
    rec = a.manifest["recommendations"]["5"]
    assert rows[0]["utility"] == pytest.approx(rec["versus_baseline"]["a"]) and rows[0]["per_study"] == 8
    assert rows[0]["low"] == pytest.approx(rec["versus_baseline"]["low"]) and rows[0]["objective"] == "utility@5"
    assert rows[0]["fingerprint"] == rows[1]["fingerprint"] == a.manifest["dataset"]["sha256"][:12]
    assert rows[0]["decision"] == f"{rec['keep']} (k = 5)"
    changed = rows[0]["changed"]
    assert changed == "none" if rec["keep"] == "baseline" and rec["params"] == a.manifest["baseline"] else \
        "decay_rate.explicit" in changed or "archive_threshold" in changed
    assert main(["runs", "compare", str(tmp_path / "a")]) == 0 and "utility@5" in capsys.readouterr().out
    assert main(["runs", "compare", str(tmp_path)]) == 2 and "not a run folder" in capsys.readouterr().err


def test_importances_and_identification_disagreeing_are_reconciled_in_words():
    """Where the study's importance and the direct test at the recommendation disagree, the report says
    which way each parameter went and that the direct test decided (no silent contradiction)."""
    from types import SimpleNamespace

    from factmem.tuning.identification import Identification, ParameterIdentification
    from factmem.tuning.report import importance_lines

    def checked(name, effect):
        return ParameterIdentification(name, "0…1", 0.5, 0.2, 0.0, 1.0, effect, effect >= 0.01)

    ident = Identification(20, 0.01, "utility@20", 10, 100, [checked("threshold", 0.25), checked("gain", 0.002),
                                                             checked("flat", 0.0)])
    imp = pd.DataFrame({"parameter": ["threshold", "gain", "flat", "other"], "all": [0.04, 0.6, 0.01, 0.02],
                        "max": [0.04, 0.6, 0.01, 0.02], "identified": [False, True, False, False]})
    text = "\n".join(importance_lines(SimpleNamespace(importances=imp, primary=SimpleNamespace(identification=ident))))
    assert "`threshold`: below 5% in the study, yet moving it alone" in text and "changes utility@20 by 0.25" in text
    assert "`gain`: important in the study" in text and "by only 0.002 < 0.01: kept at the baseline" in text
    assert "`flat`: below 5% in the study and no effect at the recommendation" in text
    assert "`other`: below 5% in the study, so the search's results do not say" in text


def test_resuming_a_run_with_another_layout_of_studies_is_refused(run, tmp_path):
    """A run written when the studies were all data + each fold's training people (``fold-0`` …) cannot be
    continued by the per-fold-people search: it is refused by name, and the run folder is left as it was."""
    import shutil

    from factmem.tuning.tune import resume

    _, first = run
    old = tmp_path / "old"
    shutil.copytree(first, old)
    studies = load_studies(old / "study.db")
    renamed = {("fold-" + n.split("-")[1] if n.startswith("people-") else n): s for n, s in studies.items()}
    save_studies(renamed, old / "study.db")
    before = {p.name: p.read_bytes() for p in old.iterdir() if p.is_file()}
    with pytest.raises(InputError, match="older factmem.*run tune afresh"):
        resume(old, n=2, compute=LOCAL)
    assert {p.name: p.read_bytes() for p in old.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # no half-written folder beside it
