"""``factmem tune``: which decay rates, thresholds and gain put the facts an agent will need into a
context of ``k`` facts, keep stale ones out — and how sure we are.

The job, on one log (default: the bundled ``small``):

1. **Base and baseline.** The base is the seed's numbers with the log's multi-valued predicates
   (declared by its scenario, else measured). The **baseline** — what a recommendation must beat — is
   that same base: it differs from every candidate only in what was searched. The pure seed defaults
   (no registry) are reported beside it.
2. **Search** (:class:`~factmem.tuning.settings.Search`, :mod:`factmem.tuning.search`): Optuna
   studies — holding out by subjects, one per fold's people (folds of whole groups of people), each
   told only its own fold's scores — propose candidates over the
   :data:`~factmem.tuning.settings.DEFAULT_SPACE` (decay rate and initial confidence per kind, gain,
   the tied archive/retrieval threshold) with the seeded sampler (TPE by default) after a shared
   random start, asked in batches the kernel replays together; the baseline, ``current`` and
   ``start`` (e.g. fitted parameters) are enqueued first.
3. **Choice**, per budget ``k`` of the :class:`~factmem.tuning.settings.Objective` (utility@k by
   default): the recommendation is the best candidate on all tuning data among every candidate;
   each fold's choice is the best on its training people among the candidates the other folds'
   studies proposed and the shared ones — never one that only the study told its own people's
   scores proposed.
4. **Held-out judgement** (:class:`~factmem.tuning.settings.Holdout`): with ``subjects`` (default),
   k-fold over subjects — each subject is scored by the choice made on the other folds, so every
   subject's held-out number comes from a choice made without it; with ``time`` the choice made
   before the split is scored after it; with ``log`` it is scored on another dataset.
5. **Uncertainty.** The held-out difference recommended − baseline (pooled over points, per subject
   sums) with a 95% percentile interval from ``bootstrap`` resamples of held-out subjects (seeded).
   The same for the **reference policies** (:mod:`~factmem.tuning.references`: the empty memory and
   keep-everything). The recommendation is **promoted** only if the near end of every interval — against
   the baseline, ``current`` production parameters when given, and both references — clears the minimum
   effect, and every restart of the search (new studies with another sampler seed) promotes too (:mod:`~factmem.tuning.decision`,
   :mod:`~factmem.tuning.restarts`). Before that judgement, each searched parameter whose effect is
   below the minimum effect is reset to the baseline's value in the recommendation and in every fold's
   choice (:mod:`~factmem.tuning.identification`): what is judged is what is shipped. Selection
   stability: the share of bootstrap resamples of the tuning data in which the recommendation is
   within the noise of the best (in the top 5% of candidates by the objective).
6. **Notes** when the recommendation sits at the edge of the searched range, or at a domain bound
   (gain 1: every re-mention jumps to the cap; decay 0: never forgets; threshold 0: never archives).

:func:`tune` returns a :class:`TuneResult` and (``write=True``) writes a run folder: ``report.md``
(the decision first, in the user's terms), ``params.toml`` (the parameters to keep at the first
budget; ``params-k<K>.toml`` for each budget), figures, tables, the studies (``study.db``: open it
with ``optuna-dashboard``; with ``search.npz`` it lets :func:`resume` continue the run) and a
manifest (:mod:`factmem.tuning.report`). Each searched parameter's importance in the all-data study
(PED-ANOVA, :func:`~factmem.tuning.studies.parameter_importances`) is reported beside the
identification.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from factmem.core.params import MemoryParams
from factmem.data.logs import bundled_dataset
from factmem.errors import InputError
from factmem.evaluation.cardinality import log_registry
from factmem.evaluation.groups import subject_groups
from factmem.evaluation.simulate import PreparedLog, Schedule, default_schedule, prepare
from factmem.tuning.decision import Promotion, judge, tradeoffs
from factmem.tuning.edges import edge_notes
from factmem.tuning.heldout import heldout_table
from factmem.tuning.identification import Identification
from factmem.tuning.probing import choosable, identify_choices
from factmem.tuning.references import EMPTY, REFERENCES
from factmem.tuning.report import write_tune_run
from factmem.tuning.restarts import RestartRun, apply_agreement, restart_searches
from factmem.tuning.runs import default_run_dir, run_folder
from factmem.tuning.search import ADAPTIVE, SearchOutcome, run_search
from factmem.tuning.settings import CALIBRATION_OBJECTIVES, CONTEXT_OBJECTIVES, Compute, Holdout, Objective, Search
from factmem.tuning.studies import load_search, parameter_importances, save_search
from factmem.tuning.sweep import (
    SweepResult,
    baseline_rows,
    concat_results,
    fill_calibration,
    forks,
    load_kernels,
    sweep,
    worker_pool,
)
from factmem.tuning.uncertainty import TOP_SHARE, Comparison, bootstrap_difference, selection_stability

__all__ = ["Comparison", "Recommendation", "TuneResult", "base_params", "tune", "resume", "decide", "subject_folds",
           "edge_notes", "bootstrap_difference", "selection_stability", "TOP_SHARE"]

@dataclass
class Recommendation:
    """The outcome at one budget ``k``."""

    budget: int
    params: MemoryParams
    index: int
    promoted: bool
    keep: str  # "recommended", "baseline" or "current"
    decision: str
    versus_baseline: Comparison
    versus_defaults: Comparison | None
    versus_current: Comparison | None
    versus_start: Comparison | None
    stability: float
    fold_choices: list[int]
    heldout: pd.DataFrame  # metric × (recommended, baseline, seed defaults[, current], references) held out
    notes: list[str] = field(default_factory=list)
    #: recommended − each reference policy (``empty``, ``keep-everything``), held out
    versus_references: dict[str, Comparison] = field(default_factory=dict)
    #: baseline − the empty memory, held out (a baseline below it is named in the Decision section)
    baseline_versus_empty: Comparison | None = None
    #: sentences naming what the recommendation gives up against the baseline (lower recall, ...)
    tradeoffs: list[str] = field(default_factory=list)
    #: the minimum effect the rule applied
    min_effect: float = 0.0
    #: every run of the search (the first, then each restart): its decision and values per budget
    restarts: list[RestartRun] = field(default_factory=list)
    #: which searched parameters this log identifies (None: not measured, e.g. a restart)
    identification: Identification | None = None
    #: the best candidate of the search (``index`` is it projected onto the identified parameters)
    candidate: int = -1

    @property
    def chosen(self) -> MemoryParams:
        return self.params if self.keep == "recommended" else self._kept

    _kept: MemoryParams = field(default_factory=MemoryParams, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (``factmem tune --json``): the decision, the parameters kept and the
        held-out comparisons, as the report states them."""
        def comparison(c: Comparison | None) -> dict[str, float | int | None] | None:
            return None if c is None else c.to_dict()

        return {"budget": self.budget, "promoted": self.promoted, "keep": self.keep, "decision": self.decision,
                "params": self.chosen.to_dict(), "recommended": self.params.to_dict(),
                "versus_baseline": comparison(self.versus_baseline), "versus_defaults": comparison(self.versus_defaults),
                "versus_current": comparison(self.versus_current), "versus_start": comparison(self.versus_start),
                "stability": self.stability, "fold_choices": list(self.fold_choices),
                "heldout": self.heldout.to_dict(orient="records"), "notes": list(self.notes)}


