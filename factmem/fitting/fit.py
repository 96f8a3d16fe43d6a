"""Estimate how fast facts go stale, per kind and per predicate, by maximum likelihood, with intervals.

>>> from factmem.data.logs import bundled_dataset
>>> result = fit(bundled_dataset(), bootstrap=0)       # point estimates; bootstrap=100 adds intervals
>>> lam = result.estimates.query("scope == 'kind' and quantity == 'seed_lambda' and source == 'truth'")
>>> round(float(lam.set_index("name").loc["explicit", "estimate"]), 4)
0.0059
>>> result.params.decay_rate.explicit == float(lam.set_index("name").loc["explicit", "estimate"])
True

Sweeping a grid is one way to choose decay rates; :func:`fit` estimates them from the data
directly. The estimators and their likelihoods are in :mod:`factmem.fitting.models`, the populations
they run on in :mod:`factmem.fitting.populations`; in short:

**Censoring at each person's last message.** A subject is observed only from its first to its last
message in the log (any session; :func:`~factmem.fitting.populations.observed_spans`). Its facts are
at risk only then: every lifetime, silent spell and checkpoint observation below is truncated at the
subject's first message and censored at its last, not at the log's start and end — a person who
stopped talking months before the log ends is not "holding, silent, no longer true" for those
months, and a subject with one message contributes no exposure. Checkpoints run on each subject's
own clock (every ``checkpoint_hours`` from its first message), so shifting a subject's whole
timeline by any offset leaves every estimate and interval unchanged (``tests/test_fit.py``).

From the truth (``source = "truth"``):

* ``change_rate`` — changes per day of a held value of a lasting kind: exponential lifetimes,
  left-truncated at the subject's first message and right-censored at its last; λ̂ = changes / days observed,
  exact Poisson (Garwood) interval; ``n`` = lifetimes observed.
* ``relevance_horizon_days`` — episodic kinds: the mean time an episode stays relevant (its
  "lifetime", ``min(valid_to, relevant_until) − valid_from``), same estimator (1 / rate), ``n`` =
  episodes.
* ``seed_lambda`` and ``initial_confidence`` — the seed's model ``p = c0·e^{−λ·age}`` fitted by
  maximum likelihood to "still true and relevant" over held, silent facts at daily checkpoints
  (age = days since the last mention; facts held until superseded or the subject's last message;
  the calibration metric's population, on the subject's clock). ``0 < c0 <= confidence_cap``. ``n`` = silent spells observed.
* ``p_true_silent_<d>d`` — empirical P(true | held and silent for d days) over the spells silent
  for d days whose d-th day falls inside the subject's span (censored at its last message). ``n`` = those spells.

From the log alone (``source = "log"``): the two-state model of :mod:`factmem.fitting.models`
(re-mentions per session ``q``, change rate ``h``, unannounced share ``u``) fitted to the silent
spells — ``remention_probability`` (per session), ``remention_rate`` (per day: ``q`` times the
subjects' mean sessions per day), ``change_rate`` (``h``), ``silent_change_share`` (``u``; single-
valued predicates only), ``p_true_silent_<d>d`` (the model's P(true | silent d days) averaged over
the log's spells silent for d days, each with its subject's sessions in those days) — and
``seed_lambda``/``initial_confidence`` fitted to the model's probabilities instead of truth labels.

``source = "auto"`` (default) does both when the dataset has truth, the log part alone otherwise.

**Scopes and fallbacks.** Every quantity is estimated per kind (all the kind's observations pooled)
and per predicate. What an observation is depends on the quantity: a lifetime (``change_rate``
from truth), an episode (``relevance_horizon_days``), a silent spell (the seed model, the
two-state model), a spell silent for d days (``p_true_silent_<d>d``); ``n`` counts them. A
predicate with fewer than ``min_observations`` (default 50) gets no row of its own: it falls back
to its kind (its most frequent kind in the log), which :meth:`FitResult.predicate_values` applies
and ``fallbacks`` lists. A kind with fewer gets no row either; in ``params`` it keeps the base (by
default the seed's) values, as does a kind the log never mentions (``derived``), and — without
truth — a kind outside :data:`LOG_PARAM_KINDS`. A seed-model fit whose facts are never true after a
mention (one-off chatter) has no identified λ and falls back the same way. The kind rows of the
two-state model are one pooled fit; the kind's ``p_true_silent`` from the log mixes its
predicates' fits (a predicate without enough spells uses the kind's pooled fit), because silence
means different things for predicates that change at different rates.

**Not identified: bounds are failures, said out loud.** A fitted parameter at an optimisation
bound — the seed model's λ at 100/day or c0 at 1e-6, the two-state ``q`` at either bound or ``h`` at
50/day — or a two-state fit whose P(true | silent for the smallest ``silent_days``, at the log's
sessions per day) underflows (< 1e-12), marks that kind's or predicate's estimate *not identified*,
for every kind: it gets no row, a predicate falls back to its kind (its spells use the kind's pooled
two-state fit) and a kind to ``base``, each stated in ``fallbacks`` and listed in
:attr:`FitResult.notes` and the report. A log-based seed λ built on a two-state fit that is not
identified is not identified either. Estimates at an edge of the parameter space (λ = 0, c0 at the
cap, ``h`` at its lower bound, ``u`` at 0 or 1) maximise the likelihood there and stay fitted; the
notes list them too.

**Intervals** are 95%: exact Poisson intervals for rates and horizons from truth; for everything
else percentile intervals of a seeded bootstrap over subjects (``bootstrap`` resamples, default
100; 0 skips them, NaN bounds): subjects are drawn with replacement and every fit is redone on the
resample, so the dependence between a subject's facts and checkpoints is respected. The log-based
``seed_lambda`` interval resamples the population with the two-state probabilities held at their
point fit.

**params** (:attr:`FitResult.params`): ``base`` (default: the base ``tune`` uses — the seed's
numbers with the log's multi-valued predicates, declared by its scenario or else measured,
:func:`~factmem.evaluation.cardinality.log_registry`) with each kind's
``decay_rate`` := its fitted ``seed_lambda`` and ``initial_confidence`` := its fitted ``c0`` (from
truth when the truth part ran, else from the log). ``change_rate`` is reported, not exported: the
memory's decay is a confidence model, not a hazard. Nothing else of ``base`` changes.

**Per-predicate decay rates** (``decay_rate_by_predicate`` in ``params``): the memory starts every
fact of a kind at the kind's ``initial_confidence``, so the rate exported for a predicate is
``seed_lambda_kind_c0`` — the seed model's λ refitted on the predicate's observations with c0 held
at its kind's exported value (the predicate's own ``seed_lambda`` row pairs λ with its own c0,
which the memory cannot use). A predicate gets its own rate only when that estimate is
*informative*: it has at least ``min_observations`` silent spells, its kind's rate and c0 were
fitted (from the log alone: kinds in :data:`LOG_PARAM_KINDS`), and its 95% bootstrap interval
excludes its kind's exported rate — the data tell the predicate apart from its kind (``works_on``
from ``born_in``). Every other predicate keeps its kind's rate (or ``base``'s own entry, none in
the seed). Without bootstrap intervals (``bootstrap=0``) no per-predicate rate is exported.
:attr:`FitResult.predicate_rates` lists every candidate, its interval and the decision. The rate
applies to every fact with the predicate, whatever its kind (a predicate is classed under its most
frequent kind).

Bad input raises :class:`~factmem.errors.InputError`: an empty log, ``source="truth"`` without
truth, nothing estimable with ``min_observations``, invalid settings.

Speed: every estimator is vectorized over observations (numpy, one optimisation per group and
bootstrap resample); on ``datasets/small`` (21k mentions) the whole fit with 100 resamples takes
5–10 s on one core, 1.5 s without intervals (``bootstrap=0``); ``benchmarks/bench_fit.py`` measures it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from factmem.core.params import KINDS, MemoryParams
from factmem.data.logs import Dataset, load
from factmem.errors import InputError
from factmem.evaluation.cardinality import log_registry
from factmem.fitting.curves import curve_table, survival_curves
from factmem.fitting.estimates import (
    FitContext,
    empirical_silent_rows,
    lifetime_rows,
    predicate_rate_rows,
    seed_rows,
    two_state_rows,
)
from factmem.fitting.models import LEVEL
from factmem.fitting.populations import lifetimes, observed_spans

__all__ = ["ESTIMATE_COLUMNS", "LOG_PARAM_KINDS", "PREDICATE_RATE_COLUMNS", "QUANTITIES", "SOURCES", "FitResult", "fit"]

ESTIMATE_COLUMNS = ("scope", "name", "quantity", "estimate", "low", "high", "n", "source")
SOURCES = ("auto", "truth", "log")
#: Kinds whose log-only seed-model fit goes into ``params`` when there is no truth. Checked against
#: truth on generated logs, the two-state model reproduces P(true | silent d days) of lasting facts
#: (explicit, user_preference) within a few hundredths; for episodic facts it does not — one-off
#: chatter, never said again, looks like a true fact that is rarely mentioned, and an episode that
#: recurs months later looks like a long silence of a true one — so episodic kinds keep ``base``.
LOG_PARAM_KINDS: tuple[str, ...] = ("explicit", "user_preference")
QUANTITIES: dict[str, str] = {
    "change_rate": "changes per day of a held value (truth: censored exponential MLE; log: the two-state h)",
    "relevance_horizon_days": "mean days an episode stays relevant (censored exponential MLE)",
    "seed_lambda": "λ per day of the seed's model p = c0·exp(−λ·days since the last mention)",
    "initial_confidence": "c0 of the seed's model (≤ confidence_cap)",
    "seed_lambda_kind_c0": "λ per day of the seed's model for a predicate with c0 held at its kind's exported "
                           "initial_confidence (the candidate decay_rate_by_predicate)",
    "remention_probability": "P(a true fact comes up in a given session of its subject)",
    "remention_rate": "re-mentions per day of a true fact (q × mean sessions per subject-day)",
    "silent_change_share": "share of changes never announced (single-valued predicates)",
    "p_true_silent": "P(true and relevant | held and silent for d days)",
}
#: Columns of :attr:`FitResult.predicate_rates`.
PREDICATE_RATE_COLUMNS = ("predicate", "kind", "estimate", "low", "high", "n", "kind_rate", "exported", "reason")


@dataclass
class FitResult:
    """What :func:`fit` estimated. See the module docstring for every quantity and rule.

    ``estimates``: one row per estimate, columns :data:`ESTIMATE_COLUMNS`, rates per day.
    ``params``: a :class:`MemoryParams` with the fitted per-kind ``decay_rate`` and
    ``initial_confidence``. ``fallbacks``: the estimates not made (scope, name, quantity, source,
    n, falls back to). ``silent_curves``: per kind and per predicate, P(true | silent d days) by
    day — ``empirical`` (truth), ``model`` (two-state), ``seed_model`` (c0·e^{−λd}), ``n``.
    ``survival``: Kaplan–Meier curves of lifetimes (scope, name, days, survival, at_risk).
    ``populations``: counts and settings of each population. ``seconds``: wall time of the fit.
    ``predicate_rates``: the candidates for ``decay_rate_by_predicate`` (columns
    :data:`PREDICATE_RATE_COLUMNS`): each predicate's ``seed_lambda_kind_c0`` with its interval, its
    kind's exported rate, whether it was exported and why (the rule is in the module docstring).
    ``notes``: every estimate *not identified* (a parameter at an optimisation bound, a predicted
    survival that underflows) with what stands in for it, and every estimate at an edge of its
    parameter space (λ = 0, c0 at the cap, h = 0, u = 0 or 1), said out loud.
    """

    estimates: pd.DataFrame
    params: MemoryParams
    base: MemoryParams
    fallbacks: pd.DataFrame
    silent_curves: pd.DataFrame
    survival: pd.DataFrame
    populations: dict[str, Any]
    settings: dict[str, Any]
    dataset: dict[str, Any]
    predicate_kinds: dict[str, str]
    predicate_rates: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PREDICATE_RATE_COLUMNS)))
    seconds: float = 0.0
    sources: tuple[str, ...] = field(default_factory=tuple)
    notes: list[str] = field(default_factory=list)
    _dataset: Dataset | None = field(default=None, repr=False)

    @property
    def dataset_sha256(self) -> str | None:
        """The fitted dataset's content hash (computed on first use for a dataset built in memory)."""
        if "sha256" not in self.dataset and self._dataset is not None:
            self.dataset["sha256"] = self._dataset.sha256
        return self.dataset.get("sha256")

    def value(self, quantity: str, name: str, *, source: str | None = None) -> float:
        """The estimate of ``quantity`` for a kind or predicate ``name`` (NaN when not estimated)."""
        e = self.estimates
        sel = (e["quantity"] == quantity) & (e["name"] == name)
        if source is not None:
            sel &= e["source"] == source
        rows = e[sel]
        return float(rows["estimate"].iloc[0]) if len(rows) else float("nan")

    def predicate_values(self, quantity: str, *, source: str | None = None) -> pd.Series:
        """Per predicate seen in the log: its own estimate, or its kind's when it has too few
        observations (the fallback rule); NaN when neither exists."""
        source = source or self.sources[0]
        out = {}
        for pred, kind in sorted(self.predicate_kinds.items()):
            v = self.value(quantity, pred, source=source)
            out[pred] = v if np.isfinite(v) else self.value(quantity, kind, source=source)
        return pd.Series(out, name=quantity, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimates": self.estimates.to_dict(orient="records"),
            "params": self.params.to_dict(),
            "fallbacks": self.fallbacks.to_dict(orient="records"),
            "predicate_rates": self.predicate_rates.to_dict(orient="records"),
            "populations": self.populations,
            "settings": self.settings,
            "dataset": self.dataset,
            "seconds": self.seconds,
            "notes": list(self.notes),
        }

    def report(self) -> str:
        """The Markdown report (what ``report.md`` holds)."""
        from factmem.fitting.report import render_report

        return render_report(self)

    def write(self, out_dir: str | os.PathLike[str], *, created_at: str | None = None, figures: bool = True) -> Path:
        """Write ``estimates.csv``, ``fallbacks.csv``, ``silent_curves.csv``, ``params.toml``,
        ``report.md`` and (with ``figures``) the PNG figures into ``out_dir`` (see
        :mod:`factmem.fitting.report`). ``created_at`` (ISO UTC) fixes the params file's stamp, for
        byte-identical reruns."""
        from factmem.fitting.report import write_result

        return write_result(self, Path(out_dir), created_at=created_at, figures=figures)


