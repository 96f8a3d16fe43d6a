"""Parameter sweeps: many parameter sets replayed and scored, vectorized and in parallel.

>>> from factmem.data.generate import generate
>>> res = sweep(generate("tiny", seed=3), {"decay_rate.episodic": [0.1, 0.3]}, compute=Compute(progress=False))
>>> list(res.table["decay_rate.episodic"])    # the baseline, the pure seed defaults, then 0.1 (0.3 is the baseline)
[0.3, 0.3, 0.1]
>>> bool(res.table.loc[0, "baseline"]), bool(res.table.loc[1, "seed_defaults"])
(True, True)

Parameter sets that share ``multi_valued_predicates`` are replayed together by the vectorized
kernel (one pass over the events for a whole chunk of parameter sets); chunks run on any
``concurrent.futures.Executor`` — local processes by default, a Dask cluster with
:func:`dask_executor`.

Every parameter set is scored two ways:

* the **budgeted context metrics** (:mod:`factmem.evaluation.context`) at each subject's session
  starts, for every budget of the :class:`~factmem.tuning.settings.Objective`, kept as sums per
  subject (``SweepResult.context``) so that folds and bootstrap resamples over subjects cost nothing;
* the **checkpoint metrics** (precision, recall, believed, stale, lost, calibration) at the schedule's
  checkpoints (:mod:`factmem.evaluation.metrics`).

Parts follow the :class:`~factmem.tuning.settings.Holdout`: one part ``all`` when holding out
subjects (the folds are cut from the per-subject sums), ``train``/``test`` for a time split (points
and checkpoints before and after it) or another log (``test`` is that log).

Rows: row 0 is the **baseline** — the seed's numbers on the same base as every other row (the same
multi-valued registry, anything not swept) — and, when it differs, the pure seed defaults follow it
(``seed_defaults``). The **reference policies** (:mod:`factmem.tuning.references`: the empty memory
and keep-everything on the same base) are scored on the same points but kept apart, in
``SweepResult.references`` (per-subject sums, like ``context``) and ``reference_table`` (one row
each, the table's columns; the empty memory has context metrics only) — never candidates. Table columns: the flat parameters, then ``<part>.<metric>`` for the checkpoint
metrics and ``<part>.<metric>@<k>`` for the context metrics (utility, recall, precision, stale,
false, charged, context, needed, log_loss).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from factmem.core import forked
from factmem.core.allocator import retain_freed_memory
from factmem.core.codes import OPEN, EndReason
from factmem.core.compiled import caches_to_disk
from factmem.core.params import MemoryParams
from factmem.data.logs import Dataset
from factmem.errors import InputError
from factmem.evaluation.context import FIELDS, ContextEvaluator, ContextScores
from factmem.evaluation.metrics import CALIBRATION_METRICS
from factmem.evaluation.simulate import (
    PreparedLog,
    Schedule,
    default_schedule,
    kernel_belief_arrays,
    prepare,
)
from factmem.tuning.references import EMPTY, KEEP_EVERYTHING, empty_sums, keep_everything
from factmem.tuning.settings import OBJECTIVES, Compute, Holdout, Objective, Search
from factmem.tuning.shared_builds import (
    CONTEXT_EVALUATORS,
    ENCODINGS,
    PREPARED_LOGS,
    build_shared,
    cached_context_evaluator,
    encoded_events,
    plan_parts,
    resolve_log,
)
from factmem.tuning.space import ALIASES, assign, grid_points, random_points

__all__ = ["SUMMARY_METRICS", "CONTEXT_METRICS", "run_id", "SweepResult", "score_chunk", "sweep", "dask_executor",
           "load_kernels", "worker_pool", "forks",
           "calibration_columns", "fill_calibration",
           "plan_parts", "baseline_rows", "concat_results", "OBJECTIVES"]

SUMMARY_METRICS = ("log_loss", "brier", "auc", "rmse_bins", "held_log_loss", "precision", "recall", "believed",
                   "needed", "stale", "lost", "samples")
#: context metrics in the table (per part and budget), as names of ContextScores.summary
CONTEXT_METRICS = ("utility", "recall", "precision", "stale", "expired", "false", "unneeded", "charged", "context",
                   "needed", "log_loss")


def run_id(dataset_sha: str, params: MemoryParams, schedule: Schedule) -> str:
    blob = json.dumps([dataset_sha, params.to_dict(), schedule.to_dict()], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass
class SweepResult:
    """One row per parameter set: the flat parameters and every metric per part (``table``), and the
    context metrics as per-subject sums (``context[part]``: parameter set × subject × budget ×
    :data:`~factmem.evaluation.context.FIELDS`; ``subjects[part]`` names the rows)."""

    table: pd.DataFrame
    params: list[MemoryParams]
    schedule: Schedule
    objective: Objective
    holdout: Holdout
    dataset_sha256: str
    holdout_sha256: str | None
    split_at: int | None
    context: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    subjects: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    points: dict[str, int] = field(default_factory=dict)
    sampled_from: dict[str, int] = field(default_factory=dict)
    #: whether every row's calibration metrics were scored (else NaN but where filled in afterwards)
    calibration: bool = True
    #: the reference policies' per-subject sums: name -> part -> subject × budget × FIELDS
    references: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    #: one row per reference policy (column ``reference``), with the table's metric columns
    reference_table: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    #: the parameter set of each replayed reference (keep-everything)
    reference_params: dict[str, MemoryParams] = field(default_factory=dict, repr=False)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.context)

    def scores(self, index: int, part: str) -> ContextScores:
        """The context scores of one parameter set on one part."""
        return ContextScores(self.objective.budgets, (part,), self.subjects[part], self.context[part][index][None])

    def objective_values(self, part: str, budget: int | None = None, subjects: np.ndarray | None = None) -> np.ndarray:
        """The objective of every parameter set on ``part`` (over all subjects, or a selection of
        subject rows — repeats allowed, as in a bootstrap resample)."""
        obj = self.objective
        if obj.per_budget:
            # only the two fields the ratio reads: a bootstrap resample copies candidates × subjects of
            # them, not of every field (the same sums, added in the same order)
            rows = self.ratio_fields(part, budget)
            if subjects is not None:
                rows = rows[:, subjects, :]
            tot = rows.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                return tot[:, 0] / tot[:, 1]
        if subjects is not None:
            raise InputError(f"objective {obj.name!r} is not kept per subject; choose a context objective")
        return self.table[f"{part}.{obj.name}"].to_numpy(np.float64)

    def ratio_fields(self, part: str, budget: int | None = None) -> np.ndarray:
        """candidate × subject × 2: the numerator and denominator fields of the (per-budget) objective's
        ratio on ``part``, per subject — what :meth:`objective_values` sums."""
        obj = self.objective
        metric = {"utility": "utility", "recall_at_k": "recall", "precision_at_k": "precision",
                  "stale_at_k": "charged"}[obj.name]
        b = obj.budgets.index(budget if budget is not None else obj.budgets[0])
        fields = [FIELDS.index(metric), FIELDS.index("precise" if metric == "precision" else "points")]
        return self.context[part][:, :, b, fields]

    def eligible(self) -> np.ndarray:
        """Which rows a choice may pick: every row but the pure seed defaults when they differ from the
        baseline — shown for comparison only, they lack the log's multi-valued predicates — and the
        ``probe`` rows ``tune`` adds to measure each parameter's effect
        (:mod:`factmem.tuning.identification`)."""
        t = self.table
        ok = np.ones(len(self.params), bool)
        if "seed_defaults" in t.columns:
            ok &= ~(t["seed_defaults"].to_numpy(bool) & ~t["baseline"].to_numpy(bool))
        if "probe" in t.columns:  # replayed to measure a parameter's effect (identification), not searched
            ok &= ~t["probe"].to_numpy(bool)
        return ok

    def best(self, part: str, budget: int | None = None, subjects: np.ndarray | None = None,
             rows: np.ndarray | None = None) -> int:
        """Row of the best eligible parameter set on ``part`` (:meth:`eligible`; ties: the lower row, so
        the baseline wins ties); ``rows``: a mask of the rows that may be chosen besides (None: all
        eligible rows — e.g. a fold's own study's candidates and the fixed points)."""
        v = self.objective_values(part, budget, subjects)
        ok = self.eligible() if rows is None else self.eligible() & np.asarray(rows, bool)
        v = np.where(np.isnan(v) | ~ok, np.inf if self.objective.lower_is_better else -np.inf, v)
        return int(np.argmin(v) if self.objective.lower_is_better else np.argmax(v))


# -- worker side ------------------------------------------------------------------------------------

def forks() -> bool:
    """Whether new worker processes are forked (and so inherit what this process has built)."""
    import multiprocessing

    return multiprocessing.get_start_method(allow_none=False) == "fork"


_KERNELS_LOADED = False


def load_kernels(objective: Objective | None = None) -> None:
    """Load the scoring kernels into this process — from Numba's cache, compiling those it lacks — by
    replaying and scoring a generated ``tiny`` log once (a few hundred mentions): worker processes
    forked afterwards inherit them. Each worker loaded them itself before, ~1.8 s of its time (most
    of it Numba's own start-up, paid by the first kernel a process runs). Once per process.

    Where processes fork (:mod:`factmem.core.forked`) and compiled kernels are cached on disk, the
    context metrics' kernels are compiled in a forked child — on stand-in belief states of the same
    types, one per mention, so that it need not wait for the replay's kernels — while this process
    compiles the replay's and the checkpoint metrics' (then loads the child's from the cache): on a
    machine whose cache is empty (a first run) that took the wall time from 12.9 to ~8 s (2 cores).
    Whatever the child does, this process then scores the ``tiny`` log with every kernel itself, so
    a child that failed costs only its time."""
    global _KERNELS_LOADED
    if _KERNELS_LOADED:
        return
    from factmem.data.generate import generate

    obj = (objective or Objective()).to_dict()
    prepared = prepare(generate("tiny", seed=3))
    schedule = default_schedule(prepared)
    params = MemoryParams(multi_valued_predicates=prepared.dataset.multi_valued_predicates)

    def context_part(beliefs: dict[str, np.ndarray]) -> None:
        ContextEvaluator(prepared, budgets=obj["budgets"], needed=obj["needed"], costs=obj["costs"],
                         max_points_per_subject=obj["max_points_per_subject"]).score(beliefs, params)

    # a child's compiling serves this process only through a cache on disk
    child = forked.start(lambda: context_part(_stand_in_beliefs(prepared))) if caches_to_disk() else None
    beliefs = kernel_belief_arrays(prepared, [params], schedule.consolidations(prepared.start, prepared.end))[0]
    checkpoints = schedule.checkpoints(prepared.start, prepared.end)
    prepared.evaluator(checkpoints).score_parts(beliefs, params.retrieval_threshold, {"all": (0, len(checkpoints))},
                                               calibration=True)
    if child is not None:
        forked.succeeded(child)  # whatever its outcome: what it did not compile is compiled below
    context_part(beliefs)  # from the cache where the child compiled them
    _KERNELS_LOADED = True


def _stand_in_beliefs(prepared: PreparedLog) -> dict[str, np.ndarray]:
    """Belief states with the columns and types :func:`kernel_belief_arrays` gives, without replaying:
    one open state per mention, from its time (what compiling the scorers needs: the same types, and
    states held at the log's session starts)."""
    n = len(prepared.ev_triple)
    return {"triple": np.asarray(prepared.ev_triple, np.int64), "kind": np.zeros(n, np.int64),
            "start": prepared.events["ts"].to_numpy(np.int64), "end": np.full(n, OPEN, np.int64),
            "reason": np.full(n, int(EndReason.OPEN), np.int64), "confidence": np.full(n, 0.5),
            "rate": np.full(n, 0.01), "fact": np.arange(n, dtype=np.int64)}


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """The local worker processes a sweep (or a whole search) scores its chunks on: each keeps the memory it
    frees for the next chunk (:func:`~factmem.core.allocator.retain_freed_memory`; the processes end with the
    pool)."""
    return ProcessPoolExecutor(max_workers=workers, initializer=retain_freed_memory)


def _shared_predicate_sets(firsts: Sequence[MemoryParams]) -> list[frozenset[str]]:
    """The sets of multi-valued predicates that two or more chunks replay with (given each chunk's
    first parameter set): the encodings worth building once, before the workers start."""
    seen: dict[frozenset[str], int] = {}
    for p in firsts:
        mv = frozenset(p.multi_valued_predicates)
        seen[mv] = seen.get(mv, 0) + 1
    return [mv for mv, n in seen.items() if n > 1]


def _chunks(points: Sequence[MemoryParams], compute: Compute) -> list[list[int]]:
    """The parameter sets' indices in chunks (one task each) of sets sharing multi-valued predicates
    (the kernel's keys depend on them), at most ``chunk_size`` a chunk, and as even as a pool of
    ``workers`` needs: a group's chunks are a multiple of the workers (a batch of 48 sets on two
    workers is 4 chunks of 12, not 16 + 16 + 16 — one worker scoring two chunks while the other
    waited), split as evenly as possible, in order."""
    order = sorted(range(len(points)), key=lambda i: (sorted(points[i].multi_valued_predicates), i))
    workers = compute.workers if compute.workers is not None else (os.cpu_count() or 1)  # 0: this process
    chunks: list[list[int]] = []
    for _, group in itertools.groupby(order, key=lambda i: points[i].multi_valued_predicates):
        members = np.array(list(group))
        count = -(-len(members) // compute.chunk_size)
        if workers > 1:
            count = min(len(members), -(-count // workers) * workers)
        chunks += [part.tolist() for part in np.array_split(members, count)]
    return chunks


def score_chunk(log: Any, holdout_log: Any, params: list[dict], schedule: dict, objective: dict,
                holdout: dict, calibration: bool = True
                ) -> tuple[list[dict], dict[str, np.ndarray], dict[str, np.ndarray], dict[str, tuple[int, int]]]:
    """Replay and score a chunk of parameter sets sharing multi-valued predicates (one task);
    ``calibration=False`` leaves the calibration metrics NaN (see :meth:`Evaluator.score_parts`).

    Returns the table rows, the per-subject context sums per part (stacked over the chunk), the
    subjects of each part, and (points scored, points before sampling) per part."""
    prepared = resolve_log(log)
    held_out = None if holdout_log is None else resolve_log(holdout_log)
    sched = Schedule(**schedule)
    holdout_spec = Holdout(**{k: v for k, v in holdout.items() if k != "log"}, log=holdout_log) \
        if holdout["mode"] == "log" else Holdout(**{k: v for k, v in holdout.items() if k != "log"})
    param_sets = [MemoryParams.from_dict(d) for d in params]
    rows: list[dict] = [{} for _ in param_sets]
    sums: dict[str, list[np.ndarray]] = {}
    subjects: dict[str, np.ndarray] = {}
    points: dict[str, tuple[int, int]] = {}
    plan, _ = plan_parts(prepared, held_out, sched, holdout_spec)
    for part_log, cp_ranges, time_ranges in plan:
        checkpoints = sched.checkpoints(part_log.start, part_log.end)
        beliefs = kernel_belief_arrays(part_log, param_sets, sched.consolidations(part_log.start, part_log.end),
                                       encoded_events(part_log, frozenset(param_sets[0].multi_valued_predicates)))
        evaluator = part_log.evaluator(checkpoints)
        context_evaluator = cached_context_evaluator(part_log, objective, time_ranges, holdout_spec.seed)
        for part in time_ranges:
            subjects[part] = context_evaluator.subjects
            sums.setdefault(part, [])
            points[part] = (context_evaluator.scored_points(part), context_evaluator.sampled_from)
        for row, param_set, belief in zip(rows, param_sets, beliefs):
            for label, evaluation in evaluator.score_parts(belief, param_set.retrieval_threshold, cp_ranges,
                                                           calibration=calibration).items():
                summary = evaluation.summary
                row.update({f"{label}.{m}": summary[m] for m in SUMMARY_METRICS})
                row.update({f"{label}.{k}": v for k, v in summary.items() if k.startswith("log_loss.")})
            scores = context_evaluator.score(belief, param_set)
            for part_index, part in enumerate(scores.parts):
                sums[part].append(scores.sums[part_index])
                for budget in scores.budgets:
                    budget_summary = scores.summary(part, budget)
                    row.update({f"{part}.{m}@{budget}": budget_summary[m] for m in CONTEXT_METRICS})
    return rows, {part: np.stack(v) for part, v in sums.items()}, subjects, points


# -- driver side -------------------------------------------------------------------------------------


def _log_ref(log: Any) -> Any:
    """What to ship to workers: the dataset's path when it has one (workers load it once)."""
    if isinstance(log, (str, os.PathLike)):
        return os.fspath(log)
    if isinstance(log, Dataset) and log.path is not None:
        return os.fspath(log.path)
    if isinstance(log, PreparedLog) and log.dataset.path is not None:
        return os.fspath(log.dataset.path)
    return log if isinstance(log, PreparedLog) else prepare(log)


def baseline_rows(base: MemoryParams, swept: Sequence[str] = ()) -> list[MemoryParams]:
    """The baseline — ``base`` with every swept parameter at the seed's value, so that it differs from
    the other rows only in what was searched — and, when different, the pure seed defaults."""
    defaults = MemoryParams()
    baseline = assign(base, {name: defaults.get(ALIASES.get(name, (name,))[0]) for name in swept})
    return [baseline] + ([defaults] if defaults != baseline else [])


def sweep(log: Any, space: Mapping[str, Any] | Sequence[MemoryParams], *, base: MemoryParams | None = None,
          schedule: Schedule | None = None, objective: Objective | None = None, holdout: Holdout | None = None,
          search: Search | None = None, compute: Compute | None = None, include_baseline: bool = True,
          calibration: bool = True, references: bool | None = None) -> SweepResult:
    """Replay ``log`` with every parameter set of ``space`` and score each (see the module docstring).

    ``space``: flat parameter name → list of values or :class:`~factmem.tuning.space.Range` (drawn as
    ``search`` says: a grid by default here, random with ``Search(method="random")``), or an explicit
    list of MemoryParams. ``base``: the parameters not swept (default: the seed's, with the dataset's
    multi-valued predicates). The baseline rows come first unless ``include_baseline=False``.
    ``calibration=False`` skips the calibration metrics (log loss, Brier, AUC, RMSE(bins): most of the
    checkpoint metrics' cost) — their columns are NaN; :func:`fill_calibration` scores them for chosen
    rows afterwards (what ``tune`` does for the rows its report shows). ``references`` (default: as
    ``include_baseline``) also scores the reference policies on the same base (see the module docstring).
    """
    objective = objective or Objective()
    holdout = holdout or Holdout()
    compute = compute or Compute()
    search = search or Search(method="grid")
    prepared = log if isinstance(log, PreparedLog) else prepare(log)
    schedule = schedule or default_schedule(prepared)
    held_out = None
    if holdout.mode == "log":
        held_out = holdout.log if isinstance(holdout.log, PreparedLog) else prepare(holdout.log)
    base = base or MemoryParams(multi_valued_predicates=prepared.dataset.multi_valued_predicates)
    if isinstance(space, Mapping):
        if search.method not in ("grid", "random"):
            raise InputError(f"a sweep draws a grid or random points, not {search.method!r}: the adaptive samplers "
                             "learn from scores, which is tune's search (factmem.tuning.search)")
        points = grid_points(space, base) if search.method == "grid" else \
            random_points(space, base, search.n, search.seed)
    else:
        points = list(space)
        if not all(isinstance(p, MemoryParams) for p in points):
            raise InputError("an explicit sweep space must be a list of MemoryParams")
    if include_baseline:
        first = baseline_rows(base, list(space) if isinstance(space, Mapping) else [])
        points = first + [p for p in points if p not in first]
    with_refs = include_baseline if references is None else references
    n_candidates = len(points)
    if with_refs:  # replayed with the candidates (it joins a chunk), split off below
        points = points + [keep_everything(base)]
    _, split_at = plan_parts(prepared, held_out, schedule, holdout)

    chunks = _chunks(points, compute)
    log_ref, hold_ref = _log_ref(prepared), (None if held_out is None else _log_ref(held_out))
    args = (schedule.to_dict(), objective.to_dict(), {**holdout.to_dict(), "log": None}, bool(calibration))
    rows: list[dict] = [{} for _ in points]
    sums: dict[str, np.ndarray] = {}
    subjects: dict[str, np.ndarray] = {}
    npoints: dict[str, tuple[int, int]] = {}

    def take(c: list[int], result) -> None:
        r, s, subj, pts = result
        for j, i in enumerate(c):
            rows[i] = r[j]
        for part, arr in s.items():
            if part not in sums:
                sums[part] = np.zeros((len(points),) + arr.shape[1:])
            sums[part][c] = arr
        subjects.update(subj)
        npoints.update(pts)

    # the logs already prepared here serve this process's chunks and, where worker processes are
    # forked (Linux), theirs: without this each worker parsed the log again (~10 s for `large`)
    lent = []
    for ref, prep in ((log_ref, prepared), (hold_ref, held_out)):
        if isinstance(ref, str) and prep is not None and ref not in PREPARED_LOGS:
            PREPARED_LOGS[ref] = prep
            lent.append(ref)
    bar = tqdm(total=len(points), desc=f"sweep {compute.where}", unit="params", disable=not compute.progress)
    executor, own = compute.executor, None
    if executor is None and (compute.workers is None or compute.workers > 0) and len(chunks) > 1:
        own = executor = worker_pool(compute.workers or min(len(chunks), os.cpu_count() or 1))
    # the evaluators, built once here: this process scores with them and worker processes forked from it
    # (Linux) inherit them — each worker built its own before (~2 s of every worker's time on `large`)
    built, encoded = build_shared(log_ref, hold_ref, schedule, objective, holdout,
                                       _shared_predicate_sets([points[c[0]] for c in chunks])) \
        if executor is None or (own is not None and forks()) else ([], [])
    if own is not None and forks():
        load_kernels(objective)  # before the first task forks the workers: they inherit the kernels
    try:
        if executor is None:
            for c in chunks:
                take(c, score_chunk(log_ref, hold_ref, [points[i].to_dict() for i in c], *args))
                bar.update(len(c))
        else:
            futs = {executor.submit(score_chunk, log_ref, hold_ref, [points[i].to_dict() for i in c], *args): c
                    for c in chunks}
            for f in as_completed(futs):
                take(futs[f], f.result())
                bar.update(len(futs[f]))
    finally:
        bar.close()
        if own is not None:
            own.shutdown()
        for ref in lent:
            PREPARED_LOGS.pop(ref, None)
        if own is not None:  # built for the workers: dropped with them (in-process ones stay cached, as before)
            for key in built:
                CONTEXT_EVALUATORS.pop(key, None)
        for key in encoded:  # one sweep's chunks share an encoding; later sweeps may not (memory)
            ENCODINGS.pop(key, None)

    refs: dict[str, dict[str, np.ndarray]] = {}
    ref_table = pd.DataFrame()
    ref_params: dict[str, MemoryParams] = {}
    if with_refs:
        keep, keep_row = points[-1], rows[-1]
        points, rows = points[:n_candidates], rows[:n_candidates]
        refs = {EMPTY: {part: empty_sums(a[-1]) for part, a in sums.items()},
                KEEP_EVERYTHING: {part: a[-1] for part, a in sums.items()}}
        sums = {part: a[:n_candidates] for part, a in sums.items()}
        ref_params = {KEEP_EVERYTHING: keep}
        ref_table = _reference_table(refs, keep, keep_row, objective, subjects)
    table = _table(points, rows, include_baseline, prepared.sha256, schedule)
    return SweepResult(table=table, params=points, schedule=schedule, objective=objective, holdout=holdout,
                       dataset_sha256=prepared.sha256, holdout_sha256=None if held_out is None else held_out.sha256, split_at=split_at,
                       context=sums, subjects=subjects, points={k: v[0] for k, v in npoints.items()},
                       sampled_from={k: v[1] for k, v in npoints.items()}, calibration=bool(calibration),
                       references=refs, reference_table=ref_table, reference_params=ref_params)


def _table(points: list[MemoryParams], rows: list[dict], include_baseline: bool, sha: str,
           schedule: Schedule) -> pd.DataFrame:
    flat = pd.DataFrame([p.to_flat() for p in points])
    flat["multi_valued_predicates"] = [",".join(sorted(p.multi_valued_predicates)) for p in points]
    table = pd.concat([flat, pd.DataFrame(rows)], axis=1)
    table.insert(0, "probe", False)
    table.insert(0, "seed_defaults", [p == MemoryParams() for p in points])
    table.insert(0, "baseline", [include_baseline and i == 0 for i in range(len(points))])
    table.insert(0, "run_id", [run_id(sha, p, schedule) for p in points])
    return table


def _reference_table(refs: dict[str, dict[str, np.ndarray]], keep: MemoryParams, keep_row: dict,
                     objective: Objective, subjects: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per reference: keep-everything as replayed (every column), the empty memory with its
    context metrics (its whole-memory metrics are not defined: it is a context policy) and NaN
    parameters."""
    keep_table = _table([keep], [keep_row], False, "", Schedule()).drop(
        columns=["run_id", "baseline", "seed_defaults", "probe"])
    empty_row: dict[str, Any] = {c: np.nan for c in keep_table.columns}
    for part, arr in refs[EMPTY].items():
        scores = ContextScores(objective.budgets, (part,), subjects[part], arr[None])
        for k in objective.budgets:
            summ = scores.summary(part, k)
            empty_row.update({f"{part}.{m}@{k}": summ[m] for m in CONTEXT_METRICS})
    empty_row["multi_valued_predicates"] = keep_table.loc[0, "multi_valued_predicates"]
    out = pd.concat([pd.DataFrame([empty_row]), keep_table], ignore_index=True)
    out.insert(0, "reference", [EMPTY, KEEP_EVERYTHING])
    return out


def calibration_columns(table: pd.DataFrame) -> list[str]:
    """The sweep-table columns holding calibration metrics (``<part>.log_loss``, ``….log_loss.<kind>`` …)."""
    def is_calibration(metric: str) -> bool:  # what follows "<part>."; context metrics carry "@k"
        return "@" not in metric and (metric in CALIBRATION_METRICS + ("samples",) or metric.startswith("log_loss."))

    return [c for c in table.columns if is_calibration(str(c).partition(".")[2])]


def fill_calibration(res: SweepResult, rows: Sequence[int], log: Any) -> SweepResult:
    """``res`` with the calibration metrics of ``rows`` scored (a sweep run with ``calibration=False``
    left them NaN): the same numbers a sweep with calibration gives those rows. ``log``: the swept log."""
    wanted = sorted({int(i) for i in rows})
    if res.calibration or not wanted:
        return res
    sub = sweep(log, [res.params[i] for i in wanted], schedule=res.schedule, objective=res.objective,
                holdout=res.holdout, compute=Compute(workers=0, progress=False), include_baseline=False)
    table = res.table.copy()
    for col in calibration_columns(sub.table):
        if col not in table.columns:
            table[col] = np.nan
        table.loc[wanted, col] = sub.table[col].to_numpy()
    return SweepResult(**{**res.__dict__, "table": table})


def dask_executor(address: str) -> Executor:
    """A ``concurrent.futures`` executor on a Dask distributed cluster (``pip install 'factmem[dask]'``)."""
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - depends on the extra
        raise InputError("--dask needs the 'dask' extra: pip install 'factmem[dask]'") from None
    executor = Client(address).get_executor()
    executor.factmem_address = address  # for the manifest and the progress bar
    return executor


def concat_results(a: SweepResult, b: SweepResult) -> SweepResult:
    """``a``'s rows then ``b``'s: the table, the parameter sets and the context arrays (calibration
    kept only if both have it)."""
    table = pd.concat([a.table, b.table], ignore_index=True)
    ctx = {part: np.concatenate([a.context[part], b.context[part]]) for part in a.context}
    return SweepResult(**{**a.__dict__, "table": table, "params": a.params + b.params, "context": ctx,
                          "calibration": a.calibration and b.calibration})
