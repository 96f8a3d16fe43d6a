"""Identification as ``tune`` runs it: the probes of every searched name at each budget's best, the
joint check of the projection, and the projected rows that are shipped and judged — replayed and
appended to the sweep as ``probe`` rows (never chosen). The rules are in
:mod:`factmem.tuning.identification`; this module replays what they need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from factmem.core.params import MemoryParams
from factmem.tuning.identification import Identification, identify, joint_restorations, log_support, probe_points
from factmem.tuning.search import study_rows
from factmem.tuning.settings import Search
from factmem.tuning.sweep import SweepResult, concat_results, sweep

if TYPE_CHECKING:
    from factmem.tuning.tune import _Job

__all__ = ["choosable", "identify_choices", "add_probes", "rows_of"]


def choosable(res: SweepResult, name: str) -> np.ndarray:
    """The rows a choice made under ``name`` may choose (:func:`~factmem.tuning.search.study_rows`:
    the tuning part every searched row, ``fold-f`` the other folds' studies' proposals, and always the
    shared and fixed points)."""
    return study_rows(res.table, name)


def identify_choices(job: _Job, res: SweepResult, folds: np.ndarray | None, search: Search
              ) -> tuple[SweepResult, dict[int, Identification], dict[int, tuple[int, int, list[int]]]]:
    """Identification at every budget (:mod:`factmem.tuning.identification`): probe each searched
    name at the best candidate, then project the best and every fold's choice onto the identified
    names. Returns the sweep with the probe and projected rows (``probe``: never chosen), the
    identification per budget, and per budget (best candidate, shipped row, each fold's judged row)."""
    obj, part = job.objective, job.tuning_part
    space = search.resolved_space
    if not obj.per_budget or not space:
        return res, {}, {}
    baseline = res.params[0]
    bests = {k: res.best(part, k, rows=choosable(res, part)) for k in obj.budgets}
    fold_rows = {k: [res.best(part, k, folds != f, rows=choosable(res, f"fold-{f}"))
                     for f in range(job.holdout.folds)] if folds is not None else []
                 for k in obj.budgets}
    probes = {k: probe_points(space, res.params[b], baseline=baseline) for k, b in bests.items()}
    res = add_probes(job, res, [p for by in probes.values() for ps in by.values() for p in ps])
    row_of = rows_of(res)
    support = log_support(job.prepared, space)
    idents: dict[int, Identification] = {}
    for k, b in bests.items():
        idents[k] = identify(res, part, k, b, space, {n: [row_of[p] for p in ps] for n, ps in probes[k].items()},
                             baseline, min_effect=job.promotion.min_effect, resamples=job.holdout.bootstrap,
                             seed=job.holdout.seed + 1000 * k + 2, support=support)
    res = _keep_jointly(job, res, idents, bests, baseline)
    projected = {k: [idents[k].project(res.params[i], baseline) for i in [bests[k], *fold_rows[k]]] for k in bests}
    res = add_probes(job, res, [p for ps in projected.values() for p in ps])
    row_of = rows_of(res)
    chosen = {k: (bests[k], row_of[ps[0]], [row_of[p] for p in ps[1:]]) for k, ps in projected.items()}
    return res, idents, chosen


def _keep_jointly(job: _Job, res: SweepResult, idents: dict[int, Identification], bests: dict[int, int],
                  baseline: MemoryParams) -> SweepResult:
    """The joint check of the projection (:mod:`factmem.tuning.identification`, "Jointly needed"):
    per budget, replay the best with its unidentified names reset together, and with them given back
    one at a time (largest effect first); keep jointly the fewest that bring it within the minimum
    effect of the best on the tuning data. One replay for every budget's points."""
    chains = {k: [idents[k].project(res.params[b], baseline),
                  *joint_restorations(idents[k], res.params[b], baseline)]
              for k, b in bests.items() if idents[k].unidentified}
    if not chains:
        return res
    res = add_probes(job, res, [p for chain in chains.values() for p in chain])
    row_of = rows_of(res)
    sign = -1.0 if job.objective.lower_is_better else 1.0
    for k, chain in chains.items():
        values = res.objective_values(job.tuning_part, k)
        top = values[bests[k]]
        within = [bool(sign * (top - values[row_of[p]]) <= job.promotion.min_effect) for p in chain]
        # the chain ends at the best itself (every name given back): some step is within
        restored = within.index(True) if True in within else len(chain) - 1
        idents[k].keep_jointly(idents[k].restoration_order()[:restored])
    return res


def rows_of(res: SweepResult) -> dict[MemoryParams, int]:
    out: dict[MemoryParams, int] = {}
    for i, p in enumerate(res.params):
        out.setdefault(p, i)
    return out


def add_probes(job: _Job, res: SweepResult, points: list[MemoryParams]) -> SweepResult:
    """``res`` with ``points`` it does not hold yet replayed and appended as ``probe`` rows."""
    have = set(res.params)
    new = list(dict.fromkeys(p for p in points if p not in have))
    if not new:
        return res
    more = sweep(job.prepared, new, base=job.base, schedule=job.schedule, objective=job.objective, holdout=job.holdout,
                 compute=job.compute, include_baseline=False, calibration=job.calibration)
    more.table["probe"] = True
    return concat_results(res, more)
