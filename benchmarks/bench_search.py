"""Sampler benchmark (the search issue): which Optuna sampler ``factmem tune`` should use by default.

For each log, search seed and method, one search at the largest budget; the smaller budgets are its
prefixes (a study's proposals in round ``r`` depend only on the seed and the trials told before, so
the search with a smaller budget *is* the first rounds of the larger one). Only the search runs
(``factmem.tuning.tune._search``: no identification probes, no restarts), on tune's folds (groups of
people who share sessions kept together). A **budget** is the number of candidates replayed:

* ``tpe``, ``cmaes`` (adaptive): tune's layout — one study per fold's people (each told only the
  scores of its own fold's people) after a start shared by all (``--startup`` draws: they look at no
  score), so each study proposes (budget − startup) / 3 of its own; fold ``f`` chooses, by its
  training people's score, among the shared rows and the other folds' studies' proposals. ``+corners``: the shared start opens with
  the space's corners (``factmem.tuning.search.corner_points``: one kind shown and never decaying,
  the others starting below the threshold; everything kept; the centre), scored beside the studies
  (any may choose one, none is told them), the rest random. ``+local``: half of each round's own
  proposals of a study are local draws around its own best (``Search.local``; ``+local25``: a
  quarter; without the flag, none — so ``tpe`` here is plain TPE, not tune's default);
  ``+scaleS``/``+centresC``: the local draws' step (S/100 of a range's width) and how many best
  trials they surround. ``@S``: a start of ``S`` draws instead of ``--startup`` (e.g.
  ``tpe+corners@32``). tune's default is ``tpe+corners+local``.
* ``random``: the whole budget shared by every study.
* ``legacy``: the search ``tune`` used before Optuna, made honest — two thirds of the budget random
  draws (the random pool's first ones), then for **each selection set** one quarter of the remaining
  third as local draws around the best 3 of the random draws *on that set's own people*
  (``factmem.tuning.space.refine_points``); each fold chooses among the shared draws and its own
  refinements only, so no fold's choice has seen its held-out people.
* ``legacy-leaky``: the same as it was in ``tune``: the refinement centres of every selection set
  (the all-data set's included, chosen with every fold's held-out people) pooled, and every
  refinement open to every fold's choice — optimistically biased, kept as a label of what the old
  number was.

The measure is the one ``tune`` reports: held-out utility@20 of the procedure — each person scored by
the choice made, at that budget, without their fold — and its spread over the search seeds (the folds
and the scoring stay fixed: only the search varies).

    python benchmarks/bench_search.py                      # small, drift, long-absence; 5 seeds; budgets 64…386
    python benchmarks/bench_search.py --quick              # tiny, 2 seeds, budgets 16 and 32 (a smoke run)
    python benchmarks/bench_search.py --logs small,conversation --samplers tpe,tpe+corners@32,legacy --seeds 3

The presets are generated (seed 1) with ``--personas`` people (default 12, to keep a run on 2 shared
cores within the hour); ``small`` is the bundled log as it is; ``conversation`` is the
conversation-like preset (people who share sessions).
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
from factmem.evaluation.simulate import default_schedule, prepare  # noqa: E402
from factmem.tuning import search as search_module  # noqa: E402
from factmem.tuning.decision import Promotion  # noqa: E402
from factmem.tuning.search import LOCAL_CENTRES, LOCAL_SCALE  # noqa: E402
from factmem.tuning.settings import DEFAULT_SPACE, Compute, Holdout, Objective, Search  # noqa: E402
from factmem.tuning.space import refine_points  # noqa: E402
from factmem.tuning.sweep import SweepResult, concat_results, sweep  # noqa: E402
from factmem.tuning.tune import _Job, _search, base_params  # noqa: E402

FOLDS = 3
STUDIES = FOLDS  # one study per fold's people (tune's layout)
BUDGET_K = 20
OBJECTIVE = Objective(budgets=(BUDGET_K,))
HOLDOUT = Holdout(bootstrap=0)


def heldout_utility(res: SweepResult, fold_rows: list[int], folds: np.ndarray) -> float:
    """Pooled held-out utility@k: each subject under its fold's choice."""
    ctx = res.context["all"][:, :, 0, :]
    rows = ctx[np.asarray(fold_rows)[folds], np.arange(len(folds)), :]
    return float(rows[:, FIELDS.index("utility")].sum() / rows[:, FIELDS.index("points")].sum())


