"""remember() written behind (factmem.store.writebehind): the same bytes as the row-by-row path, under
any interleaving of reads, writes and reopenings; durable at return (a process killed without
closing loses no call); and the journal's failure modes named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factmem.core.params import MemoryParams
from factmem.errors import StoreError, StoreWriteError
from factmem.store.factstore import Evidence, FactStore
from factmem.testing.compare import FACT_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
FACT_COLS = list(FACT_COLUMNS)
DAY = 86_400

# A call: (subject, predicate, object, kind, day offset in seconds); small vocabularies so that keys
# repeat, objects change and multi-valued predicates hold several facts
calls = st.lists(st.tuples(st.sampled_from(["ada", "bo"]), st.sampled_from(["likes", "lives_in", "uses"]),
                           st.sampled_from(["x", "y", "z"]), st.sampled_from(["explicit", "episodic", "user_preference"]),
                           st.integers(0, 3 * DAY)), min_size=1, max_size=40)
# what happens between calls: nothing, a read, a consolidation, a reopening (file stores)
steps = st.lists(st.sampled_from(["call"] * 6 + ["read", "consolidate", "reopen", "ingest"]), min_size=1, max_size=60)


def table(s: FactStore) -> tuple[pd.DataFrame, pd.DataFrame]:
    return s.facts(at=0)[FACT_COLS], s.evidence()


def run(path, params, script, items, behind: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    s = FactStore(path, params=params, write_behind=behind)
    t0 = 1_700_000_000
    i = 0
    for step in script:
        if step == "call":
            subj, pred, obj, kind, dt = items[i % len(items)]
            s.remember(subj, pred, obj, kind, at=t0 + i * 3600 + dt, evidence=Evidence(f"s{i % 2}", f"m{i}"),
                       note=None if i % 3 else f"n{i}")
            i += 1
        elif step == "read":
            assert len(s.facts(at=t0)) == len(s)
        elif step == "consolidate":
            s.consolidate(at=t0 + i * 3600)
        elif step == "ingest":  # a few events at once: new keys, repeats and changes of the calls' keys
            chosen = [items[(i + j) % len(items)] for j in range(1, 5)]
            s.ingest(pd.DataFrame({
                "ts": [t0 + i * 3600 + dt for (_, _, _, _, dt) in chosen],
                "subject": [subj for (subj, *_) in chosen], "predicate": [pred for (_, pred, *_) in chosen],
                "object": [obj + ("" if j % 2 else "2") for j, (_, _, obj, _, _) in enumerate(chosen)],
                "kind": [kind for (_, _, _, kind, _) in chosen], "session_id": "b", "message_id": f"b{i}"}))
            i += 1
        elif step == "reopen" and path is not None:
            s.close()
            s = FactStore(path, write_behind=behind)
    out = table(s)
    s.close()
    return out


@settings(max_examples=60)
@given(items=calls, script=steps, multi=st.booleans(), effective=st.booleans())
def test_written_behind_equals_row_by_row(tmp_path_factory, items, script, multi, effective):
    params = MemoryParams(multi_valued_predicates={"uses"} if multi else set(),
                          reinforce_base="effective" if effective else "stored",
                          decay_rate={"episodic": 2.0})  # episodic facts archive within hours
    d = tmp_path_factory.mktemp("wb")
    behind = run(d / "behind.duckdb", params, script, items, True)
    rows = run(d / "rows.duckdb", params, script, items, False)
    pd.testing.assert_frame_equal(behind[0], rows[0], check_exact=True)
    pd.testing.assert_frame_equal(behind[1], rows[1], check_exact=True)
    assert not list(d.glob("*.journal")), "a closed store leaves no journal"


@settings(max_examples=25)
@given(items=calls, flush_at=st.integers(1, 5), on_file=st.booleans())
def test_periodic_flushes_change_nothing(tmp_path_factory, monkeypatch_module, items, flush_at, on_file):
    """Flushing every few calls (the store flushes every FLUSH_CALLS, in the background, and empties
    the journal of each flush's calls once written), and merging the appended rows of the in-process
    state at every flush, give the same store as one flush at the end."""
    script = ["call", "call", "ingest", "consolidate"] * len(items)
    monkeypatch_module.setattr("factmem.store.writebehind.FLUSH_CALLS", flush_at)
    monkeypatch_module.setattr("factmem.store.active.ActiveState.MERGE_AT", flush_at - 1)
    small = run(tmp_path_factory.mktemp("flushes") / "m.duckdb" if on_file else None, None, script, items, True)
    monkeypatch_module.setattr("factmem.store.writebehind.FLUSH_CALLS", 10**9)
    monkeypatch_module.setattr("factmem.store.active.ActiveState.MERGE_AT", 65_536)
    big = run(None, None, script, items, True)
    pd.testing.assert_frame_equal(small[0], big[0], check_exact=True)
    pd.testing.assert_frame_equal(small[1], big[1], check_exact=True)


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def calls_script(path: Path, n: int, then: str, before: str = "pass") -> str:
    """A child process: `before` (Python), n calls on a file store, then `then`, then killed without closing."""
    return textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from factmem.store.factstore import FactStore, Evidence
        {before}
        s = FactStore({str(path)!r})
        for i in range({n}):
            s.remember("u%d" % (i % 7), "p%d" % (i % 3), "v%d" % (i % 5), "explicit", at=1_700_000_000 + i * 60,
                       evidence=Evidence("s", "m%d" % i))
        {then}
        os._exit(0)  # no close(), no flush at exit: as if killed
    """)


