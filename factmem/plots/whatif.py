"""Figures of a what-if on a production memory (:mod:`factmem.production`): the believed-set size over
time under both parameter sets, and the distribution of the per-subject change.

Both take plain DataFrames (the what-if's ``over_time`` and ``subjects`` tables), ``ax=None``/
``axes=None``, and return the figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from factmem.plots.common import TimeAxis, legend_outside, light_grid, new_axes, new_panels, numbers, require, seconds

__all__ = ["SIDE_STYLE", "believed_over_time", "subject_changes"]

#: line style of each side of a what-if
SIDE_STYLE: dict[str, dict] = {
    "current": {"color": "#555555", "lw": 1.8, "ls": "--"},
    "new": {"color": "#0072B2", "lw": 2.0, "ls": "-"},
}


def believed_over_time(table: pd.DataFrame, *, ax: Axes | None = None, held: bool = True,
                       labels: dict[str, str] | None = None, time: str = "auto",
                       title: str | None = None) -> Figure:
    """Believed-set size (and, with ``held``, the active set) at each checkpoint, per side.

    ``table``: columns ``t`` (Unix seconds), ``believed_current``, ``believed_new`` (and
    ``held_current``, ``held_new`` when ``held``). ``labels``: legend text per side."""
    cols = ["t", "believed_current", "believed_new"] + (["held_current", "held_new"] if held else [])
    require(table, cols, "table")
    fig, ax = new_axes(ax, (8.0, 4.4))
    t = seconds(table["t"], "table['t']")
    axis = TimeAxis(t, mode=time)
    x = axis.x(t)
    names = {"current": "current parameters", "new": "new parameters", **(labels or {})}
    lines = {f"{what}_{side}": numbers(table, f"{what}_{side}", "table")
             for what in (("believed", "held") if held else ("believed",)) for side in ("current", "new")}
    notes = []
    # lines that coincide are drawn once, with a note: four legend entries over one line say nothing
    if held and all(_same(lines[f"believed_{side}"], lines[f"held_{side}"]) for side in ("current", "new")):
        held = False
        notes.append("active set = believed set (the thresholds are equal)")
    sides: list[tuple[str, ...]] = [("current",), ("new",)]
    if _same(lines["believed_current"], lines["believed_new"]) and (
            not held or _same(lines["held_current"], lines["held_new"])):
        sides = [("current", "new")]
        notes.append("the new parameters give the same sizes as the current ones")
    for group in sides:
        style = SIDE_STYLE[group[-1]]
        who = " and ".join(names[side] for side in group)
        ax.plot(x, lines[f"believed_{group[0]}"], label=f"believed — {who}", **style)
        if held:
            ax.plot(x, lines[f"held_{group[0]}"], label=f"active — {who}", color=style["color"], lw=0.9, ls=":",
                    alpha=0.9)
    if notes:
        ax.annotate("; ".join(notes), (0.01, 0.02), xycoords="axes fraction", fontsize="small", color="#555555")
    axis.decorate(ax)
    ax.set_ylabel("facts")
    ax.set_ylim(bottom=0)
    light_grid(ax)
    ax.set_title(title or "Believed-set size over time", loc="left", fontsize="medium")
    legend_outside(ax)
    return fig


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two lines would look like one: within 0.5% of the larger one's peak everywhere."""
    scale = max(float(np.nanmax(np.abs(a), initial=0.0)), float(np.nanmax(np.abs(b), initial=0.0)), 1.0)
    return bool(np.nanmax(np.abs(a - b), initial=0.0) <= 0.005 * scale)


def subject_changes(subjects: pd.DataFrame, *, axes: Sequence[Axes] | None = None, budget: int | None = None,
                    bins: int = 30) -> Figure:
    """Per-subject change: the believed-set size at the compared time (new − current) and utility@k
    per session start (new − current, subjects with session starts), as histograms.

    ``subjects``: columns ``believed_current``, ``believed_new``, ``utility_current``, ``utility_new``."""
    require(subjects, ["believed_current", "believed_new", "utility_current", "utility_new"], "subjects")
    fig, (top, bottom) = new_panels(axes, 2, (7.6, 6.2), what="subject_changes", sharex=False)
    believed = numbers(subjects, "believed_new", "subjects") - numbers(subjects, "believed_current", "subjects")
    utility = numbers(subjects, "utility_new", "subjects") - numbers(subjects, "utility_current", "subjects")
    utility = utility[np.isfinite(utility)]
    for ax, values, label in ((top, believed, "Δ believed facts per person (new − current)"),
                              (bottom, utility, f"Δ utility@{budget if budget else 'k'} per session start, per person "
                                                "(new − current)")):
        if values.size:
            lo, hi = float(values.min()), float(values.max())
            if lo == hi:
                lo, hi = lo - 0.5, hi + 0.5
            ax.hist(values, bins=np.linspace(lo, hi, bins + 1).tolist(), color="#0072B2", alpha=0.85)
        ax.axvline(0.0, color="#444444", lw=1.0, ls="--")
        ax.set_xlabel(label)
        ax.set_ylabel("people")
        light_grid(ax, "y")
    top.set_title(f"Per-person change ({len(believed)} people)", loc="left", fontsize="medium")
    return fig
