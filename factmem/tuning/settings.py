"""The settings of a sweep or a tune, as parameter objects shared by the library and the CLI.

* :class:`Objective` — what "better" means: the budgeted context metric ``utility`` at each budget
  ``k`` (default), or another metric; the ``costs`` of the four kinds of charged context facts; what
  counts as needed.
* :class:`Holdout` — how the choice is judged on data it was not made on: ``subjects`` (k-fold over
  subjects, default), ``time`` (a split of the log's span) or ``log`` (another dataset).
* :class:`Search` — which parameter sets are tried: a space (default: :data:`DEFAULT_SPACE`) and an
  Optuna sampler (``tpe``, ``cmaes``, ``gp``, ``random``) with ``n`` candidates per study, or a ``grid``.
* :class:`Compute` — where the work runs: worker processes, a ``concurrent.futures`` executor (Dask),
  chunk size, progress bars.

Each is a frozen dataclass with a plain-dict form (:meth:`to_dict`) recorded in run manifests.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np

from factmem.core.codes import SEARCH_MODES, SearchMode
from factmem.errors import InputError
from factmem.evaluation.charges import ChargeCosts
from factmem.evaluation.context import NEEDED_MODES, Needed
from factmem.evaluation.groups import GroupBy, describe_group_by
from factmem.tuning.space import Range

__all__ = ["ObjectiveName", "OBJECTIVES", "CALIBRATION_OBJECTIVES", "CONTEXT_OBJECTIVES", "HoldoutMode", "HOLDOUT_MODES", "Objective",
           "Holdout", "Search", "Compute", "DEFAULT_SPACE"]

ObjectiveName = Literal["utility", "recall_at_k", "precision_at_k", "stale_at_k",
                        "log_loss", "brier", "rmse_bins", "auc", "recall", "precision", "stale", "believed", "lost"]
#: every objective, and whether lower is better
OBJECTIVES: dict[str, bool] = {
    "utility": False, "recall_at_k": False, "precision_at_k": False, "stale_at_k": True,
    "log_loss": True, "brier": True, "rmse_bins": True, "auc": False,
    "recall": False, "precision": False, "stale": True, "believed": True, "lost": True,
}
assert set(OBJECTIVES) == set(get_args(ObjectiveName))
#: objectives read from the calibration metrics (a sweep for them scores calibration for every row)
CALIBRATION_OBJECTIVES: frozenset[str] = frozenset({"log_loss", "brier", "rmse_bins", "auc"})
#: objectives read from the budgeted context metrics (one value per budget)
CONTEXT_OBJECTIVES: dict[str, str] = {"utility": "utility", "recall_at_k": "recall",
                                      "precision_at_k": "precision", "stale_at_k": "charged"}

HoldoutMode = Literal["subjects", "time", "log"]
HOLDOUT_MODES: tuple[HoldoutMode, ...] = get_args(HoldoutMode)

#: The default search space: the decay rate and initial confidence of each observed kind, the
#: reinforcement gain, and the threshold below which a fact leaves the active set — tied to the one
#: above which it enters a context (``threshold`` sets both ``archive_threshold`` and
#: ``retrieval_threshold``: a context draws on facts above the stricter of the two, so sweeping the
#: archive threshold alone below the retrieval threshold would change nothing).
DEFAULT_SPACE: dict[str, Any] = {
    "decay_rate.explicit": Range(1e-4, 0.3, log=True),
    "decay_rate.user_preference": Range(1e-4, 0.3, log=True),
    "decay_rate.episodic": Range(0.01, 10.0, log=True),
    "initial_confidence.explicit": Range(0.2, 0.99),
    "initial_confidence.user_preference": Range(0.2, 0.99),
    "initial_confidence.episodic": Range(0.1, 0.99),
    "reinforce_gain": Range(0.05, 1.0),
    "threshold": Range(0.0, 0.3),
}


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


@dataclass(frozen=True)
class Objective:
    """What the choice optimises. ``budgets``: the context sizes ``k`` (one recommendation each);
    ``costs``: what a stale, expired, false and unneeded context fact costs in utility@k
    (:class:`~factmem.evaluation.charges.ChargeCosts`, a mapping of kinds or a string like
    ``"stale=1,expired=1,false=1,unneeded=0"``; default those); ``needed``: ``"truth"``, ``"next-session"`` or None (truth when
    the log has it); ``max_points_per_subject``: sample session starts (None: all)."""

    name: ObjectiveName = "utility"
    budgets: tuple[int, ...] = (20,)
    costs: ChargeCosts = field(default_factory=ChargeCosts)
    needed: Needed | None = None
    max_points_per_subject: int | None = None

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise InputError(f"unknown objective {self.name!r}; objectives: {', '.join(OBJECTIVES)}")
        budgets = tuple(self.budgets) if not isinstance(self.budgets, int) else (self.budgets,)
        if not budgets:
            raise InputError("budgets: give at least one context size k")
        for k in budgets:
            _check_int("budget", k, 1)
        if len(set(budgets)) != len(budgets):
            raise InputError(f"budgets repeat a value: {list(budgets)}")
        object.__setattr__(self, "budgets", budgets)
        object.__setattr__(self, "costs", ChargeCosts.of(self.costs))
        if self.needed is not None and self.needed not in NEEDED_MODES:
            raise InputError(f"needed must be one of {', '.join(NEEDED_MODES)}, got {self.needed!r}")
        if self.max_points_per_subject is not None:
            _check_int("max_points_per_subject", self.max_points_per_subject, 1)

    @property
    def lower_is_better(self) -> bool:
        return OBJECTIVES[self.name]

    @property
    def per_budget(self) -> bool:
        """Whether the objective has one value per budget (the context metrics)."""
        return self.name in CONTEXT_OBJECTIVES

    def column(self, part: str, budget: int | None = None) -> str:
        """The sweep-table column holding this objective for a part (and budget)."""
        if self.per_budget:
            metric = {"utility": "utility", "recall_at_k": "recall", "precision_at_k": "precision",
                      "stale_at_k": "charged"}[self.name]
            return f"{part}.{metric}@{budget if budget is not None else self.budgets[0]}"
        return f"{part}.{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "budgets": list(self.budgets), "costs": self.costs.to_dict(),
                "needed": self.needed, "max_points_per_subject": self.max_points_per_subject}


@dataclass(frozen=True)
class Holdout:
    """How a choice is judged on data it was not made on.

    ``subjects`` (default): ``folds``-fold over groups of subjects, seeded — each group is held out
    once and scored by a choice made on the others. A group is the people who share sessions
    (:mod:`factmem.evaluation.groups`; ``group_by``: another mention column or a subject → group
    mapping or CSV file instead), so two people of one conversation are never on both sides; a log
    where everyone has sessions of their own has one group per person. ``time``: tuned on evaluation
    points before ``split`` (a fraction of the log's span, or a Unix time), judged after. ``log``: judged
    on another dataset (``log``). ``bootstrap`` resamples of held-out groups give the interval;
    ``min_groups``: held-out groups needed to promote (fewer: "too few to decide"); ``seed`` seeds folds
    and resamples."""

    mode: HoldoutMode = "subjects"
    folds: int = 3
    split: float = 2 / 3
    log: Any = None
    bootstrap: int = 1000
    seed: int = 0
    group_by: GroupBy = None
    min_groups: int = 10

    def __post_init__(self) -> None:
        if self.mode not in HOLDOUT_MODES:
            raise InputError(f"holdout mode must be one of {', '.join(HOLDOUT_MODES)}, got {self.mode!r}")
        _check_int("folds", self.folds, 2)
        _check_int("bootstrap", self.bootstrap, 0)
        _check_int("seed", self.seed, 0)
        _check_int("min_groups", self.min_groups, 1)
        if self.group_by is not None and not isinstance(self.group_by, (str, os.PathLike, Mapping)):
            raise InputError(f"group_by must be a mention column, a CSV file or a mapping, got {self.group_by!r}")
        if self.mode == "log" and self.log is None:
            raise InputError("holdout mode 'log' needs log= (another dataset)")
        if isinstance(self.split, bool) or not isinstance(self.split, (int, float)) or self.split <= 0:
            raise InputError(f"split must be a fraction in (0, 1) or a Unix time, got {self.split!r}")

    def subject_folds(self, n_subjects: int) -> np.ndarray:
        """Fold of each subject (subjects in sorted order): a seeded permutation cut into ``folds``
        parts of equal size (±1)."""
        if n_subjects < self.folds:
            raise InputError(f"{self.folds}-fold over subjects needs at least {self.folds} subjects; the log has "
                             f"{n_subjects} (use a time split or another log to hold out)")
        perm = np.random.default_rng(self.seed).permutation(n_subjects)
        fold = np.empty(n_subjects, np.int64)
        fold[perm] = np.arange(n_subjects) % self.folds
        return fold

    def group_folds(self, groups: np.ndarray) -> np.ndarray:
        """Fold of each subject when folds are over ``groups`` (group index per subject): the groups
        cut as :meth:`subject_folds` cuts subjects, every member in its group's fold — with one group
        per person, exactly :meth:`subject_folds`."""
        groups = np.asarray(groups, np.int64)
        n_groups = int(groups.max()) + 1 if len(groups) else 0
        if n_groups == len(groups):
            return self.subject_folds(len(groups))[groups]
        if n_groups < self.folds:
            raise InputError(f"{self.folds}-fold over groups of people needs at least {self.folds} groups; the log "
                             f"has {n_groups} (people who share sessions are one group; use a time split or "
                             "another log to hold out)")
        return self.subject_folds(n_groups)[groups]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "folds": self.folds, "split": self.split,
                "log": None if self.log is None else str(getattr(self.log, "path", self.log)),
                "bootstrap": self.bootstrap, "seed": self.seed, "group_by": describe_group_by(self.group_by),
                "min_groups": self.min_groups}


@dataclass(frozen=True)
class Search:
    """Which parameter sets are tried. ``space``: flat name → values or :class:`Range` (None: the
    default space); ``method``: the Optuna sampler of :mod:`factmem.tuning.search` — ``tpe``
    (default), ``cmaes``, ``gp``, ``random`` or ``grid`` (every combination of the listed values);
    ``n``: candidates each study proposes after the shared start of ``startup`` points (tpe, cmaes,
    gp: the space's corners when ``corners``, scored beside the studies, then random draws; of each
    round's own proposals the share ``local`` are drawn around the study's own best so far, the rest by
    its sampler), or the random draws (random; a grid proposes all of its points); ``seed`` seeds the
    samplers. The default (tpe, 48 + 112 per study, 3 studies: one per fold's people) replays 384
    candidates."""

    space: Mapping[str, Any] | None = None
    method: SearchMode = "tpe"
    n: int = 112
    startup: int = 48
    seed: int = 0
    #: tpe, cmaes, gp: open the shared start with the space's corners (:func:`~factmem.tuning.search.corner_points`),
    #: scored beside the studies (measured in benchmarks/bench_search.py: they lift the choice at small budgets)
    corners: bool = True
    #: tpe, cmaes, gp: the share of each round's own proposals of a study drawn around that study's
    #: own best so far instead of by its sampler (:func:`~factmem.tuning.search.local_points`; 0: none)
    local: float = 0.5

    def __post_init__(self) -> None:
        if self.method not in SEARCH_MODES:
            raise InputError(f"sampler must be one of {', '.join(SEARCH_MODES)}, got {self.method!r}")
        _check_int("n", self.n, 1)
        _check_int("startup", self.startup, 0)
        _check_int("seed", self.seed, 0)
        if not isinstance(self.corners, bool):
            raise InputError(f"corners must be true or false, got {self.corners!r}")
        if isinstance(self.local, bool) or not isinstance(self.local, (int, float)) or not 0 <= self.local <= 1:
            raise InputError(f"local must be a share between 0 and 1, got {self.local!r}")

    @property
    def resolved_space(self) -> Mapping[str, Any]:
        return DEFAULT_SPACE if self.space is None else self.space

    def to_dict(self) -> dict[str, Any]:
        space = {k: ({"low": v.low, "high": v.high, "log": v.log} if isinstance(v, Range) else list(v))
                 for k, v in self.resolved_space.items()}
        return {"space": space, "method": self.method, "n": self.n, "startup": self.startup, "seed": self.seed,
                "corners": self.corners, "local": float(self.local)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Search:
        """The inverse of :meth:`to_dict` (a run manifest's ``search``)."""
        space = {k: (Range(float(v["low"]), float(v["high"]), bool(v["log"])) if isinstance(v, Mapping) else list(v))
                 for k, v in d["space"].items()}
        return cls(space=space, method=d["method"], n=int(d["n"]), startup=int(d.get("startup", 0)),
                   seed=int(d["seed"]), corners=bool(d.get("corners", False)), local=float(d.get("local", 0.0)))


@dataclass(frozen=True)
class Compute:
    """Where the work runs: ``workers`` processes (None: every core; 0: this process), or an
    ``executor`` (e.g. Dask's, see :func:`factmem.tuning.sweep.dask_executor`); ``chunk_size``: at
    most this many parameter sets per task (replayed together; a batch is split into a multiple of
    the workers, as evenly as it goes); ``progress`` bars."""

    workers: int | None = None
    executor: Executor | None = field(default=None, compare=False)
    chunk_size: int = 16
    progress: bool = True

    def __post_init__(self) -> None:
        if self.workers is not None:
            _check_int("workers", self.workers, 0)
        _check_int("chunk_size", self.chunk_size, 1)

    def to_dict(self) -> dict[str, Any]:
        return {"workers": self.workers, "executor": None if self.executor is None else type(self.executor).__name__,
                "address": self.address, "chunk_size": self.chunk_size}

    @property
    def address(self) -> str | None:
        """The Dask scheduler's address when the executor is one :func:`~factmem.tuning.sweep.dask_executor`
        made (recorded in the manifest, shown on the progress bar)."""
        return getattr(self.executor, "factmem_address", None)

    @property
    def where(self) -> str:
        """Where the work runs, in words (the progress bar's label)."""
        if self.executor is not None:
            return f"on Dask at {self.address}" if self.address else f"on {type(self.executor).__name__}"
        return "in this process" if self.workers == 0 else f"on {self.workers or os.cpu_count() or 1} local processes"