@dataclass
class TuneResult:
    """What ``tune`` found: one :class:`Recommendation` per budget (``recommendations[k]``)."""

    sweep: SweepResult
    recommendations: dict[int, Recommendation]
    search: Search
    compute: Compute
    baseline: MemoryParams
    current: MemoryParams | None
    start: MemoryParams | None
    out: Path | None
    seconds: float
    notes: list[str] = field(default_factory=list)
    promotion: Promotion = field(default_factory=Promotion)
    restarts: list[RestartRun] = field(default_factory=list)
    #: group index per subject of each part (people who share sessions are one group)
    groups: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: the Optuna studies of the first search and which rows each may choose (:mod:`factmem.tuning.search`)
    studies: SearchOutcome | None = field(default=None, repr=False)
    #: each searched parameter's importance in the all-data study (:func:`~factmem.tuning.studies.parameter_importances`)
    importances: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def primary(self) -> Recommendation:
        """The recommendation at the first budget (the one ``params.toml`` holds)."""
        return self.recommendations[self.sweep.objective.budgets[0]]

    @property
    def recommended(self) -> MemoryParams:
        return self.primary.params

    @property
    def chosen(self) -> MemoryParams:
        return self.primary.chosen

    @property
    def promoted(self) -> bool:
        return self.primary.promoted

    @property
    def decision(self) -> str:
        return self.primary.decision

    @property
    def heldout(self) -> pd.DataFrame:
        return self.primary.heldout

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (``factmem tune --json``); ``recommendations`` keyed by the budget as text."""
        return {"out": None if self.out is None else str(self.out), "seconds": self.seconds,
                "candidates": len(self.sweep.params), "primary_budget": self.primary.budget,
                "promoted": self.promoted, "decision": self.decision,
                "recommendations": {str(k): rec.to_dict() for k, rec in self.recommendations.items()},
                "notes": list(self.notes)}


def base_params(prepared: PreparedLog) -> MemoryParams:
    """Seed defaults with the log's multi-valued predicates (declared by its scenario, else measured)."""
    return MemoryParams(multi_valued_predicates=log_registry(prepared.dataset))


