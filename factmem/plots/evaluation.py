"""Figures of evaluations: metrics over checkpoints, abstraction passes, sweeps, Pareto fronts,
calibration.

Part of :mod:`factmem.plots` (import from there). Inputs are plain DataFrames of results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import Normalize, to_rgba_array
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation

from factmem.errors import InputError
from factmem.plots.common import (
    KIND_COLORS,
    ROLE_STYLE,
    PlotFigure,
    TimeAxis,
    kind_order,
    legend_outside,
    light_grid,
    new_axes,
    new_panels,
    numbers,
    require,
    seconds,
)

__all__ = ["METRIC_LABELS", "OUTCOME_COLORS", "checkpoint_metrics", "abstraction_outcomes", "sweep_heatmap",
    "pareto_front", "pareto", "reliability"]

#: Axis labels with units for metric columns factmem's simulator and sweep produce.
METRIC_LABELS: dict[str, str] = {
    "believed": "believed-set size (facts)",
    "needed": "needed facts",
    "precision": "precision (0–1)",
    "recall": "recall (0–1)",
    "f1": "F1 (0–1)",
    "stale": "stale beliefs (facts)",
    "lost": "lost facts",
    "log_loss": "log loss (nats)",
    "brier": "Brier score (0–1)",
    "rmse_bins": "RMSE(bins) (0–1)",
    "auc": "AUC (0–1)",
}
_LOWER_IS_BETTER = ("loss", "brier", "rmse", "mse", "mae", "error", "ece", "stale", "lost", "believed",
                    "size", "regret", "calls", "seconds", "time")

OUTCOME_COLORS: dict[str, str] = {
    "derived": "#1B9E77", "unchanged": "#BDBDBD", "empty": "#E6AB02", "skipped": "#A6761D", "failed": "#D95F02",
    "created": "#1B9E77", "reinforced": "#7570B3", "pruned": "#E7298A",
}
_OUTCOME_LABELS = {"derived": "answered with facts"}


def _metric_label(name: str) -> str:
    return METRIC_LABELS.get(name, name)


def _lower_is_better(metric: str) -> bool:
    m = metric.lower()
    return any(w in m for w in _LOWER_IS_BETTER)


def _is_count(values: np.ndarray) -> bool:
    v = values[np.isfinite(values)]
    return bool(v.size) and bool(np.all(v == np.round(v)))  # whole numbers: counts; else shares


# -- metrics over time ----------------------------------------------------------------------------

def checkpoint_metrics(metrics: pd.DataFrame, *, axes: Sequence[Axes] | None = None, time: str = "auto",
                       title: str | None = None) -> Figure:
    """Metrics at each replay checkpoint, three panels sharing the time axis: believed-set size (and
    ``needed`` when present); precision and recall (0–1); stale beliefs (a count at each checkpoint)
    and lost facts (a running total since the start).

    ``metrics``: columns ``t, believed, precision, recall, stale, lost`` (+ optional ``needed``).
    ``axes``: three Axes to draw into (or two: stale/lost then go on a right-hand axis of the second).
    """
    require(metrics, ["t", "believed", "precision", "recall", "stale", "lost"], "metrics")
    m = metrics.sort_values("t", kind="mergesort")
    t = seconds(m["t"], "metrics column 't'")
    taxis = TimeAxis(t, time)
    x = taxis.x(t)
    fig, axs = new_panels(axes, 3, (9.5, 7.4), what="checkpoint_metrics", height_ratios=(1.0, 1.0, 0.8),
                          allowed=(3, 2))
    style: dict[str, Any] = {"marker": "o", "ms": 3.5 if len(m) <= 60 else 0, "lw": 1.8}

    a = axs[0]
    a.plot(x, numbers(m, "believed", "metrics"), color="#332288", label="believed", **style)
    if "needed" in m.columns:
        a.plot(x, numbers(m, "needed", "metrics"), color="#555555", ls="--", label="needed (true and relevant)", **style)
    a.set_ylabel("facts (count)")
    a.set_ylim(bottom=0)
    a.set_title("Believed-set size", loc="left", fontsize="medium")
    legend_outside(a)

    b = axs[1]
    b.plot(x, numbers(m, "precision", "metrics"), color="#332288", label="precision", **style)
    b.plot(x, numbers(m, "recall", "metrics"), color="#44AA99", label="recall", **style)
    b.set_ylim(0, 1.03)
    b.set_ylabel("score (0–1)")
    b.set_title("Precision and recall of the believed set", loc="left", fontsize="medium")

    stale, lost = numbers(m, "stale", "metrics"), numbers(m, "lost", "metrics")
    counts = _is_count(np.concatenate([stale, lost]))
    c = axs[2] if len(axs) == 3 else b.twinx()
    # stale is a state (counted afresh at each checkpoint), lost a running total: the labels say so
    c.plot(x, stale, color="#999933", label="stale: believed, no longer true (at each checkpoint)", **style)
    c.plot(x, lost, color="#882255", label="lost: archived while true, needed again (cumulative)", **style)
    c.set_ylabel("facts (count)" if counts else "share of believed (0–1)")
    c.set_ylim(bottom=0)
    if len(axs) == 3:
        c.set_title("Stale beliefs (at each checkpoint) and lost facts (cumulative)", loc="left", fontsize="medium")
        legend_outside(b)
        legend_outside(c)
    else:  # one legend for both y axes of the shared panel; the right axis's lines dashed
        for ln in c.get_lines():
            ln.set_linestyle("--")
        h1, l1 = b.get_legend_handles_labels()
        h2, l2 = c.get_legend_handles_labels()
        # past the right-hand axis's ticks and label (~0.8 in), so the legend does not cover them
        shift = c.transAxes + ScaledTranslation(0.8, 0.0, fig.dpi_scale_trans)
        c.legend(h1 + h2, l1 + l2, loc="upper left", bbox_to_anchor=(1.0, 1.0), bbox_transform=shift,
                 borderaxespad=0.0, frameon=False, fontsize="small", handlelength=3.5)
        c.set_ylabel(c.get_ylabel() + " — dashed")
    for i, ax in enumerate(axs):
        light_grid(ax)
        taxis.decorate(ax, label=(i == len(axs) - 1))
    if title:
        fig.suptitle(title)
    return fig


def abstraction_outcomes(passes: pd.DataFrame, *, axes: Sequence[Axes] | None = None, time: str = "auto",
                         title: str | None = None) -> Figure:
    """What each abstraction pass did, one bar group per pass (x: pass date, in order).

    Panel 1, clusters by outcome (stacked): ``unchanged``, ``empty``, ``skipped``, ``failed`` and, when
    an ``eligible`` column is present, ``derived`` (the rest). Panel 2, derived facts ``created`` and
    ``reinforced`` (stacked) next to the children archived by ``pruned``. Panel 3, only when
    ``believed_before``/``believed_after`` are present: the believed-set size around each pass, i.e.
    pruning's effect on memory size.
    """
    cols = ["at", "created", "reinforced", "unchanged", "empty", "skipped", "failed", "pruned"]
    require(passes, cols, "passes")
    p = passes.sort_values("at", kind="mergesort").reset_index(drop=True)
    has_size = {"believed_before", "believed_after"} <= set(p.columns)
    n_panels = 3 if has_size else 2
    fig, axs = new_panels(axes, n_panels, (max(7.5, 0.55 * len(p) + 5.5), 2.6 * n_panels + 0.9),
                          what="abstraction_outcomes", sharex=True)
    at = seconds(p["at"], "passes column 'at'")
    taxis = TimeAxis(at, time)
    xi = np.arange(len(p), dtype=np.float64)
    val = {c: numbers(p, c, "passes") for c in cols[1:]}

    cl = ["unchanged", "empty", "skipped", "failed"]
    if "eligible" in p.columns:
        val["derived"] = numbers(p, "eligible", "passes") - sum(val[c] for c in cl)
        cl = ["derived"] + cl
    _stacked(axs[0], xi, [(c, val[c]) for c in cl], width=0.7)
    axs[0].set_ylabel("clusters (count)")
    axs[0].set_title("Clusters by outcome", loc="left", fontsize="medium")

    w = 0.38
    _stacked(axs[1], xi - w / 2, [("created", val["created"]), ("reinforced", val["reinforced"])], width=w)
    axs[1].bar(xi + w / 2, val["pruned"], width=w, color=OUTCOME_COLORS["pruned"], label="pruned (children archived)",
               edgecolor="white", lw=0.5)
    axs[1].set_ylabel("facts (count)")
    axs[1].set_title("Derived facts and pruning", loc="left", fontsize="medium")

    if has_size:
        before, after = numbers(p, "believed_before", "passes"), numbers(p, "believed_after", "passes")
        a = axs[2]
        a.bar(xi - w / 2, before, width=w, color="#9ECAE1", label="before the pass")
        a.bar(xi + w / 2, after, width=w, color="#3182BD", label="after the pass")
        delta = after - before
        top = np.fmax(before, after)
        for xx, yy, d in zip(xi, top, delta):  # one label per pass
            if np.isfinite(d) and d != 0:
                a.annotate(f"{d:+.0f}", (xx, yy), textcoords="offset points", xytext=(0, 2), ha="center",
                           fontsize="x-small", color="#B2182B" if d < 0 else "#1A9850")
        a.set_ylabel("believed facts (count)")
        a.set_title("Memory size around each pass", loc="left", fontsize="medium")
    labels = taxis.tick_text(at)
    if len(p) > 1 and len(set(labels)) < len(labels):  # several passes a day: number them
        labels = [f"{s}\n#{i + 1}" for i, s in enumerate(labels)]
    step = max(1, int(np.ceil(len(p) / 16)))  # thin labels so dates never collide
    for ax in axs:
        legend_outside(ax)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        lo, hi = ax.get_ylim()
        ax.set_ylim(0, max(hi * 1.1, 1.0))  # headroom above the tallest stack
        light_grid(ax, "y")
        ax.set_xlim(-0.6, len(p) - 0.4)
    axs[-1].set_xticks(xi[::step], labels[::step], rotation=30 if len(p) > 6 else 0,
                       ha="right" if len(p) > 6 else "center")
    axs[-1].set_xlabel("abstraction pass (" + ("UTC date" if taxis.dates else taxis.label) + ")")
    if title:
        fig.suptitle(title)
    return fig


def _stacked(ax: Axes, x: np.ndarray, parts: list[tuple[str, np.ndarray]], width: float) -> None:
    bottom = np.zeros_like(x)
    for name, v in parts:  # one bar series per outcome
        v = np.nan_to_num(v)
        ax.bar(x, v, width=width, bottom=bottom, color=OUTCOME_COLORS.get(name, "#888888"),
               label=_OUTCOME_LABELS.get(name, name),
               edgecolor="white", lw=0.5)
        bottom = bottom + v


# -- sweeps ----------------------------------------------------------------------------------------

def sweep_heatmap(results: pd.DataFrame, x: str, y: str, metric: str, *, agg: str | Callable = "mean",
                  ax: Axes | None = None, annotate: bool = True, lower_is_better: bool | None = None,
                  cmap: str = "viridis", title: str | None = None) -> Figure:
    """A sweep's ``metric`` over two parameters: ``results`` has one row per parameter set with flat
    parameter columns (``x``, ``y``) and metric columns; rows sharing (x, y) are aggregated with
    ``agg`` (over the other parameters, seeds, folds). The best cell is outlined and starred; the
    colour map runs from worst (dark) to best (bright). ``lower_is_better`` defaults from the metric
    name (losses, Brier, RMSE, stale, lost, believed: lower)."""
    require(results, [x, y, metric], "results")
    df = results[[x, y]].copy()
    df[metric] = numbers(results, metric, "results")
    df = df[df[x].notna() & df[y].notna()]
    if df.empty or not np.isfinite(df[metric].to_numpy()).any():
        raise InputError(f"results has no row with {x!r}, {y!r} and a finite {metric!r}: nothing to plot")
    lower = _lower_is_better(metric) if lower_is_better is None else bool(lower_is_better)
    grid = df.pivot_table(index=y, columns=x, values=metric, aggfunc=agg, dropna=False, observed=True)
    grid = grid.sort_index(axis=0).sort_index(axis=1)
    per_cell = int(df.groupby([x, y], observed=True).size().max())
    z = grid.to_numpy(dtype=np.float64)
    ny, nx = z.shape
    fig, ax = new_axes(ax, (max(5.5, 0.75 * nx + 3.6), max(4.0, 0.5 * ny + 2.4)))
    finite = np.isfinite(z)
    norm = Normalize(np.nanmin(z), np.nanmax(z) if np.nanmax(z) > np.nanmin(z) else np.nanmin(z) + 1e-12)
    cm = cmap + "_r" if lower and not cmap.endswith("_r") else cmap
    im = ax.imshow(np.ma.masked_invalid(z), origin="lower", aspect="auto", cmap=cm, norm=norm,
                   interpolation="nearest")
    if not finite.all():  # missing combinations: hatched, not a misleading colour
        ax.set_facecolor("#f2f2f2")
        for r, c in zip(*np.nonzero(~finite)):
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, hatch="//", ec="#cccccc", lw=0))
    cb = fig.colorbar(im, ax=ax, shrink=0.95)
    how = agg if isinstance(agg, str) else getattr(agg, "__name__", "aggregate")
    cb.set_label(_metric_label(metric) + (f" — {how} of {per_cell} runs/cell" if per_cell > 1 else "")
                 + (" (lower is better)" if lower else " (higher is better)"))
    flat = np.where(finite, z, np.inf if lower else -np.inf)
    best = np.unravel_index(int(np.argmin(flat) if lower else np.argmax(flat)), z.shape)
    ax.add_patch(Rectangle((best[1] - 0.5, best[0] - 0.5), 1, 1, fill=False, ec="white", lw=3.2, zorder=4))
    ax.add_patch(Rectangle((best[1] - 0.5, best[0] - 0.5), 1, 1, fill=False, ec="black", lw=1.4, zorder=5))
    ax.plot([best[1]], [best[0] + (0.32 if annotate else 0.0)], marker="*", ms=11, color="white",
            mec="black", mew=0.8, ls="", zorder=6, label=f"best: {z[best]:.4g}")
    if annotate and nx * ny <= 400:
        rgba = to_rgba_array(im.cmap(norm(np.where(finite, z, np.nanmin(z)))).reshape(-1, 4))
        lum = (0.299 * rgba[:, 0] + 0.587 * rgba[:, 1] + 0.114 * rgba[:, 2]).reshape(z.shape)
        fs = "small" if nx <= 10 else "x-small"
        for r, c in zip(*np.nonzero(finite)):  # one number per cell (≤ 400 cells)
            ax.text(c, r - (0.12 if (r, c) == best else 0), f"{z[r, c]:.3g}", ha="center", va="center",
                    fontsize=fs, color="black" if lum[r, c] > 0.5 else "white", zorder=7)
    ax.set_xticks(np.arange(nx), [_fmt(v) for v in grid.columns], rotation=45 if nx > 8 else 0)
    ax.set_yticks(np.arange(ny), [_fmt(v) for v in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title if title is not None else f"{metric} by {x} and {y}")
    return fig


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v)


def pareto_front(df: pd.DataFrame, x: str, y: str, minimize_x: bool = True, maximize_y: bool = True) -> np.ndarray:
    """Boolean mask of the rows of ``df`` no other row dominates in (x, y).

    A row dominates another when it is at least as good on both and strictly better on one; equal
    rows do not dominate each other, so duplicates on the front are all kept. Rows with a missing x
    or y are never on the front. Vectorized: unique points in lexicographic order (best x first);
    a point is dominated exactly when some earlier point is at least as good on y, i.e. when the
    running best of y before it is at least as good as its own.
    """
    require(df, [x, y], "df", allow_empty=True)
    a = numbers(df, x, "df") * (1.0 if minimize_x else -1.0)
    b = numbers(df, y, "df") * (-1.0 if maximize_y else 1.0)
    ok = np.isfinite(a) & np.isfinite(b)
    mask = np.zeros(len(df), dtype=bool)
    if not ok.any():
        return mask
    pts, inv = np.unique(np.column_stack([a[ok], b[ok]]), axis=0, return_inverse=True)
    prev_best = np.concatenate([[np.inf], np.minimum.accumulate(pts[:-1, 1])])
    mask[ok] = (pts[:, 1] < prev_best)[inv.ravel()]
    return mask


def pareto(results: pd.DataFrame, x: str = "believed", y: str = "recall", *, minimize_x: bool = True,
           maximize_y: bool = True, highlight: dict[str, Any] | None = None, ax: Axes | None = None,
           title: str | None = None) -> Figure:
    """Scatter of every parameter set in (``x``, ``y``) with the Pareto front as a step line.

    ``highlight``: label → a row index label of ``results`` (e.g. the seed defaults) or the name of
    a boolean column (e.g. ``"recommended"``); each is drawn with its own marker and named.
    """
    require(results, [x, y], "results")
    xv, yv = numbers(results, x, "results"), numbers(results, y, "results")
    ok = np.isfinite(xv) & np.isfinite(yv)
    if not ok.any():
        raise InputError(f"results has no row with finite {x!r} and {y!r}: nothing to plot")
    front = pareto_front(results, x, y, minimize_x, maximize_y)
    fig, ax = new_axes(ax, (8.5, 5.2))
    ax.scatter(xv[ok & ~front], yv[ok & ~front], s=22, c="#9E9E9E", alpha=0.7, lw=0, label="parameter sets",
               zorder=2)
    order = np.argsort(xv[front], kind="mergesort")
    fx, fy = xv[front][order], yv[front][order]
    ax.step(fx, fy, where="post" if minimize_x else "pre", color="#882255", lw=1.8, zorder=3)
    ax.scatter(fx, fy, s=34, c="#882255", edgecolors="black", linewidths=0.5, zorder=4)
    ax.plot([], [], color="#882255", marker="o", mec="black", mew=0.5, lw=1.8,
            label=f"Pareto front ({int(front.sum())} of {int(ok.sum())})")
    markers = ["*", "D", "P", "s", "v", "h"]
    colors = ["#DDAA33", "#004488", "#BB5566", "#88CCEE", "#999933", "#000000"]
    for i, (name, sel) in enumerate((highlight or {}).items()):  # a few named parameter sets
        rows = _highlight_rows(results, name, sel)
        # a role (recommended, baseline, ...) is drawn as in every other figure of a tuning run
        role = ROLE_STYLE.get(str(name), {"marker": markers[i % 6], "color": colors[i % 6],
                                          "size": 170 if markers[i % 6] == "*" else 80})
        ax.scatter(xv[rows], yv[rows], s=role["size"], marker=role["marker"], c=role["color"], edgecolors="black",
                   linewidths=0.8, zorder=6, label=str(name))
    ax.set_xlabel(_metric_label(x) + (" — lower is better" if minimize_x else " — higher is better"))
    ax.set_ylabel(_metric_label(y) + (" — higher is better" if maximize_y else " — lower is better"))
    light_grid(ax)
    legend_outside(ax)
    ax.set_title(title if title is not None else f"Trade-off: {y} vs {x}")
    return fig


def _highlight_rows(results: pd.DataFrame, name: str, sel: Any) -> np.ndarray:
    if isinstance(sel, str) and sel in results.columns:
        col = results[sel]
        if not pd.api.types.is_bool_dtype(col):
            raise InputError(f"highlight {name!r}: column {sel!r} must be boolean, got dtype {col.dtype}")
        rows = col.fillna(False).to_numpy(bool)
    else:
        keys = list(sel) if isinstance(sel, (list, tuple, np.ndarray, pd.Index)) else [sel]
        missing = [k for k in keys if k not in results.index]
        if missing:
            raise InputError(f"highlight {name!r}: {missing[0]!r} is neither a row index of results nor a column")
        rows = results.index.isin(keys)
    if not rows.any():
        raise InputError(f"highlight {name!r}: column {sel!r} selects no row")
    return rows


# -- calibration ------------------------------------------------------------------------------------

def reliability(bins: pd.DataFrame, *, ax: Axes | None = None, by: str | None = None,
                title: str | None = None) -> Figure:
    """Calibration (reliability) curve: mean predicted confidence per bin against the observed rate
    at which those facts were true and relevant, with the diagonal of perfect calibration. Marker
    area grows with the bin's count ``n``; a lower panel shows ``n`` per bin.

    ``bins``: columns ``p_mean, y_mean, n`` and optionally a grouping column: ``by`` names it (one
    curve per group); by default ``kind`` is used when present.
    """
    require(bins, ["p_mean", "y_mean", "n"], "bins")
    if by is None and "kind" in bins.columns:
        by = "kind"
    if by is not None:
        require(bins, [by], "bins")
    p, yv, n = numbers(bins, "p_mean", "bins"), numbers(bins, "y_mean", "bins"), numbers(bins, "n", "bins")
    ok = np.isfinite(p) & np.isfinite(yv) & np.isfinite(n) & (n > 0)
    if not ok.any():
        raise InputError("bins has no bin with finite p_mean, y_mean and n > 0: nothing to plot")
    groups = bins[by].astype(object).to_numpy() if by else np.full(len(bins), "all", dtype=object)
    if ax is None:
        fig: Figure = PlotFigure(figsize=(8.4, 6.8), layout="constrained")
        top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": (3.2, 1.0)})
    else:
        fig, top = new_axes(ax, (0, 0))
        from mpl_toolkits.axes_grid1 import make_axes_locatable  # splits the caller's axes in two

        bottom = make_axes_locatable(top).append_axes("bottom", size="28%", pad=0.35, sharex=top)
    top.plot([0, 1], [0, 1], color="#888888", ls="--", lw=1.0, label="perfect calibration", zorder=1)
    names = kind_order(groups[ok]) if by == "kind" else list(pd.unique(groups[ok]))
    palette = ["#332288", "#44AA99", "#882255", "#999933", "#88CCEE", "#AA4499", "#000000"]
    nmax = float(n[ok].max())
    # bar width: 1 / (bins per group), split among the groups (p_mean is a bin's mean, not its
    # centre, so gaps between p_means say little about bin widths)
    per_group = int(pd.Series(groups[ok]).value_counts().max())
    sub = 0.85 / max(per_group, 5) / max(1, len(names))
    for i, g in enumerate(names):  # one curve per group (kinds: a handful)
        sel = ok & (groups == g)
        o = np.argsort(p[sel], kind="mergesort")
        c = KIND_COLORS.get(g, palette[i % len(palette)]) if by == "kind" else palette[i % len(palette)]
        lab = f"{g} (n={int(n[sel].sum())})" if by else f"n={int(n[sel].sum())}"
        top.plot(p[sel][o], yv[sel][o], color=c, lw=1.6, zorder=3)
        top.scatter(p[sel][o], yv[sel][o], s=18 + 260 * n[sel][o] / nmax, color=c, edgecolors="white",
                    linewidths=0.7, zorder=4)
        top.plot([], [], color=c, marker="o", lw=1.6, label=lab)
        bottom.bar(p[sel] + (i - (len(names) - 1) / 2) * sub, n[sel], width=sub, color=c, alpha=0.85)
    top.set_xlim(-0.02, 1.02)  # room for the markers of bins at 0 and 1
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel("observed frequency true & relevant (0–1)")
    light_grid(top)
    legend_outside(top, title=by if by else None)
    top.set_title(title if title is not None else "Calibration of effective confidence")
    bottom.set_xlabel("predicted: mean effective confidence in bin (0–1)")
    bottom.set_ylabel("count per bin (n)")
    if n[ok].max() / max(n[ok].min(), 1.0) > 100:
        bottom.set_yscale("log")
    light_grid(bottom, "y")
    top.tick_params(labelbottom=False)
    return fig
