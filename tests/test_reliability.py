"""Reliability (issue 11): each of the twenty ways the toolkit broke, reproduced, now ending in a
correct result or a clear error. Tests are grouped by the issue's item numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from factmem.core.codes import MAX_TIME, MIN_TIME
from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.store.factstore import FactStore
from tests.conftest import write_tiny

YEAR = 365 * 86400


def events(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["ts", "subject", "predicate", "object", "kind"])


# -- 1. timestamps before 1970 ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["ingest", "replay", "remember"])
def test_pre_1970_supersession_keeps_its_change_time(how):
    s = FactStore(params=MemoryParams(decay_rate={"explicit": 0.0}))
    rows = [(-500_000_000, "ada", "lives_in", "paris", "explicit"), (-400_000_000, "ada", "lives_in", "rome", "explicit")]
    if how == "ingest":
        s.ingest(events(rows))
    elif how == "replay":
        s.replay(events(rows), [-450_000_000])
    else:
        for ts, *fact in rows:
            s.remember(*fact, at=ts)
    f = s.facts(at=0).set_index("object")
    assert f.loc["paris", "status"] == "superseded"
    assert f.loc["paris", "status_changed_at"] == -400_000_000
    assert s.as_of(-300_000_000)["object"].tolist() == ["rome"]
    assert s.as_of(-450_000_000)["object"].tolist() == ["paris"]


def test_a_change_exactly_at_minus_one_second_is_kept():
    """−1 and 0 are ordinary times: neither may act as "no value"."""
    s = FactStore()
    s.ingest(events([(-2, "a", "p", "x", "explicit"), (-1, "a", "p", "y", "explicit"), (0, "a", "p", "z", "explicit")]))
    f = s.facts(at=0).set_index("object")
    assert f.loc["x", "status_changed_at"] == -1 and f.loc["y", "status_changed_at"] == 0


def _write_tsv(path, first_year: int, last_year: int, subjects: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    lines = ["subject\tpredicate\tobject\tstart\tend"]
    for i in range(subjects):
        year = first_year + int(rng.integers(0, 5))
        while year < last_year - 2:  # a home that changes every few years (single-valued)
            stay = int(rng.integers(2, 9))
            lines.append(f"s{i}\tlives_in\tcity{int(rng.integers(0, 12))}\t{year}\t{min(year + stay, last_year)}")
            year += stay
        for club in rng.choice(8, size=2, replace=False):  # two clubs at once (multi-valued)
            start = first_year + int(rng.integers(0, 30))
            lines.append(f"s{i}\tmember_of\tclub{club}\t{start}\t{start + int(rng.integers(3, 30))}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def imported_1900(tmp_path_factory):
    from factmem.data.importer import import_triples

    tsv = _write_tsv(tmp_path_factory.mktemp("imp") / "facts.tsv", 1900, 1969, subjects=40)
    ds, _ = import_triples(tsv, mention_rate=1.0, seed=1)
    assert ds.start < 0 and ds.end <= 0  # the whole log lies before 1970
    return ds


def _shifted(ds, seconds: int):
    from factmem.data.logs import make_dataset

    ev = ds.events.assign(ts=ds.events["ts"] + seconds)
    msg = ds.messages.assign(ts=ds.messages["ts"] + seconds)
    truth = ds.truth.assign(valid_from=ds.truth["valid_from"] + seconds, valid_to=ds.truth["valid_to"] + seconds)
    scenario = dict(ds.scenario, start=ds.start + seconds, end=ds.end + seconds)
    return make_dataset(msg, ev, truth, ds.generalizations, scenario)


def test_simulate_before_1970_is_sane_engines_agree_and_time_shift_changes_nothing(imported_1900):
    from factmem.evaluation.simulate import Schedule, kernel_beliefs, prepare, simulate

    P = prepare(imported_1900)
    params = MemoryParams(multi_valued_predicates=imported_1900.multi_valued_predicates,
                          decay_rate={"explicit": 0.001})
    sched = Schedule(consolidate_every_hours=24 * 30, evaluate_every_hours=24 * 365)
    run = simulate(P, params, sched)
    facts = run.store.facts(at=0)
    left = facts[facts["status"] != "active"]
    assert len(left) > 50 and left["status_changed_at"].notna().all()
    c = run.checkpoints
    assert ((c["precision"].dropna() >= 0) & (c["precision"].dropna() <= 1)).all()
    assert ((c["recall"].dropna() >= 0) & (c["recall"].dropna() <= 1)).all()
    assert 0 <= run.summary["precision"] <= 1 and 0 <= run.summary["recall"] <= 1
    # the vectorized kernel (sweeps) and the store (simulate) hold the same beliefs
    grid = sched.consolidations(P.start, P.end)
    kb = kernel_beliefs(P, [params], grid)[0]
    cols = ["triple", "kind", "start", "end", "reason", "confidence", "rate"]
    canon = lambda b: b[cols].sort_values(["triple", "start", "end"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(canon(run.beliefs), canon(kb), check_exact=True)
    cps = sched.checkpoints(P.start, P.end)
    assert P.evaluator(cps).score(kb, params.retrieval_threshold).summary == run.summary
    # the same history a century later (all after 1970) scores exactly the same
    later = simulate(_shifted(imported_1900, 100 * YEAR), params, sched)
    assert later.summary == run.summary
    run.store.close()
    later.store.close()


# -- 2. timestamps out of range ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [1e19, 2**63, -(2**63), MAX_TIME + 1, MIN_TIME - 1, 1_700_000_000_000])
def test_ingest_refuses_times_outside_the_supported_range(bad):
    s = FactStore()
    s.ingest(events([(0, "a", "p", "x", "explicit")]))
    for frame in (pd.DataFrame({"ts": [0, bad]}), ):
        frame = frame.assign(subject="a", predicate="p", object="y", kind="explicit")
        with pytest.raises(InputError, match="supported time range") as err:
            s.ingest(frame)
        assert "row 1" in str(err.value) and "'ts'" in str(err.value)
    assert len(s) == 1 and s.facts(at=0)["status"].tolist() == ["active"]  # nothing changed
    s.consolidate(at=0)
    s.stats(at=0)


def test_ingest_refuses_uint64_and_arrow_columns_out_of_range():
    import pyarrow as pa

    s = FactStore()
    base = dict(subject=["a"], predicate=["p"], object=["x"], kind=["explicit"])
    with pytest.raises(InputError, match="supported time range"):
        s.ingest(pd.DataFrame(dict(ts=np.array([2**64 - 1], np.uint64), **base)))
    with pytest.raises(InputError, match="supported time range"):
        s.ingest(pa.table(dict(ts=pa.array([2**64 - 1], pa.uint64()), **base)))
    with pytest.raises(InputError, match="supported time range"):
        s.ingest(pa.table(dict(ts=pa.array([10**17], pa.timestamp("s")), **base)))
    assert len(s) == 0


@pytest.mark.parametrize("at", [2**63, MAX_TIME + 1, MIN_TIME - 1, np.datetime64(10**17, "s"), float(2**70)])
def test_every_at_argument_is_checked(at):
    s = FactStore()
    for call in (lambda: s.remember("a", "p", "x", at=at), lambda: s.consolidate(at=at), lambda: s.facts(at=at),
                 lambda: s.as_of(at), lambda: s.stats(at=at), lambda: s.replay(events([]), [at]),
                 lambda: s.trajectories([1], start=0, end=at)):
        with pytest.raises(InputError, match="supported time range|whole Unix seconds"):
            call()
    assert len(s) == 0


def test_the_range_edges_themselves_work():
    s = FactStore()
    s.remember("a", "p", "x", at=MIN_TIME)
    s.remember("a", "p", "y", at=MAX_TIME)
    s.consolidate(at=MAX_TIME)
    f = s.facts(at=MAX_TIME)
    assert f["status"].tolist() == ["superseded", "active"] and f["status_changed_at"].iloc[0] == MAX_TIME
    assert f["effective_confidence"].iloc[1] == f["confidence"].iloc[1]
    assert s.as_of(MIN_TIME)["object"].tolist() == ["x"]
    assert s.as_of(MAX_TIME)["object"].tolist() == ["y"]
    s.remember("b", "p", "x", at=MIN_TIME)
    assert s.consolidate(at=MAX_TIME).archived == 1  # ten thousand years of decay, no overflow


def _message(mid: str, ts: int, facts=()) -> str:
    import json

    return json.dumps({"session_id": "s", "message_id": mid, "ts": ts, "speaker": "user", "text": "t",
                       "facts": [dict(zip(("subject", "predicate", "object", "kind"), f)) for f in facts]})


def _log_folder(tmp_path, lines, truth: str | None = None):
    folder = tmp_path / "ds"
    folder.mkdir(exist_ok=True)
    (folder / "log.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if truth is not None:
        (folder / "truth.csv").write_text(truth, encoding="utf-8")
    return folder


def test_log_times_out_of_range_name_the_line(tmp_path):
    from factmem.data.logs import load

    folder = _log_folder(tmp_path, [_message("m1", 0), "", _message("m2", 10**19)])
    with pytest.raises(InputError, match=r"log.jsonl:3: field 'ts' = 10000000000000000000 is outside the supported"):
        load(folder)
    folder = _log_folder(tmp_path, [_message("m1", 0), _message("m2", MAX_TIME + 1)])
    with pytest.raises(InputError, match=r"log.jsonl:2: .*outside the supported time range"):
        load(folder)
    folder = _log_folder(tmp_path, [_message("m1", 0)],
                         truth="subject,predicate,object,kind,valid_from,valid_to\na,p,o,explicit,0,99999999999999999999\n")
    with pytest.raises(InputError, match=r"truth.csv:2: field 'valid_to' = 99999999999999999999 is outside"):
        load(folder)


# -- 10. milliseconds among seconds; schedules too fine for the span ---------------------------------


def test_a_millisecond_timestamp_in_a_log_is_named_at_load(tmp_path):
    from factmem.data.logs import load

    ms = 1_767_225_600_123  # 2026 in milliseconds: year 57970 as seconds
    folder = _log_folder(tmp_path, [_message("m1", 1_767_225_600), _message("m2", ms)])
    with pytest.raises(InputError, match=r"log.jsonl:2: .*looks like milliseconds"):
        load(folder)
    # milliseconds of the 1970s fit the range as seconds; among seconds of the same decade they stand out
    folder = _log_folder(tmp_path, [_message(f"m{i}", 100_000_000 + i) for i in range(5)] + [_message("m9", 200_000_000_000)])
    with pytest.raises(InputError, match=r"log.jsonl:6: .*looks like milliseconds among seconds"):
        load(folder)


def test_long_historical_spans_load(tmp_path):
    from factmem.data.logs import load

    folder = _log_folder(tmp_path, [_message("m1", MIN_TIME + 86400 * 400), _message("m2", 1_600_000_000)])
    assert len(load(folder).messages) == 2


# -- 16, 17. whitespace-only fields; line numbers after blank lines and quoted newlines ----------------


def test_whitespace_only_fields_are_rejected_at_load_with_file_and_line(tmp_path):
    from factmem.data.logs import load

    for field in range(3):
        fact = ["ada", "lives_in", "paris", "explicit"]
        fact[field] = " \t "
        folder = _log_folder(tmp_path, [_message("m1", 0), "", _message("m2", 5, [fact])])
        name = ("subject", "predicate", "object")[field]
        with pytest.raises(InputError, match=rf"log.jsonl:3: facts\[0\]: field '{name}' must be a non-empty string"):
            load(folder)
    folder = _log_folder(tmp_path, [_message("m1", 0)],
                         truth="subject,predicate,object,kind,valid_from,valid_to\n  ,p,o,explicit,0,\n")
    with pytest.raises(InputError, match=r"truth.csv:2: field 'subject' is only whitespace"):
        load(folder)


def test_line_numbers_after_blank_lines_and_quoted_newlines(tmp_path):
    from factmem.data.logs import load

    folder = _log_folder(tmp_path, [_message("m1", 0), "", "", _message("m2", 5, [("a", "p", "o", "bogus")])])
    with pytest.raises(InputError, match=r"log.jsonl:4: facts\[0\]: field 'kind'"):
        load(folder)
    truth = ('subject,predicate,object,kind,valid_from,valid_to\n"multi\nline",p,o,explicit,1,2\n\n'
             "c,p,o,explicit,x,2\n")
    folder = _log_folder(tmp_path, [_message("m1", 0)], truth=truth)
    with pytest.raises(InputError, match=r"truth.csv:5: field 'valid_from' must be an integer"):
        load(folder)
    # batch files given to ingest
    s = FactStore()
    jsonl = tmp_path / "ev.jsonl"
    jsonl.write_text('{"ts":1,"subject":"a","predicate":"p","object":"o","kind":"explicit"}\n\n'
                     '{"ts":2,"subject":"a","predicate":"p","object":"o","kind":"bogus"}\n')
    with pytest.raises(InputError, match=r"ev.jsonl: line 3: field 'kind'"):
        s.ingest(jsonl)
    csv = tmp_path / "ev.csv"
    csv.write_text('ts,subject,predicate,object,kind,note\n1,a,p,o,explicit,"x\ny"\n\n2,a,p,o,bogus,\n')
    with pytest.raises(InputError, match=r"ev.csv: line 5: field 'kind'"):
        s.ingest(csv)
    assert len(s) == 0


def test_a_schedule_too_fine_for_the_span_is_refused_before_any_work(tmp_path):
    from factmem.data.logs import load
    from factmem.evaluation.simulate import Schedule, simulate

    # one time in milliseconds of the 1970s among 2026 seconds: in range as seconds (year 5138), and the
    # log then spans three thousand years
    folder = _log_folder(tmp_path, [_message("m1", 1_767_225_600, [("a", "p", "o", "explicit")]),
                                    _message("m2", 1_767_225_700), _message("m3", 100_000_000_000)])
    ds = load(folder)
    with pytest.raises(InputError, match=r"more than 100,000: choose a longer period \(--consolidate-every HOURS.*"
                                         r"milliseconds"):
        simulate(ds, schedule=Schedule())
    with pytest.raises(InputError, match=r"--evaluate-every"):
        simulate(ds, schedule=Schedule(consolidate_every_hours=24 * 365 * 10))


def test_imported_triples_default_to_a_yearly_schedule_over_two_thousand_years(tmp_path):
    from factmem.data.importer import import_triples
    from factmem.evaluation.simulate import YEARLY_HOURS, Schedule, default_schedule, simulate

    tsv = tmp_path / "old.tsv"
    tsv.write_text("\n".join(f"s{i}\tlives_in\tc{i % 3}\t{20 + 40 * i}\t{60 + 40 * i}" for i in range(50)) + "\n")
    ds, _ = import_triples(tsv)
    assert (ds.end - ds.start) / (365.25 * 86400) > 1900  # never rejected for its span
    assert default_schedule(ds) == Schedule(YEARLY_HOURS, YEARLY_HOURS)
    run = simulate(ds)  # yearly by default
    assert len(run.checkpoints) > 1900 and 0 <= run.summary["recall"] <= 1
    run.store.close()
    with pytest.raises(InputError, match="a yearly one"):
        simulate(ds, schedule=Schedule())  # daily: 700,000 consolidations


# -- 3. run folders ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return write_tiny(tmp_path_factory, seed=31)


def _evidence_rows(db) -> int:
    with FactStore(db, read_only=True) as s:
        return len(s.evidence())


def test_simulate_out_refuses_a_used_folder_and_force_replaces_it(tiny_dir, tmp_path, capsys):
    from factmem.cli.main import main
    from factmem.data.logs import load
    from factmem.tuning.runs import INCOMPLETE, load_run

    out = tmp_path / "sim"
    assert main(["simulate", "--log", str(tiny_dir), "--out", str(out)]) == 0
    mentions = len(load(tiny_dir).events)
    assert _evidence_rows(out / "memory.duckdb") == mentions
    assert not (out / INCOMPLETE).exists() and load_run(out).manifest["kind"] == "simulate"
    capsys.readouterr()
    assert main(["simulate", "--log", str(tiny_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not empty" in err and "--force" in err
    assert _evidence_rows(out / "memory.duckdb") == mentions  # untouched
    assert main(["simulate", "--log", str(tiny_dir), "--out", str(out), "--force"]) == 0
    assert _evidence_rows(out / "memory.duckdb") == mentions  # replaced, not doubled


def test_a_killed_runs_leftovers_are_refused_and_force_replaces_them(tiny_dir, tmp_path, capsys):
    from factmem.cli.main import main
    from factmem.tuning.runs import INCOMPLETE, load_run, start_run

    out = start_run(tmp_path / "t")  # what a killed `tune` leaves: the marker and a half-filled memory
    FactStore(out / "memory.duckdb").close()
    with pytest.raises(Exception, match="incomplete run"):
        load_run(out)
    argv = ["tune", "--log", str(tiny_dir), "--param", "decay_rate.explicit=0.005,0.05", "--workers", "0", "-q",
            "--out", str(out)]
    assert main(argv) == 2 and "not empty (a previous run)" in capsys.readouterr().err
    assert main(argv + ["--force"]) == 0
    assert not (out / INCOMPLETE).exists() and (out / "report.md").exists()
    assert load_run(out).manifest["kind"] == "tune"


def test_force_never_deletes_a_folder_that_is_not_a_run(tmp_path, capsys, tiny_dir):
    from factmem.cli.main import main

    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("precious")
    assert main(["simulate", "--log", str(tiny_dir), "--out", str(home), "--force"]) == 2
    assert "not a factmem run folder" in capsys.readouterr().err
    assert (home / "thesis.tex").read_text() == "precious"


def test_library_run_folders_follow_the_same_rule(tiny_dir, tmp_path, monkeypatch):
    from factmem.evaluation.simulate import simulate
    from factmem.tuning import tune as tune_module
    from factmem.tuning.settings import Compute

    local = Compute(workers=0, progress=False)

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "memory.duckdb").write_bytes(b"")
    called = []
    monkeypatch.setattr(tune_module, "sweep", lambda *a, **k: called.append(1))
    with pytest.raises(InputError, match="not empty"):
        tune_module.tune(tiny_dir, out=busy, compute=local)
    assert not called  # refused before any work
    with pytest.raises(InputError, match="already exists"):
        simulate(tiny_dir, store_path=busy / "memory.duckdb")
    # a run that fails leaves nothing behind
    fresh = tmp_path / "fresh"
    monkeypatch.setattr(tune_module, "sweep", lambda *a, **k: (_ for _ in ()).throw(InputError("boom")))
    with pytest.raises(InputError, match="boom"):
        tune_module.tune(tiny_dir, out=fresh, compute=local)
    assert not fresh.exists()


def test_sweep_out_follows_the_rule(tiny_dir, tmp_path, capsys):
    from factmem.cli.main import main

    out = tmp_path / "sw"
    argv = ["sweep", "--log", str(tiny_dir), "--param", "decay_rate.episodic=0.1,0.5", "--workers", "0", "-q",
            "--out", str(out)]
    assert main(argv) == 0 and (out / "manifest.json").exists()
    assert main(argv) == 2 and "not empty" in capsys.readouterr().err
    assert main(argv + ["--force"]) == 0


# -- 13. an unwritable --out: one line, exit 2 -------------------------------------------------------


def test_unwritable_out_is_one_line_and_exit_2(tiny_dir, tmp_path, capsys):
    """A path under a regular file cannot be written (even by root, who ignores permission bits)."""
    from factmem.cli.main import main

    blocker = tmp_path / "afile"
    blocker.write_text("x")
    db = tmp_path / "m.duckdb"
    with FactStore(db) as s:
        s.remember("a", "p", "o", at=0)
    assert main(["export-db", str(db), "--out", str(tmp_path / "ok.sqlite"), "-q"]) == 0
    commands = [
        ["export-db", str(db), "--out", str(blocker / "x.sqlite")],
        ["import-db", str(tmp_path / "ok.sqlite"), "--out", str(blocker / "y.duckdb")],
        ["generate", "--preset", "tiny", "--out", str(blocker / "g")],
        ["simulate", "--log", str(tiny_dir), "--out", str(blocker / "s")],
        ["tune", "--log", str(tiny_dir), "--out", str(blocker / "t"), "--workers", "0", "-q"],
        ["sweep", "--log", str(tiny_dir), "--param", "reinforce_gain=0.3", "--out", str(blocker / "w"), "-q"],
    ]
    for argv in commands:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(blocker) in err and "Traceback" not in err, err
    assert blocker.read_text() == "x"


# -- 5. one store, many threads -----------------------------------------------------------------------


def test_one_store_shared_by_threads_stays_consistent(tmp_path):
    import threading

    s = FactStore(tmp_path / "t.duckdb")
    errors = []

    def work(t: int) -> None:
        try:
            for i in range(60):
                s.remember(f"user{i % 5}", "lives_in", f"city{t}-{i % 3}", at=i)
                if i % 20 == 0:
                    s.ingest(events([(i, f"u{t}", "likes", f"x{i}", "explicit")]))
                    s.facts(at=i)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    f = s.facts(at=0)
    ev = s.evidence()
    assert f["id"].is_unique and ev["id"].is_unique
    assert f["id"].tolist() == list(range(1, len(f) + 1)) and ev["id"].tolist() == list(range(1, len(ev) + 1))
    assert len(ev) == 4 * 60 + 4 * 3
    active = f[f["status"] == "active"]
    assert not active.duplicated(["subject", "predicate"]).any()  # one active fact per single-valued key
    s.close()


def test_a_transaction_keeps_other_threads_out_until_it_ends():
    import threading

    s = FactStore()
    inside = threading.Event()
    order = []

    def other() -> None:
        inside.wait()
        s.remember("b", "p", "o", at=5)
        order.append("other")

    th = threading.Thread(target=other)
    th.start()
    with s.transaction():
        s.remember("a", "p", "o", at=1)
        inside.set()
        th.join(0.3)  # the other thread is blocked on the store's lock
        assert th.is_alive()
        order.append("mine")
    th.join()
    assert order == ["mine", "other"] and len(s) == 2


# -- 6. a hard link (or symlink) to an open store -------------------------------------------------------


@pytest.mark.parametrize("alias", ["hardlink", "symlink", "relative"])
def test_a_second_name_for_an_open_store_is_refused(tmp_path, alias, monkeypatch):
    import os

    from factmem.errors import StoreLockedError

    path = tmp_path / "m.duckdb"
    s = FactStore(path)
    s.remember("a", "p", "o", at=0)
    other = tmp_path / "other.duckdb"
    if alias == "hardlink":
        os.link(path, other)
    elif alias == "symlink":
        os.symlink(path, other)
    else:
        monkeypatch.chdir(tmp_path)
        other = "m.duckdb"
    with pytest.raises(StoreLockedError, match="already open"):
        FactStore(other)
    s.remember("a", "p", "o2", at=1)
    s.close()
    with FactStore(other) as again:  # free once closed
        assert len(again) == 2


# -- 14, 18. files that are not stores; a store another process writes ----------------------------------


def test_files_that_are_not_stores_are_named_without_a_network_attempt(tmp_path):
    import sqlite3

    import duckdb

    from factmem.errors import SchemaVersionError, StoreError
    from factmem.store.factstore import DUCKDB_CONFIG

    # DuckDB fetches extensions in C++ (no Python socket to intercept): what prevents a download is
    # that the store's connections neither install nor load extensions on their own
    with FactStore() as s:
        for setting in ("autoinstall_known_extensions", "autoload_known_extensions"):
            assert s.db.execute(f"SELECT current_setting('{setting}')").fetchone()[0] is False
    lite = tmp_path / "prod.sqlite"
    con = sqlite3.connect(lite)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    for read_only in (False, True):
        with pytest.raises(StoreError, match=r"prod.sqlite: a SQLite database.*import-db"):
            FactStore(lite, read_only=read_only)
    with pytest.raises(duckdb.Error) as raw:  # and had DuckDB seen it: an error, not a download
        duckdb.connect(str(lite), config=DUCKDB_CONFIG)
    assert "download" not in str(raw.value).lower()
    garbled = tmp_path / "garbled.duckdb"
    garbled.write_bytes(b"\x00garbage" * 500)
    with pytest.raises(StoreError, match=r"garbled.duckdb: not a DuckDB database file"):
        FactStore(garbled)
    empty = tmp_path / "empty.duckdb"
    empty.write_bytes(b"")
    with pytest.raises(StoreError, match=r"empty.duckdb: an empty file"):
        FactStore(empty)
    with pytest.raises(StoreError, match="is a folder"):
        FactStore(tmp_path)
    bad = tmp_path / "bad.duckdb"
    FactStore(bad).close()
    import duckdb

    c = duckdb.connect(str(bad))
    c.execute("UPDATE factmem_meta SET value = 'abc' WHERE key = 'schema_version'")
    c.close()
    with pytest.raises(SchemaVersionError, match=r"bad.duckdb: unknown schema version 'abc'"):
        FactStore(bad)
    # the in-process registry is released after each failure: the files can be opened again later
    assert FactStore(tmp_path / "fine.duckdb").close() is None


def test_opening_a_store_another_process_writes_says_what_duckdb_allows(tmp_path):
    import subprocess
    import sys
    import textwrap

    from factmem.errors import StoreLockedError

    path = tmp_path / "busy.duckdb"
    FactStore(path).close()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).resolve().parents[1])!r})
        from factmem.store.factstore import FactStore
        s = FactStore({str(path)!r})
        print("open", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreLockedError, match="not even read-only") as err:
            FactStore(path, read_only=True)
        assert "read_only=True" not in str(err.value) and f"PID {holder.pid}" in str(err.value)
        with pytest.raises(StoreLockedError, match="another process"):
            FactStore(path)
    finally:
        holder.kill()
        holder.wait()


# -- the remember() key map: a superset of the truth ----------------------------------------------------


@pytest.mark.parametrize("collide", [False, True])
def test_remember_after_set_based_writes_rollbacks_and_collisions_matches_the_reference(collide, monkeypatch):
    from factmem.store import keyindex
    from factmem.testing import RefMemory

    if collide:  # every key hashes alike: candidates are other keys' facts, which must be told apart
        monkeypatch.setattr(keyindex, "key_hash", lambda s, p: 7)
        monkeypatch.setattr(keyindex, "_HASH_SQL", "CAST(7 AS UBIGINT)")
    params = MemoryParams(multi_valued_predicates={"likes"})
    s, ref = FactStore(params=params), RefMemory(params)
    rng = np.random.default_rng(5)
    t = -1_000_000
    for step in range(400):
        t += int(rng.integers(0, 3 * 86400))
        subj, pred, obj = f"s{rng.integers(0, 6)}", ["lives_in", "likes"][rng.integers(0, 2)], f"o{rng.integers(0, 3)}"
        action = rng.integers(0, 10)
        if action < 6:
            assert s.remember(subj, pred, obj, at=t) == ref.remember(subj, pred, obj, "explicit", t)
        elif action == 6:  # a set-based write the map must catch up with
            s.ingest(events([(t, subj, pred, obj, "explicit")]))
            ref.remember(subj, pred, obj, "explicit", t)
        elif action == 7:
            s.consolidate(at=t)
            ref.consolidate(t)
        else:  # a transaction that fails after inserting: its ids are reused afterwards
            with pytest.raises(RuntimeError):
                with s.transaction():
                    s.remember(subj, pred, f"gone{step}", at=t)
                    raise RuntimeError("abort")
    got = s.facts(at=0)
    want = pd.DataFrame(ref.table())
    assert got["id"].tolist() == want["id"].tolist()
    assert got["status"].tolist() == want["status"].tolist()
    assert got["object"].tolist() == want["object"].tolist()
    assert got["supersedes_id"].fillna(-1).astype(int).tolist() == want["supersedes_id"].fillna(-1).astype(int).tolist()


def test_key_hash_matches_duckdb():
    import duckdb

    from factmem.store.keyindex import key_hash

    con = duckdb.connect()
    for subject, predicate in [("ada", "lives_in"), ("café ☕", "x'); DROP"), ("", "p"), ("a\x00b", "c")]:
        got = con.execute("SELECT md5_number_lower(? || chr(0) || ?)", [subject, predicate]).fetchone()[0]
        assert np.uint64(got).view(np.int64) == key_hash(subject, predicate)


# -- 4, 7. import-db: the destination's lock; the store's invariants ----------------------------------------


def _exported(tmp_path, name="prod.sqlite"):
    from factmem.export.sqlite import export_db

    s = FactStore(params=MemoryParams(multi_valued_predicates={"likes"}))
    s.remember("ada", "lives_in", "paris", at=-100)
    s.remember("ada", "lives_in", "rome", at=0)
    s.remember("ada", "likes", "tea", at=5)
    s.remember("ada", "likes", "rust", at=6)
    s.remember("bob", "lives_in", "oslo", at=7)
    out = tmp_path / name
    export_db(s, out)
    s.close()
    return out


INVARIANTS = {
    "two active facts for one key": ("UPDATE memory_facts SET status = 'active' WHERE id = 1",
                                     r"table memory_facts: rowids 1,2: 2 active facts for \('ada', 'lives_in'\)"),
    "dangling supersedes_id": ("UPDATE memory_facts SET supersedes_id = 99 WHERE id = 2",
                               r"table memory_facts: column 'supersedes_id': 99 is not the id of a fact .*"
                               r"dangling.*rowid 2"),
    "evidence for a missing fact": ("UPDATE memory_evidence SET fact_id = 42 WHERE id = 3",
                                    r"table memory_evidence: column 'fact_id': 42 .*evidence for a missing fact.*rowid 3"),
    "confidence 7.5": ("UPDATE memory_facts SET confidence = 7.5 WHERE id = 3",
                       r"table memory_facts: column 'confidence': 7.5 is not a confidence in \[0, 1\].*rowid 3"),
    "decay -3": ("UPDATE memory_facts SET decay_rate = -3 WHERE id = 4",
                 r"table memory_facts: column 'decay_rate': -3.0 is not a finite decay rate >= 0.*rowid 4"),
    "evidence confidence": ("UPDATE memory_evidence SET confidence = -0.5 WHERE id = 1",
                            r"table memory_evidence: column 'confidence': -0.5 is not a confidence"),
    "unknown format": ("UPDATE factmem_meta SET value = 'factmem.sqlite/2' WHERE key = 'format'",
                       r"table factmem_meta: key 'format' = 'factmem.sqlite/2': this factmem reads 'factmem.sqlite/1'"),
    "time 2**63-1": (f"UPDATE memory_facts SET first_seen = {2**63 - 1} WHERE id = 5",
                     r"table memory_facts: column 'first_seen': 9223372036854775807 is not a Unix time in the "
                     r"supported range"),
    "time -2**63": (f"UPDATE memory_evidence SET observed_at = {-(2**63)} WHERE id = 2",
                    r"table memory_evidence: column 'observed_at': -9223372036854775808 is not a Unix time"),
    "link to a missing fact": ("INSERT INTO memory_fact_links VALUES (1, 77, 5)",
                               r"table memory_fact_links: column 'child_id': 77 .*link to a missing fact"),
}


@pytest.mark.parametrize("case", list(INVARIANTS))
def test_import_db_refuses_rows_that_break_the_invariants(tmp_path, case, capsys):
    import sqlite3

    from factmem.cli.main import main
    from factmem.errors import ProductionDBError
    from factmem.export.sqlite import import_db

    src = _exported(tmp_path)
    sql, message = INVARIANTS[case]
    con = sqlite3.connect(src)
    con.execute(sql)
    con.commit()
    con.close()
    with pytest.raises(ProductionDBError, match=message):
        import_db(src, tmp_path / "m.duckdb")
    assert not (tmp_path / "m.duckdb").exists()
    assert main(["import-db", str(src), "--out", str(tmp_path / "m.duckdb")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_duplicate_evidence_ids_and_the_explicit_flag(tmp_path):
    import sqlite3

    from factmem.errors import ProductionDBError
    from factmem.export.sqlite import import_db

    src = _exported(tmp_path)
    con = sqlite3.connect(src)  # a production table whose id is not a primary key can repeat ids
    con.executescript("ALTER TABLE memory_evidence RENAME TO e0; CREATE TABLE memory_evidence (id INTEGER, "
                      "fact_id INTEGER NOT NULL, session_id TEXT, message_id TEXT, observed_at INTEGER NOT NULL, "
                      "action TEXT, confidence REAL, source TEXT); INSERT INTO memory_evidence SELECT * FROM e0; "
                      "DROP TABLE e0; UPDATE memory_evidence SET id = 1 WHERE id = 2;")
    con.commit()
    con.close()
    with pytest.raises(ProductionDBError, match=r"table memory_evidence: column 'id': 1 is not a unique evidence id"):
        import_db(src, tmp_path / "m.duckdb")
    two = _exported(tmp_path, "two.sqlite")
    con = sqlite3.connect(two)
    con.execute("UPDATE memory_facts SET status = 'active' WHERE id = 1")
    con.commit()
    con.close()
    res = import_db(two, tmp_path / "kept.duckdb", allow_multiple_active=True)  # kept as stored, on request
    assert res.facts == 5
    with FactStore(tmp_path / "kept.duckdb") as s:
        assert (s.facts(at=0)["status"] == "active").sum() == 5
        s.remember("ada", "lives_in", "lima", at=10)  # the general rule: supersedes the latest active
        assert s.history("ada", "lives_in")["status"].tolist() == ["active", "superseded", "active"]


def test_import_db_force_never_replaces_a_store_in_use(tmp_path):
    import subprocess
    import sys
    import textwrap

    from factmem.errors import StoreLockedError
    from factmem.export.sqlite import import_db

    src = _exported(tmp_path)
    out = tmp_path / "live.duckdb"
    with FactStore(out) as s:  # this process has it open
        s.remember("x", "p", "o", at=0)
        with pytest.raises(StoreLockedError, match="already open"):
            import_db(src, out, overwrite=True)
    root = str(__import__("pathlib").Path(__file__).resolve().parents[1])
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {root!r})
        from factmem.store.factstore import FactStore
        s = FactStore({str(out)!r})
        print("open", flush=True)
        sys.stdin.readline()
        s.remember("late", "write", "kept", at=5)
        s.close()
        print("done", flush=True)
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
        with pytest.raises(StoreLockedError, match="open in another process"):
            import_db(src, out, overwrite=True)
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "done"
    finally:
        writer.kill()
        writer.wait()
    with FactStore(out, read_only=True) as s:  # the writer's later write landed in the file
        assert s.facts(at=0)["subject"].tolist() == ["x", "late"]
    assert import_db(src, out, overwrite=True).facts == 5  # nobody holds it now


# -- 11. a path is never formatted into SQL ---------------------------------------------------------------


def test_a_temp_folder_with_quotes_cannot_inject_sql(tmp_path, monkeypatch):
    import tempfile

    from factmem.data.generate import generate, write
    from factmem.data.logs import load

    evil = tmp_path / "x' (FORMAT json); COPY (SELECT 42) TO 'pwned.json"
    evil.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(evil))
    monkeypatch.chdir(tmp_path)
    ds = generate("tiny", seed=2)
    out = write(ds, tmp_path / "ds")
    assert load(out).equals(ds)
    assert not (tmp_path / "pwned.json").exists() and not any(p.name == "pwned.json" for p in tmp_path.rglob("*"))


# -- 20. leftovers of a killed export-db / import-db --------------------------------------------------------


def test_stale_temporaries_of_a_killed_export_are_cleaned_on_the_next_run(tmp_path):
    import os
    import subprocess
    import sys

    from factmem.export.sqlite import export_db, import_db

    db = tmp_path / "m.duckdb"
    with FactStore(db) as s:
        s.remember("a", "p", "o", at=0)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has exited
    out = tmp_path / "prod.sqlite"
    stale = [tmp_path / f".prod.sqlite.tmp-{pid}", tmp_path / f".prod.sqlite.tmp-{pid}-journal"]
    for p in stale:
        p.write_bytes(b"\0" * 4096)
    live = tmp_path / f".prod.sqlite.tmp-{os.getppid()}"  # another export still running: left alone
    live.write_bytes(b"busy")
    export_db(db, out)
    assert not any(p.exists() for p in stale) and live.exists()
    imported = tmp_path / "back.duckdb"
    stale_db = [tmp_path / f".back.duckdb.tmp-{pid}", tmp_path / f".back.duckdb.tmp-{pid}.wal"]
    for p in stale_db:
        p.write_bytes(b"\0" * 4096)
    import_db(out, imported)
    assert not any(p.exists() for p in stale_db)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [live.name]


# -- 8, 9. providers: a deadline per call; one bad answer fails one cluster ----------------------------------


@pytest.mark.parametrize("api", ["openai", "ollama"])
def test_a_slow_drip_server_meets_the_deadline_of_the_call(llm_server, api):
    import time

    from factmem.abstraction.providers import Ollama, OpenAICompatible
    from factmem.errors import ProviderError
    from tests.llm_server import Reply

    provider = (OpenAICompatible if api == "openai" else Ollama)(llm_server.url, model="m", timeout=2)
    llm_server.reply(Reply.slow_drip("[]", every=0.5))  # ~250 bytes: two minutes of drip
    t0 = time.monotonic()
    with pytest.raises(ProviderError) as err:
        provider.complete([{"role": "user", "content": "hi"}])
    elapsed = time.monotonic() - t0
    assert err.value.kind == "timeout" and "deadline" in str(err.value)
    assert 1.9 <= elapsed < 3.5, elapsed
    llm_server.reply(Reply.text("[]"))  # the provider stays usable
    assert provider.complete([{"role": "user", "content": "hi"}]) == "[]"
    provider.close()


def _cluster_store():
    s = FactStore()
    for subject in ("ann", "ben", "cat"):
        for i, pred in enumerate(("lives_in", "works_at", "speaks")):
            s.remember(subject, pred, f"{pred}-{subject}", at=i)
    return s


class _Scripted:
    """A provider answering each cluster (by subject) with a scripted text."""

    model = "scripted"

    def __init__(self, answers):
        self.answers = answers

    def complete(self, messages, *, model=None, temperature=0.0):
        import json

        subject = json.loads(messages[-1]["content"])["subject"]
        return self.answers[subject]


def test_one_bad_answer_fails_its_cluster_and_the_pass_goes_on():
    from factmem.abstraction.passes import abstract

    deep = "[" * 200_000 + "]" * 200_000
    answers = {
        "ann": '[{"subject": "ann", "predicate": "is_a", "object": "\\ud800"}]',  # a lone surrogate
        "ben": deep,  # nested 200,000 deep
        "cat": '[{"subject": "cat", "predicate": "is_a", "object": "traveller"}]',
    }
    s = _cluster_store()
    r = abstract(s, _Scripted(answers), at=100, min_cluster=3)
    c = r.counters()
    assert (c["eligible"], c["failed"], c["created"]) == (3, 2, 1)
    by = {o.subject: o for o in r.outcomes}
    assert by["ann"].outcome == "failed" and "surrogate" in by["ann"].error
    assert by["ben"].outcome == "failed" and "nested too deep" in by["ben"].error
    assert by["cat"].outcome == "derived"
    import json

    json.dumps(r.to_dict(), ensure_ascii=False).encode("utf-8")  # printable: the CLI's --json
    assert s.facts(at=100).query("kind == 'derived'")["object"].tolist() == ["traveller"]


def test_a_deep_envelope_from_a_server_skips_the_cluster(llm_server):
    from factmem.abstraction.passes import abstract
    from factmem.abstraction.providers import OpenAICompatible
    from tests.llm_server import Reply

    s = _cluster_store()
    llm_server.reply(Reply.raw("[" * 200_000 + "]" * 200_000))
    llm_server.reply(Reply.text('[{"subject": "ben", "predicate": "is_a", "object": "cook"}]'))
    llm_server.reply(Reply.text("[]"))
    r = abstract(s, OpenAICompatible(llm_server.url, model="m", timeout=10), at=100, min_cluster=3)
    assert (r.skipped, r.created, r.empty) == (1, 1, 1)


# -- 12. out-of-range values and bad text: clear errors, not raw library exceptions ---------------------------


def test_bad_values_are_input_errors_naming_the_field():
    import pyarrow as pa

    s = FactStore()
    with pytest.raises(InputError, match="at = 9223372036854775808 is outside the supported time range"):
        s.remember("a", "p", "o", at=2**63)
    with pytest.raises(InputError, match=r"object is not valid Unicode text \(a lone surrogate\)"):
        s.remember("a", "p", "\ud800", at=0)
    bad_text = pd.DataFrame({"ts": [0, 1], "subject": ["a", "b\udfff"], "predicate": ["p", "p"], "object": ["o", "o"],
                             "kind": ["explicit", "explicit"]}, dtype=object)  # object columns can hold it
    bad_text["ts"] = bad_text["ts"].astype("int64")
    with pytest.raises(InputError, match=r"batch: row 1: field 'subject' is not valid Unicode text"):
        s.ingest(bad_text)
    with pytest.raises(InputError, match=r"batch: row 0: field 'ts' = 18446744073709551615 is outside"):
        s.ingest(pa.table({"ts": pa.array([2**64 - 1], pa.uint64()), "subject": ["a"], "predicate": ["p"],
                           "object": ["o"], "kind": ["explicit"]}))
    assert len(s) == 0


# -- 15. params files that would crash the reader ------------------------------------------------------------


@pytest.mark.parametrize("name, text", [
    ("huge.json", '{"reinforce_gain": ' + "9" * 5000 + "}"),
    ("deep.json", '{"reinforce_gain": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ("huge.toml", "reinforce_gain = " + "9" * 5000 + "\n"),
    ("deep.toml", "reinforce_gain = " + "[" * 100_000 + "]" * 100_000 + "\n"),
])
def test_params_files_that_would_crash_the_reader_are_params_file_errors(tmp_path, name, text, capsys):
    from factmem.cli.main import main
    from factmem.errors import ParamsFileError
    from factmem.export import load_params_file

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ParamsFileError, match=name):
        load_params_file(path)
    with pytest.raises(ParamsFileError, match=name):
        MemoryParams.load(path)
    assert main(["params", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and name in err
    assert main(["export", str(path), "--out", str(tmp_path / "p.rs")]) == 2
    assert not (tmp_path / "p.rs").exists()


# -- 19. Rust export: bidirectional controls --------------------------------------------------------------


def test_rust_export_escapes_bidi_controls_and_compiles(tmp_path):
    import shutil
    import subprocess

    from factmem.export.document import ParamsDocument
    from factmem.export.rust import render_rust, rust_str

    assert rust_str("a\u202eb\u2066c\u2069\u200f\u061c\u200b") == '"a\\u{202e}b\\u{2066}c\\u{2069}\\u{200f}\\u{61c}\\u{200b}"'
    tricky = {"lives_in\u202e", "\u2066admin\u2069", "rtl\u200fmark", "zero\u200bwidth"}
    doc = ParamsDocument(MemoryParams(multi_valued_predicates=tricky),
                         {"notes": "approved \u202e ;lla rof\u2066 \u2028 end", "run_id": "r\u20671"})
    text = render_rust(doc)
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\u2028"
    assert not any(ch in text for ch in bidi)  # every one spelled as an escape
    rustc = shutil.which("rustc") or ("/root/.cargo/bin/rustc" if __import__("os").path.exists("/root/.cargo/bin/rustc")
                                      else None)
    if rustc is None:
        pytest.skip("rustc not found")
    src = tmp_path / "p.rs"
    src.write_text(text, encoding="utf-8")
    src.with_name("p_test.rs").write_text(text + """