def best(res: SweepResult, subjects: np.ndarray | None, eligible: np.ndarray) -> int:
    v = res.objective_values("all", BUDGET_K, subjects)
    return int(np.argmax(np.where(eligible & res.eligible()[: len(v)] & np.isfinite(v), v, -np.inf)))


def job_of(P, compute: Compute) -> _Job:
    return _Job(P, base_params(P), default_schedule(P), OBJECTIVE, HOLDOUT, compute, None, None, False,
                Promotion(restarts=1))


def parse_method(name: str, startup: int) -> tuple[str, bool, float, int]:
    """``tpe+corners+local25@32`` -> (``tpe``, corners, local share 0.25, start 32); ``+local``: 0.5.
    ``+scaleS`` / ``+centresC`` set the local draws' step (S/100 of a range's width) and how many of
    the study's best they surround (``search.LOCAL_SCALE``, ``search.LOCAL_CENTRES``) for this method."""
    head, _, at = name.partition("@")
    method, *extras = head.split("+")
    local = 0.0
    search_module.LOCAL_SCALE, search_module.LOCAL_CENTRES = LOCAL_SCALE, LOCAL_CENTRES
    for extra in extras:
        if extra.startswith("local"):
            local = int(extra[5:]) / 100 if extra[5:] else 0.5
        elif extra.startswith("scale"):
            search_module.LOCAL_SCALE = int(extra[5:]) / 100
        elif extra.startswith("centres"):
            search_module.LOCAL_CENTRES = int(extra[7:])
        elif extra != "corners":
            raise SystemExit(f"unknown method flag {extra!r} in {name!r}")
    return method, "corners" in extras, local, int(at) if at else startup


