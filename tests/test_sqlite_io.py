"""SQLite export/import: the seed's schema exactly, lossless round trips over random stores, production
files without factmem's extras, every bad-file case, and the export-db / import-db commands."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.cli.main import main
from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams
from factmem.errors import ExportError, ProductionDBError, StoreError
from factmem.export.sqlite import compare_memories, export_db, import_db
from factmem.export.sqlite_format import (
    SEED_FACTS_DDL,
    SEED_LINKS_DDL,
    extra_columns_note,
    validate_sqlite,
)
from factmem.store.factstore import Evidence, FactStore
from factmem.store.schema import SEED_FACT_COLUMNS

SUBJECTS = ["ada", "bob", "x'); DROP TABLE memory_facts; --"]
PREDICATES = ["likes", "lives_in", "uses"]
OBJECTS = ["rust", "zig", "café ☕", "line\nbreak"]
DAY = 86400


def has_table(store: FactStore, name: str) -> bool:
    return name in set(store.query("SELECT table_name FROM information_schema.tables")["table_name"])


def tables(store: FactStore) -> dict[str, pd.DataFrame]:
    out = {
        "facts": store.query("SELECT * FROM memory_facts ORDER BY id"),
        "links": store.query("SELECT * FROM memory_fact_links ORDER BY parent_id, child_id"),
        "evidence": store.query("SELECT * FROM memory_evidence ORDER BY id"),
    }
    out["examined"] = store.query("SELECT subject, CAST(member_ids AS VARCHAR) AS ids, examined_at, pass_id, outcome "
                                  "FROM memory_abstraction_examined ORDER BY ALL")
    return out


def test_every_store_table_is_exported():
    """A table added to the store must be added to export_db/import_db too, or the round trip loses it."""
    with FactStore() as s:
        names = set(s.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'")["table_name"])
    assert names <= {"factmem_meta", "memory_facts", "memory_fact_links", "memory_evidence",
                     "memory_abstraction_examined"}


def assert_same_tables(a: FactStore, b: FactStore) -> None:
    ta, tb = tables(a), tables(b)
    for name in ta:
        pd.testing.assert_frame_equal(ta[name], tb[name], check_exact=True, obj=name)


# -- random stores -------------------------------------------------------------------------------------------

op = st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES), st.sampled_from(OBJECTS),
              st.sampled_from(KINDS), st.sampled_from([0, 60, DAY, 5 * DAY]), st.sampled_from([None, "n"])),
    st.tuples(st.just("ingest"), st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES),
                                                    st.sampled_from(OBJECTS), st.sampled_from(KINDS),
                                                    st.sampled_from([0, 1, DAY])), max_size=12)),
    st.tuples(st.just("consolidate"), st.sampled_from([DAY, 20 * DAY, 200 * DAY]), st.booleans()),
    st.tuples(st.just("derive"), st.sampled_from(SUBJECTS), st.integers(1, 4), st.booleans()),
    st.tuples(st.just("stale"), st.integers(1, 30)),
    st.tuples(st.just("empty"), st.sampled_from(SUBJECTS), st.sampled_from([None, "pass-1"])),
)


def build_store(ops, params: MemoryParams) -> FactStore:
    s = FactStore(params=params)
    t = 1_700_000_000
    for o in ops:
        if o[0] == "remember":
            _, subj, pred, obj, kind, gap, note = o
            t += gap
            s.remember(subj, pred, obj, kind=kind, at=t, note=note, evidence=Evidence(f"s{t % 7}", f"m{t}"))
        elif o[0] == "ingest":
            rows = []
            for subj, pred, obj, kind, gap in o[1]:
                t += gap
                rows.append((t, subj, pred, obj, kind))
            if rows:
                df = pd.DataFrame(rows, columns=["ts", "subject", "predicate", "object", "kind"])
                df["session_id"] = [None if i % 3 == 0 else f"s{i}" for i in range(len(df))]
                s.ingest(df)
        elif o[0] == "consolidate":
            t += o[1]
            s.consolidate(at=t, prune=o[2])
        elif o[0] == "derive":
            # a derived fact linked to the subject's active facts, as an abstraction pass would write
            subj, reps, then_prune = o[1], o[2], o[3]
            kids = s.query("SELECT id FROM memory_facts WHERE subject = ? AND status = 'active' AND kind <> 'derived'",
                           [subj])["id"].tolist()
            if kids:
                for _ in range(reps):
                    t += 60
                    pid = s.remember(subj, "is", "a pattern", kind="derived", at=t,
                                     evidence=Evidence("abstraction:p", f"cluster:{subj}", source="abstraction"))
                s.link(pid, kids, at=t)
                if then_prune:  # archives the children once the derived fact is reinforced often enough
                    s.consolidate(at=t, prune=True)
        elif o[0] == "stale":
            s.set_stale([o[1]])
        elif o[0] == "empty" and hasattr(s, "record_empty_answer"):
            kids = s.query("SELECT id FROM memory_facts WHERE subject = ? AND status = 'active'", [o[1]])["id"].tolist()
            s.record_empty_answer(o[1], kids, at=t, pass_id=o[2])
    return s


@settings(max_examples=20)
@given(ops=st.lists(op, min_size=2, max_size=14),
       params=st.builds(MemoryParams, reinforce_gain=st.sampled_from([0.3, 0.05, 1.0]),
                        multi_valued_predicates=st.sets(st.sampled_from(PREDICATES), max_size=1),
                        reinforce_base=st.sampled_from(["stored", "effective"]),
                        decay_rate_by_predicate=st.dictionaries(st.sampled_from(PREDICATES + ["is"]),
                                                                st.sampled_from([0.0, 0.004, 0.7]), max_size=2)))
def test_round_trip_random_stores(ops, params):
    src = build_store(ops, params)
    with tempfile.TemporaryDirectory() as tmp:
        sqlite_path, duck = Path(tmp) / "prod.sqlite", Path(tmp) / "back.duckdb"
        res = export_db(src, sqlite_path)
        assert res.facts == len(src)
        imp = import_db(sqlite_path, duck)
        assert imp.filled == {"action": 0, "confidence": 0, "source": 0} and imp.params_from == "factmem_meta"
        with FactStore(duck) as back:
            assert back.params == params
            assert_same_tables(src, back)
            # ids continue after the max in both, and the stores stay identical under further writes
            t = int(src.query("SELECT coalesce(max(last_reinforced), 0) AS t FROM memory_facts")["t"][0]) + DAY
            for s in (src, back):
                s.remember("ada", "likes", "go", at=t)
                s.remember("new", "fact", "x", kind="episodic", at=t + 1)
                s.consolidate(at=t + 30 * DAY)
            assert_same_tables(src, back)
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["back.duckdb", "prod.sqlite"]  # no temp files left
    src.close()


@pytest.fixture
def sample(tmp_path):
    s = build_store([("remember", "ada", "likes", "rust", "user_preference", 0, "n"),
                     ("remember", "ada", "likes", "rust", "user_preference", DAY, None),
                     ("remember", "ada", "likes", "zig", "user_preference", DAY, None),
                     ("remember", "ada", "uses", "vim", "explicit", 0, None),
                     ("remember", "ada", "saw", "a bird", "episodic", 0, None),
                     ("derive", "ada", 2, False), ("consolidate", 20 * DAY, True)], MemoryParams())
    yield s
    s.close()


def test_sqlite_has_the_seeds_schema_exactly(sample, tmp_path):
    out = tmp_path / "prod.sqlite"
    export_db(sample, out)
    sq = sqlite3.connect(out)
    info = sq.execute("PRAGMA table_info(memory_facts)").fetchall()
    assert [r[1] for r in info] == list(SEED_FACT_COLUMNS)
    assert [(r[2], r[3], r[5]) for r in info] == [
        ("INTEGER", 0, 1), ("TEXT", 1, 0), ("TEXT", 1, 0), ("TEXT", 1, 0), ("TEXT", 0, 0), ("TEXT", 1, 0),
        ("REAL", 1, 0), ("INTEGER", 1, 0), ("INTEGER", 1, 0), ("INTEGER", 1, 0), ("REAL", 1, 0), ("TEXT", 1, 0),
        ("INTEGER", 0, 0)]
    assert [(r[1], r[2], r[3], r[5]) for r in sq.execute("PRAGMA table_info(memory_fact_links)")] == [
        ("parent_id", "INTEGER", 1, 1), ("child_id", "INTEGER", 1, 2), ("created_at", "INTEGER", 1, 0)]
    fks = sq.execute("PRAGMA foreign_key_list(memory_fact_links)").fetchall()
    assert {(r[2], r[3], r[4], r[6]) for r in fks} == {("memory_facts", "parent_id", "id", "CASCADE"),
                                                       ("memory_facts", "child_id", "id", "CASCADE")}
    sql = dict(sq.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    assert sql["memory_facts"] in SEED_FACTS_DDL.replace("IF NOT EXISTS ", "")
    assert sql["memory_fact_links"] in SEED_LINKS_DDL.replace("IF NOT EXISTS ", "")
    assert set(sql) == {"memory_facts", "memory_fact_links", "memory_evidence", "factmem_fact_state", "factmem_meta",
                        "factmem_abstraction_examined"}
    # the extras live only in the side table, and only for facts that have one set
    state = sq.execute("SELECT * FROM factmem_fact_state ORDER BY id").fetchall()
    expected = sample.con.execute(
        "SELECT id, status_changed_at, status_reason, stale::INT AS stale FROM memory_facts "
        "WHERE status_changed_at IS NOT NULL OR status_reason IS NOT NULL OR stale ORDER BY id").fetchall()
    assert len(state) == 3 and state == expected and any(r[3] == 1 for r in state)
    assert len(sample) > len(state)
    sq.close()


def test_export_is_deterministic_and_accepts_a_path(sample, tmp_path):
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    export_db(sample, a)
    db = tmp_path / "m.duckdb"
    export_db(sample, tmp_path / "x.sqlite")
    import_db(tmp_path / "x.sqlite", db)
    export_db(db, b)  # from a store file, opened read-only
    assert a.read_bytes() == b.read_bytes()


def test_production_crate_can_use_the_file(sample, tmp_path):
    """The seed's own statements run on the exported file, evidence with only the seed's four columns
    included; importing it back keeps the crate's rows and completes the missing evidence values."""
    out = tmp_path / "prod.sqlite"
    export_db(sample, out)
    sq = sqlite3.connect(out)
    now = 1_800_000_000
    conflict = sq.execute(
        "SELECT id FROM memory_facts WHERE status = 'active' AND subject = ?1 AND predicate = ?2 AND object <> ?3 "
        "ORDER BY last_reinforced DESC, id DESC LIMIT 1", ("ada", "uses", "helix")).fetchone()
    assert conflict is not None
    sq.execute("INSERT INTO memory_facts (subject, predicate, object, kind, confidence, reinforcement_count, "
               "first_seen, last_reinforced, decay_rate, status, supersedes_id) "
               "VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?6, ?7, 'active', ?8)",
               ("ada", "uses", "helix", "explicit", 0.4, now, 0.05, conflict[0]))
    new_id = sq.execute("SELECT last_insert_rowid()").fetchone()[0]
    sq.execute("UPDATE memory_facts SET status = 'superseded' WHERE id = ?1", (conflict[0],))
    sq.execute("INSERT INTO memory_evidence (fact_id, session_id, message_id, observed_at) VALUES (?, 's9', 'm9', ?)",
               (new_id, now))
    sq.commit()
    sq.close()
    res = import_db(out, tmp_path / "back.duckdb")
    assert res.filled == {"action": 1, "confidence": 1, "source": 1}
    with FactStore(tmp_path / "back.duckdb") as back:
        f = back.get(new_id)
        assert (f.object, f.status, f.supersedes_id, f.status_changed_at, f.stale) == ("helix", "active", conflict[0],
                                                                                      None, False)
        old = back.get(conflict[0])
        assert old.status == "superseded" and old.status_changed_at is None  # the crate does not record it
        ev = back.evidence(new_id).iloc[0]
        # the crate records no action, confidence or source: kept NULL, as stored
        assert ev["action"] is None and ev["source"] is None and ev["session_id"] == "s9" and pd.isna(ev["confidence"])
        # NaN confidence goes back out as NULL, and comes in again as NaN
        export_db(back, tmp_path / "again.sqlite")
    sq = sqlite3.connect(tmp_path / "again.sqlite")
    assert sq.execute("SELECT confidence FROM memory_evidence WHERE fact_id = ?", (new_id,)).fetchone() == (None,)
    sq.close()