def subject_folds(n_subjects: int, folds: int, seed: int) -> np.ndarray:
    """Fold of each subject (subjects in sorted order); see :meth:`Holdout.subject_folds`."""
    return Holdout(folds=folds, seed=seed).subject_folds(n_subjects)


def decide(versus_baseline: Comparison, lower_is_better: bool, versus_current: Comparison | None = None, *,
           same_as_baseline: bool = False, objective: str = "utility@k", min_effect: float = 0.0,
           references: Mapping[str, Comparison] | None = None) -> tuple[str, str]:
    """The promotion rule (:func:`factmem.tuning.decision.judge`) on the comparisons of one budget:
    recommended − baseline, − current (when given) and − each reference policy. Returns
    (``recommended`` | ``baseline`` | ``current``, a sentence saying why and stating the rule)."""
    comparisons: dict[str, Comparison] = {"baseline": versus_baseline}
    if versus_current is not None:
        comparisons["current"] = versus_current
    comparisons.update(references or {})
    return judge(comparisons, lower_is_better=lower_is_better, min_effect=min_effect, objective=objective,
                 same_as_baseline=same_as_baseline)


def tune(log: Any = None, *, out: str | os.PathLike | None = None, search: Search | None = None,
         objective: Objective | None = None, holdout: Holdout | None = None, compute: Compute | None = None,
         schedule: Schedule | None = None, current: MemoryParams | None = None, start: MemoryParams | None = None,
         write: bool = True, force: bool = False, calibrate_all: bool = False,
         promotion: Promotion | None = None, base: MemoryParams | None = None) -> TuneResult:
    """Tune the memory's parameters on ``log`` (default: the bundled ``small`` dataset); see the
    module docstring. ``current``: production's parameters, which a recommendation must also beat.
    ``base``: the parameters every candidate starts from and the baseline (default: :func:`base_params`;
    ``tune --log PROD.sqlite`` passes production's current parameters).
    ``start``: a candidate to centre the search on (e.g. :func:`factmem.fit`'s parameters).
    ``promotion``: the rule's minimum effect and restarts (:class:`~factmem.tuning.decision.Promotion`).

    ``out`` (default ``runs/<timestamp>/``) must be new or empty (the run-folder rule of
    :mod:`factmem.tuning.runs`; ``force=True`` replaces a previous run); it is checked before any work,
    holds ``INCOMPLETE`` while the run writes, and is removed if the run fails.

    Calibration metrics (log loss, Brier, AUC, RMSE(bins)) are scored for the rows the report shows
    (baseline, seed defaults, current, start, each budget's recommendation) — scoring them for every
    candidate was over half of a tune's time and no choice reads them — unless the objective is one of
    them or ``calibrate_all``; the sweep table holds NaN for the others."""
    objective = objective or Objective()
    holdout = holdout or Holdout()
    promotion = promotion or Promotion()
    if not objective.per_budget and holdout.mode == "subjects":
        raise InputError(f"objective {objective.name!r} is scored over the whole memory, not per subject, so it "
                         "cannot be held out by subject; use a context objective (utility, recall_at_k, "
                         "precision_at_k, stale_at_k) or hold out by time or another log")
    if not write:
        return _tune(log, None, search, objective, holdout, compute, schedule, current, start, calibrate_all,
                     promotion, base)
    final = Path(out) if out is not None else default_run_dir()
    with run_folder(final, force=force) as folder:  # written beside `final`, renamed into place when complete
        result = _tune(log, folder, search, objective, holdout, compute, schedule, current, start, calibrate_all,
                       promotion, base)
    result.out = final
    return result


