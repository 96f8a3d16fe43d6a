"""Sweep benchmark (the performance issue): the sweep figures of its table, side by side in one run.

A sweep of 64 parameter sets (4 × 4 × 4 decay rates of the observed kinds) over the ``large`` preset
(>= 1M mentions) on the default schedule (a consolidation and a checkpoint every day), against 64 runs
of the row-by-row SQLite port of the seed (``benchmarks/seed_sqlite.py``, in-memory, indexed) — the
port replayed once on the **whole** log and multiplied by 64 (each of its runs is the same work).

* the sweep with scoring, the tuning issue's default objective (``Objective()``: utility@20 and the
  budgeted context metrics at **every** session start, needed from the truth, with the checkpoint
  metrics and calibration), the same with session starts sampled (``max_points_per_subject``, the
  amendment's allowance; seeded), and both without calibration (what ``tune`` does for its
  candidates: it scores calibration only for the rows its report shows), all through
  ``factmem.tuning.sweep.sweep`` with worker processes;
* the replay alone: the kernel's belief states for the 64 sets, in chunks of 16 on the same workers;
* where the time of one parameter set goes, in one process: replay (a 16-set chunk, per set), the
  checkpoint metrics, the context metrics at every session start, and sampled;
* peak RSS of this process and of the largest worker.

**Wall and CPU.** Wall-clock ratios depend on what else the machine runs (the port uses one core,
the sweep every worker's); each sweep row also gives its CPU seconds (this process and its workers)
against the port's, a ratio the load moves much less, and how busy the workers' cores were.

**Cold and warm.** The scorers' loops are compiled (Numba, ``factmem.core.compiled``) on their first
call and cached on disk. This run starts with an empty cache of its own (``NUMBA_CACHE_DIR`` in a
temporary folder, unless ``--keep-cache``): the first sweep (*cold*) pays the compilation, once, in
this process before its workers fork (``factmem.tuning.sweep.load_kernels``: the workers inherit the
kernels); the same sweep again (*warm*) runs in new worker processes, forked from a process that has
them loaded, as every later sweep of a process does (a new process loads them from the cache: ~1 s).
The compile cost alone is measured first, in fresh processes: ``load_kernels`` (replaying and scoring
a generated ``tiny`` log, what a sweep or ``factmem tune`` does before its workers fork; where the
cache is on disk, the context metrics' kernels compile in a forked child meanwhile) with an empty
cache (cold) and then with the cache it left (warm).

    python benchmarks/bench_sweep.py                 # generates the large preset in a temporary folder
    python benchmarks/bench_sweep.py --log DIR       # an existing dataset
    python benchmarks/bench_sweep.py --quick         # the bundled small log, 16 sets (a smoke run)
    python benchmarks/bench_sweep.py --port 49.3,49.0  # the port's wall and CPU seconds per run, from an
                                                     # earlier run on this log (not replayed again)
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

if "--keep-cache" not in sys.argv:  # an empty compile cache of this run's own, before Numba is imported
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-sweep-numba-")

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from seed_sqlite import replay_prefix  # noqa: E402

from factmem.core.params import MemoryParams  # noqa: E402
from factmem.data.generate import generate, write  # noqa: E402
from factmem.data.logs import bundled_dataset  # noqa: E402
from factmem.evaluation.context import ContextEvaluator  # noqa: E402
from factmem.evaluation.simulate import default_schedule, encode_events, kernel_belief_arrays, prepare  # noqa: E402
from factmem.tuning.settings import Compute, Objective  # noqa: E402
from factmem.tuning.sweep import sweep  # noqa: E402

RATES = {
    "decay_rate.explicit": [0.003, 0.01, 0.03, 0.05],
    "decay_rate.user_preference": [0.002, 0.005, 0.01, 0.02],
    "decay_rate.episodic": [0.15, 0.3, 0.6, 1.2],
}

_SHARED: dict = {}  # the prepared log, inherited by forked workers of the replay-only run


def _replay_chunk(params: list[dict]) -> int:
    P, grid, enc = _SHARED["P"], _SHARED["grid"], _SHARED["enc"]
    beliefs = kernel_belief_arrays(P, [MemoryParams.from_dict(d) for d in params], grid, enc)
    return sum(len(b["start"]) for b in beliefs)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} on {os.cpu_count()} cores"


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (worker pools, once shut down)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def maxrss_gb(who) -> float:
    return resource.getrusage(who).ru_maxrss / 1024 ** 2


_COMPILE_PROBE = """
import time
from factmem.tuning.sweep import load_kernels
ready = time.perf_counter()
load_kernels()
print(time.perf_counter() - ready)
"""


def compile_cost(cache: str) -> float:
    """Seconds a fresh process spends in ``load_kernels`` (compiling the replay and scoring kernels, or
    loading them from ``cache``)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", _COMPILE_PROBE], env=env, check=True, capture_output=True, text=True,
                         cwd=HERE.parent)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", help="dataset folder (default: generate the large preset)")
    ap.add_argument("--quick", action="store_true", help="the bundled small log and 16 sets (a smoke run)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: all cores)")
    ap.add_argument("--max-points", type=int, default=20, metavar="N",
                    help="session starts sampled per subject in the sampled run (default 20)")
    ap.add_argument("--keep-cache", action="store_true",
                    help="use the compile cache already on disk (no cold run: both sweeps are warm)")
    ap.add_argument("--port", metavar="WALL,CPU",
                    help="the port's seconds per run (wall, CPU) measured by an earlier run on the same log: "
                         "not replayed again (the row says so); for measuring two versions back to back")
    args = ap.parse_args()
    workers = args.workers or os.cpu_count() or 1
    print(f"bench_sweep{' --quick' if args.quick else ''}: {load()}")
    with tempfile.TemporaryDirectory() as cache:
        cold, warm = compile_cost(cache), compile_cost(cache)
    print(f"  loading the kernels in a fresh process (load_kernels: a tiny log replayed and scored): {cold:5.2f} s "
          f"with an empty compile cache (cold), "
          f"{warm:5.2f} s loading the cache (warm): compiling costs {cold - warm:4.1f} s once per machine")

    with tempfile.TemporaryDirectory() as tmp:
        if args.log:
            log = Path(args.log)
        elif args.quick:
            log = bundled_dataset("small")
        else:
            log = Path(tmp) / "large"
            t = time.perf_counter()
            write(generate("large", seed=1), log)
            print(f"generated the large preset (seed 1) in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        P = prepare(log)
        print(f"prepared the log in {time.perf_counter() - t:.1f} s")
        n = len(P.events)
        sched = default_schedule(P)
        grid = sched.consolidations(P.start, P.end)
        base = MemoryParams(multi_valued_predicates=P.dataset.multi_valued_predicates)
        params = [base.replace(**dict(zip(RATES, values))) for values in itertools.product(*RATES.values())]
        if args.quick:
            params = params[:16]
        m = len(params)
        print(f"log: {n:,} mentions, {(P.end - P.start) / 86400:.0f} days, {len(grid)} consolidations and "
              f"{len(sched.checkpoints(P.start, P.end))} checkpoints (daily); {m} parameter sets; {workers} workers")

        print(f"  [{load()}]")
        if args.port:
            port, port_cpu = (float(x) * f for x, f in zip(args.port.split(","), (1, m)))
            given = " (given by --port, not replayed in this run)"
        else:
            c0 = cpu_seconds()
            port = replay_prefix(P.events, grid, n, tuned=True, path=":memory:")
            port_cpu = (cpu_seconds() - c0) * m
            given = ""
        ports = port * m
        print(f"  port (row by row, in-memory SQLite, indexed), whole log: {port:7.1f} s per run "
              f"({n / port:,.0f} events/s); x{m} = {ports:8.0f} s; CPU x{m} = {port_cpu:8.0f} s{given}")

        # the replay alone, on the same workers (the log shared with them as the sweep shares it)
        enc = encode_events(P, base.multi_valued_predicates)
        _SHARED.update(P=P, grid=grid, enc=enc)
        chunks = [[p.to_dict() for p in params[i:i + 16]] for i in range(0, m, 16)]
        t = time.perf_counter()
        if workers > 1 and len(chunks) > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                rows = sum(pool.map(_replay_chunk, chunks))
        else:
            rows = sum(map(_replay_chunk, chunks))
        replay = time.perf_counter() - t
        _SHARED.clear()
        print(f"  factmem replay of {m} sets (kernel, belief states, {workers} workers): {replay:7.1f} s "
              f"({rows:,} belief states)   {ports / replay:7.0f}x the port")

        results = {}
        for label, objective, calibration in (
                ("every session start (cold: compiling once, before the workers fork)", Objective(), True),
                ("every session start (warm: the kernels loaded, inherited by the workers)", Objective(), True),
                (f"<= {args.max_points} session starts per subject (sampled, seeded)",
                 Objective(max_points_per_subject=args.max_points), True),
                ("every session start, calibration skipped as tune does for candidates", Objective(), False),
                (f"<= {args.max_points} session starts per subject, calibration skipped (tune --max-points "
                 f"{args.max_points})", Objective(max_points_per_subject=args.max_points), False)):
            t, c0 = time.perf_counter(), cpu_seconds()
            res = sweep(P, params, schedule=sched, objective=objective, include_baseline=False,
                        compute=Compute(workers=workers, progress=False), calibration=calibration)
            secs, cpu = time.perf_counter() - t, cpu_seconds() - c0
            results[label] = secs
            assert len(res.table) == m
            points = res.points.get("all", 0)
            print(f"  factmem sweep of {m} sets incl. scoring, context metrics at {label} "
                  f"({points:,} points of {res.sampled_from.get('all', 0):,}): {secs:7.1f} s   {ports / secs:7.0f}x the port "
                  f"(CPU {cpu:6.0f} s: {port_cpu / cpu:5.0f}x the port's CPU, {workers} cores busy "
                  f"{cpu / secs / workers:4.0%})")
        print(f"  peak RSS: this process {maxrss_gb(resource.RUSAGE_SELF):.2f} GB, "
              f"largest worker {maxrss_gb(resource.RUSAGE_CHILDREN):.2f} GB (limit 8 GB)")
        print(f"  [{load()}]")

        # where the time of one parameter set goes (this process, the first four sets)
        print("  one parameter set, in one process (median of 4 sets):")
        t = time.perf_counter()
        chunk = kernel_belief_arrays(P, params[:16], grid, enc)
        kernel = (time.perf_counter() - t) / 16
        evaluator = P.evaluator(sched.checkpoints(P.start, P.end))
        contexts = {"context metrics, every session start": ContextEvaluator(P),
                    f"context metrics, <= {args.max_points} per subject": ContextEvaluator(
                        P, max_points_per_subject=args.max_points)}
        parts = {"replay (kernel, share of a 16-set chunk)": [kernel] * 4, "checkpoint metrics and calibration": [],
                 "checkpoint metrics without calibration": []}
        parts.update({k: [] for k in contexts})
        everything = {"all": (0, len(evaluator.cp))}
        # (the sets of one chunk share their rows: the scorers reuse what depends on those alone, as
        # they do in a sweep; the median is over the 4 sets)
        for p, b in zip(params[:4], chunk[:4]):
            for label, calibration in (("checkpoint metrics and calibration", True),
                                       ("checkpoint metrics without calibration", False)):
                t = time.perf_counter()
                evaluator.score_parts(b, p.retrieval_threshold, everything, calibration=calibration)
                parts[label].append(time.perf_counter() - t)
            for label, ctx in contexts.items():
                t = time.perf_counter()
                ctx.score(b, p)
                parts[label].append(time.perf_counter() - t)
        for label, times in parts.items():
            print(f"    {label:48s} {np.median(times):6.2f} s")
        print(f"  [{load()}]")


if __name__ == "__main__":
    main()
