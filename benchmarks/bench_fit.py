"""Fit benchmark (the fit issue): wall time of ``factmem.fitting.fit`` on ``datasets/small`` and where it goes.

Prints, side by side in one run: the whole fit with intervals (the default 100 bootstrap
resamples), the point estimates alone (``bootstrap=0``), and their ratio — the cost of the
intervals; then the same point fit on a log four times larger (160 personas, generated), to show
the time grows about linearly with the log.

    python benchmarks/bench_fit.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from factmem.data.generate import generate  # noqa: E402
from factmem.data.logs import load  # noqa: E402
from factmem.data.presets import preset  # noqa: E402
from factmem.fitting.fit import fit  # noqa: E402


def timed(label: str, run) -> float:
    began = time.perf_counter()
    run()
    seconds = time.perf_counter() - began
    print(f"{label:<58s} {seconds:7.2f} s")
    return seconds


def main() -> None:
    small = load(HERE.parent / "datasets" / "small")
    print(f"datasets/small: {len(small.events)} mentions, {small.events['subject'].nunique()} subjects")
    fit(small, bootstrap=0)  # warm up imports and caches
    full = timed("fit(small) with 100 bootstrap resamples (default)", lambda: fit(small))
    point = timed("fit(small, bootstrap=0): point estimates only", lambda: fit(small, bootstrap=0))
    print(f"{'intervals cost (full / point)':<58s} {full / point:7.2f} x")
    big = generate(preset("small").replace(personas=160), seed=0)
    print(f"generated small with 160 personas: {len(big.events)} mentions")
    larger = timed("fit(160 personas, bootstrap=0)", lambda: fit(big, bootstrap=0))
    ratio = len(big.events) / len(small.events)
    print(f"{'time ratio / mention ratio (1 = linear)':<58s} {larger / point / ratio:7.2f}")


if __name__ == "__main__":
    main()