def make_production(path: Path, facts_ddl: str = SEED_FACTS_DDL, links_ddl: str = SEED_LINKS_DDL,
                    evidence_ddl: str = "CREATE TABLE memory_evidence (fact_id INTEGER NOT NULL, session_id TEXT, "
                                        "message_id TEXT, observed_at INTEGER NOT NULL)",
                    facts=None, skip: str | None = None, extra_sql: str = "") -> Path:
    """A memory as the seed's crate writes it: its DDL, no factmem tables."""
    sq = sqlite3.connect(path)
    for name, ddl in (("memory_facts", facts_ddl), ("memory_fact_links", links_ddl), ("memory_evidence", evidence_ddl)):
        if name != skip:
            sq.executescript(ddl)
    if skip != "memory_facts":
        rows = facts if facts is not None else [
            (3, "ada", "likes", "rust", None, "user_preference", 0.65, 1, 100, 200, 0.02, "superseded", None),
            (7, "ada", "likes", "zig", "note", "user_preference", 0.5, 0, 300, 300, 0.02, "active", 3),
            (9, "ada", "saw", "bird", None, "episodic", 0.4, 0, 300, 300, 0.3, "archived", None),
            (12, "ada", "is", "a coder", None, "derived", 0.755, 3, 400, 900, 0.02, "active", None)]
        sq.executemany(f"INSERT INTO memory_facts VALUES ({', '.join('?' * len(rows[0]))})", rows)
    if skip not in ("memory_fact_links", "memory_facts") and "created_at" in links_ddl:
        sq.execute("INSERT INTO memory_fact_links VALUES (12, 7, 400)")
    if skip != "memory_evidence" and "message_id" in evidence_ddl:
        sq.executemany("INSERT INTO memory_evidence (fact_id, session_id, message_id, observed_at) VALUES (?, ?, ?, ?)",
                       [(3, "s1", "m1", 100), (3, "s2", "m2", 200), (7, "s3", None, 300), (12, None, None, 400)])
    if extra_sql:
        sq.executescript(extra_sql)
    sq.commit()
    sq.close()
    return path


