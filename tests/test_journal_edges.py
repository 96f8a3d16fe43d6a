"""The twelve breaks of the write-behind journal and the edges of real files (one test or more each):
the data-loss ones in child processes killed with SIGKILL.

1. a store opened through a symlink or a hard link journals beside its real file; 2. a relative name
and ``os.chdir``; 3. ``--force`` replaces a run atomically; 4. NUL in a key; 5. journal entries carry
a checksum and are checked as their calls; 6. a count at 2^63 − 1; 7. ``supersedes_id`` cycles and
what ``import-db`` refuses; 8. journal entries of the wrong types; 9. text that is not UTF-8 in a
production file; 10. a full disk at a flush or ``close()``; 11. ``tune`` on an empty or one-message
log; 12. a period of year 9999 and a params file with a byte-order mark.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from factmem.core.params import MemoryParams
from factmem.errors import InputError, ProductionDBError, StoreError, StoreWriteError
from factmem.export.document import load_params_file, write_params_file
from factmem.store.calls import CountOverflowError, state_key
from factmem.store.factstore import Evidence, FactStore
from factmem.store.journal import JournalError

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_700_000_000


def killed(code: str, cwd: Path | None = None) -> None:
    """Run ``code`` in a child process that ends by SIGKILL (no close, no flush, no atexit)."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from factmem.store.factstore import FactStore, Evidence
    """) + textwrap.dedent(code) + "\nos.kill(os.getpid(), signal.SIGKILL)\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd or ROOT, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr


def calls(name: str, n: int, start: int = 0) -> str:
    return (f"s = FactStore({name!r})\n"
            f"for i in range({start}, {start + n}):\n"
            f"    s.remember('u%d' % i, 'likes', 'v%d' % i, at={T0} + i * 60, evidence=Evidence('s', 'm%d' % i))\n")


def subjects(path: Path) -> list[str]:
    with FactStore(path) as s:
        return sorted(s.facts(at=0)["subject"])


# -- 1, 2: the journal follows the file, not the name --------------------------------------------------


def test_symlink_then_the_real_name_loses_no_call(tmp_path):
    real, link = tmp_path / "a.duckdb", tmp_path / "l.duckdb"
    FactStore(real).close()
    link.symlink_to(real.name)
    killed(calls(str(link), 3))
    assert (tmp_path / "a.duckdb.journal").exists() and not (tmp_path / "l.duckdb.journal").exists()
    s = FactStore(real)  # the other name: the journal is found and applied; ids are not reused
    for i in range(3, 8):
        s.remember(f"u{i}", "likes", f"v{i}", at=T0 + i * 60)
    s.close()
    got = FactStore(link)
    assert sorted(got.facts(at=0)["subject"]) == sorted(f"u{i}" for i in range(8))
    assert got.facts(at=0)["id"].is_unique
    got.close()


def test_a_hard_links_journal_is_found_under_the_other_name(tmp_path):
    real, hard = tmp_path / "a.duckdb", tmp_path / "h.duckdb"
    FactStore(real).close()
    os.link(real, hard)
    killed(calls(str(hard), 3))
    assert (tmp_path / "h.duckdb.journal").exists()
    with pytest.raises(StoreError, match="h.duckdb.journal holds what a store opened under another name"):
        FactStore(real, read_only=True)
    with FactStore(real) as s:
        assert s.recovered_calls == 3 and len(s) == 3
    assert not any(p.suffix in (".journal", ".wal") for p in tmp_path.iterdir())
    assert subjects(hard) == ["u0", "u1", "u2"]


def test_a_journal_whose_calls_are_not_in_the_file_is_never_removed(tmp_path):
    """Calls made under one name, then the file written under another before they were applied (the
    journal moved away meanwhile): the journal is refused, named, and kept."""
    real, hard = tmp_path / "a.duckdb", tmp_path / "h.duckdb"
    FactStore(real).close()
    os.link(real, hard)
    killed(calls(str(hard), 3))
    journal = tmp_path / "h.duckdb.journal"
    journal.rename(tmp_path / "away")
    with FactStore(real) as s:
        for i in range(5):
            s.remember(f"w{i}", "likes", "x", at=T0 + i)
    (tmp_path / "away").rename(journal)
    with pytest.raises(JournalError, match=r"a\.duckdb\.journal: holds 3 calls .* the journal is kept"):
        FactStore(real)  # (h's journal was renamed to a's: a hard link's name has no journal of its own)
    assert (tmp_path / "a.duckdb.journal").exists()
    with pytest.raises(JournalError, match="the journal is kept"):
        FactStore(hard)
    assert (tmp_path / "a.duckdb.journal").exists() or journal.exists()


def test_a_relative_name_and_chdir_lose_no_call(tmp_path):
    (tmp_path / "sub").mkdir()
    killed("s = FactStore('m.duckdb')\nos.chdir('sub')\n"
           f"s.remember('a', 'p', 'x', at={T0})\ns.remember('b', 'p', 'y', at={T0})\n", cwd=tmp_path)
    assert not (tmp_path / "sub" / "m.duckdb.journal").exists()
    assert subjects(tmp_path / "m.duckdb") == ["a", "b"]


def test_store_recover_applies_a_pending_journal_for_other_tools(tmp_path, capsys):
    from factmem.cli.main import main

    path = tmp_path / "m.duckdb"
    killed(calls(str(path), 4))
    with pytest.raises(StoreError, match="store recover"):
        FactStore(path, read_only=True)
    assert main(["store", "recover", str(path)]) == 0
    assert "applied 4 journaled calls; 4 facts" in capsys.readouterr().out
    con = duckdb.connect(str(path), read_only=True)  # another tool: the tables hold every call
    assert con.execute("SELECT count(*) FROM memory_facts").fetchone() == (4,)
    con.close()
    assert main(["store", "recover", str(path)]) == 0 and "nothing to recover" in capsys.readouterr().out


# -- 3: --force replaces a run atomically -----------------------------------------------------------


def test_force_replaces_a_run_atomically(tmp_path):
    from factmem.tuning.runs import load_run, run_folder, write_run

    out = tmp_path / "run"
    with run_folder(out) as folder:
        write_run(folder, {"kind": "old"}, {"t": pd.DataFrame({"x": [1]})}, finish=False)
    assert load_run(out).manifest["kind"] == "old"
    # two replacements at once: each writes beside `out`; the old run stays whole until one is in place
    a, b = run_folder(out, force=True), run_folder(out, force=True)
    fa, fb = a.__enter__(), b.__enter__()
    assert fa != out and fb != out and fa.parent == out.parent
    write_run(fa, {"kind": "a"}, {"t": pd.DataFrame({"x": [2]})}, finish=False)
    write_run(fb, {"kind": "b"}, {"t": pd.DataFrame({"x": [3]})}, finish=False)
    assert load_run(out).manifest["kind"] == "old"
    a.__exit__(None, None, None)
    assert load_run(out).manifest["kind"] == "a"
    b.__exit__(None, None, None)
    assert load_run(out).manifest["kind"] == "b" and load_run(out).table("t")["x"].tolist() == [3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no partial folder left
    # a replacement that fails leaves the old run
    with pytest.raises(RuntimeError):
        with run_folder(out, force=True) as folder:
            (folder / "half").write_text("x")
            raise RuntimeError("killed")
    assert load_run(out).manifest["kind"] == "b" and sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_killed_replacement_leaves_the_old_run(tmp_path):
    from factmem.tuning.runs import load_run, run_folder, write_run

    out = tmp_path / "run"
    with run_folder(out) as folder:
        write_run(folder, {"kind": "old"}, {"t": pd.DataFrame({"x": [1]})}, finish=False)
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        import pandas as pd
        from factmem.tuning.runs import run_folder, write_run
        with run_folder({str(out)!r}, force=True) as folder:
            write_run(folder, {{"kind": "new"}}, {{"t": pd.DataFrame({{"x": [2]}})}}, finish=False)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run([sys.executable, "-c", script], capture_output=True).returncode == -signal.SIGKILL
    assert load_run(out).manifest["kind"] == "old"


# -- 4: NUL in a key ------------------------------------------------------------------------------------


@pytest.mark.parametrize("behind", [True, False], ids=["behind", "row-by-row"])
def test_nul_in_a_key_is_refused_on_both_paths(behind):
    s = FactStore(write_behind=behind)
    with pytest.raises(InputError, match=r"subject must not contain NUL"):
        s.remember("a\0b", "c", "x", at=0)
    with pytest.raises(InputError, match=r"predicate must not contain NUL"):
        s.remember("a", "b\0c", "y", at=0)
    with pytest.raises(InputError, match=r"row 1: field 'predicate' must not contain NUL"):
        s.ingest(pd.DataFrame({"ts": [0, 1], "subject": ["a", "a"], "predicate": ["b", "b\0c"],
                               "object": ["x", "y"], "kind": ["explicit", "explicit"]}))
    s.remember("a", "b", "x\0y", at=0)  # an object is no key: kept as given
    assert len(s) == 1
    s.close()


def test_keys_with_nul_from_elsewhere_cannot_collide():
    """A file written by another tool may hold NUL in a key: the in-process keys stay distinct."""
    assert state_key("a\0b", "c") != state_key("a", "b\0c")
    s = FactStore()
    s.remember("seed", "p", "o", at=0)
    s.db.execute("UPDATE memory_facts SET subject = 'a' || chr(0) || 'b', predicate = 'c'")
    s.db.execute("INSERT INTO memory_facts SELECT 2, 'a', 'b' || chr(0) || 'c', 'y', NULL, kind, confidence, 0, 0, 0, "
                 "decay_rate, 'active', NULL, NULL, NULL, false FROM memory_facts")
    state = s._behind_state()
    assert [r[1] for r in state.active_of("a\0b", "c")[1]] == ["o"]
    assert [r[1] for r in state.active_of("a", "b\0c")[1]] == ["y"]
    s.remember("ada", "likes", "tea", at=1)  # a call beside them supersedes neither
    assert (s.facts(at=0)["status"] == "active").all()
    s.close()


def test_the_loaders_refuse_nul_in_a_key(tmp_path):
    from factmem.data.importer import import_triples
    from factmem.data.logs import load

    folder = tmp_path / "log"
    folder.mkdir()
    msg = {"session_id": "s", "message_id": "m", "ts": T0, "speaker": "user", "text": "t",
           "facts": [{"subject": "a\0b", "predicate": "p", "object": "o", "kind": "explicit"}]}
    (folder / "log.jsonl").write_text(json.dumps(msg) + "\n")
    with pytest.raises(InputError, match=r"log\.jsonl:1.*field 'subject' must not contain NUL"):
        load(folder)
    tsv = tmp_path / "t.tsv"
    tsv.write_text("a\tp\x00q\to\t1990\t2000\nb\tp\to\t1990\t2000\n")
    ds, report = import_triples(tsv)
    assert report.skipped == {"NUL (\\0) in predicate": 1} and ds.events["subject"].tolist() == ["b"]


# -- 5, 8: journal entries are checked as their calls, with a checksum -----------------------------


@pytest.fixture(scope="module")
def killed_store(tmp_path_factory) -> Path:
    """A store whose process made 3 calls and was killed: its file, DuckDB's log and the journal (made
    once; each test works on a copy)."""
    folder = tmp_path_factory.mktemp("killed")
    killed(calls(str(folder / "m.duckdb"), 3))
    return folder


@pytest.fixture
def journal_copy(killed_store, tmp_path):
    def copy() -> tuple[Path, Path, list[bytes]]:
        for f in killed_store.iterdir():
            shutil.copyfile(f, tmp_path / f.name)
        path = tmp_path / "m.duckdb"
        journal = Path(str(path) + ".journal")
        return path, journal, journal.read_bytes().split(b"\n")
    return copy


def _entry(fields: list) -> bytes:
    body = json.dumps(fields).encode()
    return f"{zlib.crc32(body):08x} ".encode() + body


HOSTILE = [  # (what is changed in the 2nd call's entry, the message)
    ("at", 99999999999999999, "outside the supported time range"),
    ("at", 1.5e9, "at must be integer Unix seconds, got float"),
    ("at", None, "at must be integer Unix seconds, got NoneType"),
    ("at", True, "got bool"),
    ("at", "1700000000", "got str"),
    ("at", 2**70, "outside the supported time range"),
    ("subject", "", "subject must be a non-empty string"),
    ("subject", "a\0b", "must not contain NUL"),
    ("kind", "bogus", "unknown kind 'bogus'"),
    ("source", "rumour", "unknown evidence source 'rumour'"),
    ("fid", -3, "the fact id must be a positive integer"),
]
_FIELD = {"subject": 3, "kind": 6, "at": 7, "source": 10, "fid": 12}


@pytest.mark.parametrize("field,value,message", HOSTILE, ids=[f"{f}={v!r}" for f, v, _ in HOSTILE])
def test_a_journal_entry_the_call_would_refuse_is_named_and_nothing_applied(journal_copy, tmp_path, field, value,
                                                                             message):
    path, journal, lines = journal_copy()
    fields = json.loads(lines[2].partition(b" ")[2])
    fields[_FIELD[field]] = value
    lines[2] = _entry(fields)
    journal.write_bytes(b"\n".join(lines))
    with pytest.raises(JournalError, match=r"m\.duckdb\.journal, line 3: remember entry 2 records a call the store "
                                           r"refuses: .*" + message.replace("(", r"\(")):
        FactStore(path)
    assert journal.read_bytes() == b"\n".join(lines)  # kept as it was
    journal.rename(tmp_path / "away")
    assert subjects(path) == []  # nothing applied, not even the good first entry


def test_a_flipped_digit_fails_the_checksum(journal_copy):
    path, journal, lines = journal_copy()
    lines[3] = lines[3].replace(b"1700000120", b"1700000121")
    journal.write_bytes(b"\n".join(lines))
    with pytest.raises(JournalError, match=r"line 4: the entry does not match its checksum"):
        FactStore(path)


@pytest.mark.parametrize("damage", ["crlf", "nan", "count", "operation", "batch", "nested"])
def test_damaged_entries_are_journal_errors_and_the_cli_prints_no_traceback(journal_copy, damage, capsys):
    from factmem.cli.main import main

    path, journal, lines = journal_copy()
    if damage == "crlf":
        lines = [line + b"\r" for line in lines[:-1]] + [lines[-1]]
    elif damage == "nan":
        lines[2] = lines[2].replace(b"1700000060", b"NaN")
    elif damage == "count":
        lines[2] = _entry(json.loads(lines[2].partition(b" ")[2])[:-2])
    elif damage == "operation":
        lines[2] = _entry([2, "forget", 2])
    elif damage == "batch":
        lines[2] = _entry([2, "ingest", 2, 5]) + b"\nxxxxx"
    else:
        body = b"[" * 100_000 + b"]" * 100_000
        lines[2] = f"{zlib.crc32(body):08x} ".encode() + body
    journal.write_bytes(b"\n".join(lines))
    with pytest.raises(JournalError, match=r"m\.duckdb\.journal, line \d"):
        FactStore(path)
    assert main(["abstract", str(path), "--provider", "ollama", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "m.duckdb.journal, line" in err and len(err.strip().splitlines()) == 1


def test_format_2_journals_are_still_applied(journal_copy):
    """A journal a factmem before checksums left (no checksum, no journal_id) is read by number."""
    path, journal, lines = journal_copy()
    header = json.loads(lines[0])
    old = [json.dumps({"factmem_journal": 2, "store_id": header["store_id"]}).encode()]
    old += [line.partition(b" ")[2] for line in lines[1:-1]]
    journal.write_bytes(b"\n".join(old) + b"\n")
    assert subjects(path) == ["u0", "u1", "u2"]


# -- 6: a count at the largest 64-bit integer -------------------------------------------------------------


@pytest.mark.parametrize("behind", [True, False], ids=["behind", "row-by-row"])
def test_a_count_overflow_names_the_fact_on_both_paths(behind):
    s = FactStore(write_behind=behind)
    fid = s.remember("ada", "likes", "tea", at=0)
    s.db.execute("UPDATE memory_facts SET reinforcement_count = 9223372036854775807")
    with pytest.raises(CountOverflowError, match=rf"fact {fid}: reinforcement_count is 9223372036854775807"):
        s.remember("ada", "likes", "tea", at=86400)
    with pytest.raises(CountOverflowError, match=rf"fact {fid}: "):
        s.ingest(pd.DataFrame({"ts": [86400], "subject": ["ada"], "predicate": ["likes"], "object": ["tea"],
                               "kind": ["explicit"]}))
    f = s.get(fid)
    assert f.reinforcement_count == 2**63 - 1 and f.last_reinforced == 0 and len(s.evidence()) == 1
    s.close()


# -- 7: import-db checks what the store checks --------------------------------------------------------


def _production(tmp_path: Path, facts, extra_sql: str = "") -> Path:
    from tests.test_sqlite_io import make_production

    return make_production(tmp_path / "p.sqlite", facts=facts, extra_sql=extra_sql)


GOOD = [(3, "ada", "likes", "rust", None, "user_preference", 0.65, 1, 100, 200, 0.02, "superseded", None),
        (7, "ada", "likes", "zig", "note", "user_preference", 0.5, 0, 300, 300, 0.02, "active", 3),
        (9, "ada", "saw", "bird", None, "episodic", 0.4, 0, 300, 300, 0.3, "archived", None),
        (12, "ada", "is", "a coder", None, "derived", 0.755, 3, 400, 900, 0.02, "active", None)]


def _with(row: int, **changes) -> list[tuple]:
    cols = ["id", "subject", "predicate", "object", "note", "kind", "confidence", "reinforcement_count",
            "first_seen", "last_reinforced", "decay_rate", "status", "supersedes_id"]
    rows = [list(r) for r in GOOD]
    for k, v in changes.items():
        rows[row][cols.index(k)] = v
    return [tuple(r) for r in rows]


@pytest.mark.parametrize("facts,message", [
    (_with(0, supersedes_id=3), "a fact cannot supersede itself"),
    (_with(0, supersedes_id=7), r"the chain of fact (3|7) loops \((3 -> 7 -> 3|7 -> 3 -> 7)\)"),
    (_with(2, subject="  "), "'subject'.*a non-empty subject"),
    (_with(2, predicate="s\0w"), "'predicate'.*without NUL"),
], ids=["self", "loop", "empty subject", "nul"])
def test_import_db_refuses_what_the_store_refuses(tmp_path, facts, message):
    from factmem.export.sqlite import import_db

    with pytest.raises(ProductionDBError, match=message):
        import_db(_production(tmp_path, facts), tmp_path / "m.duckdb")
    assert not (tmp_path / "m.duckdb").exists()


def test_import_db_refuses_unknown_evidence_words(tmp_path):
    from factmem.export.sqlite import import_db

    sql = ("ALTER TABLE memory_evidence ADD COLUMN action TEXT; ALTER TABLE memory_evidence ADD COLUMN source TEXT;"
           "UPDATE memory_evidence SET action = 'forget' WHERE observed_at = 200;")
    with pytest.raises(ProductionDBError, match=r"column 'action': 'forget' is not one of insert, reinforce"):
        import_db(_production(tmp_path, GOOD, sql), tmp_path / "m.duckdb")


def test_lineage_stops_at_a_loop():
    s = FactStore()
    a = s.remember("ada", "likes", "tea", at=0)
    b = s.remember("ada", "likes", "coffee", at=1)
    s.db.execute("UPDATE memory_facts SET supersedes_id = ? WHERE id = ?", [b, a])  # a loop: a <- b <- a
    assert sorted(s.lineage(a)["id"]) == [a, b]
    s.close()


def test_a_count_at_the_top_imported_then_reinforced_is_named(tmp_path):
    from factmem.export.sqlite import import_db

    top = _with(1, reinforcement_count=2**63 - 1)
    import_db(_production(tmp_path, top), tmp_path / "m.duckdb")
    with FactStore(tmp_path / "m.duckdb") as s:
        with pytest.raises(CountOverflowError, match="fact 7"):
            s.remember("ada", "likes", "zig", "user_preference", at=400)


# -- 9: text that is not UTF-8 in a production file -------------------------------------------------


def test_text_that_is_not_utf8_is_named_by_table_row_and_column(tmp_path, capsys):
    from factmem.cli.main import main

    src = _production(tmp_path, GOOD)
    sq = sqlite3.connect(src)
    sq.execute("UPDATE memory_facts SET object = CAST(x'7a69ff67' AS TEXT) WHERE id = 9")
    sq.commit()
    sq.close()
    params = tmp_path / "new.toml"
    write_params_file(params, MemoryParams(archive_threshold=0.07))
    for argv in (["import-db", str(src), "--out", str(tmp_path / "m.duckdb")],
                 ["whatif", str(src), "--params", str(params), "--out", str(tmp_path / "w"), "-q"]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert "table memory_facts: column 'object': rowid 9: text that is not UTF-8" in err, err


# -- 10: a full disk at a flush or at close() -----------------------------------------------------------


def _disk_full(*args, **kwargs):
    raise duckdb.TransactionException("TransactionContext Error: Failed to commit: could not write to "
                                      "\"m.duckdb.wal\": No space left on device")


def test_a_full_disk_at_close_is_a_store_write_error_and_the_store_is_closed(tmp_path, monkeypatch):
    path = tmp_path / "m.duckdb"
    s = FactStore(path)
    for i in range(5):
        s.remember(f"u{i}", "likes", "x", at=T0 + i)
    monkeypatch.setattr("factmem.store.active.PendingWrite.write", _disk_full)
    with pytest.raises(StoreWriteError, match=r"m\.duckdb: cannot write the pending calls .*No space left on device"
                                              r".*kept in .*m\.duckdb\.journal"):
        s.close()
    monkeypatch.undo()
    assert Path(str(path) + ".journal").exists()
    with FactStore(path) as again:  # not "already open": the failed close released it; the journal applies
        assert again.recovered_calls == 5 and len(again) == 5


def test_a_full_disk_at_a_read_keeps_the_calls(tmp_path, monkeypatch):
    s = FactStore(tmp_path / "m.duckdb")
    s.remember("a", "p", "x", at=T0)
    monkeypatch.setattr("factmem.store.active.PendingWrite.write", _disk_full)
    with pytest.raises(StoreWriteError, match="No space left on device"):
        s.facts()
    monkeypatch.undo()
    assert len(s.facts()) == 1
    s.close()


def test_the_cli_exits_1_on_a_full_disk(tmp_path, monkeypatch, capsys):
    from factmem.cli.main import main

    path = tmp_path / "m.duckdb"
    killed(calls(str(path), 2))
    monkeypatch.setattr("factmem.store.active.PendingWrite.write", _disk_full)
    assert main(["store", "recover", str(path)]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err
    monkeypatch.undo()
    assert subjects(path) == ["u0", "u1"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 4 MB tmpfs (root on Linux, as on the project's machines and CI); skipped where it cannot be
    mounted — the injected failures above cover the same code everywhere."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("needs root to mount a tmpfs")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_real_full_disk_loses_no_returned_call(tiny_disk):
    path = tiny_disk / "m.duckdb"
    s = FactStore(path)
    returned = 0
    with pytest.raises(StoreWriteError, match="No space left on device"):
        for i in range(100_000):
            s.remember(f"subject-{i}", "predicate", "object-" + "x" * 200, at=T0 + i, note="n" * 300)
            returned += 1
            if i % 2000 == 1999:
                s.facts()  # a flush: DuckDB's log fills the disk
    with pytest.raises(StoreWriteError, match="No space left on device"):
        s.close()
    subprocess.run(["mount", "-o", "remount,size=64m", str(tiny_disk)], check=True)
    with FactStore(path) as again:  # the failed close() released the file; the journal applies
        assert len(again) == returned and again.recovered_calls > 0


# -- 11: tune on an empty or one-message log ---------------------------------------------------------------


@pytest.mark.parametrize("messages", [0, 1])
def test_tune_refuses_a_log_it_cannot_tune_on(tmp_path, messages, capsys):
    from factmem.cli.main import main

    folder = tmp_path / "log"
    folder.mkdir()
    lines = [json.dumps({"session_id": "s", "message_id": f"m{i}", "ts": T0, "speaker": "user", "text": "t",
                         "facts": [{"subject": "a", "predicate": "p", "object": "o", "kind": "explicit"}]})
             for i in range(messages)]
    (folder / "log.jsonl").write_text("".join(line + "\n" for line in lines))
    out = tmp_path / "run"
    assert main(["tune", "--log", str(folder), "--param", "decay_rate.explicit=0.005,0.05", "--workers", "0", "-q",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("no fact mentions" in err if not messages else "one instant" in err)
    assert not out.exists() and list(tmp_path.iterdir()) == [folder]


# -- 12: the right words for a year-9999 period and a byte-order mark -----------------------------


def test_a_period_of_year_9999_is_named_for_its_end(tmp_path):
    from factmem.data.importer import import_triples

    tsv = tmp_path / "t.tsv"
    tsv.write_text("a\tp\to\t1990\t9999\nb\tp\to\t1990\t2000\n")
    _, report = import_triples(tsv)
    (reason,) = [r for r in report.skipped]
    assert "end ends after 9999-12-31T23:59:59, the last supported second" in reason


def test_a_params_file_with_a_byte_order_mark_is_read(tmp_path):
    want = MemoryParams(archive_threshold=0.07)
    for suffix in (".toml", ".json"):
        path = tmp_path / f"p{suffix}"
        write_params_file(path, want)
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
        assert load_params_file(path)[0] == want


def test_evidence_dataclass_guard():
    s = FactStore()
    with pytest.raises(InputError, match="evidence must be an Evidence"):
        s.remember("a", "p", "o", at=0, evidence=("s", "m"))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown evidence source"):
        s.remember("a", "p", "o", at=0, evidence=Evidence("s", "m", "rumour"))
    assert np.asarray(s.facts(at=0)).size == 0
    s.close()