def _check_tunable(prepared: PreparedLog) -> None:
    """A log tune can replay: some fact mentions, over more than one instant (an empty log or a
    single message leaves nothing to compare candidates on — ``fit`` and ``cardinality`` refuse them too)."""
    where = prepared.dataset.path if prepared.dataset.path is not None else "the log"
    if not len(prepared.events):
        raise InputError(f"{where}: the log has no fact mentions; there is nothing to tune")
    if prepared.end <= prepared.start or prepared.events["ts"].nunique() < 2:
        raise InputError(f"{where}: the log's fact mentions all lie at one instant ({len(prepared.events)} mentions "
                         f"at {int(prepared.events['ts'].iloc[0])}); tuning replays a log over time — give it messages "
                         "at two times at least")


@dataclass
class _Job:
    """What every search of one tune shares (the first and each restart)."""

    prepared: PreparedLog
    base: MemoryParams
    schedule: Schedule
    objective: Objective
    holdout: Holdout
    compute: Compute
    current: MemoryParams | None
    start: MemoryParams | None
    calibration: bool
    promotion: Promotion
    #: group index per subject of each part (people who share sessions: one group), set by _search
    groups: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def tuning_part(self) -> str:
        return "all" if self.holdout.mode == "subjects" else "train"

    @property
    def eval_part(self) -> str:
        return "all" if self.holdout.mode == "subjects" else "test"


def _tune(log: Any, out: Path | None, search: Search | None, objective: Objective, holdout: Holdout,
          compute: Compute | None, schedule: Schedule | None, current: MemoryParams | None,
          start: MemoryParams | None, calibrate_all: bool = False, promotion: Promotion | None = None,
          base: MemoryParams | None = None, previous: Path | None = None, more: int | None = None) -> TuneResult:
    t0 = time.perf_counter()
    search = search or Search()
    compute = compute or Compute()
    prepared = prepare(log if log is not None else bundled_dataset())
    _check_tunable(prepared)
    schedule = schedule or default_schedule(prepared)
    if holdout.mode == "log" and not isinstance(holdout.log, PreparedLog):
        holdout = Holdout(**{**holdout.__dict__, "log": prepare(holdout.log)})
    job = _Job(prepared, base if base is not None else base_params(prepared), schedule, objective, holdout, compute,
               current, start, calibrate_all or objective.name in CALIBRATION_OBJECTIVES, promotion or Promotion())
    before = None if previous is None else _previous_search(job, previous, search)
    res, folds, outcome = _search(job, search, before, more)
    res, idents, chosen = identify_choices(job, res, folds, search)
    res, recs = _judge(job, res, folds, search, calibrate=True, chosen=chosen)
    for k, ident in idents.items():
        recs[k].identification = ident
    runs = [_run_of(search, res, recs)]
    for again in restart_searches(search, job.promotion):  # new studies with another sampler seed, smaller
        res_r, folds_r, _ = _search(job, again)
        runs.append(_run_of(again, res_r, _judge(job, res_r, folds_r, again, calibrate=False)[1]))
    for rec in recs.values():
        rec.restarts = runs
        apply_agreement(rec, runs, current if current is not None else res.params[0])
    # importances from the all-data study (the one the recommendation is chosen in)
    importances = parameter_importances({job.tuning_part: outcome.studies[job.tuning_part]},
                                        list(search.resolved_space))
    result = TuneResult(res, recs, search, compute, baseline_rows(job.base)[0], current, start, None,
                        time.perf_counter() - t0, notes=list(outcome.notes), promotion=job.promotion, restarts=runs,
                        groups=job.groups, studies=outcome, importances=importances)
    if out is not None:
        result.out = write_tune_run(result, prepared, out)
        save_search(outcome, out, res, job.groups)
    result.seconds = time.perf_counter() - t0
    return result