def reference(n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    s = FactStore(write_behind=False)
    for i in range(n):
        s.remember(f"u{i % 7}", f"p{i % 3}", f"v{i % 5}", "explicit", at=1_700_000_000 + i * 60,
                   evidence=Evidence("s", f"m{i}"))
    out = table(s)
    s.close()
    return out


def child(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def assert_like_reference(path: Path, n: int) -> None:
    with FactStore(path) as s:
        got = table(s)
    want = reference(n)
    pd.testing.assert_frame_equal(got[0], want[0], check_exact=True)
    pd.testing.assert_frame_equal(got[1], want[1], check_exact=True)
    assert not Path(str(path) + ".journal").exists()


def test_a_killed_process_loses_no_call(tmp_path):
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 60, "pass"))
    journal = Path(str(path) + ".journal")
    assert journal.exists() and len(journal.read_text().splitlines()) == 61  # header + 60 calls
    assert_like_reference(path, 60)


def test_killed_after_a_flush_and_more_calls(tmp_path):
    """Calls flushed by a read, then more calls, then killed: the reopened store has them all, once."""
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 50, textwrap.dedent("""
        s.facts()
        for i in range(50, 80):
            s.remember("u%d" % (i % 7), "p%d" % (i % 3), "v%d" % (i % 5), "explicit", at=1_700_000_000 + i * 60,
                       evidence=Evidence("s", "m%d" % i))
        """).replace("\n", "\n        ")))
    assert_like_reference(path, 80)


def test_killed_between_the_flush_commit_and_the_journal_truncation(tmp_path):
    """The rows are committed with the last journal number; the journal still lists the calls: the
    reopened store skips them by number instead of making them twice."""
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 40, "s._journal.emptied = lambda through=None: None; s.facts()"))
    journal = Path(str(path) + ".journal")
    assert len(journal.read_text().splitlines()) == 41
    assert_like_reference(path, 40)


def _flushing_every(calls: int) -> str:
    """Python for calls_script's ``before``: a flush (in the background) every ``calls`` calls."""
    return f"import factmem.store.writebehind as wb; wb.FLUSH_CALLS = {calls}"


def _more_calls(start: int, stop: int) -> str:
    """Python for calls_script's ``then``: the calls ``start`` .. ``stop - 1`` of the same sequence."""
    return ("[s.remember('u%d' % (i % 7), 'p%d' % (i % 3), 'v%d' % (i % 5), 'explicit', at=1_700_000_000 + i * 60, "
            f"evidence=Evidence('s', 'm%d' % i)) for i in range({start}, {stop})]")


