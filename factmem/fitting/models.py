"""The estimators behind :mod:`factmem.fitting.fit`: closed forms and likelihoods, on plain arrays.

Ground floor: numpy and scipy only (no dataset, no store). Times are in days. Every function
takes its population as arrays, so the estimators can be checked on hand-built and synthetic data
(``tests/test_fit.py``) independently of how :mod:`factmem.fitting.populations` builds the populations.

**Exponential lifetimes, right-censored and left-truncated** (:func:`exponential_rate`). A fact
value held over ``[entry, exit]`` inside the observation window, ending by a change at ``exit``
(``event``) or still held when the window closes (censored), contributes ``λ^event · e^{−λ·(exit −
entry)}`` to the likelihood of a constant change rate ``λ``. Whole population: ``λ^D · e^{−λ·E}``
with ``D`` changes and ``E`` days of exposure, maximised by **λ̂ = D / E**. Given the exposure, ``D``
is Poisson(λE), so the exact (Garwood) 95% interval is ``[χ²_{0.025}(2D) / 2E, χ²_{0.975}(2D + 2) /
2E]`` (lower bound 0 when D = 0) — conservative: it covers with probability ≥ 95%.

**Kaplan–Meier with delayed entry** (:func:`kaplan_meier`): at each event time τ (duration since
the value became true), ``S(τ) = Π (1 − d_j / n_j)`` where ``n_j`` counts lifetimes with ``entry <
τ_j ≤ exit`` (in the risk set: entered observation before τ_j and not yet ended or censored).

**The seed's model** (:func:`fit_seed_model`): the memory predicts ``p(a) = c0 · e^{−λ·a}`` that a
fact silent for ``a`` days is still true and relevant. Over observations ``(a_i, y_i)`` (``y`` in
[0, 1]: a Bernoulli outcome, or a probability when the labels come from a model), the
log-likelihood is ``Σ y_i·(ln c0 − λ a_i) + (1 − y_i)·ln(1 − c0 e^{−λ a_i})``, maximised over
``0 < c0 ≤ cap`` and ``λ ≥ 0`` by L-BFGS-B with the analytic gradient. Observations are first binned
by age (:class:`AgeBins`: counts and age sums per subject and bin); the ``y`` part of the
likelihood is exact (it needs only the sum of ages), the ``1 − y`` part evaluates each bin at its
mean age — with bins of a quarter day the difference is far below the sampling error, and it lets
a bootstrap over subjects refit from per-subject sums.

**The two-state model of a held fact** (:func:`two_state_nll`, :func:`fit_two_state`), from the
log alone. After a mention, a fact is *true* (T). While true, it comes up in each later session of
its subject with probability ``q`` (its *re-mention probability*), and its value changes at rate
``h`` per day; a share ``u`` of the changes is never announced (the new value is never said) and
leaves the held fact silently *false* (F); the others are announced — a new value said for the
same single-valued subject–predicate, which supersedes the held fact (it stops being held). In F
the fact is never mentioned again, and it is superseded when the next, announced change comes
(rate ``b = h·(1 − u)``). For a multi-valued predicate a new value never supersedes the others, so
every change leaves the held fact false in silence (``u = 1``, ``b = 0``; ``u`` is not estimated).

A *silent spell* starts at a mention and lasts ``g`` days, during which ``K`` sessions of the
subject passed without the fact coming up; it ends with a re-mention, a supersession or the end of
the log. With ``c = h·u`` and the sessions spread evenly over the spell (``ρ = −K·ln(1 − q) / g``,
the per-day silence rate this implies)::

    S_T(g, K) = e^{−h g} · (1 − q)^K                                  true, silent, held
    S_F(g, K) = c · e^{−b g} · (1 − e^{−(ρ + c) g}) / (ρ + c)          false, silent, held
    P(true | silent for g days over K sessions) = S_T / (S_T + S_F)

and a spell contributes to the log-likelihood

    re-mention at the (K+1)-th session after g days:  ln q + K·ln(1 − q) − h g     (only T speaks)
    superseded after g days, K silent sessions:       ln b + ln(S_T + S_F)
    still silent and held when the log ends:           ln(S_T + S_F)

(the supersession density is ``b·S_T + b·S_F``: announced changes come at rate ``b`` from either
state). Counting silence in sessions, not days, is what makes ``q`` one number per predicate: how
often a person talks (a daily rhythm, bursts, months away) moves the sessions, not the chance that
a true fact comes up in one. ``q``, ``h`` and ``u`` are identified by how fast re-mentions come
after a mention, how they thin out as silence grows (the share of silently false facts grows), and
how often a new value is announced. Fitted by L-BFGS-B on ``(logit q, ln h, logit u)`` with bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from factmem.errors import InputError

__all__ = [
    "AgeBins",
    "RateEstimate",
    "SEED_BOUNDS",
    "SpellData",
    "TWO_STATE_BOUNDS",
    "TwoStateParams",
    "age_edges",
    "bin_ages",
    "bootstrap_weights",
    "exponential_rate",
    "fit_seed_model",
    "fit_two_state",
    "kaplan_meier",
    "p_true_silent",
    "percentile_interval",
    "poisson_rate_interval",
    "seed_model_nll",
    "two_state_curves",
    "two_state_nll",
]

LEVEL = 0.95


# -- exponential lifetimes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RateEstimate:
    """A constant rate per day with its exact interval: ``events`` over ``exposure`` days."""

    rate: float
    low: float
    high: float
    events: int
    exposure: float

    def to_dict(self) -> dict:
        return {"rate": self.rate, "low": self.low, "high": self.high, "events": self.events,
                "exposure": self.exposure}


def poisson_rate_interval(events: int, exposure: float, level: float = LEVEL) -> tuple[float, float]:
    """Exact (Garwood) interval of a Poisson rate: ``events`` counted over ``exposure``."""
    if exposure <= 0:
        raise InputError(f"exposure must be positive, got {exposure!r}")
    if events < 0:
        raise InputError(f"events must be >= 0, got {events!r}")
    alpha = 1.0 - level
    low = stats.chi2.ppf(alpha / 2, 2 * events) / (2 * exposure) if events > 0 else 0.0
    high = stats.chi2.ppf(1 - alpha / 2, 2 * events + 2) / (2 * exposure)
    return float(low), float(high)


def exponential_rate(events: np.ndarray | int, exposure: np.ndarray | float, level: float = LEVEL) -> RateEstimate:
    """Maximum likelihood rate of exponential lifetimes under censoring and truncation.

    ``events``: per lifetime 1 if it ended inside the window (or a total count); ``exposure``: per
    lifetime the days it was observed (or a total). λ̂ = Σ events / Σ exposure, with the exact
    interval of :func:`poisson_rate_interval`.
    """
    d = int(np.sum(events))
    e = float(np.sum(exposure))
    low, high = poisson_rate_interval(d, e, level)
    return RateEstimate(rate=d / e, low=low, high=high, events=d, exposure=e)


def kaplan_meier(entry: np.ndarray, exit: np.ndarray, event: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kaplan–Meier survival with delayed entry (left truncation) and right censoring.

    ``entry``/``exit``: durations (days since the value became true) at which each lifetime entered
    and left observation; ``event``: whether it left by ending (else censored). Returns the distinct
    event times, the survival just after each, and the risk-set sizes. A lifetime is at risk at τ
    when ``entry < τ <= exit``.
    """
    entry = np.asarray(entry, np.float64)
    exit = np.asarray(exit, np.float64)
    event = np.asarray(event, bool)
    times = np.unique(exit[event])
    if times.size == 0:
        return times, np.ones(0), np.zeros(0, np.int64)
    d = np.bincount(np.searchsorted(times, exit[event]), minlength=times.size)
    exits_before = np.searchsorted(np.sort(exit), times, side="left")  # exit < τ: left already
    entered = np.searchsorted(np.sort(entry), times, side="left")  # entry < τ
    at_risk = entered - exits_before
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(at_risk > 0, 1.0 - d / np.maximum(at_risk, 1), 1.0)
    return times, np.cumprod(factor), at_risk.astype(np.int64)


