"""The search of ``factmem tune``: Optuna studies propose the candidates, factmem's kernel scores them.

Optuna keeps the studies (trials, samplers, importances, the dashboard); factmem keeps what Optuna
does not do — replaying many parameter sets in one pass over the events and judging them honestly.

**Samplers** (:data:`SAMPLERS`): ``tpe`` (Optuna's multivariate TPE with the constant liar),
``cmaes`` (CMA-ES), ``gp`` (Gaussian-process Bayesian optimisation; needs ``torch``), ``random`` and
``grid``. Each is seeded: the sampler of study ``s`` in round ``r`` is built afresh with the seed
:func:`round_seed` ``(seed, s, r)``, so a run's proposals depend only on the seed and the trials told
before — which is what lets ``--resume`` continue a run exactly.

**Studies** (:func:`selections`). Holding out by subjects, one study per fold's **people**
(``people-0`` …), each told only the scores of that fold's subjects. Fold ``f``'s choice is made among
the candidates the *other* folds' studies proposed (and the shared and fixed points), by the score of
its training people (:func:`study_rows` ``fold-f``): no fold's choice, nor any sampler whose proposals
it chooses among, has seen the people it is judged on. The recommendation is chosen among every
candidate on all tuning data; after the search a **summary study** named after the tuning part
(``all``, :func:`summary_study`) holds every searched candidate with its all-data score — it proposes
nothing; the importances and the dashboard's all-data view read it. Every proposal serves a fold's
choice twice over (two folds' training people include each fold's people), where one study of all
data and one per fold's training subjects spent a quarter of the budget on a study no fold may
choose from — measured in ``benchmarks/bench_search.py`` at the default budget of 384: the held-out
choice rose on ``small`` and the drift preset and stayed level on the long-absence and
conversation-like presets. With a time or log hold-out there is one study, of all tuning data
(``train``). What is proposed without looking at any score
is shared — every study holds it, told its own selection's score: a ``random`` search's draws, a
``grid``, and an adaptive sampler's start of ``startup`` points, seeded random draws — which costs
one study's candidates instead of one per selection. With ``Search.corners`` (the default) the start
opens with the space's corners (:func:`corner_points`), scored **beside** the studies like the fixed
points: every study may choose one, none is told them (told, a good corner pulls the sampler's model
to the edge of the space it lies on: measured in ``benchmarks/bench_search.py``, plain TPE did better
than TPE told the corners on the drift preset past 64 candidates). After the start each adaptive
study proposes ``n`` candidates of its own, each round's batch of ``chunk_size`` split: the share
``Search.local`` (default 0.5, rounded down) are **local draws** around the study's own best so far
(:func:`local_points`: small normal steps around its 3 best trials by the value it was told — its
own selection's score —, the refinement factmem used before Optuna, per study), enqueued and
marked with the user attribute ``local``; the rest its sampler asks.

**Rounds.** First the fixed points are scored — the baseline, the pure seed defaults, ``current``
and ``start`` — and the baseline, ``current`` and ``start`` are enqueued in every study (when they
lie in the searched space; else they are scored beside the studies, a note says so). Then each
round every study asks ``chunk_size`` candidates (``study.ask()``), the new distinct ones are
replayed together by one :func:`~factmem.tuning.sweep.sweep` (one kernel chunk per study, on the
executor of :class:`~factmem.tuning.settings.Compute` — processes or Dask), and every trial is told
its study's objective (the first budget's) on its selection; a parameter set proposed twice is
scored once. The shared pool is drawn first, ``chunk_size`` × studies a round.

**Spaces** map onto Optuna distributions (:func:`distributions`): a
:class:`~factmem.tuning.space.Range` is a ``FloatDistribution`` (``log`` kept), a list of values a
``CategoricalDistribution``; ``grid`` enumerates every combination of the lists, exactly, in
:func:`~factmem.tuning.space.grid_points` order.

**Storage.** Studies run in memory and are written to ``study.db`` (Optuna's SQLite storage) in the
run folder (:func:`factmem.tuning.studies.save_studies`), each trial with factmem's metrics as user attributes (``row`` of
``sweep.parquet``, ``run_id``, ``utility@k``, ``recall@k``, ``precision@k``, ``charged@k`` on the
study's selection) — ``optuna-dashboard study.db`` opens it.

**Importances** (:func:`factmem.tuning.studies.parameter_importances`): Optuna's PED-ANOVA (deterministic) per searched
parameter and study; a parameter whose importance is below :data:`IDENTIFIED_SHARE` in every study
is *not identified* — the data do not say where it should be.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from factmem.core.codes import SEARCH_MODES
from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.evaluation.context import FIELDS
from factmem.tuning.settings import Holdout, Objective, Search
from factmem.tuning.space import ALIASES, Range, assign, check_space, grid_points, refine_points

if TYPE_CHECKING:

    from factmem.tuning.sweep import SweepResult

__all__ = ["SAMPLERS", "ADAPTIVE", "IDENTIFIED_SHARE", "STUDY_FILE", "STATE_FILE", "Selection", "SearchOutcome",
           "selections", "study_rows", "choice_rows", "summary_study", "corner_points", "local_points", "distributions", "in_space", "make_sampler", "round_seed", "run_search",
           "study_attrs"]

SAMPLERS = SEARCH_MODES
#: samplers whose proposals depend on the scores told (one pool per study, no sharing)
ADAPTIVE = frozenset({"tpe", "cmaes", "gp"})
#: importance share below which a parameter counts as not identified in a study
IDENTIFIED_SHARE = 0.05
STUDY_FILE = "study.db"
#: what ``--resume`` needs besides study.db and sweep.parquet: every candidate's per-subject sums
STATE_FILE = "search.npz"
_METRICS = ("utility", "recall", "precision", "charged")
_POOL = 1_000_000  # the study number of the shared pool's seed stream
_LOCAL = 2_000_000  # added to a study's number: the seed stream of its local draws
#: a study's local draws are made around this many of its best trials, each coordinate moved by a
#: normal step of LOCAL_SCALE × its range's (log) width — the refinement factmem used before Optuna
LOCAL_CENTRES = 3
LOCAL_SCALE = 0.1


@dataclass(frozen=True)
class Selection:
    """The subjects one study is told about: rows of ``part`` (``subjects`` a mask, None: all)."""

    name: str
    part: str
    subjects: np.ndarray | None = None


def selections(holdout: Holdout, folds: np.ndarray | None, part: str) -> list[Selection]:
    """One selection per study. Holding out by subjects (``folds``: the fold of each subject of
    ``part``, as the judgement uses them — people who share sessions in one fold), one per fold's
    **people** (``people-0`` …: the subjects of that fold); without folds (a time or log hold-out)
    one of all tuning data."""
    if holdout.mode == "subjects" and folds is not None:
        return [Selection(f"people-{f}", part, folds == f) for f in range(holdout.folds)]
    return [Selection(part, part)]


def _fold_of(name: str, prefix: str) -> int | None:
    head, _, tail = name.partition("-")
    return int(tail) if head == prefix and tail.isdigit() else None


def study_rows(table: pd.DataFrame, name: str) -> np.ndarray:
    """Which rows of a sweep table a choice may be made among, by the name it is made under:

    - ``people-g`` (a study): the rows it proposed;
    - ``fold-f`` (fold ``f``'s choice): the rows any ``people-g`` study with ``g != f`` proposed —
      never those of the study told the scores of fold ``f``'s own people;
    - any other name (the tuning part, ``all`` or ``train``: the recommendation): every searched row;

    and in every case the rows every study holds (column ``study`` empty: the fixed points, the
    corners, a shared pool). Rows added after the search (identification probes, no ``study`` text)
    are never among them."""
    if "study" not in table.columns:
        return np.ones(len(table), bool)
    people, fold = _fold_of(name, "people"), _fold_of(name, "fold")

    def ok(label: Any) -> bool:
        if not isinstance(label, str):
            return False
        if label == "":
            return True
        owners = label.split(",")
        if people is not None:
            return name in owners
        if fold is not None:
            return any((g := _fold_of(o, "people")) is not None and g != fold for o in owners)
        return True

    return np.asarray([ok(c) for c in table["study"]], bool)


def choice_rows(table: pd.DataFrame, studies: Sequence[str], folds: int) -> dict[str, np.ndarray]:
    """:func:`study_rows` of every study and of every fold's choice (``fold-0`` … when the studies
    are per fold's people)."""
    names = list(studies)
    if any(_fold_of(n, "people") is not None for n in names):
        names += [f"fold-{f}" for f in range(folds)]
    return {n: study_rows(table, n) for n in names}


def summary_study(res: SweepResult, part: str, objective: Objective, space: Mapping[str, Any],
                  attrs: Mapping[str, Any]) -> Any:
    """A study over all tuning data that proposes nothing: every searched row of the sweep that lies
    in the space, as a completed trial (``optuna.trial.create_trial``) with its all-data objective,
    ``row``, ``run_id``, ``study`` (who proposed it) and factmem's metrics as user attributes. The
    importances of the recommendation's data and the dashboard's all-data view read it."""
    optuna = _optuna()
    dists = distributions(space)
    study = optuna.create_study(study_name=part, storage=optuna.storages.InMemoryStorage(),
                                direction="minimize" if objective.lower_is_better else "maximize")
    for k, v in attrs.items():
        study.set_user_attr(k, v)
    rows = np.flatnonzero(study_rows(res.table, part) & res.eligible())
    rows = np.asarray([i for i in rows if in_space(space, res.params[int(i)])], dtype=np.int64)
    values = res.objective_values(part, objective.budgets[0] if objective.per_budget else None, None)
    metrics = _selection_metrics(res, Selection(part, part), rows)
    labels = res.table["study"] if "study" in res.table.columns else pd.Series([""] * len(res.table))
    trials = []
    for i in rows:
        v = float(values[int(i)])
        if not math.isfinite(v):
            continue
        user = {"row": int(i), "run_id": str(res.table["run_id"].iloc[int(i)]), "study": str(labels.iloc[int(i)]),
                **{k: (None if not math.isfinite(m) else m) for k, m in metrics[int(i)].items()}}
        trials.append(optuna.trial.create_trial(params=_values(space, res.params[int(i)]), distributions=dists,
                                                value=v, user_attrs=user))
    study.add_trials(trials)
    return study


def _optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def _choice(v: Any) -> Any:
    """A categorical choice Optuna can store (None, bool, int, float, str); others as their repr."""
    return v if v is None or isinstance(v, (bool, int, float, str)) else repr(v)


def distributions(space: Mapping[str, Any]) -> dict[str, Any]:
    """Optuna distributions of a factmem space (Range -> FloatDistribution, list -> Categorical)."""
    optuna = _optuna()
    out: dict[str, Any] = {}
    for name, values in space.items():
        if isinstance(values, Range):
            out[name] = optuna.distributions.FloatDistribution(float(values.low), float(values.high), log=values.log)
        else:
            vals = list(values) if not isinstance(values, (str, bytes)) else [values]
            out[name] = optuna.distributions.CategoricalDistribution([_choice(v) for v in vals])
    return out


def _values(space: Mapping[str, Any], params: MemoryParams) -> dict[str, Any]:
    return {name: _choice(params.get(ALIASES.get(name, (name,))[0])) if not isinstance(space[name], Range)
            else params.get(ALIASES.get(name, (name,))[0]) for name in space}


def _from_trial(space: Mapping[str, Any], base: MemoryParams, values: Mapping[str, Any]) -> MemoryParams:
    """The parameter set of a trial's values (a categorical repr mapped back to its value)."""
    out: dict[str, Any] = {}
    for name, v in values.items():
        spec = space[name]
        if not isinstance(spec, Range):
            v = next(c for c in spec if _choice(c) == v)
        out[name] = float(v) if isinstance(v, (float, np.floating)) else v
    return assign(base, out)


def in_space(space: Mapping[str, Any], params: MemoryParams) -> bool:
    """Whether ``params`` lies in ``space`` (inside each Range, one of each list's values) — and
    ties its aliased parameters as the space does."""
    for name, spec in space.items():
        targets = ALIASES.get(name, (name,))
        v = params.get(targets[0])
        if any(params.get(t) != v for t in targets[1:]):
            return False
        if isinstance(spec, Range):
            if not spec.low <= v <= spec.high:
                return False
        elif _choice(v) not in [_choice(c) for c in spec]:
            return False
    return True


def corner_points(space: Mapping[str, Any], base: MemoryParams) -> list[MemoryParams]:
    """Deterministic points of the space that need no score — the corners a random start rarely
    draws and the issue's real logs showed to matter: for each kind ``K`` with both a searched
    ``decay_rate.K`` and ``initial_confidence.K``, **K shown and never decaying** (its decay at the
    range's low end, its initial confidence at the high end) while every other kind **starts below the
    threshold** (initial confidence at its low end, decay at its high end, the threshold at its high
    end), once with the base's gain and once with the gain at its low end (so re-mentions do not lift
    the other kinds over the threshold); then every kind shown and never decaying (threshold at its low
    end); then the centre of the space (the middle of each range, in log coordinates for a log range;
    the middle listed value). Only names the space searches are set; a point outside it is dropped."""
    def low(name: str) -> Any:
        spec = space[name]
        return spec.low if isinstance(spec, Range) else list(spec)[0]

    def high(name: str) -> Any:
        spec = space[name]
        return spec.high if isinstance(spec, Range) else list(spec)[-1]

    kinds = [n.split(".", 1)[1] for n in space if n.startswith("decay_rate.") and
             f"initial_confidence.{n.split('.', 1)[1]}" in space]
    threshold = next((n for n in ("threshold", "archive_threshold") if n in space), None)
    points: list[dict[str, Any]] = []
    if len(kinds) >= 2 and threshold is not None:
        gains = [None] + (["reinforce_gain"] if "reinforce_gain" in space else [])
        for kind in kinds:
            for gain in gains:
                values: dict[str, Any] = {threshold: high(threshold)}
                for other in kinds:
                    shown = other == kind
                    values[f"decay_rate.{other}"] = low(f"decay_rate.{other}") if shown else high(f"decay_rate.{other}")
                    values[f"initial_confidence.{other}"] = (high if shown else low)(f"initial_confidence.{other}")
                if gain is not None:
                    values[gain] = low(gain)
                points.append(values)
        points.append({threshold: low(threshold), **{f"decay_rate.{k}": low(f"decay_rate.{k}") for k in kinds},
                       **{f"initial_confidence.{k}": high(f"initial_confidence.{k}") for k in kinds}})
    centre: dict[str, Any] = {}
    for name, spec in space.items():
        if isinstance(spec, Range):
            mid = math.exp((math.log(spec.low) + math.log(spec.high)) / 2) if spec.log else (spec.low + spec.high) / 2
            centre[name] = float(mid)
        else:
            vals = list(spec)
            centre[name] = vals[len(vals) // 2]
    points.append(centre)
    out = [assign(base, {n: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                         and isinstance(space[n], Range) else v for n, v in p.items()}) for p in points]
    return [p for p in dict.fromkeys(out) if in_space(space, p)]


def local_points(study: Any, params_of_row: Sequence[MemoryParams], space: Mapping[str, Any], n: int, seed: int,
                 ) -> list[MemoryParams]:
    """``n`` draws around the study's own best: its :data:`LOCAL_CENTRES` best completed trials (by the
    value it was told — its own selection's score: a ``people-g`` study's draws look only at fold
    ``g``'s people, whose choice never reads them; ties by trial number), each trial's parameter set
    read from ``params_of_row`` (its ``row`` user attribute: the scored set, non-searched parameters
    included), then :func:`~factmem.tuning.space.refine_points` with :data:`LOCAL_SCALE`. Seeded; []
    before any trial is complete."""
    optuna = _optuna()
    done = [t for t in study.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.COMPLETE and "row" in t.user_attrs]
    if not done or n <= 0:
        return []
    sign = 1.0 if study.direction == optuna.study.StudyDirection.MINIMIZE else -1.0
    done.sort(key=lambda t: (sign * float(t.value), t.number))
    centres = list(dict.fromkeys(params_of_row[int(t.user_attrs["row"])] for t in done))[:LOCAL_CENTRES]
    out = []
    for p in refine_points(space, centres, n, seed, scale=LOCAL_SCALE):
        # a log range's exp(log(high)) can land one ulp outside it: clamp, so the draw lies in the space
        values = {name: p.get(ALIASES.get(name, (name,))[0]) for name, spec in space.items() if isinstance(spec, Range)}
        out.append(assign(p, {name: float(min(max(v, space[name].low), space[name].high)) for name, v in values.items()}))
    return out


def round_seed(seed: int, study: int, round_: int) -> int:
    """The sampler seed of study number ``study`` in round ``round_`` (independent streams)."""
    return int(np.random.SeedSequence([seed, study, round_]).generate_state(1)[0])


def make_sampler(name: str, seed: int) -> Any:
    """A seeded Optuna sampler."""
    optuna = _optuna()
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    if name == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError:  # pragma: no cover - a core dependency
            raise InputError("--sampler cmaes needs the 'cmaes' package: pip install cmaes") from None
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    if name == "gp":
        try:
            import torch  # noqa: F401
        except ImportError:
            raise InputError("--sampler gp needs torch: pip install 'factmem[gp]'") from None
        return optuna.samplers.GPSampler(seed=seed)
    if name in ("random", "grid"):  # grid's points are enqueued; the sampler only labels them
        return optuna.samplers.RandomSampler(seed=seed)
    raise InputError(f"unknown sampler {name!r}; samplers: {', '.join(SAMPLERS)}")


@dataclass
class SearchOutcome:
    """What a search found: the scored candidates (``sweep``), the studies by selection name, which
    rows each study may choose (``eligible``), the rounds run and notes."""

    sweep: SweepResult
    studies: dict[str, Any]
    eligible: dict[str, np.ndarray]
    rounds: int
    #: candidates each study's sampler proposed (the fixed points not counted)
    proposed: int
    notes: list[str] = field(default_factory=list)


def _selection_metrics(res: SweepResult, sel: Selection, rows: np.ndarray) -> dict[int, dict[str, float]]:
    """factmem's metrics of ``rows`` on a selection (trial user attributes)."""
    obj = res.objective
    out: dict[int, dict[str, float]] = {int(i): {} for i in rows}
    if not obj.per_budget:
        col = f"{sel.part}.{obj.name}"
        for i in rows:
            out[int(i)][obj.name] = float(res.table.loc[int(i), col])
        return out
    ctx = res.context[sel.part][rows]
    if sel.subjects is not None:
        ctx = ctx[:, sel.subjects]
    tot = ctx.sum(axis=1)  # row × budget × field
    for b, k in enumerate(obj.budgets):
        for m in _METRICS:
            den = tot[:, b, FIELDS.index("precise" if m == "precision" else "points")]
            with np.errstate(invalid="ignore", divide="ignore"):
                v = tot[:, b, FIELDS.index(m)] / den
            for j, i in enumerate(rows):
                out[int(i)][f"{m}@{k}"] = float(v[j])
    return out


def study_attrs(search: Search, objective: Objective, sel: Selection, n_subjects: int) -> dict[str, Any]:
    """The user attributes of a study: what it optimises, over whom, how."""
    return {"sampler": search.method, "seed": search.seed, "objective": objective.name,
            "budget": objective.budgets[0] if objective.per_budget else None, "part": sel.part,
            "subjects": int(n_subjects if sel.subjects is None else sel.subjects.sum()),
            "selection": "all tuning data" if sel.subjects is None else
            f"the people of fold {sel.name.split('-', 1)[1]} (the other folds' choices read it)"}


def run_search(search: Search, *, base: MemoryParams, fixed: Sequence[MemoryParams], objective: Objective,
               holdout: Holdout, score: Callable[[list[MemoryParams], bool], SweepResult],
               concat: Callable[[SweepResult, SweepResult], SweepResult], chunk_size: int,
               folds_of: Callable[[SweepResult], np.ndarray | None] | None = None,
               previous: SearchOutcome | None = None, more: int | None = None,
               progress: Callable[[int], None] | None = None) -> SearchOutcome:
    """Run (or, with ``previous``, continue by ``more`` candidates per study) the search; see the
    module docstring. ``score(points, first)`` replays and scores parameter sets (``first``: with the
    baseline rows first); ``concat`` joins two sweep results; ``fixed``: current and start;
    ``folds_of(first scores)``: the fold of each tuning subject (default: :meth:`Holdout.subject_folds`)."""
    optuna = _optuna()
    space = search.resolved_space
    check_space(space, base)
    if search.method == "grid":
        ranges = [n for n, v in space.items() if isinstance(v, Range)]
        if ranges:
            raise InputError(f"grid search needs lists of values; {', '.join(ranges)} "
                             f"{'is a range' if len(ranges) == 1 else 'are ranges'} (use another sampler)")
    dists = distributions(space)
    adaptive = search.method in ADAPTIVE
    tuning_part = "all" if holdout.mode == "subjects" else "train"
    notes: list[str] = [] if previous is None else list(previous.notes)

    def fold_array(res: SweepResult) -> np.ndarray | None:
        if holdout.mode != "subjects":
            return None
        return folds_of(res) if folds_of is not None else holdout.subject_folds(len(res.subjects[tuning_part]))

    if previous is None:
        res = score(list(dict.fromkeys(fixed)), True)
        # an adaptive sampler's start opens with the corners (they need no score), scored beside the
        # studies: every study may choose one, none is told them — told, a good corner pulls the
        # sampler's model (and the local draws) to the edge of the space it lies on
        corners = [p for p in corner_points(space, base)[:search.startup] if p not in set(res.params)] \
            if adaptive and search.corners else []
        if corners:
            res = concat(res, score(corners, False))
        n_subj = len(res.subjects[tuning_part])
        sels = selections(holdout, fold_array(res), tuning_part)
        direction = "minimize" if objective.lower_is_better else "maximize"
        studies = {s.name: optuna.create_study(study_name=s.name, direction=direction,
                                               storage=optuna.storages.InMemoryStorage()) for s in sels}
        for s in sels:
            for k, v in study_attrs(search, objective, s, n_subj).items():
                studies[s.name].set_user_attr(k, v)
        labels: list[list[str]] = [[] for _ in res.params]
        fixed_rows = set(range(len(res.params)))
        rounds, proposed = 0, 0
        queue = [p for p in dict.fromkeys([res.params[0], *fixed]) if in_space(space, p)]
        for p, what in ((res.params[0], "baseline"), *[(p, "fixed point") for p in fixed]):
            if not in_space(space, p):
                notes.append(f"The {what} lies outside the searched space, so the studies do not hold it; it is "
                             "scored beside them and may still be chosen.")
        grid = grid_points(space, base) if search.method == "grid" else []
        # the shared pool: a grid, the random draws, or the rest of an adaptive sampler's start
        shared_todo = len(grid) if search.method == "grid" else search.startup - len(corners) if adaptive \
            else search.n
        todo = search.n if adaptive else 0
    else:
        res, studies = previous.sweep, dict(previous.studies)
        n_subj = len(res.subjects[tuning_part])
        sels = selections(holdout, fold_array(res), tuning_part)
        missing = [s.name for s in sels if s.name not in studies]
        if missing:
            raise InputError(f"the run's studies ({', '.join(studies)}) are not this search's "
                             f"({', '.join(s.name for s in sels)}): it was written by an older factmem with another "
                             "layout of studies; run tune afresh")
        labels = [[] if not s else s.split(",") for s in res.table["study"]]
        fixed_rows = {i for i, lab in enumerate(labels) if not lab}
        rounds, proposed, queue = previous.rounds, previous.proposed, []
        extra = more if more is not None else search.n
        grid = []
        shared_todo = extra if search.method == "random" else 0
        todo = extra if adaptive else 0
        if search.method == "grid":
            notes.append("A grid is searched whole in the first run: resuming adds no candidates.")
    row_of = {p: i for i, p in enumerate(res.params)}

    while shared_todo > 0 or todo > 0 or queue:
        asked: list[tuple[str, Any, MemoryParams]] = []  # (study, trial, params)
        pool: list[MemoryParams] = []
        batch = 0
        if shared_todo > 0:  # proposed without looking at any score: one kernel chunk per study
            size = min(chunk_size * len(sels), shared_todo)
            if search.method == "grid":
                pool = grid[proposed:proposed + size]
            else:  # a scratch study draws the round's pool (a random sampler reads no history)
                draw = optuna.create_study(storage=optuna.storages.InMemoryStorage(),
                                           sampler=make_sampler("random", round_seed(search.seed, _POOL, rounds)))
                pool = [_from_trial(space, base, draw.ask(dists).params) for _ in range(size)]
            shared_todo -= size
        else:
            batch = min(chunk_size, todo)
            todo -= batch
        for si, sel in enumerate(sels):
            study = studies[sel.name]
            study.sampler = make_sampler(search.method, round_seed(search.seed, si, rounds))
            fixed_here = queue + pool
            for p in fixed_here:
                study.enqueue_trial(_values(space, p), skip_if_exists=False)
            for p in fixed_here:
                asked.append((sel.name, study.ask(dists), p))
            # the round's local draws around this study's own best (told values of its own selection;
            # none before a trial is complete: then the sampler proposes the whole batch)
            local = local_points(study, res.params, space, math.floor(batch * search.local) if adaptive else 0,
                                 round_seed(search.seed, _LOCAL + si, rounds))
            for _ in range(batch - len(local)):
                t = study.ask(dists)
                asked.append((sel.name, t, _from_trial(space, base, t.params)))
            for p in local:
                study.enqueue_trial(_values(space, p), skip_if_exists=False)
                t = study.ask(dists)
                t.set_user_attr("local", True)
                asked.append((sel.name, t, p))
        new = [p for p in dict.fromkeys(p for _, _, p in asked) if p not in row_of]
        if new:
            res = concat(res, score(new, False))
            for p in new:
                row_of[p] = len(row_of)
                labels.append([])
        fixed_rows |= {row_of[p] for p in pool}
        if adaptive:  # which study proposed each row (the fixed points and the pool belong to every study)
            for name, _, p in asked:
                i = row_of[p]
                if i not in fixed_rows and name not in labels[i]:
                    labels[i].append(name)
        for sel in sels:
            mine = [(t, p) for name, t, p in asked if name == sel.name]
            rows = np.asarray([row_of[p] for _, p in mine], dtype=np.int64)
            values = res.objective_values(sel.part, objective.budgets[0] if objective.per_budget else None,
                                          sel.subjects)
            attrs = _selection_metrics(res, sel, rows)
            run_ids = res.table["run_id"]
            for (t, _), i in zip(mine, rows):
                t.set_user_attr("row", int(i))
                t.set_user_attr("run_id", str(run_ids.iloc[int(i)]))
                for k, v in attrs[int(i)].items():
                    t.set_user_attr(k, None if not math.isfinite(v) else v)
                v = float(values[i])
                if math.isfinite(v):
                    studies[sel.name].tell(t, v)
                else:
                    studies[sel.name].tell(t, state=optuna.trial.TrialState.FAIL)
        proposed += len(pool) + batch
        queue = []
        rounds += 1
        if progress is not None:
            progress(len(new))

    order = {s.name: j for j, s in enumerate(sels)}
    column = [",".join(sorted(set(lab), key=order.__getitem__)) for lab in labels]
    table = res.table.drop(columns=["study"], errors="ignore")
    table.insert(table.columns.get_loc("seed_defaults") + 1, "study", column)
    res = type(res)(**{**res.__dict__, "table": table})
    if holdout.mode == "subjects" and sels[0].name != tuning_part:
        # the recommendation is chosen on all tuning data: a study of every searched row, told nothing
        # while the search ran, holds that view for the importances and the dashboard
        summary = summary_study(res, tuning_part, objective, space,
                                study_attrs(search, objective, Selection(tuning_part, tuning_part), n_subj)
                                | {"proposes": "nothing: every searched row, scored on all tuning data"})
        studies = {tuning_part: summary, **{s.name: studies[s.name] for s in sels}}
    eligible = choice_rows(table, list(studies), holdout.folds)
    return SearchOutcome(res, studies, eligible, rounds, proposed, notes)