def test_killed_while_a_background_flush_is_being_written(tmp_path):
    """The 20th call starts a flush in its own thread; the process is killed while it writes (its
    write held back) after 15 more calls: the reopened store has all 35, once."""
    path = tmp_path / "m.duckdb"
    slow = ("import time; from factmem.store.active import PendingWrite; original = PendingWrite.write; "
            "PendingWrite.write = lambda self, con: (time.sleep(30), original(self, con))")
    child(calls_script(path, 20, _more_calls(20, 35), before=_flushing_every(20) + "; " + slow))
    assert len(Path(str(path) + ".journal").read_text().splitlines()) == 36  # header + 35: none emptied
    assert_like_reference(path, 35)


def test_a_background_flush_empties_the_journal_of_its_calls_only(tmp_path):
    """Flushed in the background at the 20th call; once written, the journal keeps only the calls
    after it (a new file renamed over the old one); killed after 15 more: the reopened store has all 35."""
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 20, "s._flushing.wait(); " + _more_calls(20, 35), before=_flushing_every(20)))
    journal = Path(str(path) + ".journal")
    lines = journal.read_text().splitlines()
    assert len(lines) == 16 and json.loads(lines[1].partition(" ")[2])[0] == 21  # header + calls 21..35
    assert not Path(str(journal) + ".compacting").exists()
    assert_like_reference(path, 35)


def test_killed_while_the_journal_is_emptied_of_a_background_flush(tmp_path):
    """Killed after the new journal is written and before it is renamed over the old one: the old
    one lists calls the tables hold (skipped by number) and the rest (applied)."""
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 20, "os.replace = lambda *a: os._exit(0); s._flushing.wait(); " + _more_calls(20, 21),
                       before=_flushing_every(20)))
    journal = Path(str(path) + ".journal")
    assert len(journal.read_text().splitlines()) == 22  # header + 21: the old journal, whole
    assert Path(str(journal) + ".compacting").exists()
    with FactStore(path) as s:
        assert s.recovered_calls == 1  # the 20 others are in the tables
    assert not Path(str(journal) + ".compacting").exists()  # the crash's leftover went with the journal
    assert_like_reference(path, 21)


def test_a_background_flush_that_fails_is_tried_again_and_named(store_factory, monkeypatch):
    """Its thread's failure is raised at the next call that needs the tables, as a StoreWriteError
    naming the file; the calls stay pending (a second try writes them)."""
    monkeypatch.setattr("factmem.store.writebehind.FLUSH_CALLS", 3)
    s = store_factory()
    fails = {"left": 2}
    original = __import__("factmem.store.active", fromlist=["PendingWrite"]).PendingWrite.write

    def flaky(self, con):
        if fails["left"]:
            fails["left"] -= 1
            raise OSError("disk full")
        return original(self, con)

    monkeypatch.setattr("factmem.store.active.PendingWrite.write", flaky)
    for i in range(3):
        s.remember("ada", "likes", f"tea{i}", at=i * DAY)  # the third starts the flush, which fails
    with pytest.raises(StoreWriteError, match="cannot write the pending calls to the tables: disk full"):
        s.facts()  # waits for it, tries again: fails again
    assert fails["left"] == 0
    facts = s.facts(at=0)  # the third try writes it
    assert facts["object"].tolist() == ["tea0", "tea1", "tea2"] and len(s.evidence()) == 3


