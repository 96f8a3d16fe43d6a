"""remember() latency on a large file store, row by row, and the bulk writes it must not slow down (issue 11).

This times the row-by-row path (``write_behind=False``: a store inside ``transaction()`` or with
abstraction links writes that way), whose first statement is the lookup compared here. The default
path, written behind (:mod:`factmem.store.writebehind`), is timed against it by
``bench_store.py`` (3).

A file store is filled with about ``--facts`` facts (default 1,000,000) by one ``ingest`` (one fact
per (subject, predicate) key, a fifth of the keys then changing value) and one ``replay`` with daily
consolidations; then ``remember`` is called on random keys of the store, a third each reinforcing
the key's active fact, superseding it with a new object, and inserting a brand-new key.

Two lookups are timed side by side, call by call in alternation (the machine is shared: alternating
puts both under the same load): the key map (:mod:`factmem.store.keyindex`: candidate ids, then
``id IN (…)``) and the full-table scan ``WHERE status = 'active' AND subject = ? AND predicate = ?``
that remember() ran before it. Printed per lookup: the median and 95th percentile of the whole
remember() call and of the lookup alone, and the ratio.

``--baseline DIR`` (a checkout of factmem from before the change, e.g. made with
``git archive <commit> factmem | tar -x -C DIR``) also times the bulk ``ingest`` and ``replay`` of
the same events with that code and with this one, alternating ``--rounds`` times in child processes,
and prints the medians — the key map must leave them alone.

    python benchmarks/bench_remember.py                       # 1M facts
    python benchmarks/bench_remember.py --facts 200000        # quicker
    python benchmarks/bench_remember.py --baseline /tmp/old   # and ingest/replay before vs after
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
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

DAY = 86400
START = 1_767_225_600


def key_events(n_keys: int, seed: int, start: int) -> tuple[pd.DataFrame, np.ndarray]:
    """One mention per key, then a second mention with a new object for a fifth of the keys;
    returns the events and which keys changed (their object is then ``v1``, else ``v0``)."""
    rng = np.random.default_rng(seed)
    subj = np.arange(n_keys) // 40
    pred = np.arange(n_keys) % 40
    changed = np.flatnonzero(rng.random(n_keys) < 0.2)
    n = n_keys + len(changed)
    ts = np.sort(start + rng.integers(0, 180 * DAY, size=n))
    keys = np.concatenate([np.arange(n_keys), changed])
    version = np.concatenate([np.zeros(n_keys, np.int64), np.ones(len(changed), np.int64)])
    kinds = np.array(["explicit", "user_preference", "episodic"], dtype=object)
    return pd.DataFrame({
        "ts": ts,
        "subject": pd.array([f"user{s}" for s in subj[keys]], dtype=object),
        "predicate": pd.array([f"p{p}" for p in pred[keys]], dtype=object),
        "object": pd.array([f"v{v}" for v in version], dtype=object),
        "kind": kinds[(pred[keys] % 2)],  # explicit and user_preference: they outlive the replay below
        "session_id": pd.array([f"s{i // 50}" for i in range(n)], dtype=object),
        "message_id": pd.array([f"m{i}" for i in range(n)], dtype=object),
    }), np.isin(np.arange(n_keys), changed)


def workload(n_facts: int, seed: int):
    n_keys = int(n_facts / 1.44)  # 1.2 facts per key from the ingest, plus the replay's fifth
    events, changed = key_events(n_keys, seed, START)
    more, _ = key_events(n_keys // 5, seed + 1, START + 200 * DAY)
    more["subject"] = "r" + more["subject"]  # other keys: the replay inserts, reinforces and supersedes
    grid = np.arange(START + 201 * DAY, START + 381 * DAY, DAY)
    return n_keys, events, changed, more, grid


def bulk(path: str, n_facts: int, seed: int) -> dict:
    """Fill a store at ``path``: one ingest, one replay; their times (this process's factmem)."""
    from factmem.core.params import MemoryParams
    from factmem.store.factstore import FactStore

    _, events, _, more, grid = workload(n_facts, seed)
    # slow decay: the keys remember() is timed on must still hold an active fact after the replay
    store = FactStore(path, params=MemoryParams(decay_rate={"explicit": 0.001, "user_preference": 0.001}))
    t0 = time.perf_counter()
    store.ingest(events)
    t_ingest = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.replay(more, grid)
    t_replay = time.perf_counter() - t0
    n = len(store)
    store.close()
    return {"ingest_s": t_ingest, "replay_s": t_replay, "facts": n, "events": len(events), "replay_events": len(more),
            "consolidations": len(grid)}


def child_bulk(root: str, n_facts: int, seed: int) -> dict:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]); "
            "import bench_remember as b, tempfile, os; d = tempfile.mkdtemp(); "
            "print(json.dumps(b.bulk(os.path.join(d, 'x.duckdb'), int(sys.argv[3]), int(sys.argv[4]))))")
    out = subprocess.run([sys.executable, "-c", code, root, str(HERE), str(n_facts), str(seed)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--facts", type=int, default=1_000_000, help="facts in the store (about)")
    ap.add_argument("--calls", type=int, default=2000, help="remember() calls to time (half per lookup)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", metavar="DIR", help="a checkout of the old factmem: compare ingest/replay times")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the --baseline comparison")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from factmem.store.factstore import FactStore
    from factmem.store.keyindex import KeyIndex

    if args.baseline:
        times: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(args.rounds):
            times["before"].append(child_bulk(args.baseline, args.facts, args.seed))
            times["after"].append(child_bulk(str(ROOT), args.facts, args.seed))
        first = times["after"][0]
        print(f"bulk writes, {args.rounds} alternating rounds in child processes, median seconds:")
        for what, label in (("ingest_s", f"ingest of {first['events']:,} events into an empty file store"),
                            ("replay_s", f"replay of {first['replay_events']:,} events with "
                                         f"{first['consolidations']} daily consolidations")):
            b = float(np.median([t[what] for t in times["before"]]))
            a = float(np.median([t[what] for t in times["after"]]))
            print(f"  {label}: before {b:.2f} s, after {a:.2f} s (after/before {a / b:.2f})")

    n_keys, _, changed, _, _ = workload(args.facts, args.seed)
    rng = np.random.default_rng(args.seed + 2)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.duckdb")
        info = bulk(path, args.facts, args.seed)
        size_mb = os.path.getsize(path) / 2**20
        # reopened (with its saved params), row by row: the key map is built at the first remember()
        store = FactStore(path, write_behind=False)
        at = START + 400 * DAY
        t0 = time.perf_counter()
        store.remember("warm", "up", "x", at=at)
        t_first = time.perf_counter() - t0
        calls = {"map": [], "scan": []}
        lookups = {"map": [], "scan": []}
        lookup = store._active_of  # the lookup alone (what remember() runs first), timed separately
        keys = rng.integers(0, n_keys, size=args.calls)
        held = [0, 0, 0]  # calls whose key held an active fact, per kind of call
        for i in range(args.calls):
            mode = "map" if i % 2 == 0 else "scan"
            store._keys.MAX_CANDIDATES = KeyIndex.MAX_CANDIDATES if mode == "map" else -1  # -1: always scan
            k = int(keys[i])
            subject, predicate = f"user{k // 40}", f"p{k % 40}"
            kind = (i // 2) % 3
            if kind == 0:  # reinforce what the key holds
                obj = "v1" if changed[k] else "v0"
            elif kind == 1:  # a new value: supersedes
                obj = f"w{i}"
            else:  # a new key: inserts
                subject, obj = f"new{i}", "x"
            t = time.perf_counter()
            with store._lock:
                found = lookup(subject, predicate)
            lookups[mode].append(time.perf_counter() - t)
            held[kind] += bool(found)
            t = time.perf_counter()
            store.remember(subject, predicate, obj, kind="explicit", at=at + i)
            calls[mode].append(time.perf_counter() - t)
        store.close()

    print(f"store: {info['facts']:,} facts ({size_mb:.0f} MB file); fill: ingest {info['ingest_s']:.2f} s, "
          f"replay {info['replay_s']:.2f} s")
    print(f"first remember() after reopening (builds the key map): {t_first * 1000:.1f} ms")
    print(f"{args.calls} remember() calls on random keys (reinforce / supersede / insert), the two lookups alternating "
          f"(keys holding an active fact: {held[0]} / {held[1]} / {held[2]} of {args.calls // 3} each):")
    for mode, label in (("map", "key map (now)"), ("scan", "table scan (before)")):
        c, lk = np.array(calls[mode]) * 1000, np.array(lookups[mode]) * 1000
        print(f"  {label:20s} remember() median {np.median(c):.3f} ms, p95 {np.percentile(c, 95):.3f} ms; "
              f"lookup alone median {np.median(lk):.3f} ms, p95 {np.percentile(lk, 95):.3f} ms")
    ratio = np.median(calls["scan"]) / np.median(calls["map"])
    lratio = np.median(lookups["scan"]) / np.median(lookups["map"])
    print(f"  scan / map: remember() {ratio:.1f}x, lookup {lratio:.1f}x (target: remember() <= 1 ms at 1M facts)")


if __name__ == "__main__":
    main()
