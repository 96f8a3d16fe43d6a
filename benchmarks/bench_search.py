"""Sampler benchmark (the search issue): which Optuna sampler ``factmem tune`` should use by default.

For each log, search seed and sampler, one search at the largest budget; the smaller budgets are its
prefixes (a study's proposals in round ``r`` depend only on the seed and the trials told before, so
the search with a smaller budget *is* the first rounds of the larger one). A **budget** is the number
of candidates replayed: an adaptive sampler (``tpe``, ``cmaes``) runs one study per selection set
(all tuning data and each of the 3 folds' training people) after a random start shared by all
(``--startup``, 64: it looks at no score), so each study proposes (budget − 64) / 4 of its own; the
``random`` pool is shared by every study, so it proposes the whole budget.
``legacy`` is the search ``tune`` used before Optuna: two thirds of the budget random draws (the
random pool's first ones), one third local draws around the best 3 of every selection set
(``factmem.tuning.space.refine_points``), every candidate open to every fold's choice, as it was.

The measure is the one ``tune`` reports: held-out utility@20 of the procedure — each person scored by
the choice made, at that budget, without their fold — and its spread over the search seeds (the folds
and the scoring stay fixed: only the search varies).

    python benchmarks/bench_search.py                      # small, drift, long-absence; tpe, random, legacy; 5 seeds
    python benchmarks/bench_search.py --quick              # tiny, 2 seeds, budgets 16 and 32 (a smoke run)
    python benchmarks/bench_search.py --logs small --samplers tpe,random,legacy --seeds 3

The presets are generated (seed 1) with ``--personas`` people (default 12, to keep the default run
near 20 minutes on 2 cores; ``cmaes`` is left to ``--samplers`` for the same reason); ``small`` is the bundled log as it is. A conversation-like
preset, where the decisions issue has landed it, is one more ``--logs`` name.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from factmem.data.generate import generate, write  # noqa: E402
from factmem.data.logs import bundled_dataset  # noqa: E402
from factmem.evaluation.context import FIELDS  # noqa: E402
from factmem.evaluation.simulate import prepare  # noqa: E402
from factmem.tuning.settings import Compute, Holdout, Objective, Search  # noqa: E402
from factmem.tuning.space import refine_points  # noqa: E402
from factmem.tuning.sweep import SweepResult, sweep  # noqa: E402
from factmem.tuning.tune import _concat, base_params, subject_folds, tune  # noqa: E402

STUDIES = 4  # all tuning data + 3 folds
BUDGET_K = 20


def heldout_utility(res: SweepResult, fold_rows: list[int], folds: np.ndarray) -> float:
    """Pooled held-out utility@k: each subject under its fold's choice."""
    ctx = res.context["all"][:, :, 0, :]
    rows = ctx[np.asarray(fold_rows)[folds], np.arange(len(folds)), :]
    return float(rows[:, FIELDS.index("utility")].sum() / rows[:, FIELDS.index("points")].sum())


def best(res: SweepResult, subjects: np.ndarray | None, eligible: np.ndarray) -> int:
    v = res.objective_values("all", BUDGET_K, subjects)
    return int(np.argmax(np.where(eligible & np.isfinite(v), v, -np.inf)))


