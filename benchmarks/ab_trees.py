"""A/B of two checkouts of factmem on one workload: fresh processes, the two alternated, side by side.

A change meant to be faster is judged against the code before it on the same machine in the same
minutes: this script runs a workload ``--runs`` times in each of two trees (a folder holding a
checkout, or a git revision of this repository, checked out for the run in a temporary worktree),
alternating which goes first, each run in a fresh Python process importing *that* tree's
``factmem``; the workload's code and its data are this script's, the same for both. It prints every
run's wall and CPU seconds, the medians, the ratio new / old, and whether the two trees' results
are identical (a digest of what the workload computed: a change that is faster but not exact is
reported as such, whatever its time).

Workloads (the issue's figures, one at a time):

* ``incremental`` — ``ingest`` a day then ``consolidate`` at midnight over the benchmarks' synthetic
  stream (``streams.synthetic_stream``), a file store, ``close()`` included (bench_store's (2));
  digest: every fact row and the evidence count, read back from the closed file;
* ``replay`` — ``replay(events, midnights)`` of the same stream into a file store, ``close()``
  included (bench_store's (1)); the same digest;
* ``scoring`` — one parameter set of bench_sweep's grid over the ``large`` preset (generated once
  into ``--log-cache``): the checkpoint metrics with calibration and the context metrics at every
  session start, the median of 4 sets replayed together; digest: the summaries' numbers.

    python benchmarks/ab_trees.py main HEAD --workload incremental      # revisions of this repository
    python benchmarks/ab_trees.py ../old . --workload scoring --runs 6  # folders
    python benchmarks/ab_trees.py main HEAD --quick                     # small sizes (a smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# The child: imports factmem from its working directory (the tree), the stream from this folder.
CHILD = r'''
import hashlib, json, os, sys, tempfile, time
tree, bench, workload, size, log = sys.argv[1:6]
sys.path[:0] = [tree, bench]
import numpy as np
import factmem

def day_spans(ev):
    ts = ev["ts"].to_numpy()
    first = int(ts[0]) - int(ts[0]) % 86400
    grid = np.arange(first, int(ts[-1]) + 86400, 86400, dtype=np.int64)[1:]
    bounds = np.searchsorted(ts, grid, side="left")
    return grid, list(zip(np.concatenate([[0], bounds[:-1]]), bounds))

def store_digest(path):
    from factmem import FactStore
    with FactStore(path, read_only=True) as store:
        facts = store.db.execute("SELECT * FROM memory_facts ORDER BY id").fetch_df()
        evidence = store.db.execute("SELECT count(*), sum(fact_id) FROM memory_evidence").fetchall()
    return hashlib.sha256(facts.to_csv(index=False).encode() + repr(evidence).encode()).hexdigest()

def timed(body):
    wall, cpu = time.perf_counter(), time.process_time()
    body()
    return time.perf_counter() - wall, time.process_time() - cpu

if workload in ("incremental", "replay"):
    from streams import synthetic_stream
    from factmem import FactStore
    ev = synthetic_stream(int(size), n_days=365)
    grid, spans = day_spans(ev)
    folder = tempfile.mkdtemp(prefix="factmem-ab-")
    path = os.path.join(folder, "store.duckdb")
    FactStore(os.path.join(folder, "warm.duckdb")).replay(ev.iloc[:2000], grid[:5])  # compiled kernels loaded
    store = FactStore(path)
    def run():
        if workload == "replay":
            store.replay(ev, grid)
        else:
            for at, (a, b) in zip(grid, spans):
                if b > a:
                    store.ingest(ev.iloc[a:b])
                store.consolidate(int(at))
        store.close()
    wall, cpu = timed(run)
    digest = store_digest(path)
    import shutil; shutil.rmtree(folder)
else:  # scoring
    import itertools
    from factmem.core.params import MemoryParams
    from factmem.evaluation.context import ContextEvaluator
    from factmem.evaluation.simulate import default_schedule, encode_events, kernel_belief_arrays, prepare
    prepared = prepare(log)
    schedule = default_schedule(prepared)
    grid = schedule.consolidations(prepared.start, prepared.end)
    base = MemoryParams(multi_valued_predicates=prepared.dataset.multi_valued_predicates)
    from bench_sweep import RATES as rates  # bench_sweep's grid (this folder's)
    params = [base.replace(**dict(zip(rates, values))) for values in itertools.product(*rates.values())][:16]
    chunk = kernel_belief_arrays(prepared, params, grid, encode_events(prepared, base.multi_valued_predicates))
    evaluator = prepared.evaluator(schedule.checkpoints(prepared.start, prepared.end))
    context = ContextEvaluator(prepared)
    everything = {"all": (0, len(evaluator.cp))}
    evaluator.score_parts(chunk[0], params[0].retrieval_threshold, everything)  # compiled kernels loaded
    context.score(chunk[0], params[0])
    walls, cpus, results = [], [], []
    for p, beliefs in zip(params[:4], chunk[:4]):
        out = {}
        def run():
            out["checkpoint"] = evaluator.score_parts(beliefs, p.retrieval_threshold, everything)["all"].summary
            out["context"] = context.score(beliefs, p).summary()
        w, c = timed(run)
        walls.append(w); cpus.append(c)
        results.append(repr(sorted(out["checkpoint"].items())) + repr(sorted(out["context"].items())))
    wall, cpu = float(np.median(walls)), float(np.median(cpus))
    digest = hashlib.sha256("".join(results).encode()).hexdigest()
print(json.dumps({"wall": wall, "cpu": cpu, "digest": digest}))
'''

WORKLOADS = ("incremental", "replay", "scoring")


def checkout(spec: str, scratch: Path) -> tuple[Path, str]:
    """A folder holding the tree ``spec`` names (a folder, or a revision checked out in ``scratch``),
    and how to name it."""
    folder = Path(spec)
    if (folder / "factmem" / "__init__.py").is_file():
        return folder.resolve(), spec
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", spec], capture_output=True, text=True)
    if rev.returncode:
        sys.exit(f"ab_trees: {spec!r} is neither a folder holding factmem/ nor a revision of {REPO}")
    short = rev.stdout.strip()
    target = scratch / f"tree-{short}"
    if not target.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(target), short], check=True)
    return target, f"{spec} ({short})"


def large_log(cache: Path) -> Path:
    """bench_sweep's ``large`` preset (seed 1), generated once under ``cache`` (written beside, then
    renamed into place: a run stopped while writing leaves no half dataset)."""
    target = cache / "large-seed1"
    if not target.exists():
        sys.path.insert(0, str(REPO))
        from factmem.data.generate import generate, write

        print(f"generating the large preset (seed 1) into {target} (once)")
        cache.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix="partial-", dir=cache))
        write(generate("large", seed=1), partial / "large")
        os.replace(partial / "large", target)
        shutil.rmtree(partial, ignore_errors=True)
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", help="the tree before: a folder holding factmem/, or a revision of this repository")
    ap.add_argument("new", help="the tree after (the same)")
    ap.add_argument("--workload", choices=WORKLOADS, default="incremental")
    ap.add_argument("--runs", type=int, default=4, help="runs of each tree (default 4)")
    ap.add_argument("--quick", action="store_true", help="small sizes: 50,000 events; scoring on the bundled small log")
    ap.add_argument("--log-cache", default=os.path.join(tempfile.gettempdir(), "factmem-ab-large"),
                    help="where the scoring workload's large preset is generated once (default: %(default)s)")
    args = ap.parse_args()
    size = 50_000 if args.quick else 1_000_000
    scratch = Path(tempfile.mkdtemp(prefix="factmem-ab-trees-"))
    made: list[Path] = []
    try:
        trees = []
        for spec in (args.old, args.new):
            folder, name = checkout(spec, scratch)
            if scratch in folder.parents:
                made.append(folder)
            trees.append((folder, name))
        log = ""
        if args.workload == "scoring":
            if args.quick:
                sys.path.insert(0, str(REPO))
                from factmem.data.logs import bundled_dataset

                log = str(bundled_dataset("small"))
            else:
                log = str(large_log(Path(args.log_cache)))
        print(f"{args.workload}: {args.runs} runs of each tree, alternated, each a fresh process "
              f"(load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())})")
        runs: dict[str, list[dict]] = {name: [] for _, name in trees}
        for i in range(args.runs):
            for folder, name in (trees if i % 2 == 0 else trees[::-1]):
                done = subprocess.run([sys.executable, "-c", CHILD, str(folder), str(HERE), args.workload, str(size), log],
                                      cwd=folder, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"ab_trees: the run in {name} failed:\n{done.stderr[-4000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                runs[name].append(result)
                print(f"  {name:28s} {result['wall']:8.3f} s  cpu {result['cpu']:8.3f} s  result {result['digest'][:12]}",
                      flush=True)
        (_, old), (_, new) = trees
        median = {name: (statistics.median(r["wall"] for r in rs), statistics.median(r["cpu"] for r in rs))
                  for name, rs in runs.items()}
        for name in (old, new):
            print(f"  median {name:21s} {median[name][0]:8.3f} s  cpu {median[name][1]:8.3f} s")
        print(f"  new / old: wall {median[new][0] / median[old][0]:.3f}, cpu {median[new][1] / median[old][1]:.3f}"
              f"  (below 1: the new tree is faster)")
        digests = {r["digest"] for rs in runs.values() for r in rs}
        print("  results: identical in every run of both trees" if len(digests) == 1 else
              f"  results: DIFFER ({len(digests)} distinct digests: "
              + "; ".join(f"{name}: {sorted({r['digest'][:12] for r in rs})}" for name, rs in runs.items()) + ")")
    finally:
        for folder in made:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
