"""The what-if on a production memory (factmem.production): a file exported from a replayed log
round-trips with zero differences under its own parameters; a hand-built file where a change of one
decay rate archives exactly the expected facts; bad inputs refused with nothing written; the CLI end
to end; the chunked context scoring equal to one call."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from factmem import MemoryParams, whatif
from factmem.cli.main import main
from factmem.core.codes import DAY
from factmem.data.generate import generate
from factmem.errors import ParamsFileError, ProductionDBError
from factmem.evaluation.context import FIELDS, ContextEvaluator
from factmem.evaluation.simulate import Schedule, kernel_beliefs, prepare, simulate
from factmem.export.sqlite_format import EVIDENCE_DDL, SEED_FACTS_DDL, SEED_LINKS_DDL
from factmem.production.compare import context_sums
from factmem.production.current import EXIT_NOT_REPRODUCED, CurrentParamsMissing, reproduction_warning
from factmem.production.rebuild import file_sha256, read_production
from factmem.production.replay import consolidation_grid, replay_log

# the replayed memory's own parameters: per-predicate rates, multi-valued predicates and the
# effective reinforcement base, so the round trip goes through every path of the engine
OWN = MemoryParams(decay_rate={"episodic": 0.5}, decay_rate_by_predicate={"works_on": 0.1},
                   multi_valued_predicates={"enjoys", "met_with", "works_on"}, reinforce_base="effective")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny log replayed under OWN, exported by `factmem export-db`."""
    tmp = tmp_path_factory.mktemp("whatif")
    ds = generate("tiny", seed=3)
    run = simulate(ds, OWN, Schedule(), store_path=tmp / "memory.duckdb")
    run.store.close()
    assert main(["export-db", str(tmp / "memory.duckdb"), "--out", str(tmp / "prod.sqlite"), "-q"]) == 0
    OWN.save(tmp / "own.toml")
    return {"dir": tmp, "prod": tmp / "prod.sqlite", "dataset": ds}


def test_an_exported_memory_round_trips_with_zero_differences(exported):
    result = whatif(exported["prod"], OWN, bootstrap=50, budgets=(5, 20))
    rep = result.reproduction
    assert result.current.source == "factmem_meta" and result.current.params == OWN
    assert rep.checked == rep.facts > 0 and rep.reproduced == rep.checked and rep.failed == 0
    assert rep.renumbered == 0 and rep.checks_skipped == [] and len(rep.failures) == 0
    s = result.summary
    for key in ("forgotten", "kept", "superseded_differently", "belief_changes", "supersessions_differ",
                "context_gained", "context_lost", "subjects_changed", "subjects_context_changed"):
        assert s[key] == 0, key
    assert s["held_current"] == s["held_new"] > 0 and s["archivals_current"] == s["archivals_new"] > 0
    assert len(result.triples) == 0 and len(result.context_changes) == 0 and len(result.param_changes) == 0
    assert (result.metrics["difference"] == 0).all() and (result.metrics["current"] == result.metrics["new"]).all()
    assert (result.metrics["low"] == 0).all() and (result.metrics["high"] == 0).all()
    t = result.over_time
    assert (t["believed_current"] == t["believed_new"]).all() and t["believed_current"].max() > 0
    # the comparison is at the last observation; the replay runs to the file's last recorded change
    ds = exported["dataset"]
    assert result.at == int(ds.events["ts"].max()) and result.horizon <= ds.end


@pytest.mark.parametrize("needed", ["next-session", "hindsight", "next-3-sessions"])
def test_the_rebuilt_log_gives_the_original_logs_no_truth_metrics(exported, needed):
    """The no-truth metrics need only sessions, times and triples: the rebuild loses none of them."""
    new = OWN.replace(decay_rate={"explicit": 0.4})
    result = whatif(exported["prod"], new, bootstrap=0, budgets=(5, 20), needed=needed)
    P = prepare(exported["dataset"])
    ctx = ContextEvaluator(P, budgets=(5, 20), needed=needed)
    grid = Schedule().consolidations(P.start, P.end)
    for params, side in ((OWN, "current"), (new, "new")):
        scores = ctx.score(kernel_beliefs(P, [params], grid)[0], params)
        for k in (5, 20):
            for metric in ("utility", "recall", "stale"):
                want = scores.summary(budget=k)[metric]
                got = result.comparison(metric, k)[side]
                assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (side, k, metric)
    assert result.summary["forgotten"] > 0  # explicit facts forgotten 8x faster


