"""``tune --log PROD.sqlite`` at scale (the production-tune issue): time and peak RSS of
:func:`factmem.production.tune.tune_production` with its default settings on a 1M-observation
production file, side by side with ``whatif`` on the same file (the issue's bounds: ≤ 10 minutes on 2
cores and ≤ 6 GB for 1M; 10M within 8 GB with the sampling stated).

The file is :mod:`bench_whatif`'s synthetic conversation stream (``--subjects`` people, sessions over a
year, 40 predicates, values that change), replayed through a FactStore and exported in the seed's
schema. Each command runs in a child process, so its peak RSS is its own (``ru_maxrss``; worker
processes of the search are counted separately, as ``children_peak_rss``). Default settings: 256 + 128
candidates, 3 folds over people, 1,000 bootstrap resamples, needed = the default proxy, the search on
a seeded sample of 2,000 people when the file has more (judged on all of them).

    python benchmarks/bench_tune_production.py                        # 1M observations, 20,000 people
    python benchmarks/bench_tune_production.py --observations 10000000 --keep prod10m.sqlite
    python benchmarks/bench_tune_production.py --quick                # 100k observations: a smoke test
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_whatif import build  # noqa: E402

TUNE = """
import json, resource, sys, time
from factmem.production.tune import tune_production
t = time.perf_counter()
r = tune_production(sys.argv[1], out=sys.argv[2])
total = time.perf_counter() - t
u = r.tune.primary.versus_baseline
use = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"seconds": total, "cpu_s": use.ru_utime + use.ru_stime + kids.ru_utime + kids.ru_stime,
                  "peak_rss_kb": use.ru_maxrss, "children_peak_rss_kb": kids.ru_maxrss,
                  "candidates": len(r.tune.sweep.params), "needed": r.needed, "sample": r.sample,
                  "reproduced": r.reproduction.reproduced, "checked": r.reproduction.checked,
                  "promoted": r.promoted, "flat_share": r.flat_share, "decision": r.decision,
                  "heldout": [u.a, u.b, u.difference, u.low, u.high],
                  "judged_all": r.judged and r.judged["all"], "timings": r.timings}))
"""

WHATIF = """
import json, resource, sys, time
from factmem import whatif
t = time.perf_counter()
r = whatif(sys.argv[1], sys.argv[2] + "/params.toml", budgets=(20,), bootstrap=1000, out=sys.argv[2] + "/whatif")
total = time.perf_counter() - t
u = r.comparison("utility")
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": total, "cpu_s": use.ru_utime + use.ru_stime, "peak_rss_kb": use.ru_maxrss,
                  "needed": r.settings.needed,
                  "utility": [u["current"], u["new"], u["difference"], u["low"], u["high"]],
                  "forgotten": r.summary["forgotten"], "kept": r.summary["kept"]}))
"""


def _child(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=HERE.parent)
    if proc.returncode not in (0, 3):
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100k observations")
    ap.add_argument("--observations", type=int, default=None, help="observations in the file (default 1M)")
    ap.add_argument("--subjects", type=int, default=20_000, help="people (default 20,000)")
    ap.add_argument("--keep", metavar="FILE", help="build the production file here (reused when it exists)")
    args = ap.parse_args()
    n = args.observations or (100_000 if args.quick else 1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        prod = Path(args.keep) if args.keep else Path(tmp) / "prod.sqlite"
        built = None
        if not prod.exists():
            prod.parent.mkdir(parents=True, exist_ok=True)
            built = build(prod, n, args.subjects)
        load = os.getloadavg()
        t = time.perf_counter()
        tuned = _child(TUNE, str(prod), str(Path(tmp) / "run"))
        load_mid = os.getloadavg()
        wi = _child(WHATIF, str(prod), str(Path(tmp) / "run"))
        wall = time.perf_counter() - t
        load_end = os.getloadavg()
    gb = 1024 * 1024
    print(f"production file: {n:,} observations, {args.subjects:,} people"
          + (f" (built in {built['generate_s'] + built['replay_s'] + built['export_s']:.0f} s)" if built else ""))
    print(f"load average (1 min) at start {load[0]:.1f}, after tune {load_mid[0]:.1f}, at the end {load_end[0]:.1f} "
          "(2 shared cores)")
    print(f"{'':24}{'tune --log':>14}{'whatif':>14}")
    print(f"{'wall time (s)':24}{tuned['seconds']:>14.0f}{wi['seconds']:>14.0f}")
    print(f"{'CPU time (s)':24}{tuned['cpu_s']:>14.0f}{wi['cpu_s']:>14.0f}")
    print(f"{'peak RSS (GB)':24}{tuned['peak_rss_kb'] / gb:>14.2f}{wi['peak_rss_kb'] / gb:>14.2f}")
    print(f"{'workers peak RSS (GB)':24}{tuned['children_peak_rss_kb'] / gb:>14.2f}{'-':>14}")
    print(f"{'needed':24}{tuned['needed']:>14}{wi['needed']:>14}")
    s = tuned["sample"]
    print(f"search: {tuned['candidates']} candidates on {s['searched']:,} of {s['subjects']:,} people, "
          f"{s['searched_observations']:,} of {s['observations']:,} observations (seed {s['seed']}); judged on all: "
          f"{json.dumps(tuned['judged_all'])}")
    print(f"reproduced {tuned['reproduced']:,} of {tuned['checked']:,}; flat share {tuned['flat_share']:.2f}; "
          f"held out (search sample) {tuned['heldout']}")
    print(f"stages (s): {json.dumps({k: round(v) for k, v in tuned['timings'].items()})}")
    print(f"decision: {tuned['decision']}")
    print(f"whatif of the chosen params.toml: utility@20 {wi['utility']}; forgotten {wi['forgotten']:,}, kept "
          f"{wi['kept']:,}; both in {wall:.0f} s")


if __name__ == "__main__":
    main()