# -- the fit -------------------------------------------------------------------------------------------


def fit(log: Dataset | str | os.PathLike[str], *, source: str = "auto", min_observations: int = 50,
        silent_days: Sequence[int] = (7, 30, 90), bootstrap: int = 100, seed: int = 0,
        base: MemoryParams | None = None, multi_valued_predicates: Iterable[str] | None = None,
        checkpoint_hours: float = 24.0, max_observations: int = 5_000_000) -> FitResult:
    """Fit change rates, the seed model's decay and the two-state silence model to a dataset.

    ``log``: a dataset folder or a :class:`~factmem.data.logs.Dataset`. ``source``: ``"truth"``,
    ``"log"`` or ``"auto"``. ``min_observations``: per scope and quantity (lifetimes, episodes or
    silent spells), below which a predicate falls back to its kind and a kind to ``base``.
    ``silent_days``: the d of the ``p_true_silent_<d>d`` rows. ``bootstrap``: resamples of
    subjects for the intervals (0: no intervals, NaN). ``multi_valued_predicates``: whose values
    never supersede each other (default: the log's registry, declared or measured). ``checkpoint_hours``:
    spacing of the checkpoints of the seed-model fit. Everything is seeded by ``seed``.
    """
    began = time.perf_counter()
    settings = _check_settings(source, min_observations, silent_days, bootstrap, seed, checkpoint_hours,
                               max_observations)
    ds = log if isinstance(log, Dataset) else load(log)
    where = str(ds.path) if ds.path is not None else "dataset"
    if not len(ds.events):
        raise InputError(f"{where}: the log has no fact mentions; there is nothing to fit")
    has_truth = bool(len(ds.truth)) and bool(ds.truth["noise"].isna().any())
    if source == "truth" and not has_truth:
        raise InputError(f"{where}: source='truth' needs ground truth (a truth.csv with at least one fact that "
                         "is not noise) and this dataset has none; use source='log' to fit from the log alone")
    sources = ("truth", "log") if source == "auto" and has_truth else ("log",) if source in ("auto", "log") else ("truth",)
    registry = log_registry(ds)  # declared, else measured: the registry tune's base has
    base = base or MemoryParams(multi_valued_predicates=registry)
    multi = frozenset(registry if multi_valued_predicates is None else multi_valued_predicates)
    settings.update({"sources": list(sources), "multi_valued_predicates": sorted(multi),
                     "confidence_cap": base.confidence_cap})

    ctx = FitContext(ds, multi, settings, base)
    rows: list[dict] = []
    outcomes: dict[str, np.ndarray] = {}  # what the seed model is fitted to, per source
    survival = pd.DataFrame(columns=["scope", "name", "days", "survival", "at_risk"])
    if "truth" in sources:
        life = lifetimes(ds.truth, ds.start, ds.end, observed_spans(ds))
        rows += lifetime_rows(ctx, life)
        survival = survival_curves(life)
        outcomes["truth"] = ctx.labels()
        rows += seed_rows(ctx, outcomes["truth"], "truth")
        rows += empirical_silent_rows(ctx)
    if "log" in sources:
        rows += two_state_rows(ctx)
        outcomes["log"] = ctx.model_probabilities()
        rows += seed_rows(ctx, outcomes["log"], "log")
    curves = curve_table(ctx, rows, sources)
    ctx.populations["lifetimes"] = len(life.frame) if "truth" in sources else 0

    if not rows:
        raise InputError(f"{where}: too few observations to estimate anything ({ctx.describe_counts()}): every kind "
                         f"and predicate has fewer than min_observations={min_observations}")
    params, fitted_kinds = _params(_order(pd.DataFrame(rows, columns=list(ESTIMATE_COLUMNS))), base, sources[0], ctx)
    kind_c0 = {k: params.initial_confidence[k] for k in fitted_kinds}
    rows += predicate_rate_rows(ctx, outcomes[sources[0]], sources[0], kind_c0)
    estimates = _order(pd.DataFrame(rows, columns=list(ESTIMATE_COLUMNS)))
    params, predicate_rates = _predicate_rates(estimates, params, base, sources[0], ctx, fitted_kinds)
    fallbacks = pd.DataFrame(ctx.fallbacks, columns=["scope", "name", "quantity", "source", "n", "falls_back_to"])
    notes = list(ctx.notes)
    info = {k: v for k, v in ds.to_dict().items() if k != "sha256"} if ds.path is None else ds.to_dict()
    return FitResult(
        estimates=estimates, params=params, base=base, fallbacks=_order(fallbacks), silent_curves=curves,
        survival=survival, populations=ctx.populations, settings=settings, dataset=info,
        predicate_kinds=dict(ctx.predicate_kind), predicate_rates=predicate_rates,
        seconds=time.perf_counter() - began, sources=sources, notes=notes, _dataset=ds,
    )