def test_a_file_without_factmem_extras_reproduces_with_current(exported, tmp_path):
    """A production crate's file: only the seed's tables and evidence columns; --current supplies the params."""
    bare = tmp_path / "bare.sqlite"
    with sqlite3.connect(exported["prod"]) as src, sqlite3.connect(bare) as dst:
        dst.executescript(SEED_FACTS_DDL + SEED_LINKS_DDL + "CREATE TABLE memory_evidence (id INTEGER PRIMARY KEY, "
                          "fact_id INTEGER NOT NULL, session_id TEXT, message_id TEXT, observed_at INTEGER NOT NULL);")
        dst.executemany("INSERT INTO memory_facts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        src.execute("SELECT * FROM memory_facts").fetchall())
        dst.executemany("INSERT INTO memory_evidence VALUES (?,?,?,?,?)",
                        src.execute("SELECT id, fact_id, session_id, message_id, observed_at FROM memory_evidence"))
    end = exported["dataset"].end  # production's last consolidation: the file itself does not say
    result = whatif(bare, OWN, current=exported["dir"] / "own.toml", at=end, bootstrap=0)
    assert result.current.source == "file" and result.current.sha256 == file_sha256(exported["dir"] / "own.toml")
    assert result.reproduction.checks_skipped == ["status_changed_at"]
    assert result.reproduction.reproduced == result.reproduction.checked == result.reproduction.facts
    assert result.summary["forgotten"] == result.summary["kept"] == 0
    assert any("factmem_fact_state" in n for n in result.notes)
    # without --current: refused, naming the flag (the seed's defaults are never assumed)
    with pytest.raises(CurrentParamsMissing, match="--current FILE.*--current seed"):
        whatif(bare, OWN, at=end, bootstrap=0)
    assert main(["whatif", str(bare), "--params", str(exported["dir"] / "own.toml"), "--out",
                 str(tmp_path / "refused"), "-q"]) == 2
    assert not (tmp_path / "refused").exists()
    # --current seed, said explicitly: the mismatches counted with a cause, and the report warns first
    seed = whatif(bare, OWN, current="seed", at=end, bootstrap=0)
    assert seed.current.source == "seed defaults" and seed.reproduction.failed > 0
    assert any("--current seed" in n for n in seed.notes)
    warning = reproduction_warning(seed.reproduction, seed.current.source)
    assert warning is not None and "not against what production did" in warning
    assert main(["whatif", str(bare), "--params", str(exported["dir"] / "own.toml"), "--current", "seed",
                 "--at", str(end), "--bootstrap", "0", "--no-figures", "--out", str(tmp_path / "seed"), "-q"]) \
        == EXIT_NOT_REPRODUCED
    assert (tmp_path / "seed" / "report.md").read_text().splitlines()[0].startswith("**Warning: this comparison")
    assert set(seed.reproduction.failures["cause"]) <= {"other_decay_rate", "unexplained"}
    assert seed.reproduction.by_cause["other_decay_rate"] > 0
    failing = seed.reproduction.failures
    assert failing["checks"].str.contains("decay_rate").sum() == seed.reproduction.by_check["decay_rate"] > 0
    assert not failing["checks"].str.endswith(",").any() and (failing["checks"] != "").all()


def test_what_abstraction_did_is_reported_not_replayed(tmp_path):
    """Derived facts, links and pruning are not replayed: the facts they touched fail to reproduce, each
    with its cause, and the what-if goes on with every observation."""
    from factmem.abstraction.providers import OracleProvider
    from factmem.export.sqlite import export_db

    ds = generate("tiny", seed=7)
    oracle = OracleProvider(ds.generalizations, seed=7, facts_truth=ds.truth)
    run = simulate(ds, MemoryParams(prune_min_reinforcements=1), Schedule(abstract_every_days=7), provider=oracle)
    export_db(run.store, tmp_path / "prod.sqlite", progress=False)
    derived = int((run.store.facts(at=ds.end)["kind"] == "derived").sum())
    pruned = int((run.store.facts(at=ds.end)["status_reason"] == "pruned").sum())
    run.store.close()
    assert derived > 0 and pruned > 0
    result = whatif(tmp_path / "prod.sqlite", MemoryParams(prune_min_reinforcements=1), bootstrap=0)
    rep = result.reproduction
    assert rep.derived == derived and rep.checked == rep.facts - derived
    assert rep.by_cause["pruned"] == pruned and set(rep.by_cause) <= {"pruned", "abstraction_evidence",
                                                                      "after_abstraction"}
    assert rep.failed == sum(rep.by_cause.values()) and rep.renumbered > 0
    assert any("derived facts" in n for n in result.notes)
    # both sides replay the same observations: the same parameters change nothing
    assert result.summary["forgotten"] == result.summary["kept"] == 0


# -- a hand-built production file ---------------------------------------------------------------------

T0 = 1_767_258_000  # 2026-01-01 09:00 UTC
UP, EX = 0.02, 0.05  # the seed's decay rates of user_preference and explicit


def _day(d: float) -> int:
    return T0 + int(d * DAY)


def _hand_built(path, *, evidence=True, facts=True, drop_column=False, orphan=False, shuffled=False):
    """Seven facts consistent with the seed's defaults (daily consolidation at midnight UTC).

    id subject predicate   object kind  observed (days after T0)
    1  ada     drinks      tea    pref  0
    2  ada     listens_to  jazz   pref  0, 40
    3  ada     lives_in    Paris  expl  0          superseded by 4
    4  ada     lives_in    Rome   expl  20
    5  bob     enjoys      rain   pref  10
    6  bob     plays       chess  pref  45
    7  bob     works_at    ACME   expl  50         (the last observation)
    """
    con = sqlite3.connect(path)
    ddl = SEED_FACTS_DDL if not drop_column else SEED_FACTS_DDL.replace("    supersedes_id       INTEGER\n", "").replace(
        "status              TEXT NOT NULL,", "status              TEXT NOT NULL")
    con.executescript(ddl + SEED_LINKS_DDL + EVIDENCE_DDL)
    rows = [
        (1, "ada", "drinks", "tea", None, "user_preference", 0.5, 0, _day(0), _day(0), UP, "active", None),
        (2, "ada", "listens_to", "jazz", None, "user_preference", 0.65, 1, _day(0), _day(40), UP, "active", None),
        (3, "ada", "lives_in", "Paris", None, "explicit", 0.4, 0, _day(0), _day(0), EX, "superseded", None),
        (4, "ada", "lives_in", "Rome", None, "explicit", 0.4, 0, _day(20), _day(20), EX, "active", 3),
        (5, "bob", "enjoys", "rain", None, "user_preference", 0.5, 0, _day(10), _day(10), UP, "active", None),
        (6, "bob", "plays", "chess", None, "user_preference", 0.5, 0, _day(45), _day(45), UP, "active", None),
        (7, "bob", "works_at", "ACME", None, "explicit", 0.4, 0, _day(50), _day(50), EX, "active", None),
    ]
    if facts:
        if drop_column:
            rows = [r[:-1] for r in rows]
        con.executemany(f"INSERT INTO memory_facts VALUES ({','.join('?' * len(rows[0]))})", rows)
    ev = [(1, 1, "s1", "m1", _day(0)), (2, 2, "s1", "m1", _day(0)), (3, 3, "s1", "m2", _day(0)),
          (4, 5, "s2", "m3", _day(10)), (5, 4, "s3", "m4", _day(20)), (6, 2, "s4", "m5", _day(40)),
          (7, 6, "s5", "m6", _day(45)), (8, 7, "s6", "m7", _day(50))]
    if orphan:
        ev.append((9, 42, "s6", "m7", _day(50)))
    if shuffled:  # ids that do not follow time (rows written by several processes): time decides the order
        ids = [5, 1, 2, 8, 3, 7, 4, 6]
        ev = [(ids[i], *row[1:]) for i, row in enumerate(ev)]
    if evidence:
        con.executemany("INSERT INTO memory_evidence (id, fact_id, session_id, message_id, observed_at) "
                        "VALUES (?,?,?,?,?)", ev)
    con.commit()
    con.close()
    return path


def test_a_faster_preference_decay_archives_exactly_the_expected_facts(tmp_path):
    prod = _hand_built(tmp_path / "hand.sqlite")
    new = MemoryParams(decay_rate={"user_preference": 0.2})  # archived ln(10)/0.2 = 11.5 days after a mention
    result = whatif(prod, new, current="seed", bootstrap=20, out=tmp_path / "out")
    assert result.current.source == "seed defaults"
    rep = result.reproduction
    assert rep.checked == rep.reproduced == 7 and rep.checks_skipped == ["status_changed_at"]
    assert result.at == _day(50)
    forgotten = result.triples[result.triples["change"] == "forgotten"]
    assert sorted(zip(forgotten["subject"], forgotten["predicate"], forgotten["object"])) == [
        ("ada", "drinks", "tea"), ("bob", "enjoys", "rain")]
    assert set(result.triples["change"]) == {"forgotten"}
    assert (forgotten["status_current"] == "active").all() and (forgotten["status_new"] == "archived").all()
    s = result.summary
    # tea (day 0 -> archived at the midnight of day 12), the first jazz fact (day 0 -> day 12; day 40
    # inserts a new one) and rain (day 10 -> day 22); nothing is archived under the seed's rates
    assert (s["archivals_current"], s["archivals_new"]) == (0, 3)
    assert (s["held_current"], s["held_new"]) == (6, 4) and s["supersessions_differ"] == 0
    t = result.over_time.set_index("t")
    assert t.loc[_day(12) - 9 * 3600, "archived_new"] == 2 and t.loc[_day(12) - 9 * 3600 - DAY, "archived_new"] == 0
    assert t["archived_new"].iloc[-1] == 3 and t["archived_current"].iloc[-1] == 0
    subjects = result.subjects.set_index("subject")
    assert subjects.loc["ada", "forgotten"] == 1 and subjects.loc["bob", "forgotten"] == 1
    # the written folder
    out = tmp_path / "out"
    for name in ("report.md", "manifest.json", "believed_over_time.png", "subject_changes.png", "triples.parquet",
                 "subjects.parquet", "metrics.parquet", "over_time.parquet", "reproduction.parquet"):
        assert (out / name).is_file(), name
    assert len(pd.read_parquet(out / "triples.parquet")) == 2
    report = (out / "report.md").read_text()
    assert "**2** facts the current parameters keep active would be archived" in report
    assert "seed's defaults" in report and "7 of 7" in report


def test_the_order_of_evidence_rows_is_their_time_order(tmp_path):
    new = MemoryParams(decay_rate={"user_preference": 0.2})
    ordered = whatif(_hand_built(tmp_path / "a.sqlite"), new, current="seed", bootstrap=0)
    shuffled = whatif(_hand_built(tmp_path / "b.sqlite", shuffled=True), new, current="seed", bootstrap=0)
    assert shuffled.reproduction.reproduced == 7
    assert shuffled.summary == ordered.summary
    pd.testing.assert_frame_equal(shuffled.triples, ordered.triples)
    pd.testing.assert_frame_equal(shuffled.metrics, ordered.metrics)


def test_consolidations_are_daily_at_midnight_utc():
    grid = consolidation_grid(_day(0), _day(3), DAY)
    assert list(grid) == [_day(1) - 9 * 3600, _day(2) - 9 * 3600, _day(3) - 9 * 3600]
    assert (grid % DAY == 0).all()
    with pytest.raises(ValueError, match="consolidate-every"):
        consolidation_grid(0, 200_000 * DAY, DAY)


# -- bad input: a clear error, nothing written -----------------------------------------------------------


def _bad_cases(tmp_path):
    not_sqlite = tmp_path / "text.sqlite"
    not_sqlite.write_text("not a database")
    return {
        "not a SQLite database": not_sqlite,
        "missing column 'supersedes_id'": _hand_built(tmp_path / "schema.sqlite", drop_column=True),
        "memory_evidence is empty": _hand_built(tmp_path / "empty.sqlite", evidence=False),
        "is not the id of a fact in memory_facts": _hand_built(tmp_path / "orphan.sqlite", orphan=True),
    }


def test_bad_production_files_are_refused_and_nothing_is_written(tmp_path):
    new = tmp_path / "new.toml"
    MemoryParams().save(new)
    for message, path in _bad_cases(tmp_path).items():
        out = tmp_path / f"out-{path.stem}"
        with pytest.raises(ProductionDBError, match=message) as err:
            whatif(path, new, out=out)
        assert str(path) in str(err.value)
        assert not out.exists()
        assert main(["whatif", str(path), "--params", str(new), "--out", str(out), "-q"]) == 2
        assert not out.exists()


def test_bad_params_files_are_refused_and_nothing_is_written(tmp_path, capsys):
    prod = _hand_built(tmp_path / "hand.sqlite")
    bad = tmp_path / "bad.toml"
    bad.write_text(MemoryParams().to_toml().replace("reinforce_gain = 0.3", "reinforce_gain = 1.5"))
    good = tmp_path / "good.toml"
    MemoryParams().save(good)
    out = tmp_path / "out"
    with pytest.raises(ParamsFileError, match="reinforce_gain"):
        whatif(prod, bad, out=out)
    with pytest.raises(ParamsFileError, match="reinforce_gain"):
        whatif(prod, good, current=bad, out=out)
    assert main(["whatif", str(prod), "--params", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.toml" in err and "reinforce_gain" in err
    assert main(["whatif", str(prod), "--params", str(tmp_path / "missing.toml"), "--out", str(out)]) == 2
    assert main(["whatif", str(prod), "--params", str(good), "--budget", "x", "--out", str(out)]) == 2
    assert main(["whatif", str(prod), "--params", str(good), "--at", "2020-01-01", "--out", str(out)]) == 2
    assert not out.exists()


# -- the command line ------------------------------------------------------------------------------------


def test_cli_end_to_end(exported, tmp_path, capsys):
    new = tmp_path / "new.toml"
    OWN.replace(decay_rate={"explicit": 0.4}).save(new)
    out = tmp_path / "run"
    code = main(["whatif", str(exported["prod"]), "--params", str(new), "--budget", "5,20", "--bootstrap", "100",
                 "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "reproduced" in printed and "utility@5" in printed and str(out) in printed
    man = json.loads((out / "manifest.json").read_text())
    assert man["kind"] == "whatif"
    assert man["production"]["sha256"] == file_sha256(exported["prod"])
    assert man["new"]["sha256"] == file_sha256(new) and man["new"]["path"] == str(new)
    assert man["current"]["source"] == "factmem_meta" and MemoryParams.from_dict(man["current"]["params"]) == OWN
    assert man["settings"]["budgets"] == [5, 20]
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert sorted(set(metrics["budget"])) == [5, 20]
    assert set(metrics["metric"]) == {"utility", "recall", "precision", "stale"}
    assert (metrics["low"] <= metrics["difference"]).all() and (metrics["difference"] <= metrics["high"]).all()
    report = (out / "report.md").read_text()
    assert "## Most affected people" in report and "95% bootstrap interval over people" in report
    changes = pd.read_parquet(out / "param_changes.parquet")
    assert list(changes["parameter"]) == ["decay_rate.explicit"]


# -- the context scoring over groups of subjects ---------------------------------------------------------


def test_context_scoring_in_groups_of_subjects_equals_one_call(exported):
    log = read_production(exported["prod"])
    grid = consolidation_grid(log.first, log.latest, DAY)
    replay = replay_log(log, OWN, grid)
    fact_triple, triples = log.triple_of_fact()
    triple = fact_triple[log.events["fact"].to_numpy()]
    ctx = ContextEvaluator(log.prepared(sessions_only=True), budgets=(3, 10), needed="next-session")
    subject = pd.Index(ctx.subjects).get_indexer(pd.Index(np.asarray(triples.levels[0], object)))[
        np.asarray(triples.codes[0])[triple]]
    beliefs = replay.beliefs(log, triple)
    whole = ctx.score(beliefs, OWN)
    grouped = context_sums(ctx, beliefs, replay, subject, pair_budget=50)  # one subject per group
    assert len(ctx.subjects) > 2
    np.testing.assert_array_equal(grouped.sums, whole.sums)


def test_over_time_in_blocks_of_observations_equals_one_block(exported, monkeypatch):
    import factmem.production.compare as compare

    log = read_production(exported["prod"])
    grid = consolidation_grid(log.first, log.latest, DAY)
    replays = {"current": replay_log(log, OWN, grid), "new": replay_log(log, OWN.replace(reinforce_gain=0.6), grid)}
    cps = compare.checkpoints(log.first, log.last)
    whole = compare.over_time(log, replays, cps)
    monkeypatch.setattr(compare, "EVENT_BLOCK", 37)
    blocks = compare.over_time(log, replays, cps)
    pd.testing.assert_frame_equal(blocks, whole)
    assert whole["archived_new"].is_monotonic_increasing and whole["held_current"].max() > 0


def test_believed_set_over_time_equals_the_checkpoint_metrics(exported):
    """An independent count: the checkpoint metrics' believed-set size on the original log."""
    result = whatif(exported["prod"], OWN.replace(decay_rate={"user_preference": 0.1}), bootstrap=0)
    P = prepare(exported["dataset"])
    cps = result.over_time["t"].to_numpy()
    grid = Schedule().consolidations(P.start, P.end)
    for side, params in (("current", OWN), ("new", result.new.params)):
        checkpoints = P.evaluator(cps).score(kernel_beliefs(P, [params], grid)[0], params.retrieval_threshold)
        got = checkpoints.checkpoints.set_index("t")["believed"].reindex(cps).to_numpy()
        np.testing.assert_array_equal(result.over_time[f"believed_{side}"].to_numpy(), got)


def test_the_figures_draw_both_sides(tmp_path):
    from factmem import plots

    result = whatif(_hand_built(tmp_path / "hand.sqlite"), MemoryParams(decay_rate={"user_preference": 0.2}),
                    current="seed", bootstrap=0)
    table = result.over_time
    # here the active set is the believed set: one line per side and a note, not four entries
    assert (table["held_new"] == table["believed_new"]).all()
    fig = plots.believed_over_time(table)
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["believed — current parameters", "believed — new parameters"]
    assert "active set = believed set" in fig.axes[0].texts[0].get_text()
    believed_new = lines[1]
    assert list(believed_new.get_ydata()) == list(table["believed_new"])
    apart = table.assign(held_current=table["held_current"] + 50, held_new=table["held_new"] + 60)
    assert len(plots.believed_over_time(apart).axes[0].get_lines()) == 4  # believed and active, per side
    same = table.assign(believed_new=table["believed_current"], held_new=table["held_current"])
    one = plots.believed_over_time(same).axes[0]
    assert [line.get_label() for line in one.get_lines()] == ["believed — current parameters and new parameters"]
    fig = plots.subject_changes(result.subjects, budget=20)
    assert len(fig.axes) == 2 and fig.axes[0].get_ylabel() == "people"
    with pytest.raises(ValueError, match="believed_current"):
        plots.believed_over_time(result.over_time.drop(columns=["believed_current"]))


def test_whatif_scores_the_reference_policies_on_the_same_session_starts(exported, tmp_path):
    from factmem.tuning.references import keep_everything

    res = whatif(exported["prod"], OWN.replace(decay_rate={"explicit": 0.4}), budgets=(5,), bootstrap=50,
                 needed="next-session")
    row = res.comparison("utility", 5)
    assert row["empty"] == 0 and row["new_minus_empty"] == row["new"]
    # keep-everything: the current parameters without decay, replayed and scored on the same session starts
    log = read_production(exported["prod"])
    evaluator = ContextEvaluator(log.prepared(sessions_only=True), budgets=(5,), needed="next-session")
    keep = replay_log(log, keep_everything(OWN), consolidation_grid(log.first, res.horizon, res.settings.period))
    fact_triple, triples_index = log.triple_of_fact()
    triple_of_event = fact_triple[log.events["fact"].to_numpy()]
    subject_names = triples_index.levels[0]
    eval_subject = pd.Index(evaluator.subjects).get_indexer(pd.Index(np.asarray(subject_names, dtype=object)))
    state_subject = eval_subject[np.asarray(triples_index.codes[0], np.int64)[triple_of_event]]
    sums = context_sums(evaluator, keep.beliefs(log, triple_of_event), keep, state_subject).sums[0, :, 0, :]
    assert row["keep_everything"] == pytest.approx(sums[:, FIELDS.index("utility")].sum()
                                                   / sums[:, FIELDS.index("points")].sum())
    report = (res.write(tmp_path / "run", figures=False) / "report.md").read_text()
    assert "reference policies" in report and "keep-everything" in report


def test_the_replay_consolidates_with_the_period_the_file_records(tmp_path):
    """A memory built with a consolidation every 12 h and exported saying so: whatif replays it every 12 h
    without being told (and reproduces it), and says so; told 24 h, it names the file's period."""
    ds = generate("tiny", seed=3)
    run = simulate(ds, OWN, Schedule(consolidate_every_hours=12.0), store_path=tmp_path / "memory.duckdb")
    run.store.close()
    prod = tmp_path / "prod.sqlite"
    assert main(["export-db", str(tmp_path / "memory.duckdb"), "--out", str(prod), "--consolidate-every", "12",
                 "-q"]) == 0
    r = whatif(prod, OWN, bootstrap=0, figures=False)
    assert r.settings.consolidate_every_hours == 12.0 and r.settings.period == 43200
    assert r.reproduction.failed == 0 and r.reproduction.checked > 0
    assert any("the period the file records" in n for n in r.notes)
    told = whatif(prod, OWN, bootstrap=0, figures=False, consolidate_every_hours=24.0)
    assert told.settings.period == 86400 and any("consolidation every 12 h" in n for n in told.notes)
