"""Sweep benchmark (issue 4). Prints times and ratios measured side by side in one run.

A sweep of 64 parameter sets over the ``large`` preset (>= 1M mentions, daily consolidation)
against 64 runs of the row-by-row SQLite port of the seed (benchmarks/seed_sqlite.py). The port is
measured on a prefix of the log and extrapolated linearly to the whole log (which flatters it: its
cost per event grows with the table), then multiplied by 64.

    python benchmarks/bench_sweep.py                 # generates the large preset in a temp dir
    python benchmarks/bench_sweep.py --log DIR       # an existing dataset
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from seed_sqlite import replay_prefix  # noqa: E402

from factmem.core.params import MemoryParams  # noqa: E402
from factmem.data.generate import generate, write  # noqa: E402
from factmem.engine import waves as W  # noqa: E402
from factmem.evaluation.simulate import Schedule, encode_events, prepare  # noqa: E402
from factmem.tuning.sweep import sweep  # noqa: E402

SPACE = {
    "decay_rate.explicit": [0.003, 0.01, 0.03, 0.05],
    "decay_rate.user_preference": [0.002, 0.005, 0.01, 0.02],
    "decay_rate.episodic": [0.15, 0.3, 0.6, 1.2],
}


def maxrss_gb(who) -> float:
    return resource.getrusage(who).ru_maxrss / 1024 ** 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", help="dataset folder (default: generate the large preset)")
    ap.add_argument("--baseline-events", type=int, default=50_000, help="prefix the tuned port replays")
    ap.add_argument("--seed-events", type=int, default=10_000, help="prefix the seed-as-published port replays")
    ap.add_argument("--evaluate-every", type=float, default=24 * 7, help="hours between checkpoints (default weekly)")
    ap.add_argument("--workers", type=int, default=None, help="sweep worker processes (default: all cores)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.log:
            log = Path(args.log)
        else:
            log = Path(tmp) / "large"
            t = time.perf_counter()
            write(generate("large", seed=1), log)
            print(f"generated the large preset in {time.perf_counter() - t:.1f} s")
        P = prepare(log)
        n = len(P.events)
        sched = Schedule(consolidate_every_hours=24, evaluate_every_hours=args.evaluate_every)
        grid = sched.consolidations(P.start, P.end)
        print(f"log: {n:,} mentions, {(P.end - P.start) / 86400:.0f} days, {len(grid)} daily consolidations; "
              f"64 parameter sets")

        base = {}
        for label, tuned, k in (("tuned port", True, args.baseline_events), ("seed as published", False, args.seed_events)):
            k = min(k, n)
            secs = replay_prefix(P.events, grid, k, tuned=tuned, path=os.path.join(tmp, f"seed-{tuned}.sqlite"))
            base[label] = secs * n / k * 64
            print(f"  SQLite {label:18s}: {secs:7.2f} s for {k:,} events -> {secs * n / k:8.1f} s per run "
                  f"(extrapolated linearly), x64 = {base[label]:9.0f} s")

        params = [MemoryParams(multi_valued_predicates=P.dataset.multi_valued_predicates).replace(**{
            "decay_rate.explicit": a, "decay_rate.user_preference": b, "decay_rate.episodic": c})
            for a in SPACE["decay_rate.explicit"] for b in SPACE["decay_rate.user_preference"]
            for c in SPACE["decay_rate.episodic"]]
        assert len(params) == 64
        enc = encode_events(P, params[0].multi_valued_predicates)
        t = time.perf_counter()
        for i in range(0, 64, 16):  # the replay alone: what the port does, for 64 parameter sets
            W.replay_waves(enc.key, enc.obj, enc.ts, enc.kind, enc.n_keys, W.ParamArrays.of(params[i:i + 16]), grid)
        kernel = time.perf_counter() - t
        print(f"  factmem replay of 64 parameter sets (kernel, one process): {kernel:7.2f} s")

        t = time.perf_counter()
        res = sweep(P, params, schedule=sched, include_defaults=False, workers=args.workers, progress=False)
        full = time.perf_counter() - t
        print(f"  factmem sweep of 64 parameter sets (replay + ground-truth scoring on tuning and held-out "
              f"parts, {args.workers or os.cpu_count()} processes): {full:7.2f} s")
        print(f"  peak RSS: this process {maxrss_gb(resource.RUSAGE_SELF):.2f} GB, "
              f"largest worker {maxrss_gb(resource.RUSAGE_CHILDREN):.2f} GB")
        for label, b in base.items():
            print(f"  ratio vs {label:18s}: replay {b / kernel:8.0f}x   full sweep {b / full:8.0f}x")
        assert len(res.table) == 64


if __name__ == "__main__":
    main()