def test_import_production_memory_keeps_rows_as_stored(tmp_path):
    src = make_production(tmp_path / "prod.sqlite")
    res = import_db(src, tmp_path / "m.duckdb")
    assert (res.facts, res.links, res.evidence, res.params_from) == (4, 1, 4, "seed defaults")
    with FactStore(tmp_path / "m.duckdb") as s:
        f = s.facts(at=0)
        assert f["id"].tolist() == [3, 7, 9, 12]
        assert f["status"].tolist() == ["superseded", "active", "archived", "active"]
        assert f["confidence"].tolist() == [0.65, 0.5, 0.4, 0.755]
        assert f["supersedes_id"].tolist()[1] == 3 and pd.isna(f["supersedes_id"][0])
        assert f["status_changed_at"].isna().all() and f["status_reason"].isna().all() and not f["stale"].any()
        ev = s.evidence()
        assert ev["id"].tolist() == [1, 2, 3, 4]
        assert ev["source"].isna().all() and ev["confidence"].isna().all() and ev["action"].isna().all()
        assert s.children(12)["id"].tolist() == [7]
        assert s.remember("bob", "likes", "tea", at=1000) == 13  # ids continue after the max
        assert s.remember("ada", "likes", "zig", kind="user_preference", at=1000) == 7  # reinforces the stored fact
    # explicit params win over the file's (absent) meta
    res = import_db(src, tmp_path / "m2.duckdb", params=MemoryParams(reinforce_gain=0.5))
    assert res.params_from == "argument"
    with FactStore(tmp_path / "m2.duckdb") as s:
        assert s.params.reinforce_gain == 0.5