def resume(run: str | os.PathLike, *, n: int | None = None, out: str | os.PathLike | None = None,
           compute: Compute | None = None) -> TuneResult:
    """Continue the tune run in folder ``run`` with ``n`` more candidates per study (default: the
    run's own ``n``), with the run's log, seed and settings (search, objective, hold-out and its
    groups, schedule, current, start, promotion rule), and write the combined run to ``out``
    (default: replace ``run``, written beside it first and swapped in only when complete). The
    identification probes and the restarts are made afresh for the combined search.

    The combined run equals one run with the total budget when the first run's candidates per study
    were a whole number of batches (``n`` a multiple of the chunk size); otherwise its report says why
    not. A grid is searched whole in the first run: resuming it adds nothing."""
    import shutil

    from factmem.tuning.runs import load_run

    run = Path(run)
    prior = load_run(run)
    man = prior.manifest
    if man.get("kind") != "tune" or not man.get("studies"):
        raise InputError(f"{run}: not a tune run with studies (study.db); only such a run can be resumed")
    search0 = Search.from_dict(man["search"])
    more = search0.n if n is None else n
    if isinstance(more, bool) or not isinstance(more, int) or more < 1:
        raise InputError(f"--n must be an integer >= 1 (more candidates per study), got {more!r}")
    search = Search(space=search0.space, method=search0.method, n=search0.n + more, startup=search0.startup,
                    corners=search0.corners, local=search0.local, seed=search0.seed)
    chunk = int(man["compute"]["chunk_size"])
    compute = compute or Compute()
    compute = Compute(workers=compute.workers, executor=compute.executor, chunk_size=chunk, progress=compute.progress)
    objective = Objective(**{**man["objective"], "budgets": tuple(man["objective"]["budgets"])})
    holdout = Holdout(**man["holdout"])  # its groups come back from search.npz (a mapping is not in the manifest)
    schedule = Schedule(**man["schedule"])
    log = man["dataset"]["path"]
    if log is None:
        raise InputError(f"{run}: the run's log has no path (it was tuned in memory), so it cannot be resumed")
    current = None if man.get("current") is None else MemoryParams.from_dict(man["current"])
    start = None if man.get("start") is None else MemoryParams.from_dict(man["start"])
    promotion = Promotion(**man["promotion"]) if man.get("promotion") else Promotion()
    # the baseline differs from every candidate only in the searched names: as a base it gives the same candidates
    base = MemoryParams.from_dict(man["baseline"])
    calibrate_all = man.get("calibration") == "every candidate" and objective.name not in CALIBRATION_OBJECTIVES
    target = Path(out) if out is not None else run
    staging = target if out is not None else run.parent / f".{run.name}.resuming"
    with run_folder(staging, force=out is None) as folder:
        result = _tune(log, folder, search, objective, holdout, compute, schedule, current, start, calibrate_all,
                       promotion, base, previous=run, more=more)
    if out is None:
        shutil.rmtree(run)
        os.replace(staging, run)
        result.out = run
    else:
        result.out = target
    return result