def optuna_curve(log, sampler: str, seed: int, budgets: list[int], startup: int, compute: Compute
                 ) -> tuple[dict[int, float], SweepResult]:
    """One search at the largest budget; each smaller budget is its prefix. An adaptive sampler's
    budget ``b`` is its shared random start (``min(b, startup)``) plus ``(b - startup) / 4`` of each
    study's own; a random search's is ``b`` shared draws."""
    top = max(budgets)
    if sampler == "random":
        search = Search(method="random", n=top, seed=seed)
    else:
        search = Search(method=sampler, n=max(1, math.ceil((top - startup) / STUDIES)), startup=startup, seed=seed)
    res = tune(log, search=search, holdout=Holdout(bootstrap=0), objective=Objective(budgets=(BUDGET_K,)),
               compute=compute, write=False)
    out = res.studies
    assert out is not None
    sw = out.sweep
    folds = subject_folds(len(sw.subjects["all"]), 3, 0)
    curve = {}
    for b in budgets:
        shared = b if sampler == "random" else min(b, startup)
        own = 0 if sampler == "random" else max(0, (b - startup) // STUDIES)
        choice = []
        for f in range(3):
            trials = out.studies[f"fold-{f}"].get_trials(deepcopy=False)
            # the baseline (enqueued), the shared draws (enqueued), then the study's own proposals
            pooled = [t.user_attrs["row"] for t in trials[1:] if "fixed_params" in t.system_attrs]
            mine = [t.user_attrs["row"] for t in trials[1:] if "fixed_params" not in t.system_attrs]
            elig = np.zeros(len(sw.params), bool)
            elig[:2] = True  # the baseline and the seed defaults
            elig[pooled[:shared]] = True
            elig[mine[:own]] = True
            choice.append(best(sw, folds != f, elig))
        curve[b] = heldout_utility(sw, choice, folds)
    return curve, sw


def legacy_curve(log, P, random_sweep: SweepResult, seed: int, budgets: list[int], compute: Compute) -> dict[int, float]:
    """Random draws (the random pool's first 2/3 of the budget) + 1/3 refinement around the best 3 of
    every selection set, every candidate open to every choice (tune before Optuna)."""
    folds = subject_folds(len(random_sweep.subjects["all"]), 3, 0)
    base = base_params(P)
    from factmem.tuning.settings import DEFAULT_SPACE

    curve = {}
    for b in budgets:
        n_random = round(2 * b / 3)
        keep = np.zeros(len(random_sweep.params), bool)
        keep[: 2 + n_random] = True  # the baseline rows, then the pool in order
        centres = []
        for sel in [None] + [folds != f for f in range(3)]:
            v = np.where(keep, random_sweep.objective_values("all", BUDGET_K, sel), -np.inf)
            centres += [random_sweep.params[i] for i in np.argsort(-v, kind="stable")[:3]
                        if random_sweep.params[i] not in centres]
        more = refine_points(DEFAULT_SPACE, centres, b - n_random, seed + 1)
        extra = sweep(P, more, base=base, objective=Objective(budgets=(BUDGET_K,)), holdout=Holdout(bootstrap=0),
                      compute=compute, include_baseline=False, calibration=False)
        res = _concat(random_sweep, extra)
        elig = np.concatenate([keep, np.ones(len(more), bool)])
        curve[b] = heldout_utility(res, [best(res, folds != f, elig) for f in range(3)], folds)
    return curve


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", default="small,drift,long-absence")
    ap.add_argument("--samplers", default="tpe,random,legacy", help="of tpe, cmaes, gp, random, legacy")
    ap.add_argument("--budgets", default="64,128,256,386")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--personas", type=int, default=12)
    ap.add_argument("--startup", type=int, default=64, help="adaptive samplers: shared random draws first")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--csv", metavar="FILE", help="also write every (log, sampler, seed, budget) row here")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.logs, args.budgets, args.seeds, args.startup = "tiny", "16,32", 2, 8
    budgets = [int(x) for x in args.budgets.split(",")]
    samplers = args.samplers.split(",")
    compute = Compute(workers=args.workers, progress=False)
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="bench_search_"))
    t_all = time.perf_counter()
    logs = {}
    for name in args.logs.split(","):  # seeds outermost: an interrupted run still covers every log
        if name == "small":
            logs[name] = bundled_dataset()
        else:
            logs[name] = tmp / name
            write(generate(name, seed=1, personas=None if name == "tiny" else args.personas), logs[name])
    prepared = {name: prepare(log) for name, log in logs.items()}
    for seed in range(args.seeds):
        for name, log in logs.items():
            P = prepared[name]
            random_sweep = None
            for sampler in [s for s in samplers if s != "legacy"] + (["random"] if "legacy" in samplers
                                                                       and "random" not in samplers else []):
                t0 = time.perf_counter()
                curve, sw = optuna_curve(log, sampler, seed, budgets, args.startup, compute)
                if sampler == "random":
                    random_sweep = sw
                if sampler in samplers:
                    rows += [dict(log=name, sampler=sampler, seed=seed, budget=b, heldout=v,
                                  seconds=time.perf_counter() - t0) for b, v in curve.items()]
                print(f"{name} {sampler} seed {seed}: " + ", ".join(f"{b}: {v:.4f}" for b, v in curve.items())
                      + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
            if "legacy" in samplers and random_sweep is not None:
                t0 = time.perf_counter()
                curve = legacy_curve(log, P, random_sweep, seed, budgets, compute)
                rows += [dict(log=name, sampler="legacy", seed=seed, budget=b, heldout=v,
                              seconds=time.perf_counter() - t0) for b, v in curve.items()]
                print(f"{name} legacy seed {seed}: " + ", ".join(f"{b}: {v:.4f}" for b, v in curve.items())
                      + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
            if args.csv:
                pd.DataFrame(rows).to_csv(args.csv, index=False)
    table = pd.DataFrame(rows)
    summary = (table.groupby(["log", "sampler", "budget"])["heldout"]
               .agg(mean="mean", sd="std", low="min", high="max").reset_index())
    wide = summary.assign(cell=[f"{m:.4f} ± {s:.4f}" for m, s in zip(summary["mean"], summary["sd"])]) \
        .pivot_table(index=["log", "sampler"], columns="budget", values="cell", aggfunc="first")
    print(f"\nheld-out utility@{BUDGET_K} of the choice, mean ± sd over {args.seeds} search seeds "
          f"(budget = candidates replayed; {time.perf_counter() - t_all:.0f} s in all)\n")
    cols = [str(b) for b in wide.columns]
    print("| log | sampler | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 2) + "|")
    for (log_name, sampler), row in wide.iterrows():
        print(f"| {log_name} | {sampler} | " + " | ".join(str(v) for v in row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