def _predicate_rates(estimates: pd.DataFrame, params: MemoryParams, base: MemoryParams, source: str,
                     ctx: FitContext, fitted_kinds: list[str]) -> tuple[MemoryParams, pd.DataFrame]:
    """``params`` with ``decay_rate_by_predicate`` := base's table plus each informative
    ``seed_lambda_kind_c0`` (the rule of the module docstring), and the table of candidates."""
    rows = []
    table = base.decay_rate_by_predicate.to_dict()
    for predicate, kind in sorted(ctx.predicate_kind.items()):  # a loop over predicates
        kind_rate = params.decay_rate[kind]
        sel = estimates[(estimates["quantity"] == "seed_lambda_kind_c0") & (estimates["name"] == predicate)
                        & (estimates["source"] == source)]
        est = sel.iloc[0] if len(sel) else None
        low, high = (float(est["low"]), float(est["high"])) if est is not None else (np.nan, np.nan)
        exported = False
        if kind not in fitted_kinds:
            reason = (f"kind {kind} not fitted from the {source}" if source == "truth" or kind in LOG_PARAM_KINDS
                      else f"kind {kind}: the log-only model is not validated for it")
        elif est is None:
            why = [f for f in ctx.fallbacks if f["name"] == predicate and f["quantity"] == "seed_lambda"
                   and f["source"] == source]
            reason = ("never true and relevant after a mention: not identified"
                      if why and "not identified" in why[0]["falls_back_to"]
                      else f"{why[0]['n'] if why else 0} silent spells, fewer than {ctx.min_n}")
        elif not (np.isfinite(low) and np.isfinite(high)):
            reason = "no interval (bootstrap = 0)"
        elif low <= kind_rate <= high:
            reason = f"interval contains the kind's rate {kind_rate:.4g}"
        else:
            exported = True
            reason = f"interval excludes the kind's rate {kind_rate:.4g}"
            table[predicate] = float(est["estimate"])
        rows.append({"predicate": predicate, "kind": kind,
                     "estimate": float(est["estimate"]) if est is not None else np.nan, "low": low, "high": high,
                     "n": int(est["n"]) if est is not None else 0, "kind_rate": kind_rate, "exported": exported,
                     "reason": reason})
    frame = pd.DataFrame(rows, columns=list(PREDICATE_RATE_COLUMNS))
    return params.replace(decay_rate_by_predicate=table), frame


