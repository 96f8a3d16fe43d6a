"""What-if on a production memory: before shipping new parameters, see what they would have done to the
people already in it.

Usage (``prod.sqlite`` a production memory, ``new_params.toml`` a params file)::

    from factmem import whatif

    result = whatif("prod.sqlite", "new_params.toml", out="runs/whatif")
    result.summary["forgotten"], result.comparison("utility")

:func:`whatif` does, in order (each step is a module of :mod:`factmem.production`):

1. **Read and check** the inputs — settings, the params files (strict validation), the production
   file (:func:`~factmem.production.rebuild.read_production`: the seed's schema, evidence present and
   pointing at existing facts). Any problem is a :class:`~factmem.errors.FactmemError` naming it, and
   nothing is written.
2. **Current parameters** (:mod:`factmem.production.current`): those the file records in
   ``factmem_meta`` when present, else ``current`` (``--current FILE``), else ``current="seed"`` said
   explicitly; otherwise :class:`~factmem.production.current.CurrentParamsMissing` naming the flag
   (nothing is assumed). The report says which (and notes a ``current`` that differs from the file's own).
3. **Replay** the rebuilt mention log under the current parameters with a consolidation every
   ``consolidate_every_hours`` — default: the period the file records in ``factmem_meta``
   (``consolidate_every_seconds``), else daily — (at multiples of the period since the epoch: daily = midnight UTC) up to
   the later of ``at`` and the latest time the file records, and **check** that it reproduces the
   file's facts (:func:`~factmem.production.replay.check_reproduction`); the mismatches are counted
   and explained, and the comparison goes on — but when more than 5% of the checked facts are not
   rebuilt, the report's first line says the comparison is not against what production did, with the
   likely causes (:func:`~factmem.production.current.reproduction_warning`), and the CLI exits 4.
4. **Replay** the same log under the new parameters and **compare** (:mod:`factmem.production.compare`):
   at ``at`` (default: the last observation) per triple and per subject — facts forgotten or kept,
   supersessions that differ, believed-set sizes, the context of ``budgets[0]`` facts each person
   would get (gains and losses); over time — believed-set sizes, archivals, supersessions; and the
   budgeted context metrics with a no-truth ``needed`` (default: the best-agreeing proxy,
   :data:`~factmem.tuning.agreement.DEFAULT_PROXY`) at every session start, per side, with the
   difference new − current and a 95% bootstrap interval over subjects
   (:func:`~factmem.tuning.tune.bootstrap_difference`).
5. **Write** (``out=``, or :meth:`WhatIfResult.write`): ``report.md``, figures, Parquet tables and a
   manifest (the production file's sha256, both parameter sets and their files'
   sha256) — :mod:`factmem.production.report`. Written to a temporary folder and moved into place
   only when complete.

Both sides replay the same observations on the same schedule: the baseline of every difference is
the current parameters' replay, not the file itself (which may hold what the replay cannot rebuild:
derived facts, pruning, rows from other versions — step 3 counts them).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.codes import HOUR, Status
from factmem.core.params import MemoryParams
from factmem.core.timeutil import to_seconds
from factmem.errors import InputError
from factmem.evaluation.charges import ChargeCosts
from factmem.evaluation.context import FIELDS, NEEDED_MODES, ContextEvaluator
from factmem.export.diff import diff_params
from factmem.export.document import ParamsDocument, read_params_document
from factmem.export.sqlite_format import extra_columns_note
from factmem.production.compare import (
    changes,
    checkpoints,
    context_sums,
    contexts_at,
    event_differences,
    latest_mentions,
    lexicographic_rank,
    over_time,
    triple_states,
)
from factmem.production.current import SEED, resolve_current
from factmem.production.provenance import provenance_notes, resolve_period
from factmem.production.rebuild import ProductionLog, file_sha256, read_production, release_memory
from factmem.production.replay import Reproduction, check_reproduction, consolidation_grid, encode, replay_log
from factmem.tuning.agreement import DEFAULT_PROXY, proxy_notes
from factmem.tuning.references import EMPTY, KEEP_EVERYTHING, empty_sums, keep_everything
from factmem.tuning.uncertainty import bootstrap_difference

__all__ = ["CONTEXT_METRICS", "WhatIfSettings", "ParamsSource", "WhatIfResult", "whatif", "params_source"]

#: the budgeted context metrics compared (fields of :class:`~factmem.evaluation.context.ContextScores`)
CONTEXT_METRICS: tuple[str, ...] = ("utility", "recall", "precision", "stale")
_SIDES = ("current", "new")


@dataclass(frozen=True)
class WhatIfSettings:
    """How the what-if runs. ``budgets``: context sizes k (the first one is used for the per-subject
    tables and the context gains and losses); ``at``: the time compared (None: the last observation);
    ``needed``: a no-truth proxy (production has no truth; default
    :data:`~factmem.tuning.agreement.DEFAULT_PROXY`, the best-agreeing on logs with truth; any of
    :data:`~factmem.evaluation.proxies.PROXIES` or ``"next-session"``); ``consolidate_every_hours``: the
    replay's consolidation period (:func:`whatif` defaults it to the file's recorded period, else 24); ``costs``: what each kind of charged context fact costs in
    utility@k (:class:`~factmem.evaluation.charges.ChargeCosts`); ``bootstrap``: resamples of
    subjects for the intervals; ``seed``: of the bootstrap and of point sampling;
    ``max_points_per_subject``: sample at most this many session starts per subject (None: all);
    ``top``: the most affected subjects listed; ``show``: those whose context changes the report
    spells out."""

    budgets: tuple[int, ...] = (20,)
    at: int | None = None
    needed: str = DEFAULT_PROXY
    consolidate_every_hours: float = 24.0
    costs: ChargeCosts = field(default_factory=ChargeCosts)
    bootstrap: int = 1000
    seed: int = 0
    max_points_per_subject: int | None = None
    top: int = 10
    show: int = 3

    def __post_init__(self) -> None:
        budgets = tuple(self.budgets) if not isinstance(self.budgets, int) else (self.budgets,)
        if not budgets or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in budgets):
            raise InputError(f"budgets must be positive integers, got {list(budgets)!r}")
        object.__setattr__(self, "budgets", tuple(int(k) for k in budgets))
        if self.needed not in NEEDED_MODES or self.needed == "truth":
            raise InputError(f"needed must be a no-truth proxy for a production memory (it has no truth): one of "
                             f"{', '.join(m for m in NEEDED_MODES if m != 'truth')}; got {self.needed!r}")
        hours = self.consolidate_every_hours
        if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not math.isfinite(hours) or hours <= 0:
            raise InputError(f"consolidate_every_hours must be a positive number of hours, got {hours!r}")
        if round(hours * HOUR) < 1:
            raise InputError(f"consolidate_every_hours={hours!r} is shorter than a second")
        object.__setattr__(self, "costs", ChargeCosts.of(self.costs))
        for name in ("bootstrap", "seed", "top", "show"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise InputError(f"{name} must be an integer >= 0, got {v!r}")
        m = self.max_points_per_subject
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1):
            raise InputError(f"max_points_per_subject must be a positive integer or None, got {m!r}")
        if self.at is not None:
            object.__setattr__(self, "at", to_seconds(self.at, name="at"))

    @property
    def period(self) -> int:
        return int(round(self.consolidate_every_hours * HOUR))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["budgets"] = list(self.budgets)
        d["costs"] = self.costs.to_dict()
        return d


@dataclass(frozen=True)
class ParamsSource:
    """A parameter set and where it came from (``source``: ``factmem_meta``, ``file``, ``argument`` or
    ``seed defaults``; ``path`` and ``sha256`` of the file when from one)."""

    params: MemoryParams
    source: str
    path: Path | None = None
    sha256: str | None = None

    def describe(self) -> str:
        if self.path is not None:
            return f"{self.path} (sha256 {self.sha256[:12] if self.sha256 else '?'}…)"
        return {"factmem_meta": "the production file's factmem_meta (the parameters it was written with)",
                "seed defaults": "the seed's defaults (--current seed: the file records none)",
                "argument": "given as MemoryParams"}.get(self.source, self.source)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "path": None if self.path is None else str(self.path), "sha256": self.sha256,
                "params": self.params.to_dict()}


def params_source(value: Any, what: str) -> ParamsSource:
    """A parameter set given as MemoryParams, a params document or a params file path."""
    if isinstance(value, MemoryParams):
        return ParamsSource(value, "argument")
    if isinstance(value, ParamsDocument):
        return ParamsSource(value.params, "file" if value.source else "argument",
                            Path(value.source) if value.source else None)
    if isinstance(value, (str, os.PathLike)):
        path = Path(value)
        doc = read_params_document(path)  # ParamsFileError naming the file, key and value
        return ParamsSource(doc.params, "file", path, file_sha256(path))
    raise InputError(f"{what} must be MemoryParams or a params file path, got {type(value).__name__}")


@dataclass
class WhatIfResult:
    """What :func:`whatif` found. Tables (pandas):

    * ``metrics`` — per budget and metric (utility, recall, precision, stale): ``current``, ``new``,
      ``difference`` (new − current, pooled over session starts), ``low``/``high`` (95% bootstrap over
      subjects), ``subjects``, ``points``;
    * ``subjects`` — one row per subject mentioned up to ``at``: mentions, triples, held/believed
      per side, forgotten, kept, superseded (differently), belief, archivals and supersessions per
      side, supersessions that differ, context gains and losses at ``budgets[0]``, session starts and
      utility/recall/stale per side at ``budgets[0]``; sorted most affected first (``changed``: triples
      whose state differs, then |Δ utility|);
    * ``triples`` — every triple whose state at ``at`` differs (``change``: forgotten, kept,
      superseded, belief), with status and effective confidence per side;
    * ``context_changes`` — per subject, the facts its context at ``at`` gains or loses;
    * ``over_time`` — held and believed set sizes, cumulative archivals and supersessions per side
      at each checkpoint;
    * ``param_changes`` — the parameters that differ (:func:`factmem.export.diff.diff_params`);
    * ``reproduction.failures`` — the production facts the current replay does not rebuild.
    """

    production: dict[str, Any]
    current: ParamsSource
    new: ParamsSource
    settings: WhatIfSettings
    at: int
    horizon: int
    consolidations: int
    reproduction: Reproduction
    summary: dict[str, Any]
    metrics: pd.DataFrame
    subjects: pd.DataFrame
    triples: pd.DataFrame
    context_changes: pd.DataFrame
    over_time: pd.DataFrame
    param_changes: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    out: Path | None = None

    @property
    def most_affected(self) -> pd.DataFrame:
        """The ``settings.top`` most affected subjects (those with any change)."""
        s = self.subjects
        return s[s["changed"] + s["context_gained"] + s["context_lost"] > 0].head(self.settings.top)

    def comparison(self, metric: str = "utility", budget: int | None = None) -> dict[str, Any]:
        """One row of ``metrics`` as a dict (default: utility at the first budget)."""
        k = self.settings.budgets[0] if budget is None else budget
        row = self.metrics[(self.metrics["metric"] == metric) & (self.metrics["budget"] == k)]
        if not len(row):
            raise InputError(f"no metric {metric!r} at budget {k}; budgets: {list(self.settings.budgets)}")
        return row.iloc[0].to_dict()

    def to_dict(self) -> dict[str, Any]:
        return {"production": self.production, "current": self.current.to_dict(), "new": self.new.to_dict(),
                "settings": self.settings.to_dict(), "at": self.at, "horizon": self.horizon,
                "consolidations": self.consolidations, "reproduction": self.reproduction.to_dict(),
                "summary": dict(self.summary), "metrics": self.metrics.to_dict(orient="records"),
                "notes": list(self.notes), "seconds": self.seconds}

    def write(self, out: str | os.PathLike, *, figures: bool = True) -> Path:
        """Write the run folder (see :mod:`factmem.production.report`); returns it."""
        from factmem.production.report import write_whatif

        self.out = write_whatif(self, out, figures=figures)
        return self.out


def whatif(production: str | os.PathLike, params: MemoryParams | ParamsDocument | str | os.PathLike, *,
           current: MemoryParams | ParamsDocument | str | os.PathLike | None = None,
           budgets: tuple[int, ...] | int = (20,), at: Any = None, needed: str = DEFAULT_PROXY,
           consolidate_every_hours: float | None = None, costs: ChargeCosts | dict[str, float] | str | None = None,
           bootstrap: int = 1000, seed: int = 0,
           max_points_per_subject: int | None = None, top: int = 10, show: int = 3,
           out: str | os.PathLike | None = None, figures: bool = True) -> WhatIfResult:
    """What the parameters ``params`` would have done to the memory in the production file
    ``production`` (SQLite, the seed's schema), against its current parameters. See the module
    docstring for the steps; :class:`WhatIfSettings` for the options. ``current``: the parameters
    production runs, when the file does not record them — a params file, MemoryParams, or ``"seed"``
    for the seed's defaults said explicitly (:mod:`factmem.production.current`). ``out``: write the run
    folder there (nothing is written when any input is bad)."""
    t0 = time.perf_counter()
    settings = WhatIfSettings(budgets=budgets if not isinstance(budgets, int) else (budgets,), at=at, needed=needed,
                              consolidate_every_hours=24.0 if consolidate_every_hours is None else consolidate_every_hours,
                              costs=ChargeCosts.of(costs),
                              bootstrap=bootstrap, seed=seed, max_points_per_subject=max_points_per_subject,
                              top=top, show=show)
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise InputError(f"{out}: exists and is not a folder")
    new = params_source(params, "params")
    if current is not None and not (isinstance(current, str) and current == SEED):
        params_source(current, "current")  # a bad --current file is refused before the production file is read
    log = read_production(production)
    cur, notes = resolve_current(production, log.saved_params, current, command="whatif", source_type=ParamsSource,
                                 read_source=params_source)

    # the file's own consolidation period unless one was asked for (docs/design.md, "Writing a production client")
    period, period_note = resolve_period(log.meta, consolidate_every_hours)
    settings = replace(settings, consolidate_every_hours=period / HOUR)
    notes += [period_note] if period_note else []

    at_time = log.last if settings.at is None else settings.at
    if at_time < log.first:
        raise InputError(f"at={at_time} is before the file's first observation ({log.first}): nothing to compare")
    horizon = max(log.latest, at_time)
    grid = consolidation_grid(log.first, horizon, settings.period)

    # -- the session starts scored by the context metrics (built first: the replays are large) -------
    evaluator = ContextEvaluator(log.prepared(sessions_only=True), budgets=settings.budgets,
                                 needed=settings.needed,  # type: ignore[arg-type]
                                 costs=settings.costs,
                                 max_points_per_subject=settings.max_points_per_subject, seed=settings.seed)
    release_memory()

    # -- replays -------------------------------------------------------------------------------------
    encoded = encode(log, cur.params.multi_valued_predicates)
    replay_current = replay_log(log, cur.params, grid, encoded)
    reproduction = check_reproduction(log, replay_current)
    if new.params.multi_valued_predicates != cur.params.multi_valued_predicates:
        encoded = encode(log, new.params.multi_valued_predicates)
    replay_new = replay_log(log, new.params, grid, encoded)
    del encoded
    release_memory()
    replays = {"current": replay_current, "new": replay_new}

    # -- at `at`: triples, subjects, contexts --------------------------------------------------------
    fact_triple, triples_index = log.triple_of_fact()
    triple_of_event = fact_triple[log.events["fact"].to_numpy()]
    subject_of_triple = np.asarray(triples_index.codes[0], np.int64)
    subject_names = triples_index.levels[0]
    mentioned, latest = latest_mentions(log, triple_of_event, at_time)
    states = {side: triple_states(log, rep, mentioned, latest, at_time) for side, rep in replays.items()}
    change = changes(states["current"], states["new"])
    po_rank = lexicographic_rank(log)
    k0 = settings.budgets[0]
    in_context = {side: contexts_at(log, rep, states[side], k0, subject_of_triple, po_rank)
                  for side, rep in replays.items()}
    gained = in_context["new"] & ~in_context["current"]
    lost = in_context["current"] & ~in_context["new"]
    events_diff = event_differences(log, replay_current, replay_new, at_time)

    # -- budgeted context metrics at session starts -------------------------------------------------
    eval_subject = pd.Index(evaluator.subjects).get_indexer(pd.Index(np.asarray(subject_names, dtype=object)))
    state_subject = eval_subject[subject_of_triple[triple_of_event]]
    release_memory()
    scores = {side: context_sums(evaluator, rep.beliefs(log, triple_of_event), rep, state_subject)
              for side, rep in replays.items()}
    # the reference policies on the same session starts: keep-everything (the current parameters with no
    # decay, thresholds at 1e-6) replayed; the empty memory exact from the points
    keep_all = replay_log(log, keep_everything(cur.params), grid)
    references = {KEEP_EVERYTHING: context_sums(evaluator, keep_all.beliefs(log, triple_of_event), keep_all,
                                                state_subject).sums,
                  EMPTY: empty_sums(scores["current"].sums)}
    del keep_all
    release_memory()
    metrics = _metric_table(scores, settings, references)

    # -- tables ------------------------------------------------------------------------------------
    subjects = _subject_table(log, subject_names, subject_of_triple, mentioned, latest, states, change, gained, lost,
                              events_diff, triple_of_event, scores, evaluator, k0, at_time)
    triples = _triple_table(log, triples_index, mentioned, states, change)
    context_changes = _context_table(log, triples_index, mentioned, states, gained, lost, subjects)
    timeline = over_time(log, replays, checkpoints(log.first, at_time))
    summary = _summary(subjects, states, change, gained, lost, events_diff, at_time, horizon, grid, evaluator)
    notes += _notes(log, reproduction, evaluator, settings, cur, timeline)
    notes += provenance_notes(log.meta, cur.params, settings.period)
    result = WhatIfResult(
        production=log.to_dict(), current=cur, new=new, settings=settings, at=at_time, horizon=horizon,
        consolidations=len(grid), reproduction=reproduction, summary=summary, metrics=metrics, subjects=subjects,
        triples=triples, context_changes=context_changes, over_time=timeline,
        param_changes=diff_params(cur.params, new.params), notes=notes, seconds=time.perf_counter() - t0)
    if out is not None:
        result.write(out, figures=figures)
    return result


# -- helpers ----------------------------------------------------------------------------------------------


def _metric_table(scores: dict, settings: WhatIfSettings,
                  references: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Per budget and metric: current, new, new − current with its interval, and for each reference
    policy (``empty``, ``keep-everything``; columns with ``_`` for ``-``) its value and new − it."""
    rows = []
    for bi, k in enumerate(settings.budgets):
        cur = scores["current"].sums[0, :, bi, :]
        new = scores["new"].sums[0, :, bi, :]
        has = cur[:, 0] > 0  # subjects with session starts to score (FIELDS[0] is "points")
        for metric in CONTEXT_METRICS:
            c = bootstrap_difference(new[has], cur[has], metric, resamples=settings.bootstrap,
                                     seed=settings.seed + bi)
            row = {"budget": k, "metric": metric, "current": c.b, "new": c.a, "difference": c.difference,
                   "low": c.low, "high": c.high, "subjects": c.subjects, "points": c.points}
            for name, sums in (references or {}).items():
                r = bootstrap_difference(new[has], sums[0, :, bi, :][has], metric, resamples=settings.bootstrap,
                                         seed=settings.seed + bi)
                key = name.replace("-", "_")
                row.update({key: r.b, f"new_minus_{key}": r.difference, f"new_minus_{key}_low": r.low,
                            f"new_minus_{key}_high": r.high})
            rows.append(row)
    return pd.DataFrame(rows)


def _per_subject(values: np.ndarray, subject: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(subject, weights=values.astype(np.float64), minlength=n).astype(np.int64)


def _subject_table(log: ProductionLog, subject_names, subject_of_triple, mentioned, latest, states, change,
                   gained, lost, events_diff, triple_of_event, scores, evaluator, k0, at) -> pd.DataFrame:
    n_s = len(subject_names)
    subj_t = subject_of_triple[mentioned]
    n_at = len(events_diff["supersession_differs"])
    subj_e = subject_of_triple[triple_of_event[:n_at]]
    table = pd.DataFrame({"subject": np.asarray(subject_names, dtype=object)})
    table["mentions"] = np.bincount(subj_e, minlength=n_s)
    table["triples"] = np.bincount(subj_t, minlength=n_s)
    for side in _SIDES:
        table[f"held_{side}"] = _per_subject(states[side].held, subj_t, n_s)
        table[f"believed_{side}"] = _per_subject(states[side].believed, subj_t, n_s)
    for name in ("forgotten", "kept", "superseded", "belief"):
        table[name] = _per_subject(change == name, subj_t, n_s)
    table["changed"] = _per_subject(change != "", subj_t, n_s)
    for side in _SIDES:
        table[f"archivals_{side}"] = _per_subject(events_diff[f"archived_{side}"], subj_e, n_s)
        table[f"supersessions_{side}"] = _per_subject(events_diff[f"superseded_{side}"], subj_e, n_s)
    table["supersessions_differ"] = _per_subject(events_diff["supersession_differs"], subj_e, n_s)
    table["context_gained"] = _per_subject(gained, subj_t, n_s)
    table["context_lost"] = _per_subject(lost, subj_t, n_s)
    # context metrics at the first budget, per session start, from the evaluator's per-subject sums
    rows = pd.Index(evaluator.subjects).get_indexer(pd.Index(table["subject"]))
    points = np.where(rows >= 0, scores["current"].sums[0, np.maximum(rows, 0), 0, FIELDS.index("points")], 0)
    table["points"] = points.astype(np.int64)
    for side in _SIDES:
        sums = scores[side].sums[0, np.maximum(rows, 0), 0, :]
        for metric in ("utility", "recall", "stale"):
            with np.errstate(invalid="ignore", divide="ignore"):
                table[f"{metric}_{side}"] = np.where(points > 0, sums[:, FIELDS.index(metric)] / points, np.nan)
    table["utility_difference"] = table["utility_new"] - table["utility_current"]
    table = table[table["mentions"] > 0]
    magnitude = table["utility_difference"].abs().fillna(0.0)
    order = np.lexsort((table["subject"].to_numpy(str), -magnitude.to_numpy(),
                        -(table["context_gained"] + table["context_lost"]).to_numpy(), -table["changed"].to_numpy()))
    table = table.iloc[order].reset_index(drop=True)
    table.attrs["budget"] = k0
    table.attrs["at"] = at
    return table


def _names(index, mentioned: np.ndarray, level: int) -> np.ndarray:
    return np.asarray(index.levels[level], dtype=object)[np.asarray(index.codes[level])[mentioned]]


def _triple_table(log, triples_index, mentioned, states, change) -> pd.DataFrame:
    sel = np.flatnonzero(change != "")
    ts = log.events["ts"].to_numpy()
    fact = log.events["fact"].to_numpy()
    status_names = np.array([s.label for s in Status], dtype=object)
    cur, new = states["current"], states["new"]
    trip = mentioned[sel]
    return pd.DataFrame({
        "subject": _names(triples_index, trip, 0), "predicate": _names(triples_index, trip, 1),
        "object": _names(triples_index, trip, 2),
        "kind": np.asarray(log.facts["kind"].to_numpy(), dtype=object)[fact[cur.event[sel]]],
        "change": change[sel], "last_mentioned": ts[cur.event[sel]],
        "status_current": status_names[cur.status[sel]], "status_new": status_names[new.status[sel]],
        "effective_current": cur.effective[sel], "effective_new": new.effective[sel],
        "believed_current": cur.believed[sel], "believed_new": new.believed[sel],
    }).sort_values(["subject", "predicate", "object"], kind="stable").reset_index(drop=True)


def _context_table(log, triples_index, mentioned, states, gained, lost, subjects: pd.DataFrame) -> pd.DataFrame:
    sel = np.flatnonzero(gained | lost)
    trip = mentioned[sel]
    status_names = np.array([s.label for s in Status], dtype=object)
    frame = pd.DataFrame({
        "subject": _names(triples_index, trip, 0), "predicate": _names(triples_index, trip, 1),
        "object": _names(triples_index, trip, 2), "change": np.where(gained[sel], "gained", "lost"),
        "status_current": status_names[states["current"].status[sel]],
        "status_new": status_names[states["new"].status[sel]],
        "effective_current": states["current"].effective[sel], "effective_new": states["new"].effective[sel],
    })
    rank = pd.Series(np.arange(len(subjects)), index=subjects["subject"].to_numpy())
    frame["subject_rank"] = frame["subject"].map(rank).to_numpy()
    frame["strength"] = np.maximum(frame["effective_current"], frame["effective_new"])
    frame = frame.sort_values(["subject_rank", "change", "strength", "predicate", "object"],
                              ascending=[True, True, False, True, True], kind="stable")
    return frame.drop(columns=["subject_rank", "strength"]).reset_index(drop=True)


def _summary(subjects, states, change, gained, lost, events_diff, at, horizon, grid, evaluator) -> dict[str, Any]:
    cur, new = states["current"], states["new"]
    return {
        "at": int(at), "horizon": int(horizon), "consolidations": int(len(grid)),
        "subjects": int(len(subjects)), "triples": int(len(change)),
        "held_current": int(cur.held.sum()), "held_new": int(new.held.sum()),
        "believed_current": int(cur.believed.sum()), "believed_new": int(new.believed.sum()),
        "forgotten": int((change == "forgotten").sum()), "kept": int((change == "kept").sum()),
        "superseded_differently": int((change == "superseded").sum()), "belief_changes": int((change == "belief").sum()),
        "subjects_changed": int((subjects["changed"] > 0).sum()),
        "archivals_current": int(events_diff["archived_current"].sum()),
        "archivals_new": int(events_diff["archived_new"].sum()),
        "supersessions_current": int(events_diff["superseded_current"].sum()),
        "supersessions_new": int(events_diff["superseded_new"].sum()),
        "supersessions_differ": int(events_diff["supersession_differs"].sum()),
        "context_gained": int(gained.sum()), "context_lost": int(lost.sum()),
        "subjects_context_changed": int(((subjects["context_gained"] + subjects["context_lost"]) > 0).sum()),
        "session_starts": int(evaluator.scored_points()), "session_starts_all": int(evaluator.sampled_from),
    }


def _notes(log: ProductionLog, reproduction: Reproduction, evaluator: ContextEvaluator, settings: WhatIfSettings,
           cur: ParamsSource, timeline: pd.DataFrame) -> list[str]:
    c = log.counts
    notes = [n for n in (extra_columns_note(log.extra_columns),) if n]
    notes += proxy_notes(settings.needed, evaluator.prepared.events["kind"])
    not_replayed = []
    if c["derived_facts"]:
        not_replayed.append(f"{c['derived_facts']} derived facts")
    if c["links"]:
        not_replayed.append(f"{c['links']} abstraction links")
    if c["abstraction_evidence"]:
        not_replayed.append(f"{c['abstraction_evidence']} abstraction evidence rows")
    if not_replayed:
        notes.append("Not replayed (abstraction needs a model): " + ", ".join(not_replayed) + "; both sides replay "
                     "observations only, so pruning under derived facts happens on neither.")
    if c["observations_without_session"]:
        notes.append(f"{c['observations_without_session']} observations have no session_id: they are replayed but "
                     "start no session (no evaluation point of the context metrics).")
    if c["evidence_source_null"]:
        notes.append(f"{c['evidence_source_null']} evidence rows have no source (written by a production crate): "
                     "taken as observations unless their fact is derived.")
    if settings.max_points_per_subject is not None and evaluator.sampled_from > len(evaluator.points):
        notes.append(f"Session starts sampled: at most {settings.max_points_per_subject} per subject "
                     f"({len(evaluator.points)} of {evaluator.sampled_from}, seed {settings.seed}).")
    if not log.has_fact_state:
        notes.append("The file has no factmem_fact_state: when production archived a fact is unknown, so the "
                     "status_changed_at check is skipped and archivals after the last recorded time are not replayed.")
    elif reproduction.without_state:
        notes.append(f"The file has no factmem_fact_state for {reproduction.without_state} facts: written by a client "
                     "that does not keep it (their status is checked, the time it changed is unknown and not checked; "
                     "archivals after the last recorded time are not replayed).")
    return notes