def _previous_search(job: _Job, run: Path, search: Search) -> SearchOutcome:
    """The search a run folder holds (without its identification probes: they are made again for the
    combined search), checked against the log it is resumed on; sets the job's groups to the run's."""
    from factmem.tuning.runs import load_run
    from factmem.tuning.sweep import calibration_columns

    prior = load_run(run)
    prepared = job.prepared
    if prior.manifest["dataset"]["sha256"] != prepared.sha256:
        raise InputError(f"{run}: the log at {prepared.dataset.path} changed since the run (sha256 differs); "
                         "a resumed run must replay the same log")
    table = prior.table("sweep")
    refs = prior.table("references") if "references" in prior.manifest.get("tables", []) else pd.DataFrame()
    before, groups = load_search(run, table, refs, schedule=job.schedule, objective=job.objective,
                                 holdout=job.holdout, dataset_sha256=prepared.sha256)
    job.groups.update(groups)
    if not before.sweep.calibration:  # the report's rows get theirs again; the others hold none
        before.sweep.table.loc[:, calibration_columns(before.sweep.table)] = np.nan
    first_n = int(prior.manifest["search"]["n"])
    # a random search's pool is drawn for every proposing study at once (not the summary study)
    proposing = [n for n in before.studies if n != job.tuning_part or job.holdout.mode != "subjects"]
    batch = job.compute.chunk_size * (len(proposing) if search.method == "random" else 1)
    if first_n % batch and search.method != "grid":
        before.notes.append(
            f"Resumed after a first run of {first_n} candidates per study, not a whole number of batches of "
            f"{batch}: its last batch was short, so the later batches fall differently from one run of "
            f"{search.n}; the combined search is sound but not the same as one run with the total budget.")
    else:
        before.notes.append(f"Resumed: a first run of {first_n} candidates per study, continued to {search.n} "
                            "(the same as one run with the total budget).")
    return before


def _run_of(search: Search, res: SweepResult, recs: dict[int, Recommendation]) -> RestartRun:
    return RestartRun(seed=search.seed, n=search.n, startup=search.startup if search.method in ADAPTIVE else 0,
                      candidates=int(res.eligible().sum()), keep={k: r.keep for k, r in recs.items()},
                      params={k: res.params[r.candidate] for k, r in recs.items()},
                      difference={k: r.versus_baseline.difference for k, r in recs.items()})


def _search(job: _Job, search: Search, previous: SearchOutcome | None = None, more: int | None = None
            ) -> tuple[SweepResult, np.ndarray | None, SearchOutcome]:
    """The candidates of one search, scored: the Optuna studies of :func:`~factmem.tuning.search.run_search`
    (one per fold's people, or one of the tuning data), every batch replayed by
    :func:`sweep` on one pool of worker processes kept for the whole search (or the given executor).
    ``previous``/``more``: continue a resumed search by ``more`` candidates per study. Returns the
    sweep (column ``study``: which studies may choose each row), the subject folds and the outcome."""
    prepared, base, objective, holdout = job.prepared, job.base, job.objective, job.holdout
    tuning_part, eval_part = job.tuning_part, job.eval_part
    compute = job.compute
    pool = None
    if compute.executor is None and (compute.workers is None or compute.workers > 0):
        if forks():
            load_kernels(objective)  # before the pool's first task forks the workers: they inherit the kernels
        pool = worker_pool(compute.workers or os.cpu_count() or 1)
    inner = Compute(workers=compute.workers, executor=pool or compute.executor, chunk_size=compute.chunk_size,
                    progress=False)
    bar = tqdm(desc=f"search (seed {search.seed})", unit="params", disable=not compute.progress)

    def score(points: list[MemoryParams], first: bool) -> SweepResult:
        return sweep(prepared, points, base=base, schedule=job.schedule, objective=objective, holdout=holdout,
                     compute=inner, include_baseline=first, calibration=job.calibration)

    def folds_of(res: SweepResult) -> np.ndarray | None:
        # people who share sessions are one group: folds (and resamples) keep them together
        if not job.groups:
            job.groups[tuning_part] = subject_groups(prepared, res.subjects[tuning_part], holdout.group_by)
            job.groups[eval_part] = job.groups[tuning_part] if eval_part == tuning_part else subject_groups(
                holdout.log if holdout.mode == "log" else prepared, res.subjects[eval_part], holdout.group_by)
        return holdout.group_folds(job.groups[tuning_part]) if holdout.mode == "subjects" else None

    fixed = [p for p in (job.current, job.start) if p is not None]
    try:
        outcome = run_search(search, base=base, fixed=fixed, objective=objective, holdout=holdout, score=score,
                             concat=concat_results, chunk_size=compute.chunk_size, folds_of=folds_of, previous=previous,
                             more=more, progress=bar.update)
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown()
    res = outcome.sweep
    return res, folds_of(res), outcome