def _params(estimates: pd.DataFrame, base: MemoryParams, source: str, ctx: FitContext
            ) -> tuple[MemoryParams, list[str]]:
    """``base`` with each kind's fitted seed λ and c0 from ``source``, and the kinds so fitted; kinds
    without keep ``base``'s values (recorded as fallbacks). From the log alone only
    :data:`LOG_PARAM_KINDS` are exported."""
    changes: dict[str, dict[str, float]] = {"decay_rate": {}, "initial_confidence": {}}
    for k in KINDS:
        lam = _get(estimates, "seed_lambda", k, source)
        c0 = _get(estimates, "initial_confidence", k, source)
        keep = f"base decay_rate.{k} = {base.decay_rate[k]:g}, initial_confidence.{k} = {base.initial_confidence[k]:g}"
        why = None
        if not (np.isfinite(lam) and np.isfinite(c0)):
            if not any(f["name"] == k and f["quantity"] == "seed_lambda" and f["source"] == source for f in ctx.fallbacks):
                why = f"{keep} (no fact of this kind in the log)"
        elif source == "log" and k not in LOG_PARAM_KINDS:
            why = f"{keep} (the log-only model is not validated for {k} facts; see the report)"
        else:
            changes["decay_rate"][k] = lam
            changes["initial_confidence"][k] = min(c0, base.confidence_cap)
        if why is not None:
            ctx.fallbacks.append({"scope": "kind", "name": k, "quantity": "seed_lambda", "source": source, "n": 0,
                                  "falls_back_to": why})
    return base.replace(**changes), list(changes["decay_rate"])


