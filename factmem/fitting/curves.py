"""The curves of :func:`factmem.fitting.fit.fit`'s figures: Kaplan–Meier survival of the truth's
lifetimes, and P(true | silent d days) by day per kind and predicate — empirical (truth), the
two-state model (log) and the seed's c0·e^{−λd} at its fitted values — on the days of
:func:`curve_days`. The estimates they are drawn beside are :mod:`factmem.fitting.estimates`'.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from factmem.core.params import KINDS
from factmem.fitting.estimates import FitContext, group_sums, model_silent_sums, silent_population
from factmem.fitting.models import kaplan_meier
from factmem.fitting.populations import Lifetimes

__all__ = ["curve_days", "curve_table", "survival_curves"]


def survival_curves(life: Lifetimes) -> pd.DataFrame:
    """Kaplan–Meier survival (delayed entry) of the lifetimes per kind and per predicate."""
    f = life.frame
    parts = []
    groups = [("kind", k, (f["kind"] == k).to_numpy()) for k in KINDS if (f["kind"] == k).any()]
    groups += [("predicate", p, (f["predicate"] == p).to_numpy()) for p in sorted(pd.unique(f["predicate"]))]
    for scope, name, sel in groups:
        part = f[sel]
        times, surv, at_risk = kaplan_meier(part["entry"].to_numpy(), part["exit"].to_numpy(), part["event"].to_numpy())
        parts.append(pd.DataFrame({"scope": scope, "name": name, "days": np.r_[0.0, times], "survival": np.r_[1.0, surv],
                                   "at_risk": np.r_[int((part["entry"] <= 0).sum()), at_risk]}))
    columns = ["scope", "name", "days", "survival", "at_risk"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def curve_days(log_days: float, max_days: int = 180) -> np.ndarray:
    """Days at which the curves are drawn: daily for two weeks, every 3 days to 60, then every 6."""
    top = int(min(max_days, log_days))
    days = np.r_[np.arange(0, 15), np.arange(15, 61, 3), np.arange(66, max_days + 1, 6)]
    return days[days <= top].astype(np.float64)


def curve_table(ctx: FitContext, rows: list[dict], sources: tuple[str, ...]) -> pd.DataFrame:
    """P(true | silent d days) by day, per kind and predicate: ``empirical`` (truth), ``model``
    (two-state, log), ``seed_model_truth`` / ``seed_model_log`` (c0·e^{−λd}); ``n`` = spells silent d days."""
    days = curve_days(ctx.max_span_days)
    seed: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in rows:
        if r["quantity"] in ("seed_lambda", "initial_confidence"):
            seed.setdefault((r["scope"], r["name"], r["source"]), {})[r["quantity"]] = r["estimate"]
    names = [("kind", k) for k in KINDS if (ctx.kind == k).any()] + [("predicate", p) for p in sorted(pd.unique(ctx.predicate))]
    lookup = ctx.lookup() if "truth" in sources else None
    spell_triple = ctx.triples()[0] if lookup is not None else None
    model_names = [key for key in names if key in ctx.two_state or (key[0] == "kind" and ("kind", key[1]) in ctx.two_state)]
    out = []
    for d in days:
        idx, t = silent_population(ctx, d)
        count = group_sums(ctx, idx, names, np.ones(len(idx)))
        if lookup is not None and spell_triple is not None:
            y = lookup(spell_triple[idx], t).astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                empirical = group_sums(ctx, idx, names, y) / count
        else:
            empirical = np.full(len(names), np.nan)
        model = np.full(len(names), np.nan)
        if "log" in sources and model_names:
            num, den = model_silent_sums(ctx, d, model_names, resamples=False)
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = num[0] / den[0]
            for j, key in enumerate(model_names):
                model[names.index(key)] = ratio[j]
        for j, (scope, name) in enumerate(names):
            row = {"scope": scope, "name": name, "days": float(d), "n": int(count[j]),
                   "empirical": float(empirical[j]) if count[j] > 0 else np.nan, "model": float(model[j])}
            for src in ("truth", "log"):
                par = seed.get((scope, name, src), {})
                row[f"seed_model_{src}"] = (par["initial_confidence"] * np.exp(-par["seed_lambda"] * d)
                                            if len(par) == 2 else np.nan)
            out.append(row)
    return pd.DataFrame(out)
