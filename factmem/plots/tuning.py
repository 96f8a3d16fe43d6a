"""Figures of a tuning run: utility against the context budget, and the objective against each
searched parameter (a slice plot, which reads well for random search, where a heatmap would not).

Both take plain DataFrames, ``ax=None``/``axes=None``, and return the figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from factmem.errors import InputError
from factmem.plots.common import ROLE_STYLE, PlotFigure, column_label, legend_outside, light_grid, new_axes, require

__all__ = ["budget_curves", "slices"]

def budget_curves(curves: pd.DataFrame, *, budgets: Sequence[int] = (), ax: Axes | None = None,
                  title: str | None = None, ylabel: str = "utility@k (held out)") -> Figure:
    """Utility@k (or any metric) against the budget k, one line per parameter set.

    ``curves``: columns ``k``, ``value``, ``params`` (the line's role: recommended, baseline, seed
    defaults, current, or any name), and optionally ``low``/``high``: an interval drawn as a band
    around the line. ``budgets``: k values to mark (the ones the tune chose for)."""
    require(curves, ["k", "value", "params"], "curves")
    fig, ax = new_axes(ax, (7.6, 4.6))
    banded = {"low", "high"} <= set(curves.columns)
    for name, g in curves.groupby("params", sort=False):
        g = g.sort_values("k")
        role = ROLE_STYLE.get(str(name), {"lw": 1.5})
        style = {key: role[key] for key in ("color", "lw", "ls") if key in role}
        line, = ax.plot(g["k"].to_numpy(), g["value"].to_numpy(), label=str(name), **style)
        if banded:
            ax.fill_between(g["k"].to_numpy(), g["low"].to_numpy(np.float64), g["high"].to_numpy(np.float64),
                            color=line.get_color(), alpha=0.15, lw=0, zorder=0)
    if banded:
        ax.fill_between([], [], [], color="#999999", alpha=0.3, lw=0, label="95% interval over people")
    for k in budgets:
        ax.axvline(k, color="#bbbbbb", lw=0.8, zorder=0)
        ax.annotate(f"k = {k}", (k, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", fontsize="small", color="#666666")
    ax.set_xlabel("context budget k (facts per person in the prompt)")
    ax.set_ylabel(ylabel)
    ax.set_xlim(left=0)
    light_grid(ax)
    ax.set_title(title or "What each budget buys", loc="left", fontsize="medium")
    legend_outside(ax)
    return fig


def slices(results: pd.DataFrame, parameters: Sequence[str], metric: str, *, highlight: dict[str, int] | None = None,
           log_params: Sequence[str] = (), axes: Sequence[Axes] | None = None, lower_is_better: bool = False,
           ncols: int = 4) -> Figure:
    """The objective against each searched parameter, one panel per parameter, every candidate a dot;
    ``highlight`` marks rows by name (``{"recommended": 12, "baseline": 0}``)."""
    require(results, [metric, *parameters], "results")
    if not parameters:
        raise InputError("slices: give at least one parameter")
    n = len(parameters)
    cols = min(ncols, n)
    rows = math.ceil(n / cols)
    if axes is None:
        fig: Figure = PlotFigure(figsize=(3.1 * cols + 0.6, 2.6 * rows + 0.6), layout="constrained")
        grid = fig.subplots(rows, cols, squeeze=False)
        panel_axes = list(grid.ravel())
        for extra in panel_axes[n:]:
            extra.set_visible(False)
    else:
        panel_axes = list(axes)
        if len(panel_axes) < n:
            raise InputError(f"slices: {n} parameters need {n} axes, got {len(panel_axes)}")
        fig = panel_axes[0].get_figure(root=True)
    y = pd.to_numeric(results[metric], errors="coerce").to_numpy(np.float64)
    marks = highlight or {}
    for ax, name in zip(panel_axes, parameters):
        x = pd.to_numeric(results[name], errors="coerce").to_numpy(np.float64)
        ax.scatter(x, y, s=9, color="#999999", alpha=0.6, lw=0, label="candidates")
        for label, row in marks.items():
            style = ROLE_STYLE.get(label, {"color": "black", "marker": "o", "size": 45})
            ax.scatter([x[row]], [y[row]], s=style["size"] * 0.6, color=style["color"], marker=style["marker"],
                       edgecolor="black", lw=0.6, zorder=5, label=label)
        if name in log_params and np.nanmin(x) > 0:
            ax.set_xscale("log")
        head, _, kind = name.partition(".")  # decay_rate.episodic -> "decay rate (episodic)"
        ax.set_xlabel(head.replace("_", " ") + (f" ({kind.replace('_', ' ')})" if kind else ""), fontsize="small")
        ax.tick_params(labelsize="small")
        ax.grid(True, color="#eeeeee", lw=0.6)
        ax.set_axisbelow(True)
    panel_axes[0].set_ylabel(f"{column_label(metric)}\n({'lower' if lower_is_better else 'higher'} is better)",
                             fontsize="small")
    handles, labels = panel_axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize="small", frameon=False)
    return fig
