"""``factmem tune --log PROD.sqlite`` (factmem.production.tune): the issue's "done when" on an exported
memory with ``factmem_meta`` dropped and a column added — refused without ``--current``, end to end with
``--current seed``, its params file accepted by ``whatif`` on the same file; a flat proxy promotes
nothing; a sampled search is judged on everyone."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from factmem import MemoryParams
from factmem.cli.main import main
from factmem.data.generate import generate
from factmem.evaluation.simulate import Schedule, simulate
from factmem.export.document import read_params_document
from factmem.production.current import CurrentParamsMissing
from factmem.production.tune import tune_production
from factmem.tuning.agreement import DEFAULT_PROXY, proxy_notes
from factmem.tuning.settings import Compute, Search

FAST = ["--n", "2", "--startup", "4", "--bootstrap", "50", "--workers", "0"]


def _production_file(tmp, ds, name="prod"):
    """A memory replayed under the seed's defaults, exported by export-db, then made to look like a crate's
    file: no factmem_meta, and a column the deployment added."""
    run = simulate(ds, MemoryParams(), Schedule(), store_path=tmp / f"{name}.duckdb")
    run.store.close()
    path = tmp / f"{name}.sqlite"
    assert main(["export-db", str(tmp / f"{name}.duckdb"), "--out", str(path), "-q"]) == 0
    with sqlite3.connect(path) as sq:
        sq.execute("DROP TABLE factmem_meta")
        sq.execute("ALTER TABLE memory_facts ADD COLUMN user_id TEXT")
    return path


@pytest.fixture(scope="module")
def prod(tmp_path_factory):
    return _production_file(tmp_path_factory.mktemp("prodtune"), generate("tiny", seed=3))


def test_tune_on_a_production_file_end_to_end(prod, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["tune", "--log", str(prod), "--out", str(out), *FAST]) == 2
    assert "--current" in capsys.readouterr().err and not out.exists()
    assert main(["tune", "--log", str(prod), "--current", "seed", "--out", str(out), *FAST]) == 0
    printed = capsys.readouterr().out
    assert "On synthetic logs with truth, this proxy's ranking of the candidates agrees at ρ = " in printed
    assert printed.strip().splitlines()[-2].strip().startswith("factmem whatif") and "export" in printed.splitlines()[-1]
    man = json.loads((out / "manifest.json").read_text())
    assert man["kind"] == "tune-production" and man["needed"] == DEFAULT_PROXY == man["needed_default"] == "kind-aware"
    assert man["current"]["source"] == "seed defaults" and man["reproduction"]["failed"] == 0
    assert man["proxy_agreement"]["rho"] > 0
    report = (out / "report.md").read_text()
    assert report.startswith("# Tune on a production memory") and "memory_facts (user_id)" in report
    assert report.rstrip().endswith("```") and "## Next" in report
    read_params_document(out / "params.toml")
    # the params file passes whatif on the same file; whatif without --current is refused
    assert main(["whatif", str(prod), "--params", str(out / "params.toml"), "--out", str(tmp_path / "w"),
                 "--bootstrap", "20", "--no-figures", "-q"]) == 2
    assert main(["whatif", str(prod), "--params", str(out / "params.toml"), "--current", "seed",
                 "--out", str(tmp_path / "w"), "--bootstrap", "20", "--no-figures", "-q"]) == 0
    assert (tmp_path / "w" / "report.md").exists()
    # --json: one document, with the decision and the proxy's measured agreement
    assert main(["tune", "--log", str(prod), "--current", "seed", "--out", str(out), "--force", "--json", *FAST]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["result"]["needed"] == DEFAULT_PROXY and doc["decision"]["text"] and str(out / "params.toml") in doc["files"]


@pytest.mark.filterwarnings("error::RuntimeWarning")  # (numpy's All-NaN warning reached users once)
def test_a_flat_proxy_promotes_nothing(tmp_path):
    """Every fact mentioned once: no proxy of 'mentioned again' (hindsight) sees anything needed, so all
    candidates tie."""
    ds = generate("tiny", seed=4)
    once = ds.events.drop_duplicates(["subject", "predicate", "object"]).reset_index(drop=True)
    path = _production_file(tmp_path, dataclasses.replace(ds, events=once))
    with pytest.raises(CurrentParamsMissing):
        tune_production(path, write=False)
    r = tune_production(path, current="seed", needed="hindsight", write=False, search=Search(method="random", n=6),
                        bootstrap=20, compute=Compute(workers=0, progress=False))
    assert r.flat and not r.promoted and r.chosen == MemoryParams()
    assert "this log cannot rank the candidates" in r.decision


@pytest.mark.parametrize("flag", ["--max-search-people", "--max-search-observations"])
def test_a_bad_sample_bound_is_refused_by_name(prod, tmp_path, capsys, flag):
    out = tmp_path / "run"
    assert main(["tune", "--log", str(prod), "--current", "seed", "--out", str(out), flag, "0", *FAST]) == 2
    err = capsys.readouterr().err
    assert flag in err and "got 0" in err and not out.exists()
    assert main(["tune", "--log", str(tmp_path), "--out", str(out), flag, "5", *FAST]) == 2  # a dataset folder
    assert "applies to a production file" in capsys.readouterr().err and not out.exists()


def test_a_sampled_search_is_judged_on_everyone(prod):
    r = tune_production(prod, current="seed", write=False, search=Search(method="random", n=6), bootstrap=20,
                        max_search_subjects=3, compute=Compute(workers=0, progress=False))
    assert r.sample["searched"] == 3 < r.sample["subjects"]
    assert set(r.judged) == {"all", "not_sampled"}
    assert r.judged["all"]["subjects"] == r.sample["subjects"] > r.judged["not_sampled"]["subjects"]
    # judged on all as whatif replays and scores the file: whatif of the recommendation says the same
    from factmem import whatif

    w = whatif(prod, r.tune.primary.params, current="seed", bootstrap=0, figures=False).comparison("utility")
    assert w["difference"] == pytest.approx(r.judged["all"]["difference"], abs=1e-12)


def test_kind_aware_says_when_the_log_has_no_episodes():
    """kind-aware reads episodes by their kind: a log without any is named in a note (and only then)."""
    assert proxy_notes("kind-aware", ["explicit", "user_preference"])
    assert not proxy_notes("kind-aware", ["explicit", "episodic"]) and not proxy_notes("hindsight", ["explicit"])


def test_the_search_sample_is_bounded_by_observations(monkeypatch):
    """People are drawn in a seeded order and the sample is cut to the first whose observations fit."""
    import numpy as np

    import factmem.production.tune as pt
    from factmem.evaluation.simulate import prepare

    P = prepare(generate("tiny", seed=3))
    people = P.dataset.events["subject"].value_counts()
    full, names = pt.sample_subjects(P, len(people), 0)
    assert len(names) == len(people) and len(full.events) == len(P.events)
    monkeypatch.setattr(pt, "MIN_SEARCH_SUBJECTS", 1)
    bound = int(people.max() + people.min())
    cut, names = pt.sample_subjects(P, len(people), 0, max_observations=bound)
    assert 1 <= len(names) < len(people) and len(cut.events) <= max(bound, int(people.max()))
    assert int(people[list(names)].sum()) == len(cut.events)
    assert set(np.unique(np.asarray(cut.dataset.events["subject"]))) == set(names)