def _judge(job: _Job, res: SweepResult, folds: np.ndarray | None, search: Search, *, calibrate: bool,
           chosen: Mapping[int, tuple[int, int, list[int]]] | None = None
           ) -> tuple[SweepResult, dict[int, Recommendation]]:
    """The recommendation and its held-out judgement at every budget (``calibrate``: score the
    calibration metrics of the rows the report shows first, in the sweep returned). ``chosen``: per
    budget (best candidate, the row to ship, each fold's row to judge) from :func:`~factmem.tuning.probing.identify_choices`."""
    chosen = chosen or {}
    objective = job.objective
    i_base = 0
    i_def = next(i for i, p in enumerate(res.params) if p == MemoryParams())
    i_cur = None if job.current is None else res.params.index(job.current)
    i_start = None if job.start is None else res.params.index(job.start)
    if calibrate:
        shown = [i_base, i_def] + [i for i in (i_cur, i_start) if i is not None] + \
            [chosen[k][1] if k in chosen else res.best(job.tuning_part, k if objective.per_budget else None,
                                                       rows=choosable(res, job.tuning_part))
             for k in objective.budgets]
        res = fill_calibration(res, shown, job.prepared)
    return res, {k: _recommend(res, k, job.tuning_part, job.eval_part, folds, i_base, i_def, i_cur, job.current,
                               search, job.holdout, i_start, job.promotion.min_effect, chosen.get(k), job.groups)
                 for k in objective.budgets}


