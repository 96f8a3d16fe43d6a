"""The write-behind journal under crashes (factmem.store.writebehind, factmem.store.journal): every
framing of the journal's last entry — a ``remember``, a ``consolidate``, an ``ingest`` with its Arrow
batch — survives a process killed right after the call returned; a damaged entry after a batch is
named by its own line; a journal whose first pending entry skips a number is refused; the
in-process state tells keys apart when their hashes collide; and a run of calls interleaved with
crashes (the store's files copied while it holds calls in its journal, as a killed process leaves
them) ends with the tables of the row-by-row path.

One child process prepares every crashed store of the module (it is killed once, with all of them
open), so the crashes cost one interpreter start."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.params import MemoryParams
from factmem.errors import StoreError
from factmem.store import writebehind
from factmem.store.factstore import Evidence, FactStore
from factmem.store.journal import JOURNAL_SUFFIX, Journal
from factmem.store.writebehind import FLUSH_CALLS
from factmem.testing.compare import FACT_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
FACT_COLS = list(FACT_COLUMNS)
DAY = 86_400
T0 = 1_700_000_000
PARAMS = MemoryParams(decay_rate={"episodic": 3.0})  # episodic facts archive at the next night


def batch(day: int, tag: str) -> pd.DataFrame:
    return pd.DataFrame({"ts": [T0 + day * DAY + 60 * j for j in range(4)], "subject": ["ada", "bo", "ada", "cy"],
                         "predicate": ["likes", "lives_in", "saw", "uses"],
                         "object": [f"tea{day % 2}", f"city{day}", f"film{day}", "vim"],
                         "kind": ["explicit", "explicit", "episodic", "user_preference"],
                         "session_id": f"{tag}{day}", "message_id": [f"{tag}{day}m{j}" for j in range(4)]})


def calls(s: FactStore, last: str) -> None:
    """Two days of mixed calls, then one more call of the kind ``last`` (the journal's last entry)."""
    for day in range(2):
        s.ingest(batch(day, "b"))
        s.remember("ada", "likes", "coffee", "explicit", at=T0 + day * DAY + 3600, evidence=Evidence(f"r{day}", "m"))
        s.consolidate(at=T0 + (day + 1) * DAY)
    if last == "remember":
        s.remember("bo", "lives_in", "Oslo", "explicit", at=T0 + 2 * DAY + 60, evidence=Evidence("r2", "m"))
    elif last == "ingest":
        s.ingest(batch(2, "b"))
    else:  # a consolidation that archives (one that archives nothing is not journaled)
        s.ingest(batch(2, "b"))
        s.consolidate(at=T0 + 3 * DAY)


LASTS = ("remember", "ingest", "consolidate")


def table(s: FactStore) -> tuple[pd.DataFrame, pd.DataFrame]:
    return s.facts(at=0)[FACT_COLS], s.evidence()


def assert_same(got: FactStore, want: FactStore) -> None:
    for a, b in zip(table(got), table(want)):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> Path:
    """One killed process, leaving: a store per last call kind; a journal with a batch followed by two
    remembers; and a journal whose pending entries start with a reinforcement after a flush."""
    d = tmp_path_factory.mktemp("crashed")
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.test_journal_crashes import calls, batch, LASTS, PARAMS, T0, DAY
        from factmem.store.factstore import FactStore, Evidence
        d = Path({str(d)!r})
        stores = []
        for last in LASTS:
            s = FactStore(d / (last + ".duckdb"), params=PARAMS)
            calls(s, last)
            stores.append(s)
        s = FactStore(d / "after_batch.duckdb")
        s.ingest(batch(0, "b"))
        s.remember("ada", "likes", "x", at=T0 + DAY)
        s.remember("ada", "likes", "y", at=T0 + 2 * DAY)
        stores.append(s)
        s = FactStore(d / "skipped.duckdb")
        s.remember("ada", "likes", "tea", at=T0)
        assert len(s) == 1  # a read flushes: the store holds entry 1
        s.remember("ada", "likes", "tea", at=T0 + DAY)  # entry 2: a reinforcement (no new id)
        s.remember("bo", "likes", "tea", at=T0 + DAY)  # entry 3
        stores.append(s)
        os._exit(0)  # no close(), no flush at exit: as if killed
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return d


@pytest.mark.parametrize("last", LASTS)
def test_every_framing_of_the_last_entry_survives_a_crash(crashed, tmp_path, last):
    path = tmp_path / "m.duckdb"
    for suffix in ("", ".wal", ".journal"):  # a copy: the module's other tests keep the original
        if Path(str(crashed / f"{last}.duckdb") + suffix).exists():
            shutil.copy(str(crashed / f"{last}.duckdb") + suffix, str(path) + suffix)
    raw = Path(str(path) + ".journal").read_bytes()
    assert raw.endswith(b"\n") and max(LASTS, key=lambda op: raw.rfind(f'"{op}"'.encode())) == last
    want = FactStore(params=PARAMS, write_behind=False)
    calls(want, last)
    with FactStore(path) as got:
        assert_same(got, want)
    if last == "consolidate":
        assert (want.facts(at=0)["status"] == "archived").sum() > 1
    assert not Path(str(path) + ".journal").exists()


def test_a_damaged_entry_after_a_batch_is_named_by_its_line(crashed, tmp_path):
    """Lines: the header (1), the ingest entry (2), its batch (3, one line however many newline bytes
    its Arrow stream holds), the first remember (4), the second (5)."""
    path = tmp_path / "m.duckdb"
    for suffix in ("", ".wal"):
        if Path(str(crashed / "after_batch.duckdb") + suffix).exists():
            shutil.copy(str(crashed / "after_batch.duckdb") + suffix, str(path) + suffix)
    raw = Path(str(crashed / "after_batch.duckdb") + ".journal").read_bytes()
    cut = raw.rindex(b"\n", 0, len(raw) - 1) + 1  # the start of the last line: the second remember
    head = raw.index(b'"ingest"')
    assert raw.count(b'"remember"', head) == 2
    journal = Path(str(path) + ".journal")
    journal.write_bytes(raw[:cut] + b"not json\n")
    with pytest.raises(StoreError, match=r"m\.duckdb\.journal, line 5\b"):
        FactStore(path)
    assert journal.read_bytes() == raw[:cut] + b"not json\n"  # nothing applied, nothing removed
    first = raw.index(b'[', raw.index(b"\n", raw.index(b"\n", head) + 1))  # the first remember, after the batch
    start = raw.rindex(b"\n", 0, first) + 1
    end = raw.index(b"\n", start) + 1
    journal.write_bytes(raw[:start] + b"[4, \n" + raw[end:])
    with pytest.raises(StoreError, match=r"m\.duckdb\.journal, line 4\b"):
        FactStore(path)


def test_a_journal_whose_first_pending_entry_skips_a_number_is_refused(crashed, tmp_path):
    """The store holds entry 1; the journal's first pending entry is 3 (entry 2, a reinforcement, is
    lost): the fact ids still line up, only the numbers tell, and nothing may be applied."""
    path = tmp_path / "m.duckdb"
    for suffix in ("", ".wal"):
        if Path(str(crashed / "skipped.duckdb") + suffix).exists():
            shutil.copy(str(crashed / "skipped.duckdb") + suffix, str(path) + suffix)
    original = Path(str(crashed / "skipped.duckdb") + JOURNAL_SUFFIX)
    lines = original.read_text().splitlines()
    assert len(lines) == 3 and [e.seq for e in Journal(original).read()[1]] == [2, 3]
    journal = Path(str(path) + ".journal")
    journal.write_text("\n".join([lines[0], lines[2]]) + "\n")
    with pytest.raises(StoreError, match="do not follow"):
        FactStore(path)
    journal.write_text("\n".join(lines) + "\n")  # the whole journal: applied
    with FactStore(path) as s:
        assert s.facts(at=0)["reinforcement_count"].tolist() == [1, 0]


def copy_crashed(crashed: Path, name: str, dest: Path) -> Path:
    for suffix in ("", ".wal", JOURNAL_SUFFIX):
        if Path(str(crashed / name) + suffix).exists():
            shutil.copy(str(crashed / name) + suffix, str(dest) + suffix)
    return dest


@pytest.mark.parametrize("change, message", [
    # fact 1 (and its evidence) gone: the journal's entry 2 began at fact id 2, the file is at 1
    ("DELETE FROM memory_evidence; DELETE FROM memory_facts", "began at fact id 2, the store is at 1"),
    # fact 1 archived: entry 2 reinforced it, made again it inserts a new fact
    ("UPDATE memory_facts SET status = 'archived'", r"entry 2 \(remember\) gave another result"),
])
def test_a_journal_that_does_not_continue_the_file_is_refused(crashed, tmp_path, change, message):
    """The file was changed behind the journal's back (its ids or its facts' states are not those the
    calls started from): reopening refuses to apply the journal, and keeps it."""
    import duckdb

    path = copy_crashed(crashed, "skipped.duckdb", tmp_path / "m.duckdb")
    con = duckdb.connect(str(path))
    con.execute(change)
    con.close()
    journal = Path(str(path) + JOURNAL_SUFFIX)
    before = journal.read_bytes()
    with pytest.raises(StoreError, match=message):
        FactStore(path)
    assert journal.read_bytes() == before


def test_colliding_key_hashes_in_the_written_behind_state(monkeypatch):
    """Every key hashes alike in the in-process state: its candidates are other keys' facts, which
    must be told apart by the key itself."""
    monkeypatch.setattr("factmem.store.active.key_hashes", lambda keys: np.full(len(keys), 7, np.int64))
    rows = [("ada", "likes", "tea"), ("bo", "likes", "jazz"), ("ada", "lives_in", "Oslo"), ("bo", "likes", "jazz"),
            ("ada", "likes", "tea"), ("bo", "lives_in", "Rome"), ("ada", "lives_in", "Rome")]
    stores = [FactStore(write_behind=True), FactStore(write_behind=False)]
    for s in stores:
        for i, (subj, pred, obj) in enumerate(rows):
            s.remember(subj, pred, obj, at=T0 + i * 3600)
    assert stores[0]._active is not None  # the calls went through the in-process state
    assert_same(stores[0], stores[1])
    facts = stores[0].facts(at=0)
    assert facts["status"].tolist().count("superseded") == 1  # only Oslo, by ada's Rome
    assert facts["reinforcement_count"].max() == 1


def test_colliding_key_hashes_of_batches_in_the_written_behind_state(monkeypatch):
    """The same with the rows ingested in batches (the compiled keys and hashes of a batch)."""
    from factmem.store import keyhash

    def colliding(*args):
        keys, hashes = keyhash.keys_and_hashes(*args)
        return keys, np.full(len(hashes), 7, np.int64)

    monkeypatch.setattr("factmem.store.writes.keys_and_hashes", colliding)
    monkeypatch.setattr("factmem.store.active.key_hashes", lambda keys: np.full(len(keys), 7, np.int64))
    rows = [("ada", "likes", "tea"), ("bo", "likes", "jazz"), ("ada", "lives_in", "Oslo"), ("bo", "likes", "jazz"),
            ("ada", "likes", "tea"), ("bo", "lives_in", "Rome"), ("ada", "lives_in", "Rome")]
    batches = pd.DataFrame([{"ts": T0 + i * 3600, "subject": subj, "predicate": pred, "object": obj,
                             "kind": "explicit"} for i, (subj, pred, obj) in enumerate(rows)])
    stores = [FactStore(write_behind=True), FactStore(write_behind=False)]
    for s in stores:
        s.ingest(batches.iloc[:3])
        s.ingest(batches.iloc[3:5])
        s.remember("bo", "likes", "jazz", at=T0 + 5 * 3600 - 1)
        s.ingest(batches.iloc[5:])
    assert stores[0]._active is not None  # the batches went through the in-process state
    assert_same(stores[0], stores[1])
    facts = stores[0].facts(at=0)
    assert facts["status"].tolist().count("superseded") == 1  # only Oslo, by ada's Rome
    assert facts["reinforcement_count"].max() == 2  # bo's jazz: ingested twice, remembered once


# -- a run of calls with crashes between them ------------------------------------------------------------

items = st.lists(st.tuples(st.sampled_from(["ada", "bo"]), st.sampled_from(["likes", "lives_in", "uses"]),
                           st.sampled_from(["x", "y", "z"]), st.sampled_from(["explicit", "episodic"]),
                           st.integers(0, 2 * DAY)), min_size=1, max_size=25)
steps = st.lists(st.sampled_from(["call"] * 5 + ["read", "consolidate", "crash", "ingest"]), min_size=1, max_size=30)


def crash_copy(s: FactStore, path: Path, n: int) -> Path:
    """What a process killed now leaves on disk — the DuckDB file (and its write-ahead log) as the
    last flush left it, the journal with every call since — copied under a new name."""
    new = path.with_name(f"{path.stem}.{n}.duckdb")
    for suffix in ("", ".wal", ".journal"):
        if Path(str(path) + suffix).exists():
            shutil.copy(str(path) + suffix, str(new) + suffix)
    return new


def run(path: Path, script, calls_, behind: bool, pending: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    s = FactStore(path, params=PARAMS, write_behind=behind)
    i = crashes = 0
    for step in script:
        if step == "call":
            subj, pred, obj, kind, dt = calls_[i % len(calls_)]
            s.remember(subj, pred, obj, kind, at=T0 + i * 3600 + dt, evidence=Evidence("s", f"m{i}"))
            i += 1
        elif step == "read":
            assert len(s.facts(at=T0)) == len(s)
        elif step == "consolidate":
            s.consolidate(at=T0 + i * 3600)
        elif step == "ingest":
            chosen = [calls_[(i + j) % len(calls_)] for j in range(3)]
            s.ingest(pd.DataFrame({"ts": [T0 + i * 3600 + c[4] for c in chosen], "subject": [c[0] for c in chosen],
                                   "predicate": [c[1] for c in chosen], "object": [c[2] + "2" for c in chosen],
                                   "kind": [c[3] for c in chosen], "session_id": "b", "message_id": f"b{i}"}))
            i += 1
        else:  # crash: carry on with what a killed process leaves
            crashes += 1
            if s._flushing is not None:  # a flush in its thread (a copy cannot catch DuckDB mid-write):
                s._flushing.wait()  # killed once it has committed, before the journal is emptied of its calls,
                if crashes % 2 == 0:
                    s._finish_flush()  # or (every other crash) after
            if behind and Path(str(path) + JOURNAL_SUFFIX).exists():
                pending.append(len(Journal(Path(str(path) + JOURNAL_SUFFIX)).read()[1]))
            new = crash_copy(s, path, crashes)
            s.close()
            path, s = new, FactStore(new, params=PARAMS, write_behind=behind)
    out = table(s)
    s.close()
    return out


@settings(max_examples=15, deadline=None)
@given(calls_=items, script=steps, flush_every=st.sampled_from([FLUSH_CALLS, 2, 3]))
def test_crashes_between_calls_lose_nothing_and_repeat_nothing(tmp_path_factory, calls_, script, flush_every):
    """... also with a flush (in the background, the journal then emptied of its calls) every few calls."""
    d = tmp_path_factory.mktemp("crashes")
    pending: list[int] = []
    try:
        writebehind.FLUSH_CALLS = flush_every
        behind = run(d / "behind.duckdb", script, calls_, True, pending)
    finally:
        writebehind.FLUSH_CALLS = FLUSH_CALLS
    rows = run(d / "rows.duckdb", script, calls_, False, [])
    pd.testing.assert_frame_equal(behind[0], rows[0], check_exact=True)
    pd.testing.assert_frame_equal(behind[1], rows[1], check_exact=True)


def test_the_crash_property_reopens_pending_journals(tmp_path):
    """The property's crashes do hand journals with calls in them to the reopening store."""
    pending: list[int] = []
    script = ["call", "ingest", "crash", "call", "consolidate", "call", "crash", "read", "call", "crash"]
    calls_ = [("ada", "likes", "x", "episodic", 0), ("ada", "likes", "y", "explicit", 10), ("bo", "uses", "z",
                                                                                          "explicit", 99)]
    behind = run(tmp_path / "behind.duckdb", script, calls_, True, pending)
    rows = run(tmp_path / "rows.duckdb", script, calls_, False, [])
    assert pending == [2, 2, 1]  # journals with calls in them at every crash
    pd.testing.assert_frame_equal(behind[0], rows[0], check_exact=True)


def test_crashes_after_background_flushes_lose_nothing(tmp_path, monkeypatch):
    """A flush every two calls, its write done as soon as it starts (the thread's timing made
    deterministic): each next call empties the journal of the flush's calls, keeping itself; crashes
    then hand the reopening store journals holding that one call, which it applies."""
    script = ["call"] * 5 + ["crash"] + ["call"] * 3 + ["crash"]
    calls_ = [("ada", "likes", "x", "explicit", 0), ("bo", "uses", "z", "explicit", 99),
              ("ada", "lives_in", "y", "explicit", 5)]
    pending: list[int] = []
    monkeypatch.setattr(writebehind, "FLUSH_CALLS", 2)
    monkeypatch.setattr(writebehind._Flush, "start", lambda self, con: self.run(con))
    behind = run(tmp_path / "behind.duckdb", script, calls_, True, pending)
    monkeypatch.undo()
    rows = run(tmp_path / "rows.duckdb", script, calls_, False, [])
    assert pending == [1, 1]  # calls 5 and 8: 1-4 and 6-7 are in the tables, the journal emptied of them
    for got, want in zip(behind, rows):
        pd.testing.assert_frame_equal(got, want, check_exact=True)


@pytest.mark.parametrize("failure", ["short", "error"])
def test_a_failed_journal_append_leaves_nothing_of_the_call(tmp_path, monkeypatch, failure):
    """A write that stops short (a full disk) or fails: the call raises, nothing of it is in the
    journal or the store, and the next call gets the id the failed one would have had."""
    import os

    path = tmp_path / "m.duckdb"
    s = FactStore(path)
    first = s.remember("ada", "likes", "tea", at=T0)
    journal = Path(str(path) + JOURNAL_SUFFIX)
    before = journal.read_bytes()
    real_write = os.write

    def broken(fd, data):
        if failure == "error":
            raise OSError(28, "No space left on device")
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr("factmem.store.journal.os.write", broken)
    with pytest.raises(StoreError, match="cannot write the journal"):
        s.remember("bo", "likes", "jazz", at=T0 + 60)
    monkeypatch.undo()
    assert journal.read_bytes() == before
    assert s.remember("cy", "likes", "rain", at=T0 + 120) == first + 1
    s.close()
    with FactStore(path) as again:
        assert again.facts(at=0)["subject"].tolist() == ["ada", "cy"]


def test_a_consolidation_archiving_one_fact_is_made_and_journaled(tmp_path):
    path = tmp_path / "m.duckdb"
    s = FactStore(path, params=PARAMS)
    s.remember("ada", "saw", "film", "episodic", at=T0)
    s.remember("ada", "likes", "tea", "explicit", at=T0)
    assert s.consolidate(at=T0 + DAY).archived == 1
    crashed = crash_copy(s, path, 1)
    for store in (s, FactStore(crashed, params=PARAMS)):
        facts = store.facts(at=0).set_index("object")
        assert facts.loc["film", "status"] == "archived" and facts.loc["tea", "status"] == "active"
        assert int(facts.loc["film", "status_changed_at"]) == T0 + DAY
        store.close()
