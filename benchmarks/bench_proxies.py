"""Agreement of the no-truth proxies of "needed" with the truth (the production-tune issue): the table
docs/design.md records and from which ``tune --log PROD.sqlite`` takes its default proxy.

For each preset with truth (the bundled ``small`` and generated ``drift``, ``episodic-flood``,
``multi-valued``, ``long-absence``, ``realistic``, ``conversation``; or the presets named with ``--preset``), the
baseline and ``--n`` random candidates of the default space are replayed once and scored under the
truth and under each proxy (``next-session`` and every proxy of :mod:`factmem.evaluation.proxies`;
:func:`factmem.tuning.agreement.measure_agreement`): Spearman ρ of the
candidates' utility@20, agreement of the promote/not decision (3 folds over subjects, 200 bootstrap
resamples), and the truth-scored held-out utility of each proxy's recommendation against the truth's own.

    python benchmarks/bench_proxies.py                 # every preset above (a few minutes on 2 cores)
    python benchmarks/bench_proxies.py --preset small  # one
    python benchmarks/bench_proxies.py --markdown      # the table as Markdown (for docs/design.md)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import pandas as pd  # noqa: E402

from factmem.data.generate import generate  # noqa: E402
from factmem.data.logs import bundled_dataset, load  # noqa: E402
from factmem.tuning.agreement import agreement_table, best_proxy  # noqa: E402

PRESETS = ("small", "drift", "episodic-flood", "multi-valued", "long-absence", "realistic", "conversation")


def _markdown(frame: pd.DataFrame) -> str:
    def cell(v) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", action="append", help="preset(s) to measure (default: the seven above)")
    ap.add_argument("--n", type=int, default=48, help="random candidates per preset (default 48)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the candidates, folds and bootstrap (default 0)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args()
    logs = {}
    for name in args.preset or PRESETS:
        logs[name] = load(bundled_dataset()) if name == "small" else generate(name, seed=1)
    t = time.perf_counter()
    table = agreement_table(logs, n=args.n, seed=args.seed)
    seconds = time.perf_counter() - t
    shown = table[["log", "proxy", "rho", "decision_agrees", "promoted", "truth_promoted", "flat_share",
                   "truth_utility", "truth_best", "truth_baseline", "regret"]]
    if args.markdown:
        print(_markdown(shown))
    else:
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(shown.round(4).to_string(index=False))
    print(f"\nbest-agreeing proxy (mean rho, then decisions, then regret): {best_proxy(table)}; "
          f"{len(logs)} logs, {args.n} candidates each, {seconds:.0f} s")


if __name__ == "__main__":
    main()
