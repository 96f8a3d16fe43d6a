"""FactStore: golden values of the seed's numbers, versioning, persistence, bad input, faults."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from factmem.core.params import MemoryParams
from factmem.errors import FactNotFoundError, InputError, SchemaVersionError, StoreError, StoreLockedError
from factmem.store.factstore import Evidence, FactStore

DAY = 86400
T0 = 1_767_225_600  # 2026-01-01


def events(rows):
    return pd.DataFrame(rows, columns=["ts", "subject", "predicate", "object", "kind"])


# -- golden values of the seed ------------------------------------------------------------------

def test_episodic_half_life_is_about_2_3_days(store):
    fid = store.remember("ada", "saw", "a fox", kind="episodic", at=T0)
    f = store.get(fid)
    assert f.confidence == 0.4 and f.decay_rate == 0.3
    # the store's effective confidence falls through half (0.2) between 2.30 and 2.32 days (ln 2 / 0.3)
    eff = store.facts(at=T0 + int(2.30 * DAY))["effective_confidence"].iloc[0]
    assert eff > 0.2 > store.facts(at=T0 + int(2.32 * DAY))["effective_confidence"].iloc[0]
    assert store.facts(at=T0 + 3 * DAY)["effective_confidence"].iloc[0] == pytest.approx(0.4 * math.exp(-0.9), rel=1e-12)


def test_preference_half_life_is_about_35_days(store):
    store.remember("ada", "prefers", "rust", kind="user_preference", at=T0)
    at_35 = store.facts(at=T0 + 35 * DAY)["effective_confidence"].iloc[0]
    assert at_35 == pytest.approx(0.5 * math.exp(-0.7), rel=1e-12)
    # half of 0.5 is reached between 34.6 and 34.7 days (ln 2 / 0.02 = 34.66)
    assert store.facts(at=T0 + int(34.6 * DAY))["effective_confidence"].iloc[0] > 0.25
    assert store.facts(at=T0 + int(34.7 * DAY))["effective_confidence"].iloc[0] < 0.25


def test_a_read_before_last_reinforced_sees_the_stored_confidence(store):
    """Age is clipped at 0: reading at a time before a fact's last reinforcement (a negative age)
    gives the stored confidence, never more — in facts(), stats() and consolidate()."""
    a = store.remember("ada", "uses", "vim", kind="explicit", at=T0 + DAY)
    b = store.remember("ada", "saw", "a fox", kind="episodic", at=T0 + 10 * DAY)
    store.remember("ada", "saw", "a fox", kind="episodic", at=T0 + 12 * DAY)  # b: 0.58, reinforced at 12 d
    f = store.facts(at=T0).set_index("id")["effective_confidence"]
    assert f[a] == 0.4 and f[b] == pytest.approx(0.58, abs=1e-15)
    assert store.facts(at=T0 + 11 * DAY).set_index("id").loc[b, "effective_confidence"] == pytest.approx(0.58, abs=1e-15)
    st = store.stats(at=T0).set_index("kind")
    assert st.loc["explicit", "mean_effective_confidence"] == 0.4
    # a consolidation dated before the reinforcement compares the stored confidence with the threshold
    store.params = store.params.replace(archive_threshold=0.41)
    assert store.consolidate(at=T0) == (1, 0)
    assert store.get(a).status == "archived" and store.get(b).status == "active"


def test_archival_boundary_is_strict(store_factory):
    """A confidence exactly on the archive threshold stays active: archival is ``effective < threshold``,
    through consolidate and through replay."""
    p = MemoryParams(archive_threshold=0.4, decay_rate={"explicit": 0.0})
    s = store_factory(p)
    fid = s.remember("ada", "uses", "vim", kind="explicit", at=T0)
    assert s.consolidate(at=T0 + 100 * DAY) == (0, 0) and s.get(fid).status == "active"
    s.params = p.replace(archive_threshold=0.4000000000000001)  # the next float up
    assert s.consolidate(at=T0 + 101 * DAY) == (1, 0) and s.get(fid).status == "archived"
    r = store_factory(p, name="replay.duckdb")
    r.replay(events([(T0, "ada", "uses", "vim", "explicit"), (T0, "ada", "saw", "rain", "episodic")]),
             [T0 + DAY, T0 + 50 * DAY])
    f = r.facts(at=T0).set_index("object")
    assert f.loc["vim", "status"] == "active" and f.loc["rain", "status"] == "archived"


def test_reinforcement_sequence_from_0_4(store):
    fid = store.remember("ada", "uses", "vim", kind="explicit", at=T0)
    seen = [store.get(fid).confidence]
    for i in range(1, 16):
        store.remember("ada", "uses", "vim", kind="explicit", at=T0 + i)
        seen.append(store.get(fid).confidence)
    assert seen[:4] == pytest.approx([0.4, 0.58, 0.706, 0.7942], abs=1e-12)
    assert seen[12:] == [0.99] * 4  # capped, exactly
    assert store.get(fid).reinforcement_count == 15


def test_archival_at_0_05(store):
    store.remember("ada", "saw", "rain", kind="episodic", at=T0)
    # 0.4 * exp(-0.3 d) < 0.05  <=>  d > ln(8)/0.3 = 6.93 days
    assert store.consolidate(at=T0 + 6 * DAY) == (0, 0)
    assert store.consolidate(at=T0 + 7 * DAY) == (1, 0)
    f = store.facts(at=T0)
    assert f["status"].tolist() == ["archived"] and f["status_reason"].tolist() == ["decay"]
    assert f["status_changed_at"].tolist() == [T0 + 7 * DAY]
    assert store.consolidate(at=T0 + 8 * DAY) == (0, 0)  # idempotent
    # archived, never deleted; a new mention starts a new fact
    new = store.remember("ada", "saw", "rain", kind="episodic", at=T0 + 9 * DAY)
    assert new == 2 and len(store) == 2


def test_pruning_after_two_reinforcements(store):
    kids = [store.remember("ada", p, "x", at=T0) for p in ("a", "b", "c")]
    d = store.remember("ada", "is", "tidy", kind="derived", at=T0)
    store.link(d, kids, at=T0)
    store.remember("ada", "is", "tidy", kind="derived", at=T0 + 1)
    assert store.consolidate(at=T0 + 2) == (0, 0)  # reinforced once: not yet validated
    store.remember("ada", "is", "tidy", kind="derived", at=T0 + 3)
    assert store.consolidate(at=T0 + 4) == (0, 3)
    f = store.facts(at=T0 + 4).set_index("id")
    assert (f.loc[kids, "status"] == "archived").all() and (f.loc[kids, "status_reason"] == "pruned").all()
    assert f.loc[d, "status"] == "active" and not f.loc[d, "stale"]


def test_prune_false_only_archives_by_decay(store):
    kids = [store.remember("ada", p, "x", at=T0) for p in ("a", "b")]
    d = store.remember("ada", "is", "tidy", kind="derived", at=T0)
    store.link(d, kids, at=T0)
    for i in range(2):
        store.remember("ada", "is", "tidy", kind="derived", at=T0 + 1 + i)
    assert store.consolidate(at=T0 + 5, prune=False) == (0, 0)
    assert store.consolidate(at=T0 + 5) == (0, 2)


def test_reinforce_base_effective_uses_decayed_confidence(store_factory):
    s = store_factory(MemoryParams(reinforce_base="effective"))
    fid = s.remember("ada", "saw", "fox", kind="episodic", at=T0)
    s.remember("ada", "saw", "fox", kind="episodic", at=T0 + 2 * DAY)
    eff = 0.4 * math.exp(-0.6)
    assert s.get(fid).confidence == pytest.approx(eff + 0.3 * (1 - eff), rel=1e-15)


def test_reinforcing_ignores_the_new_mentions_kind(store):
    fid = store.remember("ada", "uses", "vim", kind="episodic", at=T0)
    assert store.remember("ada", "uses", "vim", kind="user_preference", at=T0 + 1) == fid
    f = store.get(fid)
    assert f.kind == "episodic" and f.decay_rate == 0.3 and f.reinforcement_count == 1


# -- contradiction versioning -------------------------------------------------------------------

def test_versioning_chain_and_lineage(store):
    ids = [store.remember("ada", "lives_in", city, kind="explicit", at=T0 + i * DAY)
           for i, city in enumerate(["paris", "lyon", "nice", "oslo"])]
    h = store.history("ada", "lives_in")
    assert h["object"].tolist() == ["paris", "lyon", "nice", "oslo"]
    assert h["status"].tolist() == ["superseded"] * 3 + ["active"]
    assert h["supersedes_id"].tolist()[1:] == ids[:3] and pd.isna(h["supersedes_id"].iloc[0])
    assert h["status_changed_at"].tolist()[:3] == [T0 + DAY, T0 + 2 * DAY, T0 + 3 * DAY]
    lin = store.lineage(ids[1])
    assert lin["id"].tolist() == ids and lin["depth"].tolist() == [-1, 0, 1, 2]
    # back to an old value: a new version, the superseded one stays superseded
    again = store.remember("ada", "lives_in", "paris", at=T0 + 10 * DAY)
    assert again not in ids and store.get(ids[0]).status == "superseded"
    assert store.get(again).supersedes_id == ids[3]


def test_multi_valued_predicates_never_supersede(store_factory):
    s = store_factory(MemoryParams(multi_valued_predicates={"speaks"}))
    a = s.remember("ada", "speaks", "french", at=T0)
    b = s.remember("ada", "speaks", "german", at=T0 + 1)
    assert s.get(a).status == "active" and s.get(b).status == "active" and s.get(b).supersedes_id is None


def test_as_of_rebuilds_past_beliefs(store):
    a = store.remember("ada", "lives_in", "paris", at=T0)
    store.remember("ada", "lives_in", "paris", at=T0 + DAY)
    store.remember("ada", "lives_in", "lyon", at=T0 + 5 * DAY)
    past = store.as_of(T0 + 2 * DAY)
    assert past["id"].tolist() == [a] and past["reinforcement_count"].tolist() == [1]
    assert past["confidence"].iloc[0] == pytest.approx(0.58)
    assert past["effective_confidence"].iloc[0] == pytest.approx(0.58 * math.exp(-0.05))
    now = store.as_of(T0 + 6 * DAY)
    assert now["object"].tolist() == ["lyon"]
    assert store.as_of(T0 - 1).empty


def test_trajectories_show_jumps_and_status(store):
    a = store.remember("ada", "uses", "vim", at=T0)
    store.remember("ada", "uses", "vim", at=T0 + 2 * DAY)
    store.remember("ada", "uses", "emacs", at=T0 + 4 * DAY)
    tr = store.trajectories([a], T0 - DAY, T0 + 5 * DAY, step=DAY)
    assert len(tr) == 7
    eff = tr["effective_confidence"].to_numpy()
    assert np.isnan(eff[0])
    assert eff[1] == pytest.approx(0.4) and eff[2] == pytest.approx(0.4 * math.exp(-0.05))
    assert eff[3] == pytest.approx(0.58)  # the reinforcement at day 2
    assert tr["status"].tolist()[1:] == ["active"] * 4 + ["superseded"] * 2


def test_evidence_provenance(store):
    a = store.remember("ada", "uses", "vim", at=T0, evidence=Evidence("s1", "m1"))
    store.remember("ada", "uses", "vim", at=T0 + 5, evidence=Evidence("s2", "m7"))
    ev = store.evidence(a)
    assert ev[["session_id", "message_id", "action"]].values.tolist() == [["s1", "m1", "insert"], ["s2", "m7", "reinforce"]]
    assert ev["confidence"].tolist() == pytest.approx([0.4, 0.58])


def test_get_missing_fact(store):
    with pytest.raises(FactNotFoundError, match="no fact with id 42"):
        store.get(42)


def test_time_arguments_accept_datetimes(store):
    fid = store.remember("ada", "uses", "vim", at=pd.Timestamp("2026-01-01", tz="UTC"))
    assert store.get(fid).first_seen == T0
    fid2 = store.remember("ada", "uses", "vim", at="2026-01-02T00:00:00Z")
    assert fid2 == fid and store.get(fid).last_reinforced == T0 + DAY


# -- persistence --------------------------------------------------------------------------------

def test_persistence_round_trip(tmp_path):
    path = tmp_path / "m.duckdb"
    params = MemoryParams(reinforce_gain=0.25, multi_valued_predicates={"speaks"})
    with FactStore(path, params=params) as s:
        s.ingest(events([(T0, "ada", "uses", "vim", "explicit"), (T0 + 1, "ada", "uses", "vim", "explicit"),
                         (T0 + 2, "ada", "uses", "helix", "explicit")]))
        s.consolidate(at=T0 + 3)
        before = s.facts(at=T0 + 3)
        before_ev = s.evidence()
    with FactStore(path) as s:
        assert s.params == params  # saved with the file
        pd.testing.assert_frame_equal(s.facts(at=T0 + 3), before)
        pd.testing.assert_frame_equal(s.evidence(), before_ev)
        assert s.remember("ada", "likes", "tea", at=T0 + 4) == 3  # ids continue


def test_ids_stay_in_storage_order(store):
    """facts() relies on rows being stored in id order."""
    for i in range(3):
        store.ingest(events([(T0 + i * 10 + j, "ada", f"p{j % 3}", f"o{(i + j) % 2}", "explicit") for j in range(9)]))
        store.remember("bob", "uses", f"x{i}", at=T0 + 100 + i)
        store.consolidate(at=T0 + 200 + i * DAY * 30)
    ids = store.facts(at=T0)["id"].to_numpy()
    assert (np.diff(ids) == 1).all() and ids[0] == 1


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "m.duckdb"
    FactStore(path).close()
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("UPDATE factmem_meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(SchemaVersionError, match="schema 99"):
        FactStore(path)


def test_foreign_duckdb_file_is_refused(tmp_path):
    import duckdb

    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE memory_facts (id INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="no factmem metadata"):
        FactStore(path)


def test_same_file_twice_in_one_process(tmp_path):
    path = tmp_path / "m.duckdb"
    with FactStore(path):
        with pytest.raises(StoreLockedError, match="already open"):
            FactStore(path)
    FactStore(path).close()  # released on close


def test_second_process_gets_a_clear_error(tmp_path):
    path = tmp_path / "m.duckdb"
    with FactStore(path) as s:
        s.remember("ada", "uses", "vim", at=T0)
        code = textwrap.dedent(f"""
            from factmem.store.factstore import FactStore
            from factmem.errors import StoreLockedError
            try:
                FactStore({str(path)!r})
            except StoreLockedError as e:
                print("LOCKED:", e)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert "LOCKED:" in out.stdout and "another process" in out.stdout, out.stderr
    with FactStore(path) as s:  # intact
        assert len(s) == 1