def optuna_curve(P, name: str, seed: int, budgets: list[int], startup: int, compute: Compute
                 ) -> tuple[dict[int, float], SweepResult, np.ndarray]:
    """One search at the largest budget; each smaller budget is its prefix. An adaptive sampler's
    budget ``b`` is its shared start (``min(b, start)``) plus ``(b - start) / 3`` of each study's
    own; a random search's is ``b`` shared draws."""
    method, corners, local, start = parse_method(name, startup)
    top = max(budgets)
    if method == "random":
        search = Search(method="random", n=top, seed=seed, local=0.0)
    else:
        search = Search(method=method, n=max(1, math.ceil((top - start) / STUDIES)), startup=start, seed=seed,
                        corners=corners, local=local)
    sw, folds, out = _search(job_of(P, compute), search)
    assert folds is not None
    curve = {}
    for b in budgets:
        shared = b if method == "random" else min(b, start)
        own = 0 if method == "random" else max(0, (b - start) // STUDIES)
        choice = []
        heads, pools, owns = [], [], []
        for g in range(FOLDS):
            trials = out.studies[f"people-{g}"].get_trials(deepcopy=False)
            # the baseline (enqueued), the shared draws (enqueued), then the study's own proposals
            # (its sampler's and its local draws, which are enqueued too but marked ``local``)
            pooled = [t.user_attrs["row"] for t in trials[1:]
                      if "fixed_params" in t.system_attrs and not t.user_attrs.get("local")]
            mine = [t.user_attrs["row"] for t in trials[1:]
                    if "fixed_params" not in t.system_attrs or t.user_attrs.get("local")]
            # the rows before the first shared draw: the baseline, the seed defaults (never chosen when
            # they differ: SweepResult.eligible) and the corners, scored beside the studies (part of the start)
            heads.append(pooled[0] if pooled else len(sw.params))
            pools.append(pooled)
            owns.append(mine[:own])
        for f in range(FOLDS):
            # fold f chooses among the shared rows and what the other folds' people's studies proposed
            elig = np.zeros(len(sw.params), bool)
            elig[:heads[f]] = True
            elig[pools[f][:max(0, shared - (heads[f] - 2))]] = True
            for g in range(FOLDS):
                if g != f:
                    elig[owns[g]] = True
            choice.append(best(sw, folds != f, elig))
        curve[b] = heldout_utility(sw, choice, folds)
    return curve, sw, folds


def legacy_curves(P, random_sweep: SweepResult, folds: np.ndarray, seed: int, budgets: list[int],
                  compute: Compute) -> dict[str, dict[int, float]]:
    """``legacy`` (honest) and ``legacy-leaky`` at each budget (see the module docstring); the random
    draws are the random pool's first 2/3 of the budget (rows after the baseline rows, in order)."""
    base = base_params(P)
    sels = [None] + [folds != f for f in range(FOLDS)]
    curves: dict[str, dict[int, float]] = {"legacy": {}, "legacy-leaky": {}}
    head = int(random_sweep.table["baseline"].sum() + (random_sweep.table["seed_defaults"]
                                                        & ~random_sweep.table["baseline"]).sum())

    def top3(keep: np.ndarray, sel: np.ndarray | None) -> list:
        v = np.where(keep & random_sweep.eligible(), random_sweep.objective_values("all", BUDGET_K, sel), -np.inf)
        return [random_sweep.params[i] for i in np.argsort(-v, kind="stable")[:3]]

    for b in budgets:
        n_random = round(2 * b / 3)
        keep = np.zeros(len(random_sweep.params), bool)
        keep[: head + n_random] = True  # the baseline rows, then the pool in order
        n_refine = b - n_random
        # leaky: every set's centres pooled, every refinement open to every fold
        centres: list = []
        for sel in sels:
            centres += [p for p in top3(keep, sel) if p not in centres]
        leaky = refine_points(DEFAULT_SPACE, centres, n_refine, seed + 1)
        # honest: each selection set refines around its own best, with a quarter of the refinement
        own = [refine_points(DEFAULT_SPACE, top3(keep, sel), n_refine // len(sels), seed + 1 + s)
               for s, sel in enumerate(sels)]
        points = list(dict.fromkeys([*leaky, *[p for ps in own for p in ps]]))
        have = set(random_sweep.params)
        new = [p for p in points if p not in have]
        res = random_sweep
        if new:
            res = concat_results(random_sweep, sweep(P, new, base=base, objective=OBJECTIVE, holdout=HOLDOUT,
                                                     compute=compute, include_baseline=False, calibration=False))
        row_of: dict = {}
        for i, p in enumerate(res.params):
            row_of.setdefault(p, i)
        base_keep = np.concatenate([keep, np.zeros(len(res.params) - len(keep), bool)])

        def mask(ps: list, base_keep: np.ndarray = base_keep, row_of: dict = row_of) -> np.ndarray:
            m = base_keep.copy()
            m[[row_of[p] for p in ps]] = True
            return m

        m_leaky = mask(leaky)
        curves["legacy-leaky"][b] = heldout_utility(res, [best(res, folds != f, m_leaky) for f in range(FOLDS)],
                                                    folds)
        curves["legacy"][b] = heldout_utility(res, [best(res, folds != f, mask(own[1 + f])) for f in range(FOLDS)],
                                              folds)
    return curves


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--logs", default="small,drift,long-absence")
    ap.add_argument("--samplers", default="tpe+corners+local,tpe,random,legacy,legacy-leaky",
                    help="of tpe, cmaes, gp (each with +corners, +local[SHARE%%], +scaleS, +centresC and/or @START), "
                         "random, legacy, legacy-leaky")
    ap.add_argument("--budgets", default="64,128,192,256,386")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--personas", type=int, default=12)
    ap.add_argument("--startup", type=int, default=48, help="adaptive samplers: shared draws first")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--csv", metavar="FILE", help="also write every (log, sampler, seed, budget) row here")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.logs, args.budgets, args.seeds, args.startup = "tiny", "16,32", 2, 8
    budgets = [int(x) for x in args.budgets.split(",")]
    samplers = args.samplers.split(",")
    legacy = [s for s in samplers if s.startswith("legacy")]
    compute = Compute(workers=args.workers, progress=False)
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="bench_search_"))
    t_all = time.perf_counter()
    logs = {}
    for name in args.logs.split(","):
        if name == "small":
            logs[name] = bundled_dataset()
        else:
            logs[name] = tmp / name
            write(generate(name, seed=1, personas=None if name == "tiny" else args.personas), logs[name])
    prepared = {name: prepare(log) for name, log in logs.items()}
    for seed in range(args.first_seed, args.first_seed + args.seeds):  # seeds outermost: a cut run covers every log
        for name in logs:
            P = prepared[name]
            random_sweep = folds = None
            methods = [s for s in samplers if not s.startswith("legacy")]
            if legacy and "random" not in methods:
                methods.append("random")
            for method in methods:
                t0 = time.perf_counter()
                curve, sw, folds = optuna_curve(P, method, seed, budgets, args.startup, compute)
                if method == "random":
                    random_sweep = sw
                if method in samplers:
                    rows += [dict(log=name, sampler=method, seed=seed, budget=b, heldout=v,
                                  seconds=time.perf_counter() - t0) for b, v in curve.items()]
                print(f"{name} {method} seed {seed}: " + ", ".join(f"{b}: {v:.4f}" for b, v in curve.items())
                      + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
            if legacy and random_sweep is not None and folds is not None:
                t0 = time.perf_counter()
                for method, curve in legacy_curves(P, random_sweep, folds, seed, budgets, compute).items():
                    if method in legacy:
                        rows += [dict(log=name, sampler=method, seed=seed, budget=b, heldout=v,
                                      seconds=time.perf_counter() - t0) for b, v in curve.items()]
                        print(f"{name} {method} seed {seed}: " + ", ".join(f"{b}: {v:.4f}" for b, v in curve.items())
                              + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
            if args.csv:
                pd.DataFrame(rows).to_csv(args.csv, index=False)
    print_table(pd.DataFrame(rows), time.perf_counter() - t_all)
    return 0


def print_table(table: pd.DataFrame, seconds: float | None = None) -> None:
    """The markdown table: mean ± sd over seeds per (log, sampler) and budget, and the seeds counted."""
    summary = (table.groupby(["log", "sampler", "budget"])["heldout"]
               .agg(mean="mean", sd="std", n="count").reset_index())
    wide = summary.assign(cell=[f"{m:.4f} ± {s:.4f}" for m, s in zip(summary["mean"], summary["sd"])]) \
        .pivot_table(index=["log", "sampler"], columns="budget", values="cell", aggfunc="first")
    seeds = summary.groupby(["log", "sampler"])["n"].min()
    took = "" if seconds is None else f"; {seconds:.0f} s in all"
    print(f"\nheld-out utility@{BUDGET_K} of the choice, mean ± sd over search seeds "
          f"(budget = candidates replayed{took})\n")
    cols = [str(b) for b in wide.columns]
    print("| log | sampler | " + " | ".join(cols) + " | seeds |\n" + "|---" * (len(cols) + 3) + "|")
    for (log_name, sampler), row in wide.iterrows():
        print(f"| {log_name} | {sampler} | " + " | ".join(str(v) for v in row) + f" | {seeds[(log_name, sampler)]} |")


if __name__ == "__main__":
    raise SystemExit(main())
