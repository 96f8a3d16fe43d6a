"""Identification: which searched parameters this log determines, and which it leaves free.

A search always returns a value for every parameter; the log may not care about some of them (a
gain where nothing is mentioned twice, a kind's decay where that kind is never needed). Shipping
such a value is shipping noise. Per searched name, at one budget:

* **near-best range** — the smallest and largest value among the candidates *within the noise of
  the best* on the tuning data: those the best does not beat by the minimum effect, i.e. the low end
  of the 95% bootstrap interval (resampling people, paired) of best − candidate is at most
  ``min_effect`` (:func:`near_best`). A wide range says the data do not pin the value down.
* **effect** — how much the objective on the tuning data moves when this parameter alone moves over
  its searched range at the recommendation, every other value held: ``max − min`` over
  :data:`PROBES` evenly spaced values of a :class:`~factmem.tuning.space.Range` (in log coordinates
  for a log range, both ends included) or every listed value, plus the recommendation's own and the
  baseline's (:func:`probe_points`; the probes are replayed and kept in the sweep as ``probe`` rows, never
  chosen).
* A parameter whose effect is below ``min_effect`` is **not identified by this log**: it keeps the
  baseline's value in what is shipped (:meth:`Identification.project`), and the report lists it
  apart with what the log offers it (:func:`log_support`: "0 repeated mentions" for the gain, the
  mentions of a kind for that kind's numbers).
* **Jointly needed.** Effects are measured one parameter at a time; resetting several of them
  *together* can cost more than each alone. So the projection is checked as a whole: the projected
  recommendation is replayed on the tuning data, and if the best beats it by more than
  ``min_effect`` (point difference), the unidentified parameters are given back their recommended
  values one at a time, largest effect first (ties: searched order), until the projection is within
  ``min_effect`` of the best (:func:`joint_restorations`, :meth:`Identification.keep_jointly`).
  Those are marked *kept jointly* and shipped as recommended; the rest keep the baseline's value.

``tune`` projects the recommendation *and each fold's choice* onto the identified parameters
before the held-out judgement, so that what is judged is what is shipped.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from factmem.core.params import MemoryParams
from factmem.errors import InputError
from factmem.evaluation.context_scores import FIELDS
from factmem.tuning.space import ALIASES, Range, assign

if TYPE_CHECKING:
    from factmem.evaluation.simulate import PreparedLog
    from factmem.tuning.sweep import SweepResult

__all__ = ["PROBES", "ParameterIdentification", "Identification", "probe_points", "near_best", "identify",
           "joint_restorations", "log_support", "identification_lines"]

#: probes over a Range (both ends included)
PROBES = 5


def _target(name: str) -> str:
    return ALIASES.get(name, (name,))[0]


@dataclass
class ParameterIdentification:
    """One searched name at one budget (see the module docstring)."""

    name: str
    searched: str
    baseline: Any
    recommended: Any
    near_low: Any
    near_high: Any
    effect: float
    identified: bool
    support: str = ""
    #: not identified alone, but shipped as recommended: resetting it with the other unidentified
    #: names costs the best more than the minimum effect (see the module docstring)
    kept_jointly: bool = False

    @property
    def shipped(self) -> Any:
        return self.recommended if self.identified or self.kept_jointly else self.baseline

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "searched": self.searched, "baseline": self.baseline,
                "recommended": self.recommended, "shipped": self.shipped, "near_low": self.near_low,
                "near_high": self.near_high, "effect": self.effect, "identified": self.identified,
                "support": self.support, "kept_jointly": self.kept_jointly}


@dataclass
class Identification:
    """Identification at one budget: per searched name, and how many candidates are near the best."""

    budget: int
    min_effect: float
    objective: str
    near_best: int
    candidates: int
    parameters: list[ParameterIdentification] = field(default_factory=list)

    @property
    def unidentified(self) -> list[str]:
        """The names shipped at the baseline's value: not identified, and not kept jointly."""
        return [p.name for p in self.parameters if not p.identified and not p.kept_jointly]

    @property
    def kept_jointly(self) -> list[str]:
        return [p.name for p in self.parameters if p.kept_jointly]

    def project(self, params: MemoryParams, baseline: MemoryParams) -> MemoryParams:
        """``params`` with every unidentified name at the baseline's value."""
        return assign(params, {n: baseline.get(_target(n)) for n in self.unidentified}) if self.unidentified else params

    def restoration_order(self) -> list[str]:
        """The unidentified names in the order :func:`joint_restorations` gives them back: largest
        effect first, ties in searched order."""
        order = [p for p in self.parameters if not p.identified and not p.kept_jointly]
        return [p.name for p in sorted(order, key=lambda p: -p.effect)]

    def keep_jointly(self, names: list[str]) -> None:
        """Mark ``names`` (unidentified) as kept jointly: shipped as recommended."""
        for p in self.parameters:
            if p.name in names:
                if p.identified:
                    raise InputError(f"{p.name} is identified; only an unidentified name is kept jointly")
                p.kept_jointly = True

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "min_effect": self.min_effect, "objective": self.objective,
                "near_best": self.near_best, "candidates": self.candidates,
                "parameters": [p.to_dict() for p in self.parameters], "unidentified": self.unidentified}