def test_compare_imported_memory_with_a_replay(tmp_path):
    import_db(make_production(tmp_path / "prod.sqlite"), tmp_path / "prod.duckdb")
    replay = FactStore()
    replay.remember("ada", "likes", "zig", kind="user_preference", at=300)
    replay.remember("ada", "saw", "bird", kind="episodic", at=300)
    replay.remember("bob", "likes", "tea", at=300)
    cmp = compare_memories(tmp_path / "prod.duckdb", replay)
    assert cmp.attrs["at"] == 900
    by = cmp.set_index(["subject", "predicate", "object"])
    assert by.loc[("ada", "likes", "zig"), "where"] == "both" and not by.loc[("ada", "likes", "zig"), "status_differs"]
    assert by.loc[("ada", "saw", "bird"), "status_differs"]  # archived in production, active in the replay
    assert by.loc[("ada", "likes", "rust"), "where"] == "production_only"
    assert by.loc[("bob", "likes", "tea"), "where"] == "replay_only"
    assert by.loc[("ada", "likes", "zig"), "effective_diff"] == 0.0
    replay.close()


# -- bad files --------------------------------------------------------------------------------------------------

FACT_COLS_SQL = ",\n".join(SEED_FACTS_DDL.split("(", 1)[1].rsplit(")", 1)[0].strip().splitlines())