def _recommend(res: SweepResult, k: int, tuning_part: str, eval_part: str, folds: np.ndarray | None, i_base: int,
               i_def: int, i_cur: int | None, current: MemoryParams | None, search: Search, holdout: Holdout,
               i_start: int | None = None, min_effect: float = 0.0,
               chosen: tuple[int, int, list[int]] | None = None,
               groups: Mapping[str, np.ndarray] | None = None) -> Recommendation:
    obj = res.objective
    kk = k if obj.per_budget else None
    best = candidate = res.best(tuning_part, kk, rows=choosable(res, tuning_part))
    projected_folds: list[int] = []
    if chosen is not None:  # identification: judge and ship the best projected onto the identified names
        candidate, best, projected_folds = chosen
    b = obj.budgets.index(k)
    metric = CONTEXT_OBJECTIVES.get(obj.name, "utility")
    vs_refs: dict[str, Comparison] = {}
    base_vs_empty = None
    if obj.per_budget:
        ctx = res.context[eval_part][:, :, b, :]  # candidate × subject × field
        if folds is not None:
            # each fold chooses among the candidates the other folds' studies proposed (and the shared and fixed points)
            fold_choices = projected_folds if chosen is not None else \
                [res.best(tuning_part, k, folds != f, rows=choosable(res, f"fold-{f}"))
                 for f in range(holdout.folds)]
            chosen_rows = np.asarray(fold_choices)[folds]  # each subject scored by its fold's choice
            rec_rows = ctx[chosen_rows, np.arange(ctx.shape[1]), :]
        else:
            fold_choices = []
            rec_rows = ctx[best]
        seed = holdout.seed + 1000 * k
        g_eval = None if not groups else groups[eval_part]

        def versus(other: np.ndarray, a: np.ndarray = rec_rows) -> Comparison:
            return bootstrap_difference(a, other, metric, resamples=holdout.bootstrap, seed=seed, groups=g_eval)

        vs_base = versus(ctx[i_base])
        vs_def = versus(ctx[i_def])
        vs_cur = None if i_cur is None else versus(ctx[i_cur])
        stability = selection_stability(res, tuning_part, k, candidate, resamples=holdout.bootstrap, seed=seed + 1,
                                        groups=None if not groups else groups[tuning_part],
                                        rows=choosable(res, tuning_part))
        columns = {"recommended": rec_rows, "baseline": ctx[i_base], "seed defaults": ctx[i_def]}
        if i_cur is not None:
            columns["current"] = ctx[i_cur]
        vs_start = None
        if i_start is not None:  # the start (e.g. fitted) point is a fixed candidate: no selection to hold out
            columns["start"] = ctx[i_start]
            vs_start = versus(ctx[i_start])
        for name in REFERENCES:
            if name in res.references:
                ref = res.references[name][eval_part][:, b, :]
                columns[name] = ref
                vs_refs[name] = versus(ref)
        if EMPTY in res.references:
            base_vs_empty = versus(res.references[EMPTY][eval_part][:, b, :], ctx[i_base])
        heldout = heldout_table(columns, res, eval_part, best, i_base, i_def, i_cur, k, i_start)
    else:
        fold_choices = []
        col = f"{eval_part}.{obj.name}"
        v = res.table[col].to_numpy(np.float64)
        nan = float("nan")
        vs_base = Comparison(v[best], v[i_base], v[best] - v[i_base], nan, nan, 0, 0)
        vs_def = Comparison(v[best], v[i_def], v[best] - v[i_def], nan, nan, 0, 0)
        vs_cur = None if i_cur is None else Comparison(v[best], v[i_cur], v[best] - v[i_cur], nan, nan, 0, 0)
        vs_start = None if i_start is None else Comparison(v[best], v[i_start], v[best] - v[i_start], nan, nan, 0, 0)
        stability = float("nan")
        heldout = heldout_table({}, res, eval_part, best, i_base, i_def, i_cur, k, i_start)
    label = f"{metric}@{k}" if obj.per_budget else obj.name
    keep, decision = decide(vs_base, obj.lower_is_better, vs_cur, same_as_baseline=best == i_base, objective=label,
                            min_effect=min_effect, references=vs_refs)
    scored = vs_base.groups
    if obj.per_budget and scored is not None and scored < holdout.min_groups:
        if keep == "recommended":
            keep = "current" if vs_cur is not None else "baseline"
        decision = (f"Not promoted: too few to decide — {scored} held-out groups of people (people who share "
                    f"sessions are one group), fewer than the {holdout.min_groups} a decision needs (min_groups); "
                    f"the {'current parameters' if keep == 'current' else 'baseline'} stay. What the intervals alone "
                    f"would say on so few: {decision}")
    if not obj.per_budget:
        keep, decision = "baseline", (f"Not promoted: objective {obj.name} has no per-subject sums, so no interval; "
                                      f"held-out {obj.name} {vs_base.a:.4g} against {vs_base.b:.4g} for the baseline. "
                                      "Use a context objective to get an interval and a promotion decision.")
    rec = Recommendation(budget=k, params=res.params[best], index=best, promoted=keep == "recommended", keep=keep,
                         decision=decision, versus_baseline=vs_base, versus_defaults=vs_def, versus_current=vs_cur,
                         versus_start=vs_start,
                         stability=stability, fold_choices=fold_choices, heldout=heldout,
                         notes=edge_notes(search.resolved_space, res.params[best], search.method),
                         versus_references=vs_refs, baseline_versus_empty=base_vs_empty,
                         tradeoffs=tradeoffs(heldout, k) if obj.per_budget else [], min_effect=min_effect,
                         candidate=candidate)
    rec._kept = {"recommended": res.params[best], "baseline": res.params[i_base],
                 "current": current if current is not None else res.params[i_base]}[keep]
    return rec