def joint_restorations(ident: Identification, best: MemoryParams, baseline: MemoryParams) -> list[MemoryParams]:
    """The projections of ``best`` with the first 1, 2, … names of
    :meth:`Identification.restoration_order` given back their recommended values (the last one is
    ``best`` itself whenever every unidentified name is given back)."""
    order = ident.restoration_order()
    return [assign(best, {n: baseline.get(_target(n)) for n in order[j:]}) for j in range(1, len(order) + 1)]


def probe_points(space: Mapping[str, Any], at: MemoryParams, n: int = PROBES,
                 baseline: MemoryParams | None = None) -> dict[str, list[MemoryParams]]:
    """Per searched name, ``at`` with that name alone moved over its searched values (and to the
    baseline's value, when given: a one-value list still asks whether leaving the baseline matters)."""
    out: dict[str, list[MemoryParams]] = {}
    for name, spec in space.items():
        if isinstance(spec, Range):
            if spec.log:
                values = list(np.exp(np.linspace(math.log(spec.low), math.log(spec.high), n)))
            else:
                values = list(np.linspace(spec.low, spec.high, n))
            values = [float(v) for v in values]
        else:
            values = list(spec)
        if baseline is not None and baseline.get(_target(name)) not in values:
            values.append(baseline.get(_target(name)))
        out[name] = [assign(at, {name: v}) for v in values]
    return out


def near_best(num: np.ndarray, den: np.ndarray, best: int, candidates: np.ndarray, *, lower_is_better: bool,
              min_effect: float, resamples: int, seed: int) -> np.ndarray:
    """Which ``candidates`` (row indices) are within the noise of row ``best``: the low end of the
    95% paired-bootstrap interval of (best − candidate), better direction positive, is at most
    ``min_effect``. ``num``/``den``: row × subject sums of the objective's numerator and denominator.
    Without resamples, the point difference decides."""
    rows = np.asarray(candidates, np.int64)
    n = num.shape[1]
    sign = -1.0 if lower_is_better else 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        point = num[rows].sum(axis=1) / den[rows].sum(axis=1)
        top = num[best].sum() / den[best].sum()
    if not resamples or n == 0:
        return ~(sign * (top - point) > min_effect)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    counts = np.bincount((idx + n * np.arange(resamples)[:, None]).ravel(), minlength=resamples * n)
    counts = counts.reshape(resamples, n).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = (counts @ num[rows].T) / (counts @ den[rows].T)  # resample × candidate
        vb = (counts @ num[best]) / (counts @ den[best])
        d = sign * (vb[:, None] - v)
    with warnings.catch_warnings():
        # a candidate whose difference is undefined in every resample (nothing scored: a log that
        # cannot rank the candidates) gets NaN, and NaN is within the noise: numpy's warning says so
        warnings.simplefilter("ignore", RuntimeWarning)
        low = np.nanquantile(np.where(np.isfinite(d), d, np.nan), 0.025, axis=0)
    return ~(low > min_effect)


def _searched_text(spec: Any) -> str:
    if isinstance(spec, Range):
        return f"{spec.low:g}…{spec.high:g}" + (" (log)" if spec.log else "")
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in spec)


def identify(res: SweepResult, part: str, budget: int, best: int, space: Mapping[str, Any],
             probes: Mapping[str, list[int]], baseline: MemoryParams, *, min_effect: float, resamples: int,
             seed: int, support: Mapping[str, str] | None = None) -> Identification:
    """Identification of every searched name at ``budget`` (see the module docstring). ``probes``:
    per name, the sweep rows of :func:`probe_points` at ``best``; ``support``: :func:`log_support`."""
    obj = res.objective
    metric = {"utility": "utility", "recall_at_k": "recall", "precision_at_k": "precision",
              "stale_at_k": "charged"}[obj.name]
    b = obj.budgets.index(budget)
    ctx = res.context[part][:, :, b, :]
    num = ctx[:, :, FIELDS.index(metric)]
    den = ctx[:, :, FIELDS.index("precise" if metric == "precision" else "points")]
    candidates = np.flatnonzero(res.eligible())
    near = candidates[near_best(num, den, best, candidates, lower_is_better=obj.lower_is_better,
                                min_effect=min_effect, resamples=resamples, seed=seed)]
    values = res.objective_values(part, budget)
    rec = res.params[best]
    out = Identification(budget, min_effect, f"{metric}@{budget}", int(len(near)), int(len(candidates)))
    for name, spec in space.items():
        target = _target(name)
        vals = [res.params[i].get(target) for i in near]
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        lo: Any = min(nums) if nums else None
        hi: Any = max(nums) if nums else None
        if not nums and vals:  # a listed non-number (an option's name): the first and last in order
            lo, hi = sorted(map(str, vals))[0], sorted(map(str, vals))[-1]
        seen = values[[best, *probes.get(name, [])]]
        seen = seen[np.isfinite(seen)]
        effect = float(seen.max() - seen.min()) if seen.size else 0.0
        out.parameters.append(ParameterIdentification(
            name=name, searched=_searched_text(spec), baseline=baseline.get(target), recommended=rec.get(target),
            near_low=lo, near_high=hi, effect=effect, identified=effect >= min_effect,
            support=(support or {}).get(name, "")))
    return out