def test_a_background_flush_writes_on_one_thread_and_puts_the_setting_back(store_factory, monkeypatch):
    """DuckDB runs the flush on one thread (the calls keep the other core), and the database's
    threads are what they were once it is written — also after a flush that failed."""
    monkeypatch.setattr("factmem.store.writebehind.FLUSH_CALLS", 3)
    s = store_factory()
    setting = "SELECT current_setting('threads')"
    before = s.query(setting).iloc[0, 0]
    seen = []
    original = __import__("factmem.store.active", fromlist=["PendingWrite"]).PendingWrite.write

    def watched(self, con):
        seen.append(con.execute(setting).fetchone()[0])
        if len(seen) == 1:
            raise OSError("disk full")
        return original(self, con)

    monkeypatch.setattr("factmem.store.active.PendingWrite.write", watched)
    for i in range(3):
        s.remember("ada", "likes", f"tea{i}", at=i * DAY)  # the third starts the flush (which fails)
    assert len(s.facts(at=0)) == 3  # waits for it; written again here, in this thread, with the threads it has
    assert seen == [1, before] and before > 1
    assert s.query(setting).iloc[0, 0] == before


def test_a_line_cut_short_by_a_crash_is_a_call_that_never_returned(tmp_path):
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 30, "pass"))
    journal = Path(str(path) + ".journal")
    with open(journal, "ab") as f:
        f.write(b'0badc0de [31, "u3", "p1", "v')  # the 31st call, killed mid-write
    assert_like_reference(path, 30)


def test_a_damaged_journal_is_named_and_the_store_is_left_alone(tmp_path):
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 10, "pass"))
    journal = Path(str(path) + ".journal")
    lines = journal.read_text().splitlines()
    lines[4] = "not json"
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreError, match=r"m\.duckdb\.journal, line 5: not a journal entry"):
        FactStore(path)
    assert journal.exists()  # nothing applied, nothing removed


def test_a_journal_left_by_another_store_is_refused(tmp_path):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    child(calls_script(a, 5, "pass"))
    FactStore(b).close()
    os.replace(str(a) + ".journal", str(b) + ".journal")
    with pytest.raises(StoreError, match="a journal of another store"):
        FactStore(b)


def test_read_only_opening_refuses_a_store_with_calls_in_its_journal(tmp_path):
    path = tmp_path / "m.duckdb"
    child(calls_script(path, 5, "pass"))
    with pytest.raises(StoreError, match="5 calls are in m.duckdb.journal"):
        FactStore(path, read_only=True)
    assert_like_reference(path, 5)  # opened for writing once: applied
    with FactStore(path, read_only=True) as s:
        assert len(s) > 0


def test_every_call_is_in_the_journal_before_it_returns(tmp_path):
    path = tmp_path / "m.duckdb"
    s = FactStore(path)
    fid = s.remember("ada", "likes", "tea", at=0, evidence=Evidence("s1", "m1"), note="n")
    lines = Path(str(path) + ".journal").read_text().splitlines()
    header = json.loads(lines[0])
    assert header["factmem_journal"] == 3 and header["store_id"] and header["journal_id"] and header["base"] == 0
    checksum, _, entry = lines[1].partition(" ")
    assert checksum == f"{zlib.crc32(entry.encode()):08x}"
    assert json.loads(entry) == [1, "remember", 1, "ada", "likes", "tea", "explicit", 0, "s1", "m1", "observation",
                                 "n", fid]
    assert len(s) == 1  # a read flushes: the journal is emptied to its header
    assert len(Path(str(path) + ".journal").read_text().splitlines()) == 1
    s.close()


def test_a_failed_flush_loses_nothing(store_factory, monkeypatch):
    s = store_factory()
    s.remember("ada", "likes", "tea", at=0)
    s.remember("ada", "likes", "tea", at=DAY)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("factmem.store.active.PendingWrite.write", broken)
    with pytest.raises(StoreWriteError, match="cannot write the pending calls to the tables: disk full"):
        s.facts()
    monkeypatch.undo()
    facts = s.facts(at=0)
    assert facts["reinforcement_count"].tolist() == [1] and len(s.evidence()) == 2


def test_a_write_through_the_connection_is_seen_by_the_next_call(store_factory):
    """store.con / store.db may be written by the caller: the next call rebuilds its state."""
    s = store_factory()
    a = s.remember("ada", "likes", "tea", at=0)
    s.con.execute("UPDATE memory_facts SET status = 'archived' WHERE id = ?", [a])
    b = s.remember("ada", "likes", "tea", at=DAY)  # not a reinforcement of the archived fact
    assert b != a and s.get(b).reinforcement_count == 0


