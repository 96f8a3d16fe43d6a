"""Store benchmarks (the performance issue): every store figure of its table, side by side in one run.

The anchor is the seed's algorithm row by row on an in-memory SQLite with an index on the key
(``benchmarks/seed_sqlite.py``, ``tuned=True``: the fastest honest port), run on the **whole** log —
never a prefix extrapolated. All figures come from the same synthetic stream (Zipf-popular keys,
values that change, all kinds; ``benchmarks/streams.py``) with a consolidation at every midnight.

(1) ``store.replay(events, consolidate_at)`` of the whole log, file store and in-memory store, vs the port
    (the median of three replays into fresh stores: one ~1 s run on a shared machine is noise-prone;
    the port runs once, ~20 s);
(2) incremental: ``ingest`` one day then ``consolidate`` at midnight, day after day, file and in-memory
    store, written behind (the default: every call journaled and synced, the tables written set-based
    every ``FLUSH_ROWS`` events and at ``close()``, which is counted) and row by row
    (``write_behind=False``: every call committed, and synced on a file store), vs the port (which
    never syncs); the journal's ``fdatasync`` calls are counted and timed (:class:`JournalSyncs`), and
    so are the flushes written in the background while the next calls are made, with the time the
    calls waited for one (:class:`BackgroundFlushes`); the close is split into its last flush and the
    rest (:class:`ClosingFlush`: on a file store, DuckDB's checkpoint); and the in-memory loop plus the
    file store's syncs and closing checkpoint is printed as durability's floor: the ratio a durable file
    store reaches, with the same compute, if everything else it does beyond the in-memory store were free;
(3) ``remember()`` on a file store of about 1M facts: median, 95th and 99th percentile per call (a third
    each reinforcing, superseding, inserting), written behind (the default: journaled, flushed set-based)
    and row by row (``write_behind=False``) on copies of the same store, with the first call (which
    builds the in-process state) and the closing flush reported, and the cost per call with both
    included; the first call cold (a fresh process: the median of ``COLD_CHILDREN``) and warm; then the DuckDB statements a row-by-row call is made of, timed alone (where its time goes);
(4) ``facts(at, status="active")`` over 10M facts vs the bare SQL on the same file (median of 3);
(5) peak RSS of one ``ingest`` of 10M events from Parquet (a child process, ``ru_maxrss``).

Times are wall-clock seconds on whatever else the machine is running: the port and factmem run one
after the other in this process, so both see the same load; the load average is printed with them.
Beside each wall time is the process's CPU time (every thread's, DuckDB's included): on a shared
machine a loaded run stretches wall times unevenly (the port is one Python thread, factmem waits on
DuckDB's threads and on ``fdatasync``), and the CPU ratio is the steadier comparison.

**Cold and warm.** Cold is a store's first use in a fresh process: the first ``replay`` of the run
(imports done, nothing else warmed), and for ``remember`` a child process that imports factmem,
opens the store and makes one call (each timed). Warm is the same again in the same process: the
median of the later replays, a second opening of the same file.

The run ends with the issue's table: each figure, cold and warm, against its target.

    python benchmarks/bench_store.py            # full sizes (tens of minutes: the port alone is ~1 min)
    python benchmarks/bench_store.py --quick    # small sizes, same code paths (a smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_remember  # noqa: E402
from seed_sqlite import replay_prefix  # noqa: E402
from streams import synthetic_stream  # noqa: E402

from factmem.engine.waves import grid_between  # noqa: E402
from factmem.store.factstore import FactStore  # noqa: E402

DAY = 86400
REPLAY_RUNS = 3  # replay() is timed this many times (fresh stores), the median reported


class Clock:
    """Wall and CPU seconds of a block (CPU: the process's, every thread's)."""

    def __enter__(self) -> Clock:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall0, time.process_time() - self.cpu0


class JournalSyncs:
    """Counts and times the journal's ``fdatasync`` calls inside a block: every call written behind
    on a file store is synced before it returns (the port never syncs), and on a virtual disk each
    sync waits a few milliseconds whatever its size — a floor under the incremental figure."""

    def __enter__(self) -> JournalSyncs:
        from factmem.store import journal

        self.count, self.wall, self._module = 0, 0.0, journal
        self._sync = journal._sync

        def timed(fd: int) -> None:
            t = time.perf_counter()
            self._sync(fd)
            self.count += 1
            self.wall += time.perf_counter() - t

        journal._sync = timed
        return self

    def __exit__(self, *exc) -> None:
        self._module._sync = self._sync


class BackgroundFlushes:
    """Counts the flushes written in a thread of their own inside a block (the write-behind flush the
    calls' count triggers), the seconds their threads spent writing, and the seconds the caller
    waited for one (a read, the next flush or ``close()`` waits for the flush in flight)."""

    def __enter__(self) -> BackgroundFlushes:
        from factmem.store import writebehind

        self.count, self.writing, self.waited = 0, 0.0, 0.0
        self._cls = flush = writebehind._Flush
        self._start, self._run, self._wait = flush.start, flush.run, flush.wait
        outer = self

        def start(self, con) -> None:
            outer.count += 1
            self.in_thread = True
            outer._start(self, con)

        def run(self, con) -> None:
            t = time.perf_counter()
            outer._run(self, con)
            if getattr(self, "in_thread", False):
                outer.writing += time.perf_counter() - t

        def wait(self) -> None:
            t = time.perf_counter()
            outer._wait(self)
            outer.waited += time.perf_counter() - t

        flush.start, flush.run, flush.wait = start, run, wait
        return self

    def __exit__(self, *exc) -> None:
        self._cls.start, self._cls.run, self._cls.wait = self._start, self._run, self._wait


class ClosingFlush:
    """Times the last flush inside ``store.close()`` (the rows pending since the last background flush,
    written on the caller's thread); what ``close()`` spends beyond it is DuckDB's checkpoint (a file
    store: the write-ahead log of the flushes' UPDATEs rewritten into the file) and closing."""

    def __init__(self, store: FactStore) -> None:
        self.store, self.wall = store, 0.0

    def __enter__(self) -> ClosingFlush:
        flush = self.store._flush

        def timed(*args, **kwargs) -> None:
            t = time.perf_counter()
            try:
                flush(*args, **kwargs)
            finally:
                self.wall += time.perf_counter() - t

        self.store._flush = timed  # type: ignore[method-assign]  # (this instance only)
        return self

    def __exit__(self, *exc) -> None:
        self.store.__dict__.pop("_flush", None)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} on {os.cpu_count()} cores"


def day_batches(ev):
    """Midnight consolidation times over the stream, and each day's [start, end) row range."""
    ts = ev["ts"].to_numpy()
    t0 = int(ts[0]) - int(ts[0]) % DAY
    grid = grid_between(t0, int(ts[-1]) + DAY, DAY)
    bounds = np.searchsorted(ts, grid, side="left")
    starts = np.concatenate([[0], bounds[:-1]])
    return grid, list(zip(starts, bounds))


def bench_log(n_events: int, n_days: int, tmp: str) -> dict:
    """(1) and (2): the port, replay() and the incremental loop on one stream."""
    ev = synthetic_stream(n_events, n_days=n_days)
    grid, spans = day_batches(ev)
    out: dict = {"events": n_events, "days": n_days, "consolidations": len(grid)}
    print(f"\n(1)+(2) {n_events:,} events over {n_days} days, a consolidation at every midnight ({len(grid)})")
    print(f"  [{load()}]")
    with Clock() as c:
        port = replay_prefix(ev, grid, n_events, tuned=True, path=":memory:")
    port_cpu = c.cpu
    out["port_s"], out["port_cpu_s"] = port, port_cpu
    print(f"  port (row by row, in-memory SQLite, indexed), whole log: {port:8.2f} s, cpu {port_cpu:.2f} s  "
          f"({n_events / port:,.0f} events/s)")

    for backend in ("file", "memory"):
        runs, cpus, closings = [], [], []
        for attempt in range(REPLAY_RUNS + 1):  # the first: cold; then a ~1 s figure on a shared machine: a median
            path = os.path.join(tmp, f"replay-{backend}-{attempt}.duckdb") if backend == "file" else None
            with Clock() as c:
                store = FactStore(path)
                store.replay(ev, grid)
            with Clock() as closed:
                store.close()
            runs.append(c.wall)
            cpus.append(c.cpu)
            closings.append(closed.wall)
            if path:
                os.remove(path)
        secs, cpu, closing = (float(np.median(v[1:])) for v in (runs, cpus, closings))
        out[f"replay_{backend}"] = {"cold_s": runs[0], "cold_cpu_s": cpus[0], "warm_s": secs, "warm_cpu_s": cpu,
                                    "close_s": closing, "runs_s": runs, "cpu_runs_s": cpus,
                                    "x_port": port / secs, "x_port_cpu": port_cpu / cpu,
                                    "x_port_cold": port / runs[0], "x_port_cpu_cold": port_cpu / cpus[0]}
        print(f"  factmem replay(), {backend:6s} store: cold {runs[0]:5.2f} s (cpu {cpus[0]:.2f}), warm {secs:5.2f} s "
              f"(cpu {cpu:.2f}; median of {len(runs) - 1}: {', '.join(f'{r:.2f}' for r in runs[1:])}); close {closing:.2f} s"
              f"   {port / secs:6.1f}x the port ({port_cpu / cpu:.1f}x by cpu; cold {port / runs[0]:.1f}x)")

    # written behind (the default: each day journaled, the tables written every FLUSH_ROWS events and
    # at close, which is timed with the days) and row by row (write_behind=False: each call committed)
    for backend, behind in (("file", True), ("memory", True), ("file", False), ("memory", False)):
        path = os.path.join(tmp, f"incremental-{behind}.duckdb") if backend == "file" else None
        store = FactStore(path, write_behind=behind)
        with Clock() as c, JournalSyncs() as syncs, BackgroundFlushes() as flushes:
            for at, (a, b) in zip(grid, spans):
                if b > a:
                    store.ingest(ev.iloc[a:b])
                store.consolidate(int(at))
            with Clock() as closed, ClosingFlush(store) as last_flush:
                store.close()
        key = ("incremental" if backend == "file" else "incremental_memory") + ("" if behind else "_row_by_row")
        total, closing = c.wall, closed.wall
        out[key] = {"s": total, "cpu_s": c.cpu, "close_s": closing, "close_flush_s": last_flush.wall,
                    "close_rest_s": closing - last_flush.wall, "x_port": port / total, "x_port_cpu": port_cpu / c.cpu,
                    "journal_syncs": syncs.count, "journal_sync_s": syncs.wall, "background_flushes": flushes.count,
                    "background_writing_s": flushes.writing, "waited_s": flushes.waited}
        how = "written behind" if behind else "row by row    "
        print(f"  factmem ingest a day + consolidate, {backend:6s} store, {how}: {total:7.2f} s incl. close, "
              f"cpu {c.cpu:.2f} ({total / len(grid) * 1000:.1f} ms a day; close {closing:.2f} s: the last flush "
              f"{last_flush.wall:.2f} s, then {closing - last_flush.wall:.2f} s)   {port / total:6.1f}x "
              f"the port ({port_cpu / c.cpu:.1f}x by cpu)"
              + (f"; journal: {syncs.count} fdatasyncs, {syncs.wall:.2f} s" if syncs.count else "")
              + (f"; {flushes.count} flushes in the background, writing {flushes.writing:.2f} s, waited for "
                 f"{flushes.waited:.2f} s" if flushes.count else ""))
    # what durability alone adds to the in-memory loop: every call's sync and the closing checkpoint (the
    # rest of the file store's close beyond its last flush) — with today's compute, the best a durable
    # file store could do here
    inc, mem = out["incremental"], out["incremental_memory"]
    floor = mem["s"] + inc["journal_sync_s"] + max(0.0, inc["close_rest_s"] - mem["close_rest_s"])
    out["incremental_floor_s"], out["incremental_floor_x_port"] = floor, port / floor
    print(f"  the in-memory loop + the file store's journal syncs ({inc['journal_sync_s']:.2f} s) + its closing "
          f"checkpoint ({inc['close_rest_s'] - mem['close_rest_s']:.2f} s beyond the in-memory close) = {floor:.2f} s: "
          f"{port / floor:.1f}x the port, the most a durable file store reaches with this compute")
    print(f"  [{load()}]")
    return out


def _remember_calls(store, n_keys: int, changed, calls: int, at: int, seed: int = 2) -> dict:
    """Time ``calls`` remember() calls on random keys (a third each reinforcing, superseding, inserting)."""
    rng = np.random.default_rng(seed)
    per_kind: dict[str, list[float]] = {"reinforce": [], "supersede": [], "insert": []}
    cpu: list[float] = []
    keys = rng.integers(0, n_keys, size=calls)
    for i in range(calls):
        k = int(keys[i])
        subject, predicate = f"user{k // 40}", f"p{k % 40}"
        what = ("reinforce", "supersede", "insert")[i % 3]
        obj = ("v1" if changed[k] else "v0") if what == "reinforce" else f"w{i}"
        if what == "insert":
            subject, obj = f"new{i}", "x"
        t, c = time.perf_counter(), time.process_time()
        store.remember(subject, predicate, obj, kind="explicit", at=at + i)
        per_kind[what].append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    every = np.concatenate([np.array(v) for v in per_kind.values()]) * 1000
    return {"median_ms": float(np.median(every)), "p95_ms": float(np.percentile(every, 95)),
            "p99_ms": float(np.percentile(every, 99)), "max_ms": float(every.max()), "total_ms": float(every.sum()),
            "cpu_median_ms": float(np.median(cpu) * 1000),
            "by_kind": {k: float(np.median(v) * 1000) for k, v in per_kind.items()}}


def bench_remember_latency(n_facts: int, calls: int, tmp: str) -> dict:
    """(3): remember() on a file store of about n_facts facts — written behind (the default) and row
    by row — and the statements a row-by-row call is made of."""
    from factmem.store.writebehind import FLUSH_CALLS

    print(f"\n(3) remember() on a file store of about {n_facts:,} facts, {calls} calls on random keys")
    path = os.path.join(tmp, "remember.duckdb")
    info = bench_remember.bulk(path, n_facts, 0)
    n_keys, _, changed, _, _ = bench_remember.workload(n_facts, 0)
    at = bench_remember.START + 400 * DAY
    out: dict = {"facts": info["facts"]}
    print(f"  store: {info['facts']:,} facts")
    for label, behind in (("row by row (write_behind=False)", False), ("written behind (the default)", True)):
        copy = os.path.join(tmp, f"remember-{behind}.duckdb")
        shutil.copyfile(path, copy)
        store = FactStore(copy, write_behind=behind)
        with Clock() as c:
            store.remember("warm", "up", "x", at=at)
        first, first_cpu = c.wall * 1000, c.cpu * 1000
        got = _remember_calls(store, n_keys, changed, calls, at + 1)
        t = time.perf_counter()
        store.close()  # writes what is still held behind (a read would too)
        closing = (time.perf_counter() - t) * 1000
        got.update(first_ms=first, first_cpu_ms=first_cpu, close_ms=closing, per_call_ms=(got["total_ms"] + closing) / calls)
        out["behind" if behind else "row_by_row"] = got
        print(f"  {label}:")
        print(f"    first call after opening {first:.0f} ms, cpu {first_cpu:.0f} ms ("
              + ("builds the in-process state of the active facts" if behind else "builds the key map") + ")")
        print(f"    remember(): median {got['median_ms']:.2f} ms (cpu {got['cpu_median_ms']:.2f}), p95 {got['p95_ms']:.2f}, p99 {got['p99_ms']:.2f}, "
              f"max {got['max_ms']:.1f} ms   (" + ", ".join(f"{k} {v:.2f}" for k, v in got["by_kind"].items())
              + " ms median)")
        print(f"    close() {closing:.0f} ms; per call, everything included (calls + close): {got['per_call_ms']:.2f} ms")
    # cold: a fresh process imports factmem, opens the store and makes one call; warm: this process
    # opens the same file again (the state is rebuilt from the table either way)
    # (the median of COLD_CHILDREN fresh processes, each on a fresh copy: one cold call on a shared
    # machine ranged 0.12-0.42 s idle, back to back)
    copy = os.path.join(tmp, "remember-cold.duckdb")
    colds = []
    for _ in range(COLD_CHILDREN):
        shutil.copyfile(path, copy)
        child = subprocess.run([sys.executable, "-c", COLD_OPEN, copy, str(at)], capture_output=True, text=True,
                               cwd=str(HERE.parent))
        if child.returncode:
            raise SystemExit(child.stderr)
        colds.append(tuple(float(v) for v in child.stdout.split()[-4:]))
    imported, opened, first_cold, first_cold_cpu = sorted(colds, key=lambda c: c[2])[len(colds) // 2]
    shutil.copyfile(path, copy)
    warm, warm_cpu = [], []
    for _ in range(2):
        with Clock() as c:
            store = FactStore(copy)
            store.remember("warm", "start", "x", at=at + 10**6)
        warm.append(c.wall)
        warm_cpu.append(c.cpu)
        store.close()
    out["first_call"] = {"cold_import_s": imported, "cold_open_s": opened, "cold_first_s": first_cold,
                         "cold_first_cpu_s": first_cold_cpu, "cold_first_all_s": [c[2] for c in colds],
                         "warm_open_and_first_s": warm,
                         "warm_open_and_first_cpu_s": warm_cpu}
    print(f"  first remember() after opening, cold (a fresh process, the median of {COLD_CHILDREN}): import "
          f"{imported:.2f} s, open {opened:.3f} s, first call {first_cold:.3f} s (cpu {first_cold_cpu:.3f}; all: "
          + ", ".join(f"{c[2]:.3f}" for c in colds) + "); warm (this process, opened again): open + first "
          "call " + ", ".join(f"{w:.3f} (cpu {c:.3f})" for w, c in zip(warm, warm_cpu)) + " s")
    behind_out, rows_out = out["behind"], out["row_by_row"]
    out["median_ms"], out["p95_ms"] = behind_out["median_ms"], behind_out["p95_ms"]
    print(f"  written behind vs row by row: median {rows_out['median_ms'] / behind_out['median_ms']:.1f}x, "
          f"everything included {rows_out['per_call_ms'] / behind_out['per_call_ms']:.1f}x "
          f"(a flush every {FLUSH_CALLS} calls, before any read, and at close)")
    # where a row-by-row call's time goes: its statements, each timed alone on this store (medians of 200)
    store = FactStore(path)
    con = store.db
    cols = "id, object, confidence, last_reinforced, decay_rate, status, subject, predicate"
    fid = int(info["facts"]) // 2

    def timed(body) -> float:
        times = []
        for j in range(200):
            t0 = time.perf_counter()
            body(j)
            times.append(time.perf_counter() - t0)
        return float(np.median(times)) * 1000

    def in_txn(body):
        def run(j):
            con.begin()
            body(j)
            con.commit()
        return run

    parts = {
        "empty transaction (BEGIN + COMMIT)": timed(lambda j: (con.begin(), con.commit())),
        "SELECT 1 (a statement's fixed cost)": timed(lambda j: con.execute("SELECT 1").fetchall()),
        "point lookup of one fact by id": timed(lambda j: con.execute(f"SELECT {cols} FROM memory_facts WHERE id = ?",
                                                                      [fid + j]).fetchall()),
        "UPDATE one fact by id, committed": timed(in_txn(lambda j: con.execute(
            "UPDATE memory_facts SET confidence = confidence WHERE id = ?", [fid + j]))),
        "INSERT one evidence row, committed": timed(in_txn(lambda j: con.execute(
            "INSERT INTO memory_evidence VALUES (?, 1, NULL, NULL, 0, 'reinforce', 0.5, 'observation')",
            [10**15 + j]))),
    }
    out["statements_ms"] = parts
    print("  a row-by-row call's statements, each timed alone:")
    for label, ms in parts.items():
        print(f"    {label:40s} {ms:6.2f} ms")
    print("  (a reinforcing call = lookup + UPDATE + evidence INSERT + COMMIT; an insert = lookup + two INSERTs + "
          "COMMIT; a supersession one statement more)")
    store.close()
    return out


def bench_facts(n_facts: int, tmp: str) -> dict:
    """(4): facts(at, status='active') vs the bare SQL, same file."""
    print(f"\n(4) facts(at, status='active') over {n_facts:,} facts vs the bare SQL, same file")
    path = os.path.join(tmp, "big.duckdb")
    s = FactStore(path)
    s.con.execute(f"""
        INSERT INTO memory_facts
        SELECT i, 'user' || (i % 50000), 'p' || (i % 40), 'v' || (i % 1000), NULL,
               ['explicit', 'user_preference', 'episodic'][1 + i % 3], 0.3 + (i % 7) / 10.0,
               i % 5, 1767225600 + i, 1767225600 + i + (i % 1000), [0.05, 0.02, 0.3][1 + i % 3],
               CASE WHEN i % 10 < 4 THEN 'active' WHEN i % 10 < 8 THEN 'superseded' ELSE 'archived' END,
               NULL, NULL, NULL, false
        FROM range({n_facts}) t(i)""")
    s.con.execute("CHECKPOINT")
    at = 1767225600 + n_facts + 86400
    bare = ("SELECT *, confidence * exp(-decay_rate * greatest(0.0, CAST($at - last_reinforced AS DOUBLE) "
            "/ 86400.0)) AS effective_confidence FROM memory_facts WHERE status = 'active'")
    times: dict[str, list[float]] = {"facts": [], "bare": []}
    rows = 0
    for _ in range(3):
        t = time.perf_counter()
        df = s.facts(at=at, status="active")
        times["facts"].append(time.perf_counter() - t)
        rows = len(df)
        del df
        t = time.perf_counter()
        df = s.con.execute(bare, {"at": at}).df()
        times["bare"].append(time.perf_counter() - t)
        del df
    s.close()
    os.remove(path)
    f, b = float(np.median(times["facts"])), float(np.median(times["bare"]))
    print(f"  facts(): {f:.2f} s   bare SQL: {b:.2f} s   ratio {f / b:.2f}x   ({rows:,} active rows, median of 3)")
    return {"facts": f, "bare": b, "ratio": f / b, "rows": rows}


#: fresh processes timed for the cold first call (their median is the figure)
COLD_CHILDREN = 5

COLD_OPEN = """
import sys, time
t = time.perf_counter()
from factmem.store.factstore import FactStore
imported = time.perf_counter() - t
t = time.perf_counter()
s = FactStore(sys.argv[1])
opened = time.perf_counter() - t
t, c = time.perf_counter(), time.process_time()
s.remember("cold", "start", "x", at=int(sys.argv[2]))
first, first_cpu = time.perf_counter() - t, time.process_time() - c
s.close()
print(imported, opened, first, first_cpu)
"""

CHILD = """
import resource, sys, time
from factmem.store.factstore import FactStore
t = time.perf_counter()
s = FactStore(sys.argv[2])
r = s.ingest(sys.argv[1])
s.close()
print(r.events, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bench_rss(n_events: int, tmp: str) -> dict:
    """(5): peak RSS of one ingest of n_events from Parquet, in a child process."""
    import pyarrow.parquet as pq

    print(f"\n(5) peak RSS of ingesting {n_events:,} events from Parquet (one ingest call, a child process)")
    src = os.path.join(tmp, "events.parquet")
    pq.write_table(synthetic_stream(n_events, n_days=365, n_subjects=20000, as_arrow=True), src)
    out = subprocess.run([sys.executable, "-c", CHILD, src, os.path.join(tmp, "m.duckdb")],
                         capture_output=True, text=True, cwd=str(HERE.parent))
    if out.returncode:
        raise SystemExit(out.stderr)
    events, secs, kb = out.stdout.strip().splitlines()[-1].split()
    gb = int(kb) / 1024 ** 2
    print(f"  {int(events):,} events ingested in {float(secs):.1f} s, peak RSS {gb:.2f} GB (limit 4 GB)")
    return {"events": int(events), "seconds": float(secs), "peak_rss_gb": gb}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run, not the figures)")
    ap.add_argument("--only", choices=("log", "remember", "facts", "rss"), help="run one part")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    q = args.quick
    results: dict = {"quick": q}
    print(f"bench_store{' --quick' if q else ''}: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "log"):
            results["log"] = bench_log(50_000 if q else 1_000_000, 365, tmp)
        if args.only in (None, "remember"):
            results["remember"] = bench_remember_latency(100_000 if q else 1_000_000, 300 if q else 9000, tmp)
        if args.only in (None, "facts"):
            results["facts"] = bench_facts(500_000 if q else 10_000_000, tmp)
        if args.only in (None, "rss"):
            results["rss"] = bench_rss(200_000 if q else 10_000_000, tmp)
    summary(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def summary(r: dict) -> None:
    """The issue's table: each store figure, cold and warm, against its target."""
    rows = []
    if "log" in r:
        lg = r["log"]
        f = lg["replay_file"]
        rows.append(("replay() the whole log into a file store, x the port", f"{f['x_port_cold']:.1f}x",
                     f"{f['x_port']:.1f}x (cpu {f['x_port_cpu']:.1f}x)", ">= 30x (aim 100x)"))
        m = lg["replay_memory"]
        rows.append(("replay() into an in-memory store (for comparison)", f"{m['x_port_cold']:.1f}x",
                     f"{m['x_port']:.1f}x (cpu {m['x_port_cpu']:.1f}x)", "-"))
        inc = lg["incremental"]
        rows.append(("incremental (a day + consolidate), file store, incl. close", "-",
                     f"{inc['x_port']:.1f}x (cpu {inc['x_port_cpu']:.1f}x)", ">= 8x (aim 20x)"))
        rows.append(("  of its wall: the journal's fdatasyncs", "-",
                     f"{inc['journal_sync_s']:.2f} s ({inc['journal_syncs']} syncs)", "-"))
        rows.append(("  of its wall: the close (the last flush; then the checkpoint)", "-",
                     f"{inc['close_s']:.2f} s ({inc['close_flush_s']:.2f}; {inc['close_rest_s']:.2f})", "-"))
        rows.append(("  in memory + syncs + checkpoint (durability's floor)", "-",
                     f"{lg['incremental_floor_x_port']:.1f}x ({lg['incremental_floor_s']:.2f} s)", "-"))
        rows.append(("  beside it: flushes written in the background", "-",
                     f"{inc['background_writing_s']:.2f} s ({inc['background_flushes']}; waited "
                     f"{inc['waited_s']:.2f} s)", "-"))
    if "remember" in r:
        fc = r["remember"]["first_call"]
        rows.append(("first remember() after opening a 1M-fact store", f"{fc['cold_first_s']:.3f} s "
                     f"(cpu {fc['cold_first_cpu_s']:.3f})", f"{min(fc['warm_open_and_first_s']):.3f} s (cpu "
                     f"{min(fc['warm_open_and_first_cpu_s']):.3f}; with open)", "<= 0.3 s"))
        b = r["remember"]["behind"]
        rows.append(("remember() steady state, 1M facts (median; p95)", "-",
                     f"{b['median_ms']:.2f} ms (cpu {b['cpu_median_ms']:.2f}); {b['p95_ms']:.2f} ms", "<= 0.5 ms"))
    if "rss" in r:
        rows.append(("peak RSS, one ingest of 10M events", "-", f"{r['rss']['peak_rss_gb']:.2f} GB", "< 4 GB"))
    print(f"\nsummary [{load()}]")
    print(f"  {'figure':62s} {'cold':24s} {'warm':30s} target")
    for name, cold, warm, target in rows:
        print(f"  {name:62s} {cold:24s} {warm:30s} {target}")


if __name__ == "__main__":
    main()