def log_support(prepared: PreparedLog, space: Mapping[str, Any]) -> dict[str, str]:
    """What the log offers each searched name: repeated mentions for the gain (mentions of a triple
    already mentioned before), the mentions of a kind for that kind's numbers, of a predicate for its
    own rate."""
    ev = prepared.events
    out: dict[str, str] = {}
    repeated = int(ev.duplicated(["subject", "predicate", "object"]).sum()) if len(ev) else 0
    kinds = ev["kind"].value_counts() if len(ev) else None
    preds = ev["predicate"].value_counts() if len(ev) else None
    for name in space:
        head, _, tail = name.partition(".")
        if head == "reinforce_gain":
            out[name] = f"{repeated:,} repeated mention{'s' if repeated != 1 else ''} in the whole log"
        elif head in ("decay_rate", "initial_confidence") and tail:
            n = int(kinds.get(tail, 0)) if kinds is not None else 0
            out[name] = f"{n:,} mention{'s' if n != 1 else ''} of kind {tail}"
        elif head == "decay_rate_by_predicate" and tail:
            n = int(preds.get(tail, 0)) if preds is not None else 0
            out[name] = f"{n:,} mention{'s' if n != 1 else ''} of {tail}"
    return out


def _v(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def identification_lines(ident: Identification, restart_values: Mapping[str, list[Any]] | None = None) -> list[str]:
    """Markdown: the identification table of one budget, then the parameters not identified, listed
    apart. ``restart_values``: per name, the value each run of the search recommended."""
    k = ident.budget
    lines = [f"At k = {k}: {ident.near_best} of {ident.candidates} candidates are within the noise of the best on the "
             f"tuning data (the best does not beat them by the minimum effect {ident.min_effect:g}: the low end of the "
             f"95% paired bootstrap interval of best − candidate is at most {ident.min_effect:g}). *Effect*: how much "
             f"{ident.objective} on the tuning data moves when the parameter alone moves over its searched range at the "
             "recommendation.", "",
             "| parameter | searched | baseline | recommended | near-best range | effect | "
             + ("runs of the search | " if restart_values else "") + "shipped |",
             "|---" * (7 + bool(restart_values)) + "|"]
    for p in ident.parameters:
        runs = ""
        if restart_values:
            runs = " / ".join(_v(v) for v in restart_values.get(p.name, [])) + " | "
        shipped = _v(p.shipped) + ("" if p.identified else " (kept jointly)" if p.kept_jointly
                                   else " (baseline: not identified)")
        lines.append(f"| `{p.name}` | {p.searched} | {_v(p.baseline)} | {_v(p.recommended)} | "
                     f"{_v(p.near_low)} … {_v(p.near_high)} | {p.effect:.4f} | {runs}{shipped} |")
    lines.append("")
    if ident.kept_jointly:
        lines += ["**Kept jointly** (no effect alone, shipped as recommended): resetting every unidentified parameter "
                  "together cost the best more than the minimum effect on the tuning data, so these were given back "
                  "their recommended values, largest effect first, until the projection was within it: "
                  + ", ".join(f"`{n}`" for n in ident.kept_jointly) + ".", ""]
    if ident.unidentified:
        lines += ["**Not identified by this log** (each keeps the baseline's value in `params.toml`):", ""]
        for p in ident.parameters:
            if not p.identified and not p.kept_jointly:
                why = f" — {p.support}" if p.support else ""
                lines.append(f"- `{p.name}`: no effect on this log{why}: moving it over {p.searched} changes "
                             f"{ident.objective} by {p.effect:.4f} < {ident.min_effect:g}; kept at {_v(p.baseline)} "
                             f"(the search said {_v(p.recommended)}).")
    elif not ident.kept_jointly:
        lines.append("Every searched parameter is identified by this log (each moves the objective by at least the "
                     "minimum effect).")
    return lines
