"""Store benchmarks (issue 2). Prints times and ratios measured side by side in one run.

(a) replay throughput over a 1M-event stream — ingest per day plus a daily consolidate — against a
    row-by-row SQLite port of the seed (benchmarks/seed_sqlite.py): the seed as published (its
    schema, SQLite's default journal) and a tuned port (WAL, an index on subject/predicate/status);
(b) ``facts(at=..., status="active")`` over 10M facts against the bare DuckDB SQL on the same file;
(c) peak RSS of ingesting 10M events from a Parquet file (a child process, ru_maxrss).

    python benchmarks/bench_store.py            # full sizes (several minutes)
    python benchmarks/bench_store.py --quick    # smaller sizes, same code paths
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from seed_sqlite import replay_prefix  # noqa: E402
from streams import synthetic_stream  # noqa: E402

from factmem.engine.waves import grid_between  # noqa: E402
from factmem.store.factstore import FactStore  # noqa: E402

DAY = 86400


def day_batches(ev):
    ts = ev["ts"].to_numpy()
    t0 = int(ts[0]) - int(ts[0]) % DAY
    grid = grid_between(t0, int(ts[-1]) + DAY, DAY)
    bounds = np.searchsorted(ts, grid, side="left")
    starts = np.concatenate([[0], bounds[:-1]])
    return grid, list(zip(starts, bounds))


def bench_replay(n_events: int, n_days: int, baseline_events: int, seed_events: int) -> dict:
    ev = synthetic_stream(n_events, n_days=n_days)
    grid, spans = day_batches(ev)
    out = {"events": n_events, "days": n_days, "consolidations": len(grid)}
    print(f"\n(a) replay: {n_events:,} events over {n_days} days, ingest per day + daily consolidate")
    with tempfile.TemporaryDirectory() as tmp:
        for label, kw in (("seed_as_published", dict(tuned=False, n=seed_events)),
                          ("seed_tuned", dict(tuned=True, n=baseline_events))):
            n = min(kw["n"], n_events)
            secs = replay_prefix(ev, grid, n, tuned=kw["tuned"], path=os.path.join(tmp, f"{label}.sqlite"))
            full = secs * n_events / n
            out[label] = full
            note = "" if n == n_events else f" (measured on the first {n:,} events, extrapolated linearly)"
            print(f"  SQLite port, {label:18s} {full:9.2f} s{note}")
        for backend in ("file", "memory"):
            path = os.path.join(tmp, "f.duckdb") if backend == "file" else None
            s = FactStore(path)
            t = time.perf_counter()
            for T, (a, b) in zip(grid, spans):
                if b > a:
                    s.ingest(ev.iloc[a:b])
                s.consolidate(int(T))
            loop = time.perf_counter() - t
            s.close()
            if path:
                os.remove(path)
            s = FactStore(path)
            t = time.perf_counter()
            s.replay(ev, grid)
            one = time.perf_counter() - t
            s.close()
            if path:
                os.remove(path)
            out[f"factmem_{backend}_loop"], out[f"factmem_{backend}_replay"] = loop, one
            print(f"  factmem {backend:6s} ingest+consolidate per day {loop:8.2f} s   "
                  f"replay(): {one:6.2f} s")
    for backend in ("file", "memory"):
        for how in ("loop", "replay"):
            t = out[f"factmem_{backend}_{how}"]
            print(f"  ratio {backend:6s} {how:6s}: vs tuned port {out['seed_tuned'] / t:7.1f}x   "
                  f"vs seed as published {out['seed_as_published'] / t:8.1f}x")
    return out


def bench_facts(n_facts: int) -> dict:
    print(f"\n(b) facts(at, status='active') over {n_facts:,} facts vs the bare SQL, same file")
    with tempfile.TemporaryDirectory() as tmp:
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
        times = {"facts": [], "bare": []}
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
    f, b = float(np.median(times["facts"])), float(np.median(times["bare"]))
    print(f"  facts(): {f:.2f} s   bare SQL: {b:.2f} s   ratio {f / b:.2f}x   ({rows:,} active rows, median of 3)")
    return {"facts": f, "bare": b, "ratio": f / b, "rows": rows}


CHILD = """
import resource, sys, time
from factmem.store.factstore import FactStore
t = time.perf_counter()
s = FactStore(sys.argv[2])
r = s.ingest(sys.argv[1])
s.close()
print(r.events, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bench_rss(n_events: int) -> dict:
    import pyarrow.parquet as pq

    print(f"\n(c) peak RSS of ingesting {n_events:,} events from Parquet (one ingest call)")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "events.parquet")
        pq.write_table(synthetic_stream(n_events, n_days=365, n_subjects=20000, as_arrow=True), src)
        out = subprocess.run([sys.executable, "-c", CHILD, src, os.path.join(tmp, "m.duckdb")],
                             capture_output=True, text=True, cwd=str(HERE.parent))
        if out.returncode:
            raise SystemExit(out.stderr)
        events, secs, kb = out.stdout.strip().splitlines()[-1].split()
    gb = int(kb) / 1024 ** 2
    print(f"  {int(events):,} events ingested in {float(secs):.1f} s, peak RSS {gb:.2f} GB")
    return {"events": int(events), "seconds": float(secs), "peak_rss_gb": gb}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--only", choices=("a", "b", "c"), help="run one benchmark")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    q = args.quick
    results = {}
    if args.only in (None, "a"):
        results["replay"] = bench_replay(100_000 if q else 1_000_000, 365, 20_000 if q else 1_000_000,
                                         5_000 if q else 20_000)
    if args.only in (None, "b"):
        results["facts"] = bench_facts(1_000_000 if q else 10_000_000)
    if args.only in (None, "c"):
        results["rss"] = bench_rss(1_000_000 if q else 10_000_000)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
