"""Goodness-of-fit figures of :func:`factmem.fitting.fit.fit`: survival and silence curves, fitted against empirical.

Part of the plots layer: inputs are the plain DataFrames a :class:`~factmem.fitting.fit.FitResult` holds
(``survival``, ``silent_curves``, ``estimates``), so any saved fit can be redrawn. Each function
returns a :class:`matplotlib.figure.Figure` with one panel per kind or predicate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from factmem.plots.common import GRID_STYLE, KINDS, PlotFigure, kind_color, require

__all__ = ["silent_fit", "survival_fit", "top_predicates"]

_MODEL = {"color": "#000000", "lw": 1.6}


def top_predicates(estimates: pd.DataFrame, quantity: str, source: str, limit: int = 6) -> list[str]:
    """The predicates with the most observations (``n``) of ``quantity`` from ``source``."""
    require(estimates, ["scope", "name", "quantity", "n", "source"], "estimates", allow_empty=True)
    rows = estimates[(estimates["scope"] == "predicate") & (estimates["quantity"] == quantity)
                     & (estimates["source"] == source)]
    return list(rows.sort_values(["n", "name"], ascending=[False, True])["name"].head(limit))


def _panels(n: int, width: float = 4.0, height: float = 3.0) -> tuple[Figure, list]:
    cols = min(3, max(n, 1))
    rows = int(np.ceil(max(n, 1) / cols))
    fig = PlotFigure(figsize=(width * cols, height * rows), layout="constrained")
    axes = list(np.ravel(fig.subplots(rows, cols, squeeze=False)))
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _colour(scope: str, name: str, kinds: dict[str, str]) -> str:
    return kind_color(name if scope == "kind" else kinds.get(name, ""))


def survival_fit(survival: pd.DataFrame, estimates: pd.DataFrame, *, predicates: Sequence[str] | None = None,
                 predicate_kinds: dict[str, str] | None = None, max_days: float | None = None) -> Figure:
    """Kaplan–Meier survival of lifetimes (steps) against the fitted exponential ``e^{−rate·τ}``
    (line), per kind and for ``predicates`` (default: the six with the most lifetimes).

    Lasting kinds use ``change_rate``; episodic ones their relevance horizon (rate = 1 / horizon).
    ``τ``: days since the value became true. The shaded band is the rate's 95% interval.
    """
    require(survival, ["scope", "name", "days", "survival"], "survival")
    require(estimates, ["scope", "name", "quantity", "estimate", "low", "high", "source"], "estimates")
    kinds = predicate_kinds or {}
    truth = estimates[(estimates["source"] == "truth")
                      & estimates["quantity"].isin(["change_rate", "relevance_horizon_days"])]
    if predicates is None:
        predicates = top_predicates(truth, "change_rate", "truth")
    panels: list[tuple[str, str]] = [("kind", k) for k in KINDS if ((survival["scope"] == "kind") & (survival["name"] == k)).any()]
    panels += [("predicate", p) for p in predicates]
    fig, axes = _panels(len(panels))
    for ax, (scope, name) in zip(axes, panels):
        km = survival[(survival["scope"] == scope) & (survival["name"] == name)].sort_values("days")
        est = truth[(truth["scope"] == scope) & (truth["name"] == name)]
        colour = _colour(scope, name, kinds)
        top = float(max_days) if max_days is not None else float(km["days"].max()) if len(km) else 1.0
        top = top if top > 0 else 1.0
        ax.step(km["days"], km["survival"], where="post", color=colour, lw=1.4, label="Kaplan–Meier")
        if len(est):
            row = est.iloc[0]
            horizon = row["quantity"] == "relevance_horizon_days"
            rate, low, high = ((1 / row["estimate"], 1 / row["high"], 1 / row["low"]) if horizon
                               else (row["estimate"], row["low"], row["high"]))
            tau = np.linspace(0.0, max(top, 1e-9), 200)
            ax.plot(tau, np.exp(-rate * tau), label=f"exponential, rate {rate:.3g}/day", **_MODEL)
            ax.fill_between(tau, np.exp(-high * tau), np.exp(-low * tau), color="#000000", alpha=0.12, lw=0)
        ax.set_xlim(0, top)
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{name} ({scope})", fontsize="medium")
        ax.set_xlabel("days since the value became true")
        ax.set_ylabel("still unchanged (survival)")
        ax.grid(True, **GRID_STYLE)
        ax.legend(fontsize="x-small", frameon=False, loc="lower left")
    fig.suptitle("Lifetimes: Kaplan–Meier (left-truncated at the log's start) vs the fitted exponential")
    return fig


def silent_fit(curves: pd.DataFrame, estimates: pd.DataFrame, *, scope: str = "kind", names: Sequence[str] | None = None,
               predicate_kinds: dict[str, str] | None = None) -> Figure:
    """P(true and relevant | held and silent for d days): empirical (truth), the two-state model (log
    only) and the seed model ``c0·e^{−λd}`` (fitted to truth and to the log), per kind (``scope =
    "kind"``) or per predicate (default: the six with the most spells). Error bars: the 95%
    intervals of the ``p_true_silent_<d>d`` estimates.
    """
    require(curves, ["scope", "name", "days", "empirical", "model"], "curves")
    kinds = predicate_kinds or {}
    if names is None:
        if scope == "kind":
            names = [k for k in KINDS if ((curves["scope"] == "kind") & (curves["name"] == k)).any()]
        else:
            sizes = curves[(curves["scope"] == scope) & (curves["days"] == 0)].sort_values(["n", "name"], ascending=[False, True])
            names = list(sizes["name"].head(6))
    fig, axes = _panels(len(names))
    points = estimates[estimates["quantity"].str.startswith("p_true_silent_")] if len(estimates) else estimates
    for ax, name in zip(axes, names):
        c = curves[(curves["scope"] == scope) & (curves["name"] == name)].sort_values("days")
        colour = _colour(scope, name, kinds)
        if c["empirical"].notna().any():
            ax.plot(c["days"], c["empirical"], color=colour, lw=1.4, marker="o", ms=2.5, label="empirical (truth)")
        if c["model"].notna().any():
            ax.plot(c["days"], c["model"], label="two-state model (log)", **_MODEL)
        for col, style, label in (("seed_model_truth", "--", "seed model, λ from truth"),
                                  ("seed_model_log", ":", "seed model, λ from the log")):
            if col in c.columns and c[col].notna().any():
                ax.plot(c["days"], c[col], color="#777777", ls=style, lw=1.3, label=label)
        p = points[(points["scope"] == scope) & (points["name"] == name)] if len(points) else points
        for source, offset, col in (("truth", -0.8, colour), ("log", 0.8, "#000000")):
            q = p[p["source"] == source] if len(p) else p
            if len(q):
                d = q["quantity"].str.extract(r"_(\d+)d$")[0].astype(float).to_numpy() + offset
                err = np.abs(np.vstack([q["estimate"] - q["low"], q["high"] - q["estimate"]]).astype(float))
                ax.errorbar(d, q["estimate"], yerr=np.nan_to_num(err), fmt="none", ecolor=col, capsize=3, lw=1.1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{name} ({scope})", fontsize="medium")
        ax.set_xlabel("days held and silent (no re-mention)")
        ax.set_ylabel("P(true and relevant)")
        ax.grid(True, **GRID_STYLE)
        ax.legend(fontsize="x-small", frameon=False, loc="lower left")
    fig.suptitle("P(true | silent d days): empirical vs fitted (bars: 95% intervals at the reported days)")
    return fig