#[cfg(test)]
mod bidi_check {
    #[test]
    fn predicates_keep_their_characters() {
        assert!(super::is_multi_valued("lives_in\\u{202e}"));
        assert!(super::is_multi_valued("\\u{2066}admin\\u{2069}"));
        assert!(!super::is_multi_valued("lives_in"));
    }
}
""", encoding="utf-8")
    exe = tmp_path / "p_bin"
    build = subprocess.run([rustc, "--edition", "2021", "--test", str(src.with_name("p_test.rs")), "-o", str(exe)],
                           capture_output=True, text=True, timeout=180)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "bidi_check::predicates_keep_their_characters ... ok" in run.stdout, run.stdout


# -- trajectories: computed from the evidence with numpy, the grid capped ------------------------------------

_TRAJECTORIES_SQL = """
    WITH ids AS (SELECT DISTINCT unnest($ids::BIGINT[]) AS fact_id),
    ev AS (SELECT fact_id, observed_at AS t, arg_max(confidence, id) AS confidence
           FROM memory_evidence WHERE fact_id IN (SELECT fact_id FROM ids) GROUP BY fact_id, observed_at),
    pts AS (SELECT i.fact_id, g.t, NULL::DOUBLE AS confidence, NULL::BIGINT AS obs, 1 AS is_point
            FROM ids i CROSS JOIN (SELECT unnest(range($start, $end + 1, $step)) AS t) g
            UNION ALL SELECT fact_id, t, confidence, t, 0 FROM ev),
    filled AS (SELECT fact_id, t, is_point, last_value(confidence IGNORE NULLS) OVER w AS c,
                      last_value(obs IGNORE NULLS) OVER w AS observed_at FROM pts
               WINDOW w AS (PARTITION BY fact_id ORDER BY t, is_point ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW))
    SELECT p.fact_id, p.t, f.kind, f.subject, f.predicate, f.object,
           p.c * exp(-f.decay_rate * greatest(0.0, CAST(p.t - p.observed_at AS DOUBLE) / 86400.0)) AS effective_confidence,
           CASE WHEN p.observed_at IS NULL THEN NULL
                WHEN f.status_changed_at IS NOT NULL AND f.status_changed_at <= p.t THEN f.status
                ELSE 'active' END AS status
    FROM filled p JOIN memory_facts f ON f.id = p.fact_id WHERE p.is_point = 1 ORDER BY p.fact_id, p.t"""


def test_trajectories_equal_the_window_query_they_replace():
    rng = np.random.default_rng(3)
    s = FactStore()
    t = -5 * 86400  # across 1970
    for _ in range(300):
        t += int(rng.integers(0, 20_000))
        s.remember(f"s{rng.integers(0, 4)}", "p", f"o{rng.integers(0, 3)}", at=t)
        if rng.random() < 0.05:
            s.consolidate(at=t)
    # production evidence without a confidence, and two observations at one time
    s.db.execute("INSERT INTO memory_evidence VALUES (10000, 2, NULL, NULL, ?, NULL, NULL, NULL)", [t - 50_000])
    s.db.execute("INSERT INTO memory_evidence VALUES (10001, 3, NULL, NULL, ?, NULL, NULL, NULL)", [t - 60_000])
    ids = [1, 2, 3, 5, 8, 13, 999]  # 999 does not exist
    for start, end, step in [(-6 * 86400, t + 86400, 3600), (t - 70_000, t, 977)]:
        got = s.trajectories(ids, start, end, step)
        want = s.query(_TRAJECTORIES_SQL, {"ids": ids, "start": start, "end": end, "step": step})
        assert got["fact_id"].tolist() == want["fact_id"].tolist() and got["t"].tolist() == want["t"].tolist()
        for col in ("kind", "subject", "predicate", "object", "status"):
            assert got[col].tolist() == want[col].tolist() or [
                None if pd.isna(v) else v for v in got[col]] == [None if pd.isna(v) else v for v in want[col]], col
        np.testing.assert_allclose(got["effective_confidence"].to_numpy(float),
                                   want["effective_confidence"].to_numpy(float), rtol=1e-14, atol=0, equal_nan=True)


def test_a_trajectory_grid_too_large_is_refused_with_a_step_that_fits():
    s = FactStore()
    ids = [s.remember(f"s{i}", "p", "o", at=0) for i in range(20)]
    four_months = 120 * 86400
    with pytest.raises(InputError, match=r"20 facts × 172,801 times .* more than max_rows=2,000,000; use step >= 104 s"):
        s.trajectories(ids, 0, four_months, step=60)
    got = s.trajectories(ids, 0, four_months, step=104)  # what the message proposes fits
    assert len(got) <= 2_000_000 and got["fact_id"].nunique() == 20
    assert len(s.trajectories(ids[:2], 0, four_months, step=60, max_rows=400_000)) == 2 * 172_801


def test_cli_uses_a_yearly_schedule_for_imported_triples(tmp_path, capsys):
    import json

    from factmem.cli.main import main

    tsv = tmp_path / "old.tsv"
    tsv.write_text("\n".join(f"s{i}\tlives_in\tc{i % 3}\t{100 + 30 * i}\t{130 + 30 * i}" for i in range(40)) + "\n")
    assert main(["import-triples", str(tsv), "--out", str(tmp_path / "ds"), "-q"]) == 0
    assert main(["simulate", "--log", str(tmp_path / "ds"), "--out", str(tmp_path / "run")]) == 0
    schedule = json.loads((tmp_path / "run" / "manifest.json").read_text())["schedule"]
    assert schedule["consolidate_every_hours"] == schedule["evaluate_every_hours"] == 8760
    capsys.readouterr()
    assert main(["simulate", "--log", str(tmp_path / "ds"), "--consolidate-every", "24"]) == 2
    assert "--consolidate-every HOURS" in capsys.readouterr().err


@pytest.mark.parametrize("suffix, body, hint", [
    (".csv", "ts,subject,predicate,object,kind\n1,a,p,o,explicit\n99999999999999999999,a,p,o,explicit\n", "nanoseconds"),
    (".jsonl", '{"ts":1,"subject":"a","predicate":"p","object":"o","kind":"explicit"}\n'
               '{"ts":1700000000000,"subject":"a","predicate":"p","object":"o","kind":"explicit"}\n', "milliseconds"),
])
def test_batch_files_with_times_out_of_range_name_the_line(tmp_path, suffix, body, hint):
    path = tmp_path / f"events{suffix}"
    path.write_text(body)
    s = FactStore()
    with pytest.raises(InputError, match=rf"events{suffix}: line 3|events{suffix}: line 2") as err:
        s.ingest(path)
    assert "supported time range" in str(err.value) and hint in str(err.value)
    assert len(s) == 0
