"""The estimate rows of :func:`factmem.fitting.fit.fit`, one family per function, on a shared context.

:class:`FitContext` holds what every family shares: the silent spells and their checkpoint
observations (:mod:`factmem.fitting.populations`), the subjects and the bootstrap weights, each predicate's
kind, the groups (kinds, then predicates) and the fallback bookkeeping. Each ``*_rows`` function
returns rows of the estimates table (``scope, name, quantity, estimate, low, high, n, source``);
the rules they implement are stated in :mod:`factmem.fitting.fit`, the estimators in
:mod:`factmem.fitting.models`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from factmem.core.params import KINDS, MemoryParams
from factmem.data.logs import Dataset
from factmem.fitting.models import (
    SEED_BOUNDS,
    TWO_STATE_BOUNDS,
    SpellData,
    TwoStateParams,
    bin_ages,
    bootstrap_weights,
    exponential_rate,
    fit_seed_model,
    fit_two_state,
    p_true_silent,
    percentile_interval,
    two_state_curves,
)
from factmem.fitting.populations import (
    DAY,
    Lifetimes,
    Spells,
    TruthLookup,
    checkpoint_observations,
    encode_triples,
    silent_spells,
)

__all__ = [
    "FitContext",
    "empirical_silent_rows",
    "group_sums",
    "lifetime_rows",
    "model_silent_sums",
    "predicate_rate_rows",
    "seed_rows",
    "silent_population",
    "two_state_rows",
]

_CHUNK = 16  # bootstrap rows evaluated at once over every spell (bounds the memory of the model curves)
TWO_STATE_QUANTITIES = "change_rate, remention_probability, remention_rate, silent_change_share"


def _row(scope: str, name: str, quantity: str, estimate: float, low: float, high: float, n: int, source: str) -> dict:
    return {"scope": scope, "name": name, "quantity": quantity, "estimate": float(estimate), "low": float(low),
            "high": float(high), "n": int(n), "source": source}


class FitContext:
    """Everything the estimate families share (see the module docstring)."""

    def __init__(self, ds: Dataset, multi: frozenset[str], settings: dict, base: MemoryParams):
        self.ds, self.settings, self.base = ds, settings, base
        self.min_n = settings["min_observations"]
        self.cap = base.confidence_cap
        self.fallbacks: list[dict] = []
        self.notes: list[str] = []  # not identified, and at an edge: FitResult.notes
        self.unidentified: dict[tuple[str, str, str], str] = {}  # (scope, name, source) -> why
        self.spells: Spells = silent_spells(ds, multi)
        sp = self.spells.frame
        self.kind = sp["kind"].to_numpy(object)
        self.predicate = sp["predicate"].to_numpy(object)
        self.start = sp["start"].to_numpy(np.int64)
        self.days = sp["days"].to_numpy(np.float64)
        self.multi = sp["multi"].to_numpy(bool)
        self.subject_code = sp["subject_code"].to_numpy(np.int64)  # index into the spells' session table
        kind_code, self.kind_names = pd.factorize(self.kind)
        predicate_code, self.predicate_names = pd.factorize(self.predicate)
        self.kind_code, self.predicate_code = kind_code.astype(np.int64), predicate_code.astype(np.int64)
        self._fit_keys: tuple[list[tuple[str, str]], np.ndarray] | None = None
        subjects = pd.Index(sorted(set(ds.events["subject"]) | set(ds.truth["subject"])))
        self.subject_index = subjects
        self.spell_subject = subjects.get_indexer(sp["subject"]).astype(np.int64)  # index into the weights
        self.weights = bootstrap_weights(len(subjects), settings["bootstrap"], np.random.default_rng(settings["seed"]))
        # each predicate's kind: its most frequent kind in the log (ties: factmem's kind order)
        counts = ds.events.groupby(["predicate", "kind"]).size().reset_index(name="n")
        counts["rank"] = counts["kind"].map({k: i for i, k in enumerate(KINDS)})
        counts = counts.sort_values(["predicate", "n", "rank"], ascending=[True, False, True], kind="stable")
        first = counts.drop_duplicates("predicate")
        self.predicate_kind: dict[str, str] = dict(zip(first["predicate"], first["kind"]))
        every = int(round(settings["checkpoint_hours"] * 3600))
        # every subject on its own clock, from its first message to its last (populations docstring)
        self.spell_last = self.spells.last[self.subject_code] if len(self.subject_code) else np.zeros(0, np.int64)
        origin = self.spells.first[self.subject_code] if len(self.subject_code) else np.zeros(0, np.int64)
        self.obs_row, self.obs_t, stride = checkpoint_observations(sp, origin, every,
                                                                   max_observations=settings["max_observations"])
        self.obs_age = (self.obs_t - self.start[self.obs_row]) / DAY
        span_seconds = (self.spells.last - self.spells.first).astype(np.float64)
        observed = span_seconds > 0
        per_subject_sessions = np.diff(self.spells.session_offsets)
        subject_days = float(span_seconds[observed].sum()) / DAY
        self.observed_days = subject_days
        self.max_span_days = float(span_seconds.max(initial=0.0)) / DAY
        self.sessions_per_day = (float(per_subject_sessions[observed].sum()) / subject_days if subject_days > 0
                                 else float("nan"))
        n_checkpoints = int((span_seconds // every).sum()) if every > 0 else 0
        self.two_state: dict[tuple[str, str], TwoStateParams] = {}
        self.two_state_boot: dict[tuple[str, str], list[TwoStateParams]] = {}
        self._triples: tuple[np.ndarray, np.ndarray] | None = None
        self.populations: dict[str, Any] = {
            "subjects": len(subjects),
            "spells": len(sp),
            "spell_outcomes": {name: int((sp["outcome"] == code).sum())
                               for code, name in enumerate(("re-mention", "superseded", "censored"))},
            "checkpoint_observations": len(self.obs_row),
            "checkpoint_stride": int(stride),
            "checkpoints": n_checkpoints,
            "observed_subject_days": subject_days,
            "subjects_observed": int(observed.sum()),
            "sessions": len(self.spells.session_ts),
            "sessions_per_subject_day": float(self.sessions_per_day),
            "bootstrap_resamples": len(self.weights),
        }

    # -- groups and the fallback rule -------------------------------------------------------------

    def groups(self, kind: np.ndarray, predicate: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
        """(scope, name, mask) of every kind present (factmem's order), then every predicate (sorted)."""
        out = []
        for values, scope, order in ((kind, "kind", KINDS), (predicate, "predicate", None)):
            codes, names = pd.factorize(values)  # compare small integers, not strings
            rank = {n: i for i, n in enumerate(names)}
            for name in (order if order is not None else sorted(names)):
                if name in rank:
                    out.append((scope, str(name), codes == rank[name]))
        return out

    def enough(self, scope: str, name: str, quantity: str, source: str, n: int) -> bool:
        """Whether ``n`` observations make an estimate; record the fallback when not."""
        if n >= self.min_n:
            return True
        if scope == "predicate":
            to = f"kind {self.predicate_kind.get(name, '?')}"
        elif quantity in ("seed_lambda", "initial_confidence") and name in KINDS:
            field_name = "decay_rate" if quantity == "seed_lambda" else "initial_confidence"
            to = f"base {field_name}.{name} = {getattr(self.base, field_name)[name]:g}"
        else:
            to = "none (not estimated)"
        self.fallbacks.append({"scope": scope, "name": name, "quantity": quantity, "source": source, "n": int(n),
                               "falls_back_to": to})
        return False

    def describe_counts(self) -> str:
        per_kind = pd.Series(self.kind).value_counts()
        return ", ".join(f"{k} {int(per_kind[k])} silent spells" for k in KINDS if k in per_kind.index) or "no spells"

    # -- truth --------------------------------------------------------------------------------------

    def triples(self) -> tuple[np.ndarray, np.ndarray]:
        """Triple codes shared by the spells and the truth rows."""
        if self._triples is None:
            spell_triple, truth_triple = encode_triples(self.spells.frame, self.ds.truth)
            self._triples = (spell_triple, truth_triple)
        return self._triples

    def lookup(self) -> TruthLookup:
        return TruthLookup(self.ds.truth, self.triples()[1])

    def labels(self) -> np.ndarray:
        """Truth label (true and relevant) of every checkpoint observation."""
        return self.lookup()(self.triples()[0][self.obs_row], self.obs_t)

    # -- the two-state fits, gathered per spell -------------------------------------------------------

    def columns(self, names: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """Per spell, the position in ``names`` of its kind's group and of its predicate's group (-1
        when absent)."""
        position = {key: i for i, key in enumerate(names)}
        kind_pos = np.array([position.get(("kind", k), -1) for k in self.kind_names], np.int64)
        pred_pos = np.array([position.get(("predicate", p), -1) for p in self.predicate_names], np.int64)
        return kind_pos[self.kind_code], pred_pos[self.predicate_code]

    def fit_keys(self) -> tuple[list[tuple[str, str]], np.ndarray]:
        """The fitted groups, and per spell the index of the fit it uses: its predicate's own, else
        its kind's pooled fit, else -1."""
        keys = list(self.two_state)
        if self._fit_keys is None or self._fit_keys[0] != keys:
            kind_col, pred_col = self.columns(keys)
            self._fit_keys = (keys, np.where(pred_col >= 0, pred_col, kind_col))
        return self._fit_keys

    def param_table(self, keys: list[tuple[str, str]], resamples: slice | None) -> np.ndarray:
        """(rows, fits, 3) array of (q, h, u): the point fits (one row) or a slice of the resamples."""
        if not keys:
            return np.zeros((1 if resamples is None else len(range(len(self.weights))[resamples]), 0, 3))
        if resamples is None:
            return np.array([[[p.q, p.h, p.u] for p in (self.two_state[k] for k in keys)]])
        cols = [[(p.q, p.h, p.u) for p in self.two_state_boot[k][resamples]] for k in keys]
        return np.transpose(np.asarray(cols, np.float64).reshape(len(keys), -1, 3), (1, 0, 2))

    def model_curves(self, idx: np.ndarray, age_days: np.ndarray | float, sessions: np.ndarray, params: np.ndarray,
                     spell_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(S_T, S) of spells ``idx`` at ``age_days`` with ``sessions`` silent sessions, under each
        row of ``params`` (rows, fits, 3); NaN where a spell has no fit."""
        key = spell_key[idx]
        has = key >= 0
        safe = np.where(has, key, 0)
        q, h, u = params[:, safe, 0], params[:, safe, 1], params[:, safe, 2]
        u = np.where(self.multi[idx][None, :], 1.0, u)
        log_true, log_all = two_state_curves(np.broadcast_to(age_days, q.shape), np.broadcast_to(sessions, q.shape),
                                             q, h, u)
        s_true, s_all = np.exp(log_true), np.exp(log_all)
        bad = ~has[None, :] | ~np.isfinite(s_true) | ~np.isfinite(s_all)
        return np.where(bad, np.nan, s_true), np.where(bad, np.nan, s_all)

    def model_probabilities(self) -> np.ndarray:
        """Two-state P(true | silent) of every checkpoint observation (its predicate's fit, else its
        kind's; NaN without either)."""
        keys, spell_key = self.fit_keys()
        out = np.full(len(self.obs_row), np.nan)
        if not keys:
            return out
        sessions = self.spells.sessions_between(self.subject_code[self.obs_row], self.start[self.obs_row], self.obs_t)
        s_true, s_all = self.model_curves(self.obs_row, self.obs_age, sessions, self.param_table(keys, None), spell_key)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = s_true[0] / s_all[0]
        return np.where(np.isfinite(out), np.clip(out, 0.0, 1.0), np.nan)


# -- truth: lifetimes ----------------------------------------------------------------------------------


def lifetime_rows(ctx: FitContext, life: Lifetimes) -> list[dict]:
    """``change_rate`` (lasting kinds) and ``relevance_horizon_days`` (episodic) from truth."""
    f = life.frame
    rows = []
    for scope, name, sel in ctx.groups(f["kind"].to_numpy(object), f["predicate"].to_numpy(object)):
        for episodic in (False, True):
            part = f[sel & (f["episodic"].to_numpy() == episodic)]
            if not len(part):
                continue
            quantity = "relevance_horizon_days" if episodic else "change_rate"
            if not ctx.enough(scope, name, quantity, "truth", len(part)):
                continue
            est = exponential_rate(part["event"].to_numpy(), part["exposure"].to_numpy())
            if episodic:  # the mean horizon is 1 / rate; its interval inverts the rate's
                inv = lambda x: 1.0 / x if x > 0 else float("inf")
                rows.append(_row(scope, name, quantity, inv(est.rate), inv(est.high), inv(est.low), len(part), "truth"))
            else:
                rows.append(_row(scope, name, quantity, est.rate, est.low, est.high, len(part), "truth"))
    return rows


# -- identification ------------------------------------------------------------------------------------

#: a fitted value within this relative distance of an optimisation bound is at the bound
_AT_BOUND = 1e-6
#: below this, a predicted probability of still being true has underflowed (no finite evidence says it)
UNDERFLOW = 1e-12


def _near(value: float, bound: float) -> bool:
    return abs(value - bound) <= _AT_BOUND * max(1.0, abs(bound))


def _fallback_of(ctx: FitContext, scope: str, name: str, field_name: str | None) -> str:
    if scope == "predicate":
        return f"kind {ctx.predicate_kind.get(name, '?')}"
    if field_name is not None and name in KINDS:
        return f"base {field_name}.{name} = {getattr(ctx.base, field_name)[name]:g}"
    return "none (not estimated)"


def _not_identified(ctx: FitContext, scope: str, name: str, source: str, quantities: tuple[str, ...], n: int,
                    why: str, field_name: str | None) -> None:
    """Record an estimate that is not identified: a fallback per quantity and one note."""
    to = _fallback_of(ctx, scope, name, field_name)
    ctx.unidentified[(scope, name, source)] = why
    for quantity in quantities:
        ctx.fallbacks.append({"scope": scope, "name": name, "quantity": quantity, "source": source, "n": int(n),
                              "falls_back_to": f"{to} (not identified: {why})"})
    ctx.notes.append(f"not identified: {scope} {name}, {', '.join(quantities)} from the {source} — {why}; "
                     f"falls back to {to}")


def seed_identification(c0: float, lam: float, cap: float, max_rate: float) -> tuple[str | None, list[str]]:
    """Why a seed-model fit is not identified (None when it is), and the edges it lies at.

    At an optimisation bound: λ at ``max_rate`` (a decay faster than any checkpoint can see), c0 at
    its lower bound. At an edge of the parameter space (reported, still fitted): λ = 0 (no decay
    seen), c0 at ``cap`` (the memory's own limit: the data ask for at least the cap)."""
    c0_low = SEED_BOUNDS["c0_low"]
    if _near(lam, max_rate):
        return f"λ at its optimisation bound {max_rate:g}/day", []
    if _near(c0, c0_low):
        return f"c0 at its optimisation bound {c0_low:g}", []
    edges = (["λ = 0 (no decay seen)"] if lam <= 1e-12 else []) + ([f"c0 at the cap {cap:g}"] if _near(c0, cap) else [])
    return None, edges


def two_state_identification(point: TwoStateParams, sessions_per_day: float, days: float
                             ) -> tuple[str | None, list[str]]:
    """Why a two-state fit is not identified (None when it is), and the edges it lies at.

    At an optimisation bound: ``q`` at either bound (never or always re-mentioned: silence cannot
    be told from change), ``h`` at its upper bound. A predicted survival that underflows: P(true |
    silent ``days`` days, with the log's sessions per day) below :data:`UNDERFLOW`. At an edge
    (reported, still fitted): ``h`` at its lower bound (no change seen), ``u`` at either bound (every
    change announced, or none)."""
    if not np.isfinite(point.q):
        return "the fit failed", []
    (q_lo, q_hi), (h_lo, h_hi), (u_lo, u_hi) = TWO_STATE_BOUNDS
    if _near(point.q, q_lo) or _near(point.q, q_hi):
        return f"q = {point.q:.3g} at its optimisation bound", []
    if _near(point.h, h_hi):
        return f"h = {point.h:.3g}/day at its optimisation bound", []
    k = days * sessions_per_day if np.isfinite(sessions_per_day) else 0.0
    p = float(p_true_silent(np.array([days]), np.array([k]), point, multi=not np.isfinite(point.u))[0])
    if not p >= UNDERFLOW:
        return f"P(true | silent {days:g} days) = {p:.3g} underflows", []
    edges = [f"h = {point.h:.3g}/day at its lower bound (no change seen)"] if _near(point.h, h_lo) else []
    if np.isfinite(point.u) and (_near(point.u, u_lo) or _near(point.u, u_hi)):
        edges.append(f"u = {point.u:.3g} at its bound (every change {'announced' if point.u < 0.5 else 'silent'})")
    return None, edges


# -- the seed's model ------------------------------------------------------------------------------------


def seed_rows(ctx: FitContext, outcome: np.ndarray, source: str) -> list[dict]:
    """``seed_lambda`` and ``initial_confidence`` fitted to ``outcome`` at every checkpoint observation
    (truth labels, or the two-state model's probabilities)."""
    kind = ctx.kind[ctx.obs_row]
    pred = ctx.predicate[ctx.obs_row]
    subj = ctx.spell_subject[ctx.obs_row]
    usable = np.isfinite(outcome)
    rows = []
    for scope, name, sel in ctx.groups(kind, pred):
        sel = sel & usable
        n = len(np.unique(ctx.obs_row[sel]))
        if not ctx.enough(scope, name, "seed_lambda", source, n):
            ctx.enough(scope, name, "initial_confidence", source, n)
            continue
        bins = bin_ages(subj[sel], ctx.obs_age[sel], outcome[sel].astype(np.float64), n_subjects=len(ctx.subject_index))
        if source == "log" and (scope, name, "log") in ctx.unidentified:  # its two-state fit is not
            _not_identified(ctx, scope, name, source, ("seed_lambda", "initial_confidence"), n,
                            f"its two-state model: {ctx.unidentified[(scope, name, 'log')]}", "decay_rate")
            continue
        c0, lam = fit_seed_model(bins, cap=ctx.cap)[0]
        why, edges = seed_identification(c0, lam, ctx.cap, SEED_BOUNDS["max_rate"]) if np.isfinite(lam) else (None, [])
        if why is not None:
            _not_identified(ctx, scope, name, source, ("seed_lambda", "initial_confidence"), n, why, "decay_rate")
            continue
        ctx.notes += [f"at an edge: {scope} {name}, seed model from the {source}: {e}" for e in edges
                      if scope == "kind" or not e.startswith("c0 at the cap")]  # the cap: said once, per kind
        if not np.isfinite(lam):  # never true and relevant after a mention: λ is not identified
            for quantity in ("seed_lambda", "initial_confidence"):
                ctx.fallbacks.append({"scope": scope, "name": name, "quantity": quantity, "source": source, "n": n,
                                      "falls_back_to": ("kind " + ctx.predicate_kind.get(name, "?") if scope == "predicate"
                                                        else "base") + " (never true and relevant after a mention: "
                                                                       "not identified)"})
            continue
        boot = fit_seed_model(bins, cap=ctx.cap, subject_weights=ctx.weights, start=(c0, lam)) if len(ctx.weights) \
            else np.zeros((0, 2))
        rows.append(_row(scope, name, "seed_lambda", lam, *percentile_interval(boot[:, 1]), n, source))
        rows.append(_row(scope, name, "initial_confidence", c0, *percentile_interval(boot[:, 0]), n, source))
    return rows


def predicate_rate_rows(ctx: FitContext, outcome: np.ndarray, source: str, kind_c0: dict[str, float]) -> list[dict]:
    """``seed_lambda_kind_c0``: per predicate with enough silent spells whose kind has a fitted c0
    (``kind_c0``: kind -> the initial_confidence exported for it), the seed model's λ with c0 held at
    its kind's value — the rate its facts would decay at in the exported memory, which starts every
    fact of the kind at that c0. Fitted to ``outcome`` at the predicate's checkpoint observations,
    with a bootstrap interval over subjects like ``seed_lambda``."""
    pred = ctx.predicate[ctx.obs_row]
    subj = ctx.spell_subject[ctx.obs_row]
    usable = np.isfinite(outcome)
    codes, names = pd.factorize(pred)
    rows = []
    for code, name in sorted(enumerate(names), key=lambda item: str(item[1])):  # a loop over predicates
        c0 = kind_c0.get(ctx.predicate_kind.get(str(name), ""))
        sel = (codes == code) & usable
        n = len(np.unique(ctx.obs_row[sel]))
        if c0 is None or n < ctx.min_n:
            continue
        bins = bin_ages(subj[sel], ctx.obs_age[sel], outcome[sel].astype(np.float64), n_subjects=len(ctx.subject_index))
        lam = fit_seed_model(bins, cap=ctx.cap, fixed_c0=c0)[0][1]
        if not np.isfinite(lam):
            continue
        if _near(lam, SEED_BOUNDS["max_rate"]):
            _not_identified(ctx, "predicate", str(name), source, ("seed_lambda_kind_c0",), n,
                            f"λ at its optimisation bound {SEED_BOUNDS['max_rate']:g}/day", None)
            continue
        boot = fit_seed_model(bins, cap=ctx.cap, subject_weights=ctx.weights, start=(c0, lam), fixed_c0=c0)[:, 1] \
            if len(ctx.weights) else np.zeros(0)
        rows.append(_row("predicate", str(name), "seed_lambda_kind_c0", lam, *percentile_interval(boot), n, source))
    return rows


# -- truth: empirical P(true | silent d) --------------------------------------------------------------


def silent_population(ctx: FitContext, days: float) -> tuple[np.ndarray, np.ndarray]:
    """Spells held and silent for more than ``days`` (their day ``days`` then lies inside the log), and
    the time of that day."""
    idx = np.flatnonzero(ctx.days > days)
    return idx, ctx.start[idx] + int(round(days * DAY))


def empirical_silent_rows(ctx: FitContext) -> list[dict]:
    """Empirical ``p_true_silent_<d>d`` from truth, with a bootstrap interval over subjects."""
    spell_triple, _ = ctx.triples()
    lookup = ctx.lookup()
    rows = []
    n_sub = len(ctx.subject_index)
    for d in ctx.settings["silent_days"]:
        idx, t = silent_population(ctx, d)
        y = lookup(spell_triple[idx], t).astype(np.float64)
        subj = ctx.spell_subject[idx]
        for scope, name, sel in ctx.groups(ctx.kind[idx], ctx.predicate[idx]):
            quantity = f"p_true_silent_{d}d"
            if not ctx.enough(scope, name, quantity, "truth", int(sel.sum())):
                continue
            yes = np.bincount(subj[sel], weights=y[sel], minlength=n_sub)
            total = np.bincount(subj[sel], minlength=n_sub).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                boot = (ctx.weights @ yes) / (ctx.weights @ total)
            rows.append(_row(scope, name, quantity, yes.sum() / total.sum(), *percentile_interval(boot),
                             int(sel.sum()), "truth"))
    return rows


# -- log: the two-state model -------------------------------------------------------------------------


def two_state_rows(ctx: FitContext) -> list[dict]:
    """The two-state model per kind (pooled) and per predicate, then its ``p_true_silent_<d>d``."""
    sp = ctx.spells.frame
    g = ctx.days
    k = sp["silent"].to_numpy(np.float64)
    outcome = sp["outcome"].to_numpy(np.int64)
    rate = ctx.sessions_per_day
    rows = []
    for scope, name, sel in ctx.groups(ctx.kind, ctx.predicate):
        n = int(sel.sum())
        if not ctx.enough(scope, name, TWO_STATE_QUANTITIES, "log", n):
            continue
        data = SpellData.build(ctx.spell_subject[sel], g[sel], k[sel], outcome[sel], ctx.multi[sel])
        point = fit_two_state(data)[0]
        why, edges = two_state_identification(point, rate, float(min(ctx.settings["silent_days"])))
        if why is not None:  # not identified: its spells use the kind's pooled fit (a kind's: none)
            _not_identified(ctx, scope, name, "log", tuple(TWO_STATE_QUANTITIES.split(", ")), n, why, None)
            continue
        ctx.notes += [f"at an edge: {scope} {name}, two-state model: {e}" for e in edges]
        boot = fit_two_state(data, subject_weights=ctx.weights, start=point) if len(ctx.weights) else []
        ctx.two_state[(scope, name)] = point
        ctx.two_state_boot[(scope, name)] = boot
        qs = np.array([b.q for b in boot])
        hs = np.array([b.h for b in boot])
        us = np.array([b.u for b in boot])
        q_lo, q_hi = percentile_interval(qs)
        rows.append(_row(scope, name, "change_rate", point.h, *percentile_interval(hs), n, "log"))
        rows.append(_row(scope, name, "remention_probability", point.q, q_lo, q_hi, n, "log"))
        rows.append(_row(scope, name, "remention_rate", point.q * rate, q_lo * rate, q_hi * rate, n, "log"))
        if np.isfinite(point.u):
            rows.append(_row(scope, name, "silent_change_share", point.u, *percentile_interval(us), n, "log"))
    return rows + _model_silent_rows(ctx)


def _group_matrix(ctx: FitContext, idx: np.ndarray, names: list[tuple[str, str]]) -> np.ndarray:
    """(spells, groups) 0/1 matrix: spell ``idx[i]`` counts for its kind's group and its predicate's
    group, those of them that are in ``names``."""
    out = np.zeros((len(idx), len(names)))
    kind_col, pred_col = (c[idx] for c in ctx.columns(names))
    rows = np.arange(len(idx))
    out[rows[kind_col >= 0], kind_col[kind_col >= 0]] = 1.0
    out[rows[pred_col >= 0], pred_col[pred_col >= 0]] = 1.0
    return out


def group_sums(ctx: FitContext, idx: np.ndarray, names: list[tuple[str, str]], values: np.ndarray) -> np.ndarray:
    """Σ ``values`` over the spells ``idx`` of each group in ``names`` (a spell counts for its kind's
    group and its predicate's group)."""
    kind_col, pred_col = (c[idx] for c in ctx.columns(names))
    out = np.zeros(len(names))
    for col in (kind_col, pred_col):
        ok = col >= 0
        out += np.bincount(col[ok], weights=values[ok], minlength=len(names))
    return out


def model_silent_sums(ctx: FitContext, days: float, names: list[tuple[str, str]], resamples: bool
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Σ S_T and Σ S per group over the spells that can be silent for ``days`` inside the log, for
    the point fits (one row) or every bootstrap resample (subject-weighted)."""
    keys, spell_key = ctx.fit_keys()
    idx = np.flatnonzero((ctx.start + days * DAY <= ctx.spell_last) & (spell_key >= 0))
    sessions = ctx.spells.sessions_between(ctx.subject_code[idx], ctx.start[idx], ctx.start[idx] + int(round(days * DAY)))
    if not resamples:
        s_true, s_all = ctx.model_curves(idx, np.float64(days), sessions, ctx.param_table(keys, None), spell_key)
        return group_sums(ctx, idx, names, np.nan_to_num(s_true[0]))[None, :], \
            group_sums(ctx, idx, names, np.nan_to_num(s_all[0]))[None, :]
    groups = _group_matrix(ctx, idx, names)
    n_boot = len(ctx.weights)
    num, den = np.zeros((n_boot, len(names))), np.zeros((n_boot, len(names)))
    for lo in range(0, n_boot, _CHUNK):
        part = slice(lo, min(lo + _CHUNK, n_boot))
        s_true, s_all = ctx.model_curves(idx, np.float64(days), sessions, ctx.param_table(keys, part), spell_key)
        w = ctx.weights[part][:, ctx.spell_subject[idx]]
        num[part] = np.nan_to_num(w * s_true) @ groups
        den[part] = np.nan_to_num(w * s_all) @ groups
    return num, den


def _model_silent_rows(ctx: FitContext) -> list[dict]:
    """The two-state P(true | silent d days), averaged over the log's spells that could be silent for
    d days inside the log: Σ S_T / Σ S, each spell with its subject's sessions in those days (a kind
    mixes its predicates' fits). ``n``: the spells actually silent that long (the empirical population)."""
    names = [key for key in ctx.two_state]
    rows: list[dict] = []
    if not names:
        return rows
    for d in ctx.settings["silent_days"]:
        num, den = model_silent_sums(ctx, d, names, resamples=False)
        boot_num, boot_den = model_silent_sums(ctx, d, names, resamples=True)
        observed = ctx.days > d
        for j, (scope, name) in enumerate(names):
            members = observed & ((ctx.kind == name) if scope == "kind" else (ctx.predicate == name))
            quantity = f"p_true_silent_{d}d"
            if den[0, j] <= 0 or not ctx.enough(scope, name, quantity, "log", int(members.sum())):
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                reps = boot_num[:, j] / boot_den[:, j]
            rows.append(_row(scope, name, quantity, num[0, j] / den[0, j], *percentile_interval(reps),
                             int(members.sum()), "log"))
    return rows