# -- bootstrap ---------------------------------------------------------------------------------------


def bootstrap_weights(n_subjects: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, n_subjects) multiplicities: each row draws ``n_subjects`` subjects with replacement."""
    if resamples <= 0 or n_subjects <= 0:
        return np.zeros((0, max(n_subjects, 0)))
    return rng.multinomial(n_subjects, np.full(n_subjects, 1.0 / n_subjects), size=resamples).astype(np.float64)


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (NaN replicates, from failed refits, are dropped)."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return float("nan"), float("nan")
    alpha = 1.0 - level
    lo, hi = np.quantile(v, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


# -- the seed's model: p = c0 · exp(−λ·age) ----------------------------------------------------------

#: the optimisation bounds of :func:`fit_seed_model` (c0's upper bound is the cap it is given)
SEED_BOUNDS = {"c0_low": 1e-6, "max_rate": 100.0}


def age_edges(max_age: float, *, fine: float = 0.25, fine_until: float = 7.0, growth: float = 1.05) -> np.ndarray:
    """Bin edges in days: ``fine``-day bins up to ``fine_until``, then each bin ``growth`` times the
    last edge (about 100 bins for a year)."""
    edges = list(np.arange(0.0, fine_until + fine / 2, fine))
    while edges[-1] <= max_age:
        edges.append(edges[-1] * growth)
    return np.asarray(edges)


@dataclass
class AgeBins:
    """Observations ``(subject, age, y)`` summed per subject, and per subject and age bin.

    ``yes``/``age_yes`` (per subject): Σ y and Σ y·age; ``no``/``age_no`` (subjects × bins):
    Σ (1 − y) and Σ (1 − y)·age. ``count``: observations per subject.
    """

    yes: np.ndarray
    age_yes: np.ndarray
    no: np.ndarray
    age_no: np.ndarray
    count: np.ndarray

    def totals(self, subject_weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Σ y, Σ y·age (shape (R,)), per-bin Σ (1 − y) and mean age of the 1 − y part (shape (R, bins)),
        for R rows of subject weights (one row of ones when None)."""
        w = np.ones((1, len(self.yes))) if subject_weights is None else np.atleast_2d(subject_weights)
        no = w @ self.no
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_age = np.where(no > 0, (w @ self.age_no) / np.where(no > 0, no, 1.0), 0.0)
        return w @ self.yes, w @ self.age_yes, no, mean_age