def test_calls_in_an_explicit_transaction_roll_back_together(store_factory):
    s = store_factory()
    s.remember("ada", "likes", "tea", at=0)  # written behind; flushed when the transaction starts
    with pytest.raises(RuntimeError):
        with s.transaction():
            s.remember("ada", "likes", "coffee", at=DAY)
            raise RuntimeError("abort")
    assert s.facts(at=0)["object"].tolist() == ["tea"]
    assert s.remember("ada", "likes", "coffee", at=DAY) == 2  # the rolled-back id is given again


def test_the_row_by_row_path_serves_stores_with_links(store_factory):
    """With abstraction links a supersession marks derived parents stale in call order: no write-behind."""
    s = store_factory()
    kids = [s.remember("ada", f"p{i}", "x", at=0) for i in range(3)]
    parent = s.remember("ada", "is", "busy", kind="derived", at=0)
    s.link(parent, kids, at=0)
    s.remember("ada", "p0", "y", at=DAY)  # supersedes a child: its parent is stale at once
    assert s._active is None and bool(s.get(parent).stale)


def test_a_write_through_query_is_seen_by_the_next_call(store_factory):
    s = store_factory()
    a = s.remember("ada", "likes", "tea", at=0)
    s.query("SELECT count(*) FROM memory_facts")
    assert s._active is not None  # a read keeps the state
    s.query("UPDATE memory_facts SET status = 'archived' WHERE id = $id", {"id": a})
    b = s.remember("ada", "likes", "tea", at=DAY)
    assert b != a and s.get(b).reinforcement_count == 0


def test_a_store_never_closed_is_flushed_at_interpreter_exit(tmp_path):
    """A program that forgets close() still leaves complete tables for other tools to read."""
    path = tmp_path / "m.duckdb"
    code = calls_script(path, 12, "pass").replace("os._exit(0)  # no close(), no flush at exit: as if killed",
                                                  "sys.exit(0)  # a normal exit, store never closed")
    child(code)
    assert not Path(str(path) + ".journal").exists()
    import duckdb
    con = duckdb.connect(str(path), read_only=True)  # DuckDB alone, no journal applied
    assert con.execute("SELECT count(*) FROM memory_evidence").fetchone()[0] == 12
    con.close()
    assert_like_reference(path, 12)


def mixed_calls(s: FactStore, days: int) -> None:
    """A few days of an agent's memory: a batch a day, remembered facts between, a consolidation a night."""
    t0 = 1_700_000_000
    for d in range(days):
        s.ingest(pd.DataFrame({"ts": [t0 + d * DAY + 60 * j for j in range(6)],
                               "subject": [f"u{(d + j) % 4}" for j in range(6)],
                               "predicate": [f"p{j % 3}" for j in range(6)],
                               "object": [f"v{(d * j) % 3}" for j in range(6)],
                               "kind": ["episodic" if j % 4 == 0 else "explicit" for j in range(6)],
                               "session_id": f"d{d}", "message_id": [f"d{d}m{j}" for j in range(6)]}))
        s.remember(f"u{d % 4}", "p1", f"r{d % 2}", "user_preference", at=t0 + d * DAY + 7200,
                   evidence=Evidence(f"d{d}", "r"))
        s.consolidate(at=t0 + (d + 1) * DAY)


