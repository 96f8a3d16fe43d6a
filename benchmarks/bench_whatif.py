"""What-if benchmark (the what-if issue): time and peak RSS of ``factmem.whatif`` on a production file of
10M observations (the issue's bound: 4 GB).

The production file is built the way production would hold it: a synthetic conversation stream —
``--subjects`` people, each with sessions spread over a year (about two a week), each session
mentioning a few facts over one to three messages; 40 predicates with Zipf-like popularity, values
that change with probability 0.05 per mention, kinds by predicate — replayed through a
:class:`~factmem.store.FactStore` (``replay``, daily consolidation at midnight UTC, seed defaults) and
written by :func:`~factmem.export.sqlite.export_db` in the seed's schema. The what-if then runs in a
child process (so its peak RSS is its own, ``ru_maxrss``) with new parameters (explicit facts decaying
twice as fast), a budget of 20 and 200 bootstrap resamples, and writes its run folder.

    python benchmarks/bench_whatif.py                     # 10M observations (builds the file: minutes)
    python benchmarks/bench_whatif.py --quick             # 1M observations, same code paths
    python benchmarks/bench_whatif.py --keep prod.sqlite  # keep (and reuse) the production file
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
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from factmem.core.codes import DAY  # noqa: E402

START = 1_767_225_600  # 2026-01-01T00:00:00Z
KINDS = pa.array(["explicit", "user_preference", "episodic"])
LIMIT_GB = 4.0


def _labels(prefix: str, codes: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(pa.array(codes), pa.string()), "")


def conversation_stream(n_observations: int, n_subjects: int, *, n_predicates: int = 40, days: int = 365,
                        change_prob: float = 0.05, seed: int = 0) -> pa.Table:
    """Exactly ``n_observations`` mentions, sorted by time: (ts, subject, predicate, object, kind,
    session_id, message_id). Sessions belong to one person; a session's mentions come 40 s apart,
    three to a message."""
    rng = np.random.default_rng(seed)
    per_session = 5.0  # 1 + Poisson(4)
    n_sessions = int(n_observations / per_session * 1.15) + 100
    subj = rng.integers(0, n_subjects, n_sessions)
    start = START + rng.integers(0, days * DAY - 3600, n_sessions)
    size = 1 + rng.poisson(per_session - 1, n_sessions)
    session = np.repeat(np.arange(n_sessions), size)
    pos = np.arange(len(session)) - np.repeat(np.cumsum(size) - size, size)
    ts = start[session] + 40 * pos
    order = np.argsort(ts, kind="stable")[:n_observations]
    order = order[np.argsort(ts[order], kind="stable")]
    session, pos, ts = session[order], pos[order], ts[order]
    weights = 1.0 / np.arange(1, n_predicates + 1) ** 0.9
    pred = rng.choice(n_predicates, size=len(ts), p=weights / weights.sum())
    who = subj[session]
    key = who.astype(np.int64) * n_predicates + pred
    # values: each mention keeps the key's current object or, with change_prob, moves to a new one
    by_key = np.argsort(key, kind="stable")
    ks = key[by_key]
    first = np.ones(len(ks), bool)
    first[1:] = ks[1:] != ks[:-1]
    version = np.cumsum((rng.random(len(ks)) < change_prob) | first)
    base = np.maximum.accumulate(np.where(first, version, 0))
    obj = np.empty(len(ks), np.int64)
    obj[by_key] = version - base
    return pa.table({
        "ts": pa.array(ts.astype(np.int64)),
        "subject": _labels("user", who),
        "predicate": _labels("p", pred),
        "object": _labels("v", obj),
        "kind": KINDS.take(pa.array(pred % 3)),
        "session_id": _labels("s", session),
        "message_id": _labels("m", pos // 3),
    })


def build(path: Path, n_observations: int, n_subjects: int) -> dict:
    """The production file: the stream replayed through a FactStore and exported in the seed's schema."""
    from factmem.engine.waves import grid_between
    from factmem.export.sqlite import export_db
    from factmem.store.factstore import FactStore

    t = time.perf_counter()
    events = conversation_stream(n_observations, n_subjects)
    t_gen = time.perf_counter() - t
    ts = events.column("ts").to_numpy()
    grid = grid_between((int(ts[0]) // DAY) * DAY, int(ts[-1]) + DAY, DAY)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        t = time.perf_counter()
        store = FactStore(Path(tmp) / "memory.duckdb")
        store.replay(events, grid)
        del events
        t_replay = time.perf_counter() - t
        t = time.perf_counter()
        res = export_db(store, path, overwrite=True, progress=False)
        t_export = time.perf_counter() - t
        store.close()
    return {"generate_s": t_gen, "replay_s": t_replay, "export_s": t_export, "facts": res.facts,
            "evidence": res.evidence}


CHILD = """
import json, resource, sys, time
from factmem import MemoryParams, whatif
t = time.perf_counter()
new = MemoryParams(decay_rate={"explicit": 0.1})
r = whatif(sys.argv[1], new, budgets=(20,), bootstrap=200, out=sys.argv[2])
total = time.perf_counter() - t
u = r.comparison("utility")
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": total, "compute_s": r.seconds, "cpu_s": use.ru_utime + use.ru_stime, "peak_rss_kb": use.ru_maxrss,
                  "reproduced": r.reproduction.reproduced, "checked": r.reproduction.checked,
                  "subjects": r.summary["subjects"], "session_starts": r.summary["session_starts"],
                  "forgotten": r.summary["forgotten"], "kept": r.summary["kept"],
                  "utility": [u["current"], u["new"], u["difference"], u["low"], u["high"]]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1M observations instead of 10M")
    ap.add_argument("--observations", type=int, default=None, help="observations in the file (default 10M)")
    ap.add_argument("--subjects", type=int, default=20_000, help="people (default 20,000)")
    ap.add_argument("--keep", metavar="FILE", help="build the production file here (reused when it exists)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    n = args.observations or (1_000_000 if args.quick else 10_000_000)
    subjects = args.subjects if not args.quick or args.subjects != 20_000 else 2_000
    with tempfile.TemporaryDirectory() as tmp:
        prod = Path(args.keep) if args.keep else Path(tmp) / "prod.sqlite"
        out: dict = {"observations": n, "subjects": subjects}
        if prod.exists():
            print(f"reusing {prod}")
        else:
            print(f"building a production file of {n:,} observations of {subjects:,} people …")
            out["build"] = build(prod, n, subjects)
            b = out["build"]
            print(f"  generated in {b['generate_s']:.1f} s, FactStore.replay {b['replay_s']:.1f} s, "
                  f"export_db {b['export_s']:.1f} s: {b['facts']:,} facts, {b['evidence']:,} evidence rows")
        out["file_bytes"] = os.path.getsize(prod)
        print(f"what-if on {prod} ({out['file_bytes'] / 1e6:,.0f} MB) in a child process …")
        run = subprocess.run([sys.executable, "-c", CHILD, str(prod), str(Path(tmp) / "run")], capture_output=True,
                             text=True, cwd=str(HERE.parent), env={**os.environ, "PYTHONPATH": str(HERE.parent)})
        if run.returncode:
            raise SystemExit(run.stderr)
        res = json.loads(run.stdout.strip().splitlines()[-1])
        out["whatif"] = res
        gb = res["peak_rss_kb"] / 1024 ** 2
        u = res["utility"]
        print(f"  {res['seconds']:.1f} s in all ({res['compute_s']:.1f} s before writing the run folder; "
              f"{res['cpu_s']:.1f} s of CPU), peak RSS {gb:.2f} GB = {gb / LIMIT_GB:.2f} of the {LIMIT_GB:g} GB bound")
        print(f"  reproduced {res['reproduced']:,} of {res['checked']:,} facts; {res['subjects']:,} people, "
              f"{res['session_starts']:,} session starts; {res['forgotten']:,} facts forgotten, {res['kept']:,} kept; "
              f"utility@20 {u[0]:.4f} -> {u[1]:.4f} (difference {u[2]:+.4f} [{u[3]:+.4f}, {u[4]:+.4f}])")
        print(f"  throughput: {n / res['seconds'] / 1e6:.3f} M observations/s wall, "
              f"{n / res['cpu_s'] / 1e6:.3f} M/s of CPU (the machine may be shared: CPU time is the steadier figure)")
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
