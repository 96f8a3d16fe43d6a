"""remember() latency on a large file store, and the bulk ingest it must not slow down (issue 11).

A file store is filled with ``--facts`` facts (default 1,000,000: one per (subject, predicate) key, a
fifth of the keys then changing value once, so the table also holds superseded versions) by one
``ingest``; then ``remember`` is called ``--calls`` times on random keys of the store, a third each
reinforcing the key's active fact, superseding it with a new object, and inserting a brand-new key.
It prints the median, 95th percentile and mean per call, and the time of the bulk ingest and of a
``replay`` of a second batch with daily consolidations (the paths the remember() lookup must leave
alone).

    python benchmarks/bench_remember.py                 # 1M facts
    python benchmarks/bench_remember.py --facts 200000  # quicker

Run it on the branch before and after a change to compare; the machine is shared, so run the two
side by side and read the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from factmem.store.factstore import FactStore  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--facts", type=int, default=1_000_000, help="keys in the store (facts ≈ 1.2 × keys)")
    ap.add_argument("--calls", type=int, default=3000, help="remember() calls to time")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    n_keys = int(args.facts / 1.44)  # 1.2 facts per key, plus the replay's fifth
    events, changed = key_events(n_keys, args.seed, START)
    more, _ = key_events(n_keys // 5, args.seed + 1, START + 200 * DAY)
    more["subject"] = "r" + more["subject"]  # other keys: the replay inserts, reinforces and supersedes
    rng = np.random.default_rng(args.seed + 2)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.duckdb")
        store = FactStore(path)
        t0 = time.perf_counter()
        store.ingest(events)
        t_ingest = time.perf_counter() - t0
        grid = np.arange(START + 201 * DAY, START + 381 * DAY, DAY)
        t0 = time.perf_counter()
        store.replay(more, grid)
        t_replay = time.perf_counter() - t0
        n_facts = len(store)
        store.close()
        size_mb = os.path.getsize(path) / 2**20

        store = FactStore(path)  # a reopened store: whatever the lookup needs is rebuilt here or lazily
        at = START + 400 * DAY
        t0 = time.perf_counter()
        store.remember("warm", "up", "x", at=at)  # the first call pays any lazy build
        t_first = time.perf_counter() - t0
        times = np.empty(args.calls)
        keys = rng.integers(0, n_keys, size=args.calls)
        mode = np.arange(args.calls) % 3
        for i in range(args.calls):
            k = int(keys[i])
            subject, predicate = f"user{k // 40}", f"p{k % 40}"
            if mode[i] == 0:  # reinforce whatever the key holds now
                obj = "v1" if changed[k] else "v0"
            elif mode[i] == 1:
                obj = f"w{i}"  # a new value: supersedes
            else:
                subject = f"new{i}"  # a new key: inserts
                obj = "x"
            t = time.perf_counter()
            store.remember(subject, predicate, obj, kind="explicit", at=at + i)
            times[i] = time.perf_counter() - t
        store.close()

    ms = times * 1000
    print(f"store: {n_facts:,} facts ({size_mb:.0f} MB file)")
    print(f"ingest of {len(events):,} events into an empty file store: {t_ingest:.2f} s")
    print(f"replay of {len(more):,} events with {len(grid)} daily consolidations: {t_replay:.2f} s")
    print(f"first remember() after reopening (pays any lazy build): {t_first * 1000:.1f} ms")
    print(f"remember() over {args.calls} calls (reinforce / supersede / insert, a third each): "
          f"median {np.median(ms):.3f} ms, p95 {np.percentile(ms, 95):.3f} ms, mean {ms.mean():.3f} ms "
          f"(target <= 1 ms at 1M facts)")


if __name__ == "__main__":
    main()