def test_a_killed_process_loses_no_batch_or_consolidation(tmp_path):
    path = tmp_path / "m.duckdb"
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_writebehind import mixed_calls
        from factmem.core.params import MemoryParams
        from factmem.store.factstore import FactStore
        s = FactStore({str(path)!r}, params=MemoryParams(decay_rate={{"episodic": 3.0}}))
        mixed_calls(s, 9)
        os._exit(0)
    """)
    child(code)
    assert Path(str(path) + ".journal").stat().st_size > 0
    want = FactStore(params=MemoryParams(decay_rate={"episodic": 3.0}), write_behind=False)
    mixed_calls(want, 9)
    assert (want.facts(at=0)["status"] == "archived").any(), "the scenario archives facts"
    with FactStore(path) as got:
        for a, b in zip(table(got), table(want)):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert not Path(str(path) + ".journal").exists()


def test_a_batch_cut_short_in_the_journal_is_a_call_that_never_returned(tmp_path):
    """Killed while its batch was being written: the batch's entry is dropped, the calls before it kept."""
    path = tmp_path / "m.duckdb"
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_writebehind import mixed_calls
        from factmem.store.factstore import FactStore
        s = FactStore({str(path)!r})
        mixed_calls(s, 3)
        os._exit(0)
    """)
    child(code)
    journal = Path(str(path) + ".journal")
    raw = journal.read_bytes()
    cut = raw.rfind(b'"ingest"')  # the last batch's entry: keep its header line and half its Arrow bytes
    start = raw.rfind(b"\n", 0, cut) + 1
    end_of_head = raw.index(b"\n", cut) + 1
    size = json.loads(raw[start:end_of_head].partition(b" ")[2])[3]  # after the checksum
    journal.write_bytes(raw[:end_of_head + size // 2])
    want = FactStore(write_behind=False)
    mixed_calls(want, 2)  # days 0 and 1 whole; day 2's batch cut short, so day 2 never happened
    with FactStore(path) as got:
        for a, b in zip(table(got), table(want)):
            pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_big_batches_are_written_at_once_and_drop_the_state(store_factory, monkeypatch):
    monkeypatch.setattr("factmem.store.writes.BEHIND_MAX_EVENTS", 3)
    s = store_factory()
    s.remember("ada", "likes", "tea", at=0)
    assert s._active is not None and s._active.calls == 1
    s.ingest(pd.DataFrame({"ts": [1, 2, 3, 4], "subject": "ada", "predicate": ["likes", "likes", "uses", "is"],
                           "object": ["tea", "tea", "vim", "here"], "kind": "explicit"}))
    assert s._active is None  # written in a transaction (after a flush): the state is rebuilt when next needed
    assert s.facts(at=0)["reinforcement_count"].tolist() == [2, 0, 0]


def test_single_calls_never_run_compiled_code_and_batches_do(store_factory, monkeypatch):
    """A process's first compiled call costs ~0.4 s (factmem.store.hashchains): remember() calls —
    the first ones scanning, the next building the chains with numpy, then one key looked up and one
    row added at a time in Python — never reach the compiled loops; a batch does; and the facts are
    the row-by-row path's."""
    from factmem.store import hashchains

    monkeypatch.setattr("factmem.store.active.ActiveState.SCANS_BEFORE_INDEX", 3)
    compiled = {"insert": hashchains._insert, "find": hashchains._find}
    used = []

    def counted(name):
        def call(*args):
            used.append(name)
            return compiled[name](*args)
        return call

    monkeypatch.setattr(hashchains, "_insert", counted("insert"))
    monkeypatch.setattr(hashchains, "_find", counted("find"))
    s, reference = store_factory(), FactStore(None, write_behind=False)
    t0 = 1_700_000_000
    for i in range(12):  # scans, then the chains built, then found and added one at a time
        for store in (s, reference):
            store.remember(f"u{i % 5}", "likes" if i % 2 else "lives_in", f"v{i % 3}", "explicit", at=t0 + i * 60)
    assert used == [] and s._active is not None and s._active.chains is not None
    batch = pd.DataFrame({"ts": [t0 + 3600 + j for j in range(6)], "subject": [f"u{j}" for j in range(6)],
                          "predicate": ["likes"] * 6, "object": ["v1"] * 6, "kind": ["explicit"] * 6})
    s.ingest(batch)
    reference.ingest(batch)
    assert "find" in used and "insert" in used  # a batch's keys and new rows: compiled
    assert table(s)[0].equals(table(reference)[0])
    reference.close()