def _check_settings(source, min_observations, silent_days, bootstrap, seed, checkpoint_hours, max_observations) -> dict:
    if source not in SOURCES:
        raise InputError(f"source = {source!r} is invalid: must be one of {', '.join(SOURCES)}")
    for name, value, low in (("min_observations", min_observations, 1), ("bootstrap", bootstrap, 0),
                             ("seed", seed, 0), ("max_observations", max_observations, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise InputError(f"{name} = {value!r} is invalid: must be an integer >= {low}")
    days = list(silent_days)
    if not days or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d <= 0 for d in days):
        raise InputError(f"silent_days = {silent_days!r} is invalid: must be positive whole days")
    if isinstance(checkpoint_hours, bool) or not isinstance(checkpoint_hours, (int, float)) or not checkpoint_hours > 0:
        raise InputError(f"checkpoint_hours = {checkpoint_hours!r} is invalid: must be a positive number")
    return {"source": source, "min_observations": int(min_observations), "silent_days": sorted(int(d) for d in set(days)),
            "bootstrap": int(bootstrap), "seed": int(seed), "checkpoint_hours": float(checkpoint_hours),
            "max_observations": int(max_observations), "level": LEVEL}


def _get(estimates: pd.DataFrame, quantity: str, name: str, source: str) -> float:
    sel = estimates[(estimates["quantity"] == quantity) & (estimates["name"] == name) & (estimates["source"] == source)]
    return float(sel["estimate"].iloc[0]) if len(sel) else float("nan")


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    """Kinds first (in factmem's order), then predicates by name; quantities in QUANTITIES order."""
    if not len(frame):
        return frame.reset_index(drop=True)
    scope_rank = frame["scope"].map({"kind": 0, "predicate": 1})
    kind_rank = frame["name"].map({k: i for i, k in enumerate(KINDS)}).fillna(len(KINDS))
    q = frame["quantity"].str.replace(r"_\d+d$", "", regex=True).str.split(",").str[0]
    q_rank = q.map({k: i for i, k in enumerate(QUANTITIES)}).fillna(len(QUANTITIES))
    days = frame["quantity"].str.extract(r"_(\d+)d$")[0].astype(float).fillna(0)
    key = pd.DataFrame({"s": scope_rank, "k": kind_rank, "n": frame["name"], "q": q_rank, "d": days,
                        "src": frame["source"]})
    order = key.sort_values(["s", "k", "n", "q", "d", "src"], kind="stable").index
    return frame.loc[order].reset_index(drop=True)