def facts_ddl(replace: dict[str, str | None] | None = None, add: str = "") -> str:
    lines = [ln.strip().rstrip(",") for ln in SEED_FACTS_DDL.split("(", 1)[1].rsplit(")", 1)[0].strip().splitlines()]
    out = []
    for ln in lines:
        name = ln.split()[0]
        if replace and name in replace:
            if replace[name] is not None:
                out.append(replace[name])
        else:
            out.append(ln)
    if add:
        out.append(add)
    return "CREATE TABLE memory_facts (\n    " + ",\n    ".join(out) + "\n);"


ROW = (1, "ada", "likes", "rust", None, "explicit", 0.4, 0, 100, 100, 0.05, "active", None)
BAD_FILES = {
    "missing column": (dict(facts_ddl=facts_ddl({"note": None}),
                            facts=[ROW[:4] + ROW[5:]]), "table memory_facts: missing column 'note'"),
    "wrong declared type": (dict(facts_ddl=facts_ddl({"confidence": "confidence TEXT NOT NULL"})),
                            "column 'confidence' has type 'TEXT', expected REAL"),
    "text in an integer column": (dict(facts=[ROW[:8] + ("yesterday",) + ROW[9:]]),
                                  "column 'first_seen': 'yesterday' is text, expected integer"),
    "text in a real column": (dict(facts=[ROW[:6] + ("high",) + ROW[7:]]),
                              "column 'confidence': 'high' is text, expected real"),
    "null in not null": (dict(facts_ddl=facts_ddl({"subject": "subject TEXT"}), facts=[ROW[:1] + (None,) + ROW[2:]]),
                         "column 'subject': NULL in a NOT NULL column"),
    "unknown kind": (dict(facts=[ROW[:5] + ("preference",) + ROW[6:]]), "column 'kind': unknown value 'preference'"),
    "unknown status": (dict(facts=[ROW[:11] + ("deleted",) + ROW[12:]]), "column 'status': unknown value 'deleted'"),
    "duplicate ids": (dict(facts_ddl=facts_ddl({"id": "id INTEGER NOT NULL"}), facts=[ROW, ROW]),
                      "column 'id': value 1 appears 2 times"),
    "missing facts table": (dict(skip="memory_facts"), "missing table 'memory_facts'"),
    "missing links table": (dict(skip="memory_fact_links"), "missing table 'memory_fact_links'"),
    "missing evidence table": (dict(skip="memory_evidence"), "missing table 'memory_evidence'"),
    "links missing column": (dict(links_ddl="CREATE TABLE memory_fact_links (parent_id INTEGER, child_id INTEGER)"),
                             "table memory_fact_links: missing column 'created_at'"),
    "evidence missing seed column": (dict(evidence_ddl="CREATE TABLE memory_evidence (fact_id INTEGER, observed_at "
                                          "INTEGER, session_id TEXT)"),
                                     "table memory_evidence: missing column 'message_id'"),
    "bad state table": (dict(extra_sql="CREATE TABLE factmem_fact_state (id INTEGER PRIMARY KEY, status_changed_at "
                             "INTEGER, status_reason TEXT, stale INTEGER NOT NULL); INSERT INTO factmem_fact_state "
                             "VALUES (3, 5, 'decay', 2);"), "factmem_fact_state: column 'stale': unknown value 2"),
    "bad empty-cluster ids": (dict(extra_sql="CREATE TABLE factmem_abstraction_empty (subject TEXT NOT NULL, member_ids "
                                   "TEXT NOT NULL, examined_at INTEGER NOT NULL, pass_id TEXT); INSERT INTO "
                                   "factmem_abstraction_empty VALUES ('ada', '[1, \"x\"]', 5, NULL);"),
                              "factmem_abstraction_empty: column 'member_ids': '[1, \"x\"]' is not a JSON array of integer"),
    "bad examined outcome": (dict(extra_sql="CREATE TABLE factmem_abstraction_examined (subject TEXT NOT NULL, "
                                  "member_ids TEXT NOT NULL, examined_at INTEGER NOT NULL, pass_id TEXT, outcome TEXT "
                                  "NOT NULL); INSERT INTO factmem_abstraction_examined VALUES ('ada', '[1]', 5, NULL, "
                                  "'failed');"), "factmem_abstraction_examined: column 'outcome': unknown value 'failed'"),
    "bad examined ids": (dict(extra_sql="CREATE TABLE factmem_abstraction_examined (subject TEXT NOT NULL, member_ids "
                              "TEXT NOT NULL, examined_at INTEGER NOT NULL, pass_id TEXT, outcome TEXT NOT NULL); "
                              "INSERT INTO factmem_abstraction_examined VALUES ('ada', '{\"a\": 1}', 5, NULL, 'empty');"),
                         "factmem_abstraction_examined: column 'member_ids'"),
    "examined missing outcome": (dict(extra_sql="CREATE TABLE factmem_abstraction_examined (subject TEXT NOT NULL, "
                                      "member_ids TEXT NOT NULL, examined_at INTEGER NOT NULL, pass_id TEXT);"),
                                 "table factmem_abstraction_examined: missing column 'outcome'"),
    "bad meta params": (dict(extra_sql="CREATE TABLE factmem_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); "
                             "INSERT INTO factmem_meta VALUES ('params', '{\"reinforce_gain\": 7}');"),
                        "factmem_meta: key 'params': reinforce_gain = 7.0 is invalid"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_sqlite_files_are_rejected_and_nothing_written(tmp_path, case, capsys):
    kwargs, message = BAD_FILES[case]
    src = make_production(tmp_path / "prod.sqlite", **kwargs)
    out = tmp_path / "m.duckdb"
    with pytest.raises(ProductionDBError) as info:
        import_db(src, out)
    assert str(src) in str(info.value) and message in str(info.value), str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prod.sqlite"]
    assert main(["import-db", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prod.sqlite"]


def test_columns_a_deployment_added_to_the_seed_tables_are_ignored_and_listed(tmp_path):
    """A real deployment adds columns (user_id, embedding) to the seed's tables: they are ignored, named in
    ``extra_columns``; an extra column in factmem's own tables is still refused."""
    rows = [(3, "ada", "likes", "rust", None, "user_preference", 0.65, 1, 100, 200, 0.02, "superseded", None, b"x"),
            (7, "ada", "likes", "zig", "note", "user_preference", 0.5, 0, 300, 300, 0.02, "active", 3, None),
            (12, "ada", "is", "a coder", None, "derived", 0.755, 3, 400, 900, 0.02, "active", None, None)]
    src = make_production(tmp_path / "prod.sqlite", facts_ddl=facts_ddl(add="embedding BLOB"), facts=rows,
                          evidence_ddl="CREATE TABLE memory_evidence (fact_id INTEGER NOT NULL, session_id TEXT, "
                          "message_id TEXT, observed_at INTEGER NOT NULL, weight REAL)")
    info = validate_sqlite(src)
    assert info["extra_columns"] == {"memory_facts": ["embedding"], "memory_evidence": ["weight"]}
    assert "memory_evidence (weight); memory_facts (embedding)" in extra_columns_note(info["extra_columns"])
    import_db(src, tmp_path / "m.duckdb")
    bad = make_production(tmp_path / "state.sqlite", extra_sql="CREATE TABLE factmem_fact_state (id INTEGER PRIMARY "
                          "KEY, status_changed_at INTEGER, status_reason TEXT, stale INTEGER NOT NULL, extra TEXT);")
    with pytest.raises(ProductionDBError, match="factmem_fact_state: unexpected column 'extra'"):
        validate_sqlite(bad)


def test_other_bad_inputs(tmp_path, sample):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ProductionDBError, match="not a SQLite database"):
        validate_sqlite(junk)
    with pytest.raises(ProductionDBError, match="no such file"):
        import_db(tmp_path / "missing.sqlite", tmp_path / "m.duckdb")
    good = make_production(tmp_path / "prod.sqlite")
    existing = tmp_path / "exists.duckdb"
    existing.write_bytes(b"keep me")
    with pytest.raises(ExportError, match="already exists"):
        import_db(good, existing)
    assert existing.read_bytes() == b"keep me"
    import_db(good, existing, overwrite=True)
    # export: existing output, NaN confidence, a missing store file
    out = tmp_path / "out.sqlite"
    out.write_bytes(b"keep me")
    with pytest.raises(ExportError, match="already exists"):
        export_db(sample, out)
    sample.con.execute("UPDATE memory_facts SET confidence = 'NaN'::DOUBLE WHERE id = 2")
    with pytest.raises(ExportError, match=r"1 facts have a NaN confidence .*first id 2"):
        export_db(sample, out, overwrite=True)
    assert out.read_bytes() == b"keep me"
    with pytest.raises(StoreError, match="none.duckdb: no such store file"):
        export_db(tmp_path / "none.duckdb", tmp_path / "x.sqlite")
    assert not (tmp_path / "x.sqlite").exists()


def test_export_and_import_commands(tmp_path, sample, capsys):
    db = tmp_path / "m.duckdb"
    export_db(sample, tmp_path / "seed.sqlite")
    import_db(tmp_path / "seed.sqlite", db)
    prod = tmp_path / "prod.sqlite"
    assert main(["export-db", str(db), "--out", str(prod)]) == 0
    assert "facts" in capsys.readouterr().out
    assert main(["export-db", str(db), "--out", str(prod)]) == 2  # exists
    assert "already exists" in capsys.readouterr().err
    assert main(["export-db", str(db), "--out", str(prod), "--force", "-q"]) == 0
    back = tmp_path / "back.duckdb"
    params = tmp_path / "p.toml"
    from factmem.export import write_params_file

    write_params_file(params, MemoryParams(archive_threshold=0.1), None)
    assert main(["import-db", str(prod), "--out", str(back), "--params", str(params), "-q"]) == 0
    with FactStore(back) as b, FactStore(db, read_only=True) as a:
        assert_same_tables(a, b)
        assert b.params == MemoryParams(archive_threshold=0.1)
    assert main(["export-db", str(tmp_path / "nope.duckdb"), "--out", str(tmp_path / "n.sqlite")]) == 2
    assert not (tmp_path / "n.sqlite").exists()
    for cmd in ("export-db", "import-db"):
        with pytest.raises(SystemExit) as info:
            main([cmd, "--help"])
        assert info.value.code == 0 and "--force" in capsys.readouterr().out