def bin_ages(subject: np.ndarray, age_days: np.ndarray, outcome: np.ndarray, *, n_subjects: int | None = None,
             edges: np.ndarray | None = None) -> AgeBins:
    """Sum observations per subject and age bin (:func:`age_edges` by default); ``outcome`` in [0, 1]."""
    subject = np.asarray(subject, np.int64)
    age = np.asarray(age_days, np.float64)
    y = np.asarray(outcome, np.float64)
    if not (len(subject) == len(age) == len(y)):
        raise InputError("subject, age_days and outcome must have the same length")
    if len(age) and (not np.isfinite(age).all() or age.min() < 0):
        raise InputError("ages must be finite and >= 0")
    if len(y) and (not np.isfinite(y).all() or ((y < 0) | (y > 1)).any()):
        raise InputError("outcomes must lie in [0, 1]")
    n_sub = int(subject.max(initial=-1)) + 1 if n_subjects is None else int(n_subjects)
    edges = age_edges(float(age.max(initial=0.0))) if edges is None else np.asarray(edges, np.float64)
    n_bins = len(edges) - 1
    b = np.clip(np.searchsorted(edges, age, "right") - 1, 0, n_bins - 1)
    cell = subject * n_bins + b
    per_cell = lambda v: np.bincount(cell, weights=v, minlength=n_sub * n_bins).reshape(n_sub, n_bins)
    return AgeBins(
        yes=np.bincount(subject, weights=y, minlength=n_sub), age_yes=np.bincount(subject, weights=y * age, minlength=n_sub),
        no=per_cell(1.0 - y), age_no=per_cell((1.0 - y) * age), count=np.bincount(subject, minlength=n_sub).astype(np.float64),
    )


