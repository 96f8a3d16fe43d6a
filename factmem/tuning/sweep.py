"""Parameter sweeps: many parameter sets replayed and scored, vectorized and in parallel.

>>> from factmem.generate import generate
>>> res = sweep(generate("tiny", seed=3), {"decay_rate.episodic": [0.1, 0.3]}, progress=False)
>>> list(res.table["decay_rate.episodic"])[:2]
[0.3, 0.1]

Parameter sets that share ``multi_valued_predicates`` are replayed together by the vectorized
kernel (one pass over the events for a whole chunk of parameter sets); chunks run on any
``concurrent.futures.Executor`` — local processes by default, a Dask cluster with
``dask_executor(address)``. Each row is scored on a *tuning* part and a *held-out* part: a time
split of the log (checkpoints before / after ``split``), or another log (``holdout=``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from factmem.core.params import MemoryParams
from factmem.data.logs import Dataset
from factmem.errors import InputError
from factmem.evaluation.simulate import (
    PreparedLog,
    Schedule,
    default_schedule,
    encode_events,
    kernel_beliefs,
    prepare,
)

#: objectives and whether lower is better
OBJECTIVES: dict[str, bool] = {
    "log_loss": True, "brier": True, "rmse_bins": True, "auc": False,
    "recall": False, "precision": False, "stale": True, "believed": True, "lost": True,
}
SUMMARY_METRICS = ("log_loss", "brier", "auc", "rmse_bins", "precision", "recall", "believed", "needed",
                   "stale", "lost", "samples")


@dataclass(frozen=True)
class Range:
    """A continuous range for random search: uniform, or log-uniform with ``log=True``."""

    low: float
    high: float
    log: bool = False

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.log:
            return np.exp(rng.uniform(math.log(self.low), math.log(self.high), n))
        return rng.uniform(self.low, self.high, n)


def _check_space(space: Mapping[str, Any], base: MemoryParams) -> None:
    """Every name a parameter, every value valid — before any work starts."""
    if not isinstance(space, Mapping) or not space:
        raise InputError("a sweep space maps parameter names to lists of values (or Range)")
    names = MemoryParams.field_names()
    for name, values in space.items():
        if name not in names:
            raise InputError(f"unknown parameter {name!r} in the sweep space; known: {', '.join(names)}")
        if isinstance(values, Range):
            if not values.low < values.high:
                raise InputError(f"{name}: Range low ({values.low}) must be below high ({values.high})")
            probe: list[Any] = [values.low, values.high]
        else:
            probe = list(values) if not isinstance(values, (str, bytes)) else [values]
            if not probe:
                raise InputError(f"{name}: no values to sweep")
        for v in probe:
            try:
                base.replace(**{name: v})
            except ValueError as exc:
                raise InputError(f"sweep space: {exc}") from None


def grid_points(space: Mapping[str, Sequence], base: MemoryParams) -> list[MemoryParams]:
    """Every combination of the listed values, in a fixed order."""
    _check_space(space, base)
    names = list(space)
    mesh = np.meshgrid(*[np.arange(len(space[n])) for n in names], indexing="ij")
    idx = np.stack([m.ravel() for m in mesh], axis=1)
    return [base.replace(**{n: space[n][i] for n, i in zip(names, row)}) for row in idx]


def random_points(space: Mapping[str, Any], base: MemoryParams, n: int, seed: int) -> list[MemoryParams]:
    """``n`` draws: a Range is sampled, a list is chosen from; seeded."""
    _check_space(space, base)
    rng = np.random.default_rng(seed)
    cols: dict[str, list[Any]] = {}
    for name, values in space.items():
        if isinstance(values, Range):
            cols[name] = list(values.draw(rng, n))
        else:
            vals = list(values)
            cols[name] = [vals[i] for i in rng.integers(0, len(vals), n)]
    return [base.replace(**{k: (float(v[i]) if isinstance(v[i], (float, np.floating)) else v[i]) for k, v in cols.items()})
            for i in range(n)]


def run_id(dataset_sha: str, params: MemoryParams, schedule: Schedule) -> str:
    blob = json.dumps([dataset_sha, params.to_dict(), schedule.to_dict()], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass
class SweepResult:
    """One row per parameter set: the flat parameters, tuning and held-out metrics, run id."""

    table: pd.DataFrame
    params: list[MemoryParams]
    schedule: Schedule
    dataset_sha256: str
    holdout_sha256: str | None
    split_at: int | None
    objective: str

    def best(self, objective: str | None = None, on: str = "train") -> int:
        """Row index of the best parameter set by ``objective`` on the tuning part."""
        obj = objective or self.objective
        col = self.table[f"{on}.{obj}"]
        return int(col.idxmin() if OBJECTIVES[obj] else col.idxmax())


# -- worker side ------------------------------------------------------------------------------------

_CACHE: dict[str, PreparedLog] = {}


def _resolve(log: Any) -> PreparedLog:
    """A PreparedLog from a path (cached per process: workers load each log once) or an object."""
    if isinstance(log, PreparedLog):
        return log
    key = os.fspath(log)
    if key not in _CACHE:
        _CACHE[key] = prepare(key)
    return _CACHE[key]


def score_chunk(log: Any, holdout: Any, params: list[dict], schedule: dict, split_at: int | None,
                first_index: int) -> list[dict]:
    """Replay and score a chunk of parameter sets sharing multi-valued predicates (one task)."""
    P = _resolve(log)
    sched = Schedule(**schedule)
    ps = [MemoryParams.from_dict(d) for d in params]
    rows = [{"index": first_index + i} for i in range(len(ps))]
    cps = sched.checkpoints(P.start, P.end)
    if holdout is None:
        # one evaluator over the whole log, scored on two checkpoint ranges
        cut = int(np.searchsorted(cps, split_at, "left")) if split_at is not None else len(cps)
        ranges = {"train": (0, cut), "test": (cut, len(cps))} if split_at is not None else \
            {"train": (0, len(cps)), "test": (0, len(cps))}
        jobs = [(P, cps, ranges)]
    else:
        H = _resolve(holdout)
        jobs = [(P, cps, {"train": (0, len(cps))}),
                (H, sched.checkpoints(H.start, H.end), {"test": (0, len(sched.checkpoints(H.start, H.end)))})]
    for prep, cp, ranges in jobs:
        for label, (a, b) in ranges.items():
            if b <= a:
                raise InputError(f"the {label} part has no checkpoints; change the split or the schedule")
        beliefs = kernel_beliefs(prep, ps, sched.consolidations(prep.start, prep.end),
                                 encode_events(prep, ps[0].multi_valued_predicates))
        ev = prep.evaluator(cp)
        for row, p, bel in zip(rows, ps, beliefs):
            for label, res in ev.score_parts(bel, p.retrieval_threshold, ranges).items():
                s = res.summary
                row.update({f"{label}.{m}": s[m] for m in SUMMARY_METRICS})
                row.update({f"{label}.{k}": v for k, v in s.items() if k.startswith("log_loss.")})
    return rows


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


def sweep(log: Any, space: Mapping[str, Any] | Sequence[MemoryParams], *, base: MemoryParams | None = None,
          schedule: Schedule | None = None, split: float | int | None = 2 / 3, holdout: Any = None,
          search: str = "grid", n: int = 64, seed: int = 0, objective: str = "log_loss",
          include_defaults: bool = True, executor: Executor | None = None, workers: int | None = None,
          chunk_size: int = 16, progress: bool = True) -> SweepResult:
    """Replay ``log`` with every parameter set of ``space`` and score each on a tuning part and a
    held-out part.

    ``space``: flat parameter name → list of values (grid; with ``search="random"``, lists and
    :class:`Range` are sampled ``n`` times with ``seed``), or an explicit list of MemoryParams.
    ``base``: the parameters not swept (default: the seed's, with the dataset's multi-valued
    predicates). ``split``: fraction of the log's span (or a Unix time) where the held-out part
    starts; ignored when ``holdout`` (another log) is given. The seed's defaults are always row 0
    (``baseline`` = True) unless ``include_defaults=False``. ``executor``: any
    ``concurrent.futures.Executor`` (default: a process pool of ``workers``; ``workers=0`` runs
    in this process).
    """
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
    if search not in ("grid", "random"):
        raise InputError(f"search must be 'grid' or 'random', got {search!r}")
    if chunk_size < 1:
        raise InputError(f"chunk_size must be >= 1, got {chunk_size!r}")
    P = log if isinstance(log, PreparedLog) else prepare(log)
    schedule = schedule or default_schedule(P)
    H = None if holdout is None else (holdout if isinstance(holdout, PreparedLog) else prepare(holdout))
    base = base or MemoryParams(multi_valued_predicates=P.dataset.multi_valued_predicates)
    if isinstance(space, Mapping):
        points = grid_points(space, base) if search == "grid" else random_points(space, base, n, seed)
    else:
        points = list(space)
        if not all(isinstance(p, MemoryParams) for p in points):
            raise InputError("an explicit sweep space must be a list of MemoryParams")
    defaults = MemoryParams()
    if include_defaults:
        points = [defaults] + [p for p in points if p != defaults]
    split_at = None
    if H is None and split is not None:
        split_at = int(split) if split > 1 else int(P.start + split * (P.end - P.start))
        if not P.start < split_at < P.end:
            raise InputError(f"split at {split_at} is outside the log ({P.start}..{P.end})")

    # chunks of parameter sets sharing multi-valued predicates (the kernel's keys depend on them)
    order = sorted(range(len(points)), key=lambda i: (sorted(points[i].multi_valued_predicates), i))
    chunks: list[list[int]] = []
    for i in order:
        if chunks and len(chunks[-1]) < chunk_size and \
                points[chunks[-1][0]].multi_valued_predicates == points[i].multi_valued_predicates:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    log_ref, hold_ref = _log_ref(P), (None if H is None else _log_ref(H))
    sched = schedule.to_dict()
    rows: list[dict] = []
    bar = tqdm(total=len(points), desc="sweep", unit="params", disable=not progress)
    own = None
    if executor is None and (workers is None or workers > 0) and len(chunks) > 1:
        own = executor = ProcessPoolExecutor(max_workers=workers or min(len(chunks), os.cpu_count() or 1))
    try:
        if executor is None:
            for c in chunks:
                for r in score_chunk(log_ref, hold_ref, [points[i].to_dict() for i in c], sched, split_at, 0):
                    r["index"] = c[r["index"]]
                    rows.append(r)
                bar.update(len(c))
        else:
            futs = {executor.submit(score_chunk, log_ref, hold_ref, [points[i].to_dict() for i in c], sched,
                                    split_at, 0): c for c in chunks}
            for f in as_completed(futs):
                c = futs[f]
                for r in f.result():
                    r["index"] = c[r["index"]]
                    rows.append(r)
                bar.update(len(c))
    finally:
        bar.close()
        if own is not None:
            own.shutdown()

    metrics = pd.DataFrame(rows).set_index("index").sort_index()
    flat = pd.DataFrame([p.to_flat() for p in points])
    flat["multi_valued_predicates"] = [",".join(sorted(p.multi_valued_predicates)) for p in points]
    table = pd.concat([flat, metrics.reset_index(drop=True)], axis=1)
    table.insert(0, "baseline", [include_defaults and i == 0 for i in range(len(points))])
    table.insert(0, "run_id", [run_id(P.sha256, p, schedule) for p in points])
    return SweepResult(table=table, params=points, schedule=schedule, dataset_sha256=P.sha256,
                       holdout_sha256=None if H is None else H.sha256, split_at=split_at, objective=objective)


def dask_executor(address: str) -> Executor:
    """A ``concurrent.futures`` executor on a Dask distributed cluster (``pip install 'factmem[dask]'``)."""
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - depends on the extra
        raise InputError("--dask needs the 'dask' extra: pip install 'factmem[dask]'") from None
    return Client(address).get_executor()
