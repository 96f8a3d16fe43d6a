"""What travels with the parameters: the schedule in params documents, the fingerprint and period in an
exported file's factmem_meta, the index the seed's queries need, and what whatif says when a file was
built with other parameters or another schedule."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from factmem.cli.main import main
from factmem.core.params import MemoryParams
from factmem.core.schedule import CONSOLIDATE_EVERY_SECONDS, next_consolidation
from factmem.errors import InputError, ParamsFileError
from factmem.export.document import ParamsDocument, params_fingerprint, read_params_document, write_params_file
from factmem.export.rust import render_rust
from factmem.export.sqlite import export_db, import_db
from factmem.production.provenance import provenance_notes
from factmem.production.whatif import whatif
from factmem.store.factstore import FactStore

DAY = 86400
T0 = 1_704_067_200


def test_schedule_travels_in_params_documents(tmp_path):
    p = MemoryParams(reinforce_gain=0.4)
    for suffix in ("toml", "json"):
        path = write_params_file(tmp_path / f"p.{suffix}", p, stamp=False, consolidate_every_seconds=3600)
        doc = read_params_document(path)
        assert doc.params == p and doc.consolidate_every_seconds == 3600
        assert "consolidate_every_seconds" in path.read_text() and "1970-01-01T00:00:00Z" in path.read_text()
        # exporting keeps it, in every format
        assert main(["export", str(path), "--out", str(tmp_path / f"e.{suffix}"), "-q"]) == 0
        assert read_params_document(tmp_path / f"e.{suffix}").consolidate_every_seconds == 3600
    assert "pub const CONSOLIDATE_EVERY_SECONDS: i64 = 3600;" in render_rust(read_params_document(path))
    # a document written before the table: daily, as every tuning assumed
    old = tmp_path / "old.json"
    data = json.loads(write_params_file(old, p, stamp=False).read_text())
    del data["schedule"]
    old.write_text(json.dumps(data))
    assert read_params_document(old).consolidate_every_seconds == CONSOLIDATE_EVERY_SECONDS
    for bad, match in (({"consolidate_every_seconds": 0}, "positive whole number"),
                       ({"consolidate_every_seconds": 1.5}, "positive whole number"),
                       ({"anchor": "2024-01-01T00:00:00Z"}, "only supported anchor"),
                       ({"every": 5}, "unknown key")):
        old.write_text(json.dumps({**data, "schedule": bad}))
        with pytest.raises(ParamsFileError, match=match):
            read_params_document(old)
    with pytest.raises(InputError, match="positive whole number"):
        ParamsDocument(p, consolidate_every_seconds=0)
    assert next_consolidation(T0 - 1) == T0 and next_consolidation(T0) == T0 + DAY
    assert next_consolidation(-1) == 0 and next_consolidation(T0 + 5, 3600) == T0 + 3600


def _memory(tmp_path, params=None):
    store = FactStore(tmp_path / "m.duckdb", params=params or MemoryParams())
    rows = [(T0 + i * 3600, "ada", "likes", o, "episodic") for i, o in enumerate(["tea", "tea", "go", "go"])]
    for ts, s, p, o, k in rows:
        store.remember(s, p, o, kind=k, at=ts)
    store.consolidate(T0 + 10 * DAY)
    return store


def test_export_db_records_fingerprint_period_and_writes_the_index(tmp_path):
    p = MemoryParams(reinforce_gain=0.4)
    with _memory(tmp_path, p) as store:
        export_db(store, tmp_path / "a.sqlite", progress=False, consolidate_every_seconds=7200)
    with sqlite3.connect(tmp_path / "a.sqlite") as sq:
        meta = dict(sq.execute("SELECT key, value FROM factmem_meta").fetchall())
        index = sq.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = "
                           "'memory_facts_subject_predicate_status'").fetchone()
        plan = " ".join(r[-1] for r in sq.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM memory_facts WHERE status = 'active' AND subject = 'ada' "
            "AND predicate = 'likes' AND object = 'go'"))
    assert meta["params_fingerprint"] == params_fingerprint(p) and meta["consolidate_every_seconds"] == "7200"
    assert index is not None and "(subject, predicate, status)" in index[0]
    assert "USING INDEX memory_facts_subject_predicate_status" in plan
    # import-db reads the file with the index, and without it
    assert import_db(tmp_path / "a.sqlite", tmp_path / "a.duckdb").facts == 2
    with sqlite3.connect(tmp_path / "a.sqlite") as sq:
        sq.execute("DROP INDEX memory_facts_subject_predicate_status")
        sq.execute("CREATE INDEX crate_own ON memory_facts(kind)")
    assert import_db(tmp_path / "a.sqlite", tmp_path / "b.duckdb").facts == 2
    # the CLI's period, in hours
    assert main(["export-db", str(tmp_path / "m.duckdb"), "--out", str(tmp_path / "c.sqlite"),
                 "--consolidate-every", "1", "-q"]) == 0
    with sqlite3.connect(tmp_path / "c.sqlite") as sq:
        assert sq.execute("SELECT value FROM factmem_meta WHERE key = 'consolidate_every_seconds'").fetchone() == ("3600",)
    assert main(["export-db", str(tmp_path / "m.duckdb"), "--out", str(tmp_path / "d.sqlite"),
                 "--consolidate-every", "0", "-q"]) == 2
    assert not (tmp_path / "d.sqlite").exists()


def test_whatif_says_when_the_file_was_built_otherwise(tmp_path):
    seed, other = MemoryParams(), MemoryParams(reinforce_gain=0.4)
    with _memory(tmp_path, seed) as store:
        export_db(store, tmp_path / "a.sqlite", progress=False)
    # the file as factmem wrote it: no note
    quiet = whatif(tmp_path / "a.sqlite", other, bootstrap=5, figures=False)
    assert not any("built with" in n for n in quiet.notes)
    # a client that ran other parameters hourly and recorded it
    with sqlite3.connect(tmp_path / "a.sqlite") as sq:
        sq.execute("UPDATE factmem_meta SET value = ? WHERE key = 'params_fingerprint'", [params_fingerprint(other)])
        sq.execute("UPDATE factmem_meta SET value = '3600' WHERE key = 'consolidate_every_seconds'")
    hourly = whatif(tmp_path / "a.sqlite", other, bootstrap=5, figures=False)
    notes = hourly.notes
    assert any("built with other parameters" in n and params_fingerprint(other)[:12] in n
               and "not those of its own factmem_meta 'params'" in n for n in notes), notes
    # without --consolidate-every the replay takes the file's period, and says so
    assert hourly.settings.period == 3600 and any("the period the file records" in n for n in notes), notes
    told = whatif(tmp_path / "a.sqlite", other, bootstrap=5, figures=False, consolidate_every_hours=24.0).notes
    assert any("consolidation every 1 h" in n and "--consolidate-every 1" in n for n in told), told
    # the pure check: agreement, and a garbled period
    assert provenance_notes({"params_fingerprint": params_fingerprint(seed),
                             "consolidate_every_seconds": "86400"}, seed, 86400) == []
    assert "not a whole number" in provenance_notes({"consolidate_every_seconds": "daily"}, seed, 86400)[0]
    assert provenance_notes({}, seed, 3600) == []


def test_store_contexts_follow_the_params_thresholds():
    store = FactStore(params=MemoryParams(archive_threshold=0.05, retrieval_threshold=0.3))
    store.remember("ada", "likes", "tea", kind="episodic", at=T0)  # 0.4, decays 0.3/day
    store.remember("ada", "uses", "vim", kind="user_preference", at=T0)  # 0.5, 0.02/day
    day1 = store.context("ada", 5, at=T0 + DAY)
    assert list(day1["object"]) == ["vim"]  # tea: 0.4·e^-0.3 = 0.296 < 0.3
    assert day1["effective_confidence"].iloc[0] == pytest.approx(0.5 * np.exp(-0.02))
    assert list(store.context("ada", 5, at=T0)["object"]) == ["vim", "tea"]
    assert store.context("nobody", 5, at=T0).empty