def test_kill_9_mid_ingest_keeps_last_committed_state(tmp_path):
    path = tmp_path / "m.duckdb"
    marker = tmp_path / "committed"
    code = textwrap.dedent(f"""
        import numpy as np, pandas as pd, pathlib
        from factmem.store.factstore import FactStore
        s = FactStore({str(path)!r})
        n = 200_000
        rng = np.random.default_rng(0)
        for b in range(1000):
            ev = pd.DataFrame({{"ts": np.full(n, {T0} + b, dtype=np.int64),
                                "subject": rng.integers(0, 500, n).astype(str),
                                "predicate": "p", "object": rng.integers(0, 3, n).astype(str),
                                "kind": "explicit"}})
            s.ingest(ev)
            pathlib.Path({str(marker)!r}).write_text(str(b + 1))
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 120
    while time.time() < deadline and (not marker.exists() or int(marker.read_text() or 0) < 2):
        time.sleep(0.05)
    time.sleep(0.3)  # land inside a later ingest
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = int(marker.read_text())
    with FactStore(path) as s:
        ev = s.evidence()
        batches = ev["observed_at"].nunique()
        # every committed batch is whole; at most the one in flight after the marker was written
        assert batches in (done, done + 1)
        assert len(ev) == batches * 200_000
        counts = s.query("SELECT sum(reinforcement_count + 1) AS n FROM memory_facts")["n"].iloc[0]
        assert counts == len(ev)


# -- bad input ----------------------------------------------------------------------------------

GOOD = [(T0, "ada", "uses", "vim", "explicit"), (T0 + 1, "bob", "uses", "ed", "episodic")]


def assert_rejected(store, batch, match):
    before = store.facts(at=T0), store.evidence()
    with pytest.raises(InputError, match=match):
        store.ingest(batch)
    pd.testing.assert_frame_equal(store.facts(at=T0), before[0])
    pd.testing.assert_frame_equal(store.evidence(), before[1])


@pytest.mark.parametrize("column, value, match", [
    ("kind", "opinion", r"row 1: field 'kind' has unknown value 'opinion'"),
    ("subject", "", r"row 1: field 'subject' is empty"),
    ("object", "  ", r"row 1: field 'object' is empty"),
    ("predicate", None, r"row 1: field 'predicate' is missing"),
    ("subject", 7, r"row 1: field 'subject' must be a string, got 7"),
])
def test_bad_fields_are_named(store, column, value, match):
    store.ingest(events(GOOD))
    bad = events(GOOD)
    bad[column] = bad[column].astype(object)
    bad.loc[1, column] = value
    assert_rejected(store, bad, match)


@pytest.mark.parametrize("form", ["object", "str", "arrow"])
@pytest.mark.parametrize("bad, match", [
    # field by field: a field's nulls, then its empty and NUL words, then the next field; kind last
    ({"subject": [None, "ada"], "object": ["", "vim"]}, r"row 0: field 'subject' is missing"),
    ({"subject": ["ada", ""], "predicate": [None, "uses"]}, r"row 1: field 'subject' is empty"),
    ({"subject": ["ada", "a\0b"], "object": [None, "ed"]}, r"row 1: field 'subject' must not contain NUL"),
    ({"predicate": [None, "uses"], "object": ["", "ed"]}, r"row 0: field 'predicate' is missing"),
    ({"object": ["vim", " "], "kind": ["opinion", "episodic"]}, r"row 1: field 'object' is empty"),
    ({"kind": [None, "opinion"], "object": ["vim", ""]}, r"row 1: field 'object' is empty"),
])
def test_the_first_bad_field_is_named(form, bad, match):
    """Several problems at once: the message names the first, in the same order for every form."""
    from factmem.store.batch import load_batch

    df = events(GOOD)
    for column, values in bad.items():
        df[column] = pd.Series(values, dtype=object)
    if form == "str":
        df = df.astype({c: "str" for c in bad})
    batch = pa.Table.from_pandas(df, preserve_index=False) if form == "arrow" else df
    with pytest.raises(InputError, match=match):
        load_batch(batch)


def test_bad_timestamps(store):
    store.remember("ada", "uses", "vim", at=T0)
    df = events(GOOD)
    df["ts"] = [float(T0), float("nan")]
    assert_rejected(store, df, r"row 1: field 'ts' must be whole Unix seconds, got nan")
    df["ts"] = [float(T0), T0 + 0.5]
    assert_rejected(store, df, r"row 1: field 'ts' must be whole Unix seconds")
    df["ts"] = ["x", "y"]
    assert_rejected(store, df, r"column 'ts' must be integer Unix seconds")


def test_missing_columns_and_wrong_dtypes(store):
    assert_rejected(store, events(GOOD).drop(columns=["kind", "object"]), r"missing columns 'object', 'kind'")
    df = events(GOOD)
    df["object"] = [1, 2]
    assert_rejected(store, df, r"column 'object' must hold strings, got dtype int64")
    with pytest.raises(InputError, match="must be a pandas DataFrame"):
        store.ingest([1, 2, 3])


def test_bad_rows_in_files_name_file_and_line(store, tmp_path):
    p = tmp_path / "ev.csv"
    p.write_text("ts,subject,predicate,object,kind\n1,ada,uses,vim,explicit\n2,ada,uses,vim,feeling\n")
    assert_rejected(store, p, r"ev.csv: line 3: field 'kind' has unknown value 'feeling'")
    p.write_text("ts,subject,predicate,object,kind\n1,ada,uses,vim,explicit\nsoon,ada,uses,vim,explicit\n")
    assert_rejected(store, p, r"ev.csv: line 3: field 'ts' must be integer Unix seconds, got 'soon'")
    j = tmp_path / "ev.jsonl"
    j.write_text('{"ts": 1, "subject": "ada", "predicate": "uses", "object": "vim", "kind": "explicit"}\n'
                 '{"ts": 2, "subject": "", "predicate": "uses", "object": "vim", "kind": "explicit"}\n')
    assert_rejected(store, j, r"ev.jsonl: line 2: field 'subject' is empty")
    assert_rejected(store, tmp_path / "nope.parquet", "no such file")


def test_files_ingest_like_frames(store_factory, tmp_path):
    df = events(GOOD + [(T0 + 2, "ada", "uses", "emacs", "explicit")])
    df["session_id"] = ["s1", "s1", "s2"]
    df.to_parquet(tmp_path / "ev.parquet")
    df.to_csv(tmp_path / "ev.csv", index=False)
    df.to_json(tmp_path / "ev.jsonl", orient="records", lines=True)
    a = store_factory(name="a.duckdb")
    a.ingest(df)
    for i, f in enumerate(["ev.parquet", "ev.csv", "ev.jsonl"]):
        b = store_factory(name=f"b{i}.duckdb")
        b.ingest(tmp_path / f)
        pd.testing.assert_frame_equal(a.facts(at=T0), b.facts(at=T0))
        pd.testing.assert_frame_equal(a.evidence(), b.evidence())


def test_remember_rejects_bad_arguments(store):
    with pytest.raises(InputError, match="unknown kind 'mood'"):
        store.remember("ada", "feels", "ok", kind="mood", at=T0)
    with pytest.raises(InputError, match="subject must be a non-empty string"):
        store.remember("", "feels", "ok", at=T0)
    with pytest.raises(ValueError, match="whole Unix seconds"):
        store.remember("ada", "feels", "ok", at=1.5)
    assert len(store) == 0


def test_sql_injection_is_stored_as_text(store):
    evil = "x'); DROP TABLE memory_facts; --"
    store.remember(evil, evil, evil, at=T0)
    store.ingest(events([(T0 + 1, evil, "uses", evil, "explicit")]))
    f = store.facts(at=T0)
    assert f["subject"].tolist() == [evil, evil] and len(store.history(evil, evil)) == 1


def test_empty_batch_is_a_no_op(store):
    r = store.ingest(events([]).astype({"ts": "int64"}))
    assert r.events == 0 and len(store) == 0


def test_ingest_result_ids_align_with_rows(store):
    r = store.ingest(events([(T0 + 5, "ada", "uses", "vim", "explicit"), (T0, "ada", "uses", "ed", "explicit")]))
    # sorted by ts: ed (id 1) then vim (id 2) supersedes it
    assert r.fact_ids.tolist() == [2, 1] and (r.inserted, r.reinforced, r.superseded) == (2, 0, 1)


def test_read_only_store(tmp_path):
    path = tmp_path / "m.duckdb"
    with FactStore(path) as s:
        s.remember("ada", "uses", "vim", at=T0)
    with FactStore(path, read_only=True) as r1, FactStore(path, read_only=True) as r2:
        assert len(r1) == len(r2) == 1
        with pytest.raises(StoreError, match="read-only"):
            r1.remember("ada", "uses", "ed", at=T0)