def _seed_batch(x: np.ndarray, yes: np.ndarray, age_yes: np.ndarray, no: np.ndarray, mean_age: np.ndarray,
                scale: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row r: −log-likelihood of ``p = c0·e^{−λ·age}`` and its gradient in ``(c0, λ·scale)``.

    ``x``: (R, 2); ``yes``/``age_yes``: (R,); ``no``/``mean_age``: (R, bins); ``scale``: (R,).
    """
    c0, lam = x[:, 0], x[:, 1] / scale
    e = np.exp(-lam[:, None] * mean_age)
    one_minus = 1.0 - c0[:, None] * e  # >= 1 − cap > 0
    ll = yes * np.log(c0) - lam * age_yes + (no * np.log(one_minus)).sum(axis=1)
    ratio = no * e / one_minus
    grad_c0 = yes / c0 - ratio.sum(axis=1)
    grad_lam = -age_yes + c0 * (ratio * mean_age).sum(axis=1)
    return -ll, -grad_c0, -grad_lam / scale


def seed_model_nll(x: np.ndarray, yes: float, age_yes: float, no: np.ndarray, age_no: np.ndarray,
                   scale: float = 1.0) -> tuple[float, np.ndarray]:
    """Negative log-likelihood of ``p = c0·e^{−λ·age}`` on binned observations and its gradient in
    ``x = (c0, λ·scale)``: ``yes`` = Σ y, ``age_yes`` = Σ y·age, per bin ``no`` = Σ (1 − y) at mean
    age ``age_no``."""
    f, g0, g1 = _seed_batch(np.asarray(x, np.float64)[None, :], np.array([yes]), np.array([age_yes]),
                            np.asarray(no)[None, :], np.asarray(age_no)[None, :], np.array([scale]))
    return float(f[0]), np.array([g0[0], g1[0]])


def _stacked(batch, n_rows: int, n_params: int):
    """The separable sum Σ_r f_r(x_r) of a batch objective, for one scipy minimisation of all rows:
    its minimum is every row's own minimum (the rows share no variable)."""
    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        f, *grads = batch(flat.reshape(n_rows, n_params))
        if not np.all(np.isfinite(f)):
            return 1e300, np.zeros_like(flat)
        return float(f.sum()), np.stack(grads, axis=1).ravel()
    return objective


def fit_seed_model(bins: AgeBins, *, cap: float = 0.99, subject_weights: np.ndarray | None = None,
                   start: tuple[float, float] | None = None, max_rate: float = SEED_BOUNDS["max_rate"],
                   fixed_c0: float | None = None) -> np.ndarray:
    """Maximum likelihood ``(c0, λ)`` of the seed's model on binned observations, for each row of
    ``subject_weights`` (one fit with unit weights when None): an array of shape (R, 2).

    ``0 < c0 <= cap < 1``, ``0 <= λ <= max_rate`` per day. scipy's TNC with the analytic gradient;
    the R fits are solved as one separable problem (see :func:`_stacked`), each variable
    ``λ·(mean age)`` scaled to order one. NaNs where the weighted population is empty or the fit
    fails. ``fixed_c0``: hold c0 at this value (equal bounds; TNC drops the variable) and fit λ
    alone — the profile λ at a given initial confidence.
    """
    if not 0 < cap < 1:
        raise InputError(f"cap must be in (0, 1), got {cap!r}")
    if fixed_c0 is not None and not 0 < fixed_c0 <= cap:
        raise InputError(f"fixed_c0 must be in (0, cap={cap}], got {fixed_c0!r}")
    yes, age_yes, no, mean_age = bins.totals(subject_weights)
    rows = len(yes)
    total = yes + no.sum(axis=1)
    live = total > 0
    out = np.full((rows, 2), np.nan)
    if not live.any():
        return out
    # never true after a mention: the likelihood grows as c0 → 0 whatever λ is — not identified
    live &= yes > 1e-9 * np.maximum(total, 1.0)
    if not live.any():
        return out
    yes, age_yes, no, mean_age, total = yes[live], age_yes[live], no[live], mean_age[live], total[live]
    scale = np.maximum((age_yes + (no * mean_age).sum(axis=1)) / total, 1e-3)
    n = len(yes)
    objective = _stacked(lambda x: _seed_batch(x, yes, age_yes, no, mean_age, scale), n, 2)
    c0_bounds = (SEED_BOUNDS["c0_low"], cap) if fixed_c0 is None else (fixed_c0, fixed_c0)
    bounds = [b for r in range(n) for b in (c0_bounds, (0.0, max_rate * scale[r]))]
    if fixed_c0 is not None:  # one λ per row; start from a slow and a fast decay
        starts = [np.c_[np.full(n, fixed_c0), np.full(n, lam0)] for lam0 in (0.01, 1.0)]
        if start is not None:
            starts.append(np.c_[np.full(n, fixed_c0), np.clip(start[1] * scale, 0.0, max_rate * scale)])
    elif start is None:  # a few starting points (the surface has long flat ridges); keep the best per row
        starts = [np.c_[np.clip(yes / total, 1e-3, cap), np.full(n, 0.1)], np.c_[np.full(n, cap), np.full(n, 0.01)],
                  np.c_[np.full(n, cap), np.full(n, 1.0)], np.c_[np.full(n, cap / 2), np.full(n, 0.3)]]
    else:
        starts = [np.c_[np.full(n, min(max(start[0], 1e-6), cap)), np.clip(start[1] * scale, 0.0, max_rate * scale)]]
    best, best_f = np.full((n, 2), np.nan), np.full(n, np.inf)
    for x0 in starts:
        res = optimize.minimize(objective, x0.ravel(), jac=True, method="TNC", bounds=bounds,
                                options={"maxfun": 200 + 50 * n})
        x = res.x.reshape(n, 2)
        if not (res.fun < 1e299 and np.all(np.isfinite(x))):
            continue
        f = _seed_batch(x, yes, age_yes, no, mean_age, scale)[0]
        better = f < best_f
        best[better], best_f[better] = x[better], f[better]
    out[live] = np.c_[best[:, 0], best[:, 1] / scale]
    return out


# -- the two-state model ----------------------------------------------------------------------------

REMENTION, SUPERSEDED, CENSORED = 0, 1, 2
_BOUNDS = [(-14.0, 8.0), (np.log(1e-7), np.log(50.0)), (-12.0, 12.0)]
#: the optimisation bounds of (q, h, u) in their own units (a fit at one is checked by the caller)
TWO_STATE_BOUNDS: tuple[tuple[float, float], ...] = (
    (float(special.expit(_BOUNDS[0][0])), float(special.expit(_BOUNDS[0][1]))),
    (float(np.exp(_BOUNDS[1][0])), float(np.exp(_BOUNDS[1][1]))),
    (float(special.expit(_BOUNDS[2][0])), float(special.expit(_BOUNDS[2][1]))),
)


@dataclass(frozen=True)
class TwoStateParams:
    """Re-mention probability per session ``q``, change rate per day ``h``, unannounced share ``u``."""

    q: float
    h: float
    u: float

    def to_dict(self) -> dict:
        return {"q": self.q, "h": self.h, "u": self.u}


def two_state_curves(g: np.ndarray, k: np.ndarray, q, h, u) -> tuple[np.ndarray, np.ndarray]:
    """``(ln S_T, ln(S_T + S_F))`` after ``g`` days and ``k`` silent sessions (see the module docstring).

    ``q``, ``h``, ``u`` broadcast against ``g`` (``u`` = 1 for multi-valued predicates)."""
    log_true, log_all, _ = _curves(np.asarray(g, np.float64), np.asarray(k, np.float64), np.asarray(q, np.float64),
                                   np.asarray(h, np.float64), np.asarray(u, np.float64), grad=False)
    return log_true, log_all


def _curves(g, k, q, h, u, grad: bool):
    """ln S_T, ln S and (with ``grad``) d ln S / d(logit q, ln h, logit u), broadcasting every input.

    A spell of 0 days is true for sure (S_T = S = 1)."""
    empty = g <= 0
    if np.any(empty):
        g = np.where(empty, 1.0, g)
    log_miss = np.log1p(-q)
    c = h * u
    b = h - c
    rate = -k * log_miss / g + c
    y = rate * g
    log_true = -h * g + k * log_miss
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # ln S_F = ln c − b·g + ln Φ, Φ = (1 − e^{−y}) / rate; c > 0 and y > 0 whenever u > 0
        log_false = np.log(c) - b * g + np.log(-np.expm1(-y)) - np.log(rate)
        log_all = np.logaddexp(log_true, log_false)
        if np.any(empty):
            log_true, log_all = np.where(empty, 0.0, log_true), np.where(empty, 0.0, log_all)
        if not grad:
            return log_true, log_all, None
        p_true = np.exp(log_true - log_all)
        p_false = 1.0 - p_true
        # d ln Φ / d rate = g·ψ(y), ψ(y) = (y / (e^y − 1) − 1) / y  (→ −1/2 as y → 0, −1/y as y → ∞)
        dphi = g * np.where(y < 1e-8, -0.5, (y / np.expm1(y) - 1.0) / y)
        # ln S_T: d/dα = −q·k (α = logit q), d/dβ = −h·g (β = ln h); it does not depend on u.
        # ln S_F: rate = ρ + c with dρ/dα = q·k/g; c = h·u, b = h·(1 − u); du/dγ = u·(1 − u) (γ = logit u)
        d_alpha = q * k * (p_false * dphi / g - p_true)
        d_beta = p_false * (1.0 - g * b + dphi * c) - p_true * h * g
        du = u * (1.0 - u)  # 0 for multi-valued spells (u = 1)
        d_gamma = p_false * ((1.0 - u) + h * du * (g + dphi))
    return log_true, log_all, (d_alpha, d_beta, d_gamma)


def p_true_silent(g: np.ndarray, k: np.ndarray, params: TwoStateParams, multi: np.ndarray | bool = False) -> np.ndarray:
    """P(true | silent and held for ``g`` days over ``k`` sessions) under the two-state model
    (``multi``: a multi-valued predicate, every change silent; so is a fit without ``u``)."""
    u = np.where(np.asarray(multi, bool) | (not np.isfinite(params.u)), 1.0, params.u)
    log_true, log_all = two_state_curves(g, k, params.q, params.h, u)
    return np.exp(log_true - log_all)


@dataclass
class SpellData:
    """Silent spells of one group, ready for the likelihood.

    Re-mentions enter only through sums (their log-likelihood is linear in ``k`` and ``g``), kept per
    subject so that bootstrap weights apply: ``re_subject``, ``re_count``, ``re_k``, ``re_g``. The other
    spells (superseded, censored) are kept one by one: ``subject``, ``g``, ``k``, ``superseded``,
    ``multi``. ``single``: some spell is of a single-valued predicate (``u`` is estimated).
    """

    re_subject: np.ndarray
    re_count: np.ndarray
    re_k: np.ndarray
    re_g: np.ndarray
    subject: np.ndarray
    g: np.ndarray
    k: np.ndarray
    superseded: np.ndarray
    multi: np.ndarray
    single: bool
    n: int

    @staticmethod
    def build(subject: np.ndarray, g: np.ndarray, k: np.ndarray, outcome: np.ndarray, multi: np.ndarray) -> SpellData:
        subject = np.asarray(subject, np.int64)
        g = np.asarray(g, np.float64)
        k = np.asarray(k, np.float64)
        outcome = np.asarray(outcome, np.int64)
        multi = np.asarray(multi, bool)
        if len(g) and (not np.isfinite(g).all() or g.min() <= 0):
            raise InputError("spell lengths must be finite and > 0 days")
        if len(k) and (k.min() < 0):
            raise InputError("silent session counts must be >= 0")
        if (multi & (outcome == SUPERSEDED)).any():
            raise InputError("a spell of a multi-valued predicate cannot end superseded")
        re = outcome == REMENTION
        subs, inv = np.unique(subject[re], return_inverse=True)
        sums = lambda v: np.bincount(inv, weights=v, minlength=len(subs))
        rest = ~re
        return SpellData(
            re_subject=subs, re_count=sums(np.ones(int(re.sum()))), re_k=sums(k[re]), re_g=sums(g[re]),
            subject=subject[rest], g=g[rest], k=k[rest], superseded=outcome[rest] == SUPERSEDED, multi=multi[rest],
            single=not bool(np.all(multi)), n=len(g),
        )

    def weights(self, subject_weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(R, re-mention subjects) and (R, other spells) weights for R rows of subject weights."""
        if subject_weights is None:
            return np.ones((1, len(self.re_subject))), np.ones((1, len(self.subject)))
        w = np.atleast_2d(subject_weights)
        return w[:, self.re_subject], w[:, self.subject]


def _two_state_batch(theta: np.ndarray, data: SpellData, w_re: np.ndarray, w: np.ndarray):
    """Per row: −log-likelihood and its gradient in ``(logit q, ln h[, logit u])``."""
    q = special.expit(theta[:, 0])[:, None]
    h = np.exp(theta[:, 1])[:, None]
    u = special.expit(theta[:, 2])[:, None] if data.single else np.ones_like(q)
    n_re, k_re, g_re = w_re @ data.re_count, w_re @ data.re_k, w_re @ data.re_g
    qf, hf, uf = q[:, 0], h[:, 0], u[:, 0]
    ll = n_re * np.log(qf) + k_re * np.log1p(-qf) - hf * g_re
    grads = [n_re * (1.0 - qf) - k_re * qf, -hf * g_re, np.zeros_like(qf)]
    if len(data.g):
        u_spell = np.where(data.multi[None, :], 1.0, u)
        _, log_all, (da, db, dc) = _curves(data.g[None, :], data.k[None, :], q, h, u_spell, grad=True)
        ll = ll + (w * log_all).sum(axis=1)
        grads = [grads[0] + (w * da).sum(axis=1), grads[1] + (w * db).sum(axis=1), grads[2] + (w * dc).sum(axis=1)]
        n_sup = w @ data.superseded.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ll = ll + np.where(n_sup > 0, n_sup * np.log(hf * (1.0 - uf)), 0.0)
        grads[1] = grads[1] + n_sup
        grads[2] = grads[2] - n_sup * uf
    bad = ~np.isfinite(ll)
    ll = np.where(bad, -1e300, ll)
    grads = [np.where(bad, 0.0, gr) for gr in grads]
    return (-ll, *(-gr for gr in grads[:theta.shape[1]]))


def two_state_nll(theta: np.ndarray, data: SpellData, subject_weights: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Negative log-likelihood of silent spells and its gradient (module docstring), under one
    vector of subject weights; ``theta = (logit q, ln h, logit u)`` (no ``u`` when every spell is
    multi-valued)."""
    w_re, w = data.weights(None if subject_weights is None else np.asarray(subject_weights)[None, :])
    f, *grads = _two_state_batch(np.asarray(theta, np.float64)[None, :], data, w_re, w)
    return float(f[0]), np.array([gr[0] for gr in grads])


def _two_state_row(theta: np.ndarray, sums: tuple[float, float, float, float], g: np.ndarray, k: np.ndarray,
                   multi: np.ndarray, w: np.ndarray, single: bool) -> tuple[float, np.ndarray]:
    """One fit's −log-likelihood and gradient: re-mention sums ``(count, Σk, Σg)`` and superseded
    weight in ``sums``; the other spells one by one (weights ``w``). The lean form of
    :func:`_two_state_batch` for one row of weights, since most of a fit's time is per-call overhead."""
    n_re, k_re, g_re, n_sup = sums
    q = 1.0 / (1.0 + np.exp(-theta[0]))
    h = float(np.exp(theta[1]))
    u = 1.0 / (1.0 + np.exp(-theta[2])) if single else 1.0
    ll = n_re * np.log(q) + k_re * np.log1p(-q) - h * g_re
    d_a, d_b, d_c = n_re * (1.0 - q) - k_re * q, -h * g_re, 0.0
    if len(g):
        u_spell = np.where(multi, 1.0, u) if single else 1.0
        _, log_all, (da, db, dc) = _curves(g, k, q, h, u_spell, grad=True)
        ll += float(np.dot(w, log_all))
        d_a += float(np.dot(w, da))
        d_b += float(np.dot(w, db))
        d_c += float(np.dot(w, dc)) if single else 0.0
        if n_sup > 0:
            b = h * (1.0 - u)
            if b <= 0:
                return 1e300, np.zeros(len(theta))
            ll += n_sup * np.log(b)
            d_b += n_sup
            d_c -= n_sup * u
    if not np.isfinite(ll):
        return 1e300, np.zeros(len(theta))
    return -ll, -np.array([d_a, d_b, d_c][:len(theta)])


def fit_two_state(data: SpellData, subject_weights: np.ndarray | None = None,
                  start: TwoStateParams | None = None) -> list[TwoStateParams]:
    """Maximum likelihood ``(q, h, u)`` of the two-state model for each row of ``subject_weights``
    (one fit with unit weights when None), by scipy's TNC with the analytic gradient, in
    ``(logit q, ln h, logit u)`` within bounds (q in [8e-7, 0.9997], h in [1e-7, 50] per day, u in
    [6e-6, 1 − 6e-6]). A bootstrap row starts at ``start`` (the full-sample fit) and stops at a
    looser tolerance (1e-6 in the parameters) than the full-sample fit.

    ``u`` is NaN when every spell is multi-valued (not identified); all NaN for a row whose
    population is empty or whose fit fails.
    """
    w_re, w = data.weights(subject_weights)
    nan = TwoStateParams(float("nan"), float("nan"), float("nan"))
    bounds = _BOUNDS if data.single else _BOUNDS[:2]
    lo, hi = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
    out = []
    for row_re, row in zip(w_re, w):  # one small fit per row of weights
        n_re = float(row_re @ data.re_count)
        live = row > 0  # spells of subjects the resample left out weigh nothing: drop them
        if n_re + float(row.sum()) <= 0:
            out.append(nan)
            continue
        sums = (n_re, float(row_re @ data.re_k), float(row_re @ data.re_g), float(row @ data.superseded))
        if start is None or not np.isfinite(start.q):
            # a few starting points (change rates of a year to a week; mostly announced or silent
            # changes): the likelihood can be flat along h·u; keep the best optimum
            sessions = float(row_re @ (data.re_k + data.re_count)) + float(row @ data.k)
            q0 = special.logit(min(max(n_re / max(sessions, 1.0), 1e-4), 0.9))
            starts = [np.array([q0, np.log(h0), special.logit(u0)]) for h0 in (1e-3, 3e-2) for u0 in (0.2, 0.8)]
            options: dict[str, float] = {"maxfun": 600}
        else:
            u0 = start.u if data.single and np.isfinite(start.u) else 0.5
            starts = [np.array([special.logit(start.q), np.log(max(start.h, 1e-7)),
                                special.logit(min(max(u0, 1e-5), 1 - 1e-5))])]
            options = {"maxfun": 400, "xtol": 1e-6}
        args = (sums, data.g[live], data.k[live], data.multi[live], row[live], data.single)
        x, fun = None, np.inf
        for x0 in starts:
            res = optimize.minimize(_two_state_row, np.clip(x0[:len(bounds)], lo, hi), jac=True, method="TNC",
                                    bounds=bounds, options=options, args=args)
            if res.fun < min(fun, 1e299) and np.all(np.isfinite(res.x)):
                x, fun = res.x, res.fun
        if x is None:
            out.append(nan)
            continue
        out.append(TwoStateParams(float(special.expit(x[0])), float(np.exp(x[1])),
                                  float(special.expit(x[2])) if data.single else float("nan")))
    return out
