"""Figures of the memory itself: confidence trajectories, decay curves, lineage timelines.

Part of :mod:`factmem.plots` (import from there). Inputs are the DataFrames ``FactStore`` returns.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from factmem.errors import InputError
from factmem.plots.common import (
    STATUS_COLORS,
    STATUS_HATCH,
    TimeAxis,
    confidence_axis,
    kind_color,
    kind_colors,
    kind_handles,
    kind_order,
    legend_outside,
    light_grid,
    new_axes,
    numbers,
    require,
    seconds,
    threshold_line,
)

__all__ = ["trajectories", "kind_trajectories", "decay_curves", "lineage"]

_LN2 = float(np.log(2.0))
_SRC_GRID, _SRC_EVIDENCE, _SRC_EVENT = 0, 1, 2
#: colours of the groups of ``trajectories(color_by=...)`` (Okabe–Ito, then Tol: colour-blind safe)
_GROUP_PALETTE = ("#0072B2", "#009E73", "#D55E00", "#CC79A7", "#E69F00", "#56B4E9", "#332288", "#882255")


def _interp_per_fact(fid_rank: np.ndarray, t: np.ndarray, y: np.ndarray, q_rank: np.ndarray,
                     q_t: np.ndarray) -> np.ndarray:
    """Value of each fact's curve at query times, all facts in one ``np.interp``.

    Each fact's times are shifted into a block of its own (rank × span) so one monotone key covers
    every fact. Interpolation is in log space: between reinforcements the curve is a pure
    exponential, so this is exact, not an approximation of it.
    """
    span = float(np.nanmax(t) - np.nanmin(t)) + 1.0
    base = float(np.nanmin(t))
    key = fid_rank * (3.0 * span) + (t - base)
    qkey = q_rank * (3.0 * span) + (q_t - base)
    logy = np.log(np.clip(y, 1e-12, None))
    return np.exp(np.interp(qkey, key, logy))


def trajectories(traj: pd.DataFrame, *, evidence: pd.DataFrame | None = None, facts: pd.DataFrame | None = None,
                 threshold: float | None = None, ax: Axes | None = None, label: str | None = "object",
                 time: str = "auto", max_labels: int = 12, title: str | None = None, color_by: str = "kind",
                 colors: Mapping[str, str] | None = None) -> Figure:
    """Effective confidence of individual facts over time, one line per fact coloured by kind (or by
    another column of ``traj``: ``color_by``).

    ``traj``: ``FactStore.trajectories(ids, start, end, step)`` (columns ``fact_id, t, kind,
    effective_confidence, status`` and the ``label`` column). Lines are solid while the fact is
    active and dotted and faded once it has left the active set. ``evidence``
    (``FactStore.evidence()``: ``fact_id, observed_at, action, confidence``) adds the exact insert and
    reinforcement points to each line, with markers at the jumps. ``facts`` (``id, status,
    status_changed_at``, e.g. ``FactStore.facts()``) marks when facts were superseded or archived.
    ``threshold`` draws the archive threshold. ``label`` names the column written next to each line
    (when at most ``max_labels`` facts; None for no labels). ``time``: ``"auto"``, ``"date"`` (UTC)
    or ``"days"`` (since the first time). ``color_by``: the column whose value colours each fact's
    line and marks — ``"kind"`` (default, the kind colours of every figure) or any per-fact column,
    e.g. the role a fact plays (derived, supports it, unrelated); its values get ``colors`` (value →
    colour) or, for values not given there, colour-blind-safe colours in order of appearance, and
    the legend names each value with its number of facts.
    """
    need = ["fact_id", "t", "kind", "effective_confidence", "status"] + ([label] if label else [])
    if color_by != "kind":
        need.append(color_by)
    require(traj, need, "traj (FactStore.trajectories)")
    pts = pd.DataFrame({
        "fid": traj["fact_id"].to_numpy(np.int64),
        "t": seconds(traj["t"], "traj column 't'"),
        "y": numbers(traj, "effective_confidence", "traj"),
        "active": (traj["status"] == "active").fillna(False).to_numpy(bool),
        "src": _SRC_GRID,
    })
    per_fact = traj.drop_duplicates("fact_id").set_index("fact_id")
    ids = per_fact.index.to_numpy(np.int64)
    tmin, tmax = float(np.nanmin(pts["t"])), float(np.nanmax(pts["t"]))

    ev = None
    if evidence is not None:
        require(evidence, ["fact_id", "observed_at", "action", "confidence"], "evidence", allow_empty=True)
        ev_t = seconds(evidence["observed_at"], "evidence column 'observed_at'")
        keep = evidence["fact_id"].isin(ids).to_numpy() & (ev_t >= tmin) & (ev_t <= tmax)
        ev = pd.DataFrame({"fid": evidence["fact_id"].to_numpy()[keep].astype(np.int64), "t": ev_t[keep],
                           "y": numbers(evidence, "confidence", "evidence")[keep], "active": True,
                           "src": _SRC_EVIDENCE, "action": evidence["action"].to_numpy(object)[keep]})
        # several evidence rows at one instant: the last one recorded is the fact's state after it
        ev = ev.drop_duplicates(["fid", "t"], keep="last")
        pts = pd.concat([pts, ev.drop(columns="action")], ignore_index=True)

    pts = pts.sort_values(["fid", "t", "src"], ascending=[True, True, False], kind="mergesort")
    rank_of = pd.Series(np.arange(len(ids), dtype=np.float64), index=ids)

    events = None
    if facts is not None:
        require(facts, ["id", "status", "status_changed_at"], "facts", allow_empty=True)
        f_t = seconds(facts["status_changed_at"], "facts column 'status_changed_at'")
        keep = (facts["id"].isin(ids).to_numpy() & facts["status"].isin(["superseded", "archived"]).to_numpy()
                & np.isfinite(f_t) & (f_t >= tmin) & (f_t <= tmax))
        if keep.any():
            valid = pts[np.isfinite(pts["y"].to_numpy())]
            fid = facts["id"].to_numpy()[keep].astype(np.int64)
            y = _interp_per_fact(rank_of.loc[valid["fid"]].to_numpy(), valid["t"].to_numpy(), valid["y"].to_numpy(),
                                 rank_of.loc[fid].to_numpy(), f_t[keep])
            events = pd.DataFrame({"fid": fid, "t": f_t[keep], "y": y, "active": True, "src": _SRC_EVENT,
                                   "status": facts["status"].to_numpy(object)[keep]})
            pts = pd.concat([pts, events.drop(columns="status")], ignore_index=True).sort_values(
                ["fid", "t", "src"], ascending=[True, True, False], kind="mergesort")
    # an exact point (evidence, event) replaces the grid point at the same time
    pts = pts.drop_duplicates(["fid", "t"], keep="first").reset_index(drop=True)
    if ev is not None and facts is not None and "decay_rate" in facts.columns and len(ev):
        pts = _add_prejump_points(pts, ev, facts)

    taxis = TimeAxis(pts["t"].to_numpy(), time)
    fig, ax = new_axes(ax, (10.0, 5.2))
    x, y = taxis.x(pts["t"].to_numpy()), pts["y"].to_numpy()
    fid, active = pts["fid"].to_numpy(), pts["active"].to_numpy()
    fact_kind = per_fact["kind"]
    if color_by == "kind":
        color_of = pd.Series(kind_colors(fact_kind.to_numpy()), index=ids)
    else:
        group_of = per_fact[color_by].astype(str)
        groups = list(pd.unique(group_of))
        given = {str(k): v for k, v in (colors or {}).items()}
        spare = iter([c for c in _GROUP_PALETTE if c not in given.values()] * (len(groups) // len(_GROUP_PALETTE) + 1))
        palette = {g: given[g] if g in given else next(spare) for g in groups}  # one per group: a handful
        color_of = pd.Series(group_of.map(palette).to_numpy(object), index=ids)

    # segment i joins points i and i+1 of the same fact; its style is that of its right end, so the
    # solid part ends exactly where the fact left the active set (at the event point when given)
    seg_ok = (fid[:-1] == fid[1:]) & np.isfinite(y[:-1]) & np.isfinite(y[1:])
    segs = np.stack([np.column_stack([x[:-1], y[:-1]]), np.column_stack([x[1:], y[1:]])], axis=1)[seg_ok]
    seg_active = active[1:][seg_ok]
    seg_color = color_of.loc[fid[:-1][seg_ok]].to_numpy()
    # many facts: thinner lines and smaller marks, no insert marks (every line starts with one);
    # beyond a few dozen facts kind_trajectories is the readable view
    many, dense = len(ids) > 12, len(ids) > 40
    lw, alpha = (0.7, 0.45) if dense else (1.0, 0.6) if many else (1.9, 0.95)
    ms = 0.3 if dense else 1.0
    ax.add_collection(LineCollection(segs[seg_active], colors=list(seg_color[seg_active]), linewidths=lw,
                                     alpha=alpha, zorder=3, capstyle="round"))
    ax.add_collection(LineCollection(segs[~seg_active], colors=list(seg_color[~seg_active]), linewidths=lw * 0.8,
                                     alpha=alpha * 0.45, linestyles=(0, (1.2, 1.8)), zorder=2))

    marks_h, marks_l = [], []
    if ev is not None and len(ev):
        ins = ev["action"].to_numpy() == "insert"
        ec = color_of.loc[ev["fid"]].to_numpy()
        ex, ey = taxis.x(ev["t"].to_numpy()), ev["y"].to_numpy()
        if not dense:
            ax.scatter(ex[ins], ey[ins], s=26, facecolors="white", edgecolors=list(ec[ins]), linewidths=1.4,
                       zorder=5)
            marks_h.append(Line2D([], [], ls="", marker="o", mfc="white", mec="#333333", mew=1.4))
            marks_l.append("first seen (insert)")
        ax.scatter(ex[~ins], ey[~ins], s=34 * ms, marker="^", c=list(ec[~ins]), edgecolors="white",
                   linewidths=0.6 * ms, zorder=5)
        marks_h.append(Line2D([], [], ls="", marker="^", color="#333333", mec="white"))
        marks_l.append("reinforced")
    if events is not None:
        ex, ey = taxis.x(events["t"].to_numpy()), events["y"].to_numpy()
        ecol = color_of.loc[events["fid"].to_numpy()].to_numpy()
        sup = events["status"].to_numpy() == "superseded"
        arc = events["status"].to_numpy() == "archived"
        if sup.any():
            ax.scatter(ex[sup], ey[sup], s=40 * ms, marker="D", facecolors="white", edgecolors=list(ecol[sup]),
                       linewidths=1.3 * max(ms, 0.6), zorder=6)
            marks_h.append(Line2D([], [], ls="", marker="D", mfc="white", mec="#333333", ms=7))
            marks_l.append("superseded")
        if arc.any():
            ax.scatter(ex[arc], ey[arc], s=60 * ms, marker="X", c=list(ecol[arc]), edgecolors="black",
                       linewidths=0.6 * ms, zorder=6)
            marks_h.append(Line2D([], [], ls="", marker="X", mfc="#333333", mec="black", ms=7))
            marks_l.append("archived")

    thr = threshold_line(ax, threshold)
    xmin, xmax = taxis.x(np.array([tmin, tmax]))
    ax.set_xlim(xmin, xmax + (xmax - xmin) * 0.01 + 1e-9)
    confidence_axis(ax, top=float(np.nanmax(y)) if np.isfinite(y).any() else 1.0)
    taxis.decorate(ax)

    if label and len(ids) <= max_labels:
        names = per_fact[label].astype(str)
        dup = names.duplicated(keep=False).to_numpy()
        names = names.where(~dup, names + " #" + names.index.astype(str))  # tell equal names apart by id
        _label_line_ends(ax, x, y, fid, names, color_of)

    if color_by == "kind":
        kinds = kind_order(fact_kind)
        counts = fact_kind.value_counts().to_dict()
        hs, ls = kind_handles(kinds, {k: f"{counts[k]} fact{'s' if counts[k] > 1 else ''}" for k in kinds})
    else:
        counts = group_of.value_counts().to_dict()
        hs = [Line2D([], [], color=palette[g], lw=2.2) for g in groups]
        ls = [f"{g} ({counts[g]} fact{'s' if counts[g] > 1 else ''})" for g in groups]
    hs += [Line2D([], [], color="#333333", lw=1.9), Line2D([], [], color="#333333", lw=1.5, ls=(0, (1.2, 1.8)), alpha=0.6)]
    ls += ["active", "after leaving the active set"]
    hs += marks_h
    ls += marks_l
    if thr is not None:
        hs.append(thr)
        ls.append(thr.get_label())
    if label and len(ids) <= max_labels:
        # line labels sit in the right margin, so the legend goes below the plot
        ax.legend(hs, ls, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False, fontsize="small",
                  ncol=min(4, len(hs)))
    else:
        legend_outside(ax, hs, ls)
    ax.set_title(title if title is not None else _traj_title(traj))
    return fig


def _add_prejump_points(pts: pd.DataFrame, ev: pd.DataFrame, facts: pd.DataFrame) -> pd.DataFrame:
    """Before each reinforcement point, a point at the same instant with the confidence just before
    it (the previous point decayed at the fact's rate), so a reinforcement is drawn as a vertical
    jump however coarse the time grid is."""
    rate = pd.Series(numbers(facts, "decay_rate", "facts"), index=facts["id"].to_numpy())
    rate = rate[~rate.index.duplicated()]
    reinf = pd.MultiIndex.from_frame(ev.loc[ev["action"].to_numpy() != "insert", ["fid", "t"]])
    fid, t, y = pts["fid"].to_numpy(), pts["t"].to_numpy(), pts["y"].to_numpy()
    is_reinf = pd.MultiIndex.from_arrays([fid, t]).isin(reinf) & (pts["src"].to_numpy() == _SRC_EVIDENCE)
    prev_ok = np.r_[False, (fid[1:] == fid[:-1]) & np.isfinite(y[:-1])]
    sel = np.flatnonzero(is_reinf & prev_ok)
    if not sel.size:
        return pts
    lam = rate.reindex(fid[sel]).to_numpy()
    pre_y = y[sel - 1] * np.exp(-lam * np.maximum(0.0, t[sel] - t[sel - 1]) / 86400.0)
    ok = np.isfinite(pre_y)
    pre = pd.DataFrame({"fid": fid[sel][ok], "t": t[sel][ok], "y": pre_y[ok], "active": True, "src": _SRC_EVENT + 1})
    out = pd.concat([pts, pre], ignore_index=True)
    out["_before"] = out["src"].to_numpy() != _SRC_EVENT + 1  # the pre-jump point sorts first
    return out.sort_values(["fid", "t", "_before"], kind="mergesort").drop(columns="_before").reset_index(drop=True)


def _traj_title(traj: pd.DataFrame) -> str:
    if {"subject", "predicate"} <= set(traj.columns):
        sp = traj[["subject", "predicate"]].drop_duplicates()
        if len(sp) == 1:
            return f"{sp.iloc[0, 0]} · {sp.iloc[0, 1]}: confidence over time"
        if traj["subject"].nunique() == 1:
            return f"{traj['subject'].iloc[0]}: confidence over time"
    n = traj["fact_id"].nunique()
    return f"Confidence of {n} fact{'s' if n > 1 else ''} over time"


def _label_line_ends(ax: Axes, x, y, fid, names: pd.Series, color_of: pd.Series) -> None:
    """Write each fact's name in the right margin at the height where its line ends, nudged apart
    so names never overlap (a running maximum pushes each one at least ``gap`` above the last)."""
    ok = np.isfinite(y)
    last = pd.DataFrame({"fid": fid[ok], "y": y[ok]}).groupby("fid", sort=False)["y"].last()
    order = np.argsort(last.to_numpy(), kind="mergesort")
    ys = last.to_numpy()[order]
    bottom, top = ax.get_ylim()
    gap = 0.045 * (top - bottom)
    i = np.arange(len(ys))
    # push each name up to at least `gap` above the one below it, starting at the axis bottom; then
    # cap each from the top (the k-th from the top at most top - k·gap): both keep the spacing
    placed = np.maximum.accumulate(np.maximum(ys, bottom + gap / 2) - gap * i) + gap * i
    placed = np.minimum(placed, (top - gap / 2) - gap * (len(ys) - 1 - i))
    trans = ax.get_yaxis_transform()
    for f, yy in zip(last.index.to_numpy()[order], placed):  # one text per labelled fact (≤ max_labels)
        ax.text(1.01, yy, str(names.loc[f]), transform=trans, va="center", ha="left", fontsize="small",
                color=color_of.loc[f], clip_on=False)


def kind_trajectories(traj: pd.DataFrame, *, threshold: float | None = None, ax: Axes | None = None,
                      time: str = "auto", active_only: bool = False, band: tuple[float, float] = (0.1, 0.9),
                      title: str | None = None) -> Figure:
    """Per kind, the mean effective confidence over time (line) and the ``band`` quantiles (shaded)
    across the facts in ``traj`` (``FactStore.trajectories``). A fact counts from the time it exists;
    with ``active_only`` only while it is active."""
    require(traj, ["fact_id", "t", "kind", "effective_confidence", "status"], "traj (FactStore.trajectories)")
    lo_q, hi_q = (float(b) for b in band)
    if not 0.0 <= lo_q < hi_q <= 1.0:
        raise InputError(f"band must be two quantiles 0 ≤ low < high ≤ 1, got {band!r}")
    live = traj["status"].eq("active") if active_only else traj["status"].notna()
    df = pd.DataFrame({"kind": traj["kind"].to_numpy(object), "t": seconds(traj["t"], "traj column 't'"),
                       "y": numbers(traj, "effective_confidence", "traj")})[live.fillna(False).to_numpy(bool)]
    df = df[np.isfinite(df["y"].to_numpy())]
    if df.empty:
        raise InputError("traj has no point where a fact exists" + (" and is active" if active_only else "")
                         + ": there is nothing to average")
    g = df.groupby(["kind", "t"], sort=True)["y"]
    stats = pd.DataFrame({"mean": g.mean(), "lo": g.quantile(lo_q), "hi": g.quantile(hi_q)}).reset_index()
    taxis = TimeAxis(df["t"].to_numpy(), time)
    fig, ax = new_axes(ax, (9.5, 4.8))
    facts_per_kind = traj.drop_duplicates("fact_id")["kind"].value_counts().to_dict()
    kinds = kind_order(stats["kind"])
    for k in kinds:  # at most a handful of kinds
        s = stats[stats["kind"] == k]
        xx = taxis.x(s["t"].to_numpy())
        c = kind_color(k)
        ax.fill_between(xx, s["lo"].to_numpy(), s["hi"].to_numpy(), color=c, alpha=0.18, lw=0, step=None)
        n = facts_per_kind.get(k, 0)
        ax.plot(xx, s["mean"].to_numpy(), color=c, lw=2.0, label=f"{k} ({n} fact{'s' if n != 1 else ''})")
    ax.fill_between([], [], [], color="#777777", alpha=0.25, lw=0,
                    label=f"{lo_q * 100:.0f}–{hi_q * 100:.0f}% of facts")
    threshold_line(ax, threshold)
    confidence_axis(ax, top=float(stats["hi"].max()))
    taxis.decorate(ax)
    xs = taxis.x(np.array([df["t"].min(), df["t"].max()]))
    ax.set_xlim(xs[0], xs[1] + 1e-9)
    legend_outside(ax, title="kind: mean")
    ax.set_title(title if title is not None else
                 "Mean effective confidence by kind" + (" (active facts)" if active_only else ""))
    return fig


def decay_curves(table: pd.DataFrame, *, days: float = 90, threshold: float | None = None,
                 ax: Axes | None = None, title: str | None = None) -> Figure:
    """Decay without reinforcement, ``c0·exp(−λ·d)`` over ``days``, for each (parameter set, kind).

    ``table``: columns ``label, kind, decay_rate, initial_confidence`` (``label`` names the parameter
    set and may be omitted for one set; ``kind`` may be the index, as in ``decay.kind_table()``).
    Colour is the kind, line style the parameter set; dots mark half-lives, ticks on the ``threshold``
    line mark the day each curve falls below it (the day an unreinforced fact is archived).
    """
    if isinstance(table, pd.DataFrame) and "kind" not in table.columns and table.index.name == "kind":
        table = table.reset_index()
    if isinstance(table, pd.DataFrame) and "label" not in table.columns and "kind" in table.columns:
        table = table.assign(label="parameters")
    require(table, ["label", "kind", "decay_rate", "initial_confidence"], "table")
    rate = numbers(table, "decay_rate", "table")
    c0 = numbers(table, "initial_confidence", "table")
    bad = ~(np.isfinite(rate) & (rate >= 0) & np.isfinite(c0) & (c0 > 0) & (c0 <= 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"table row {table.index[i]!r}: decay_rate must be ≥ 0 and initial_confidence in (0, 1], "
                         f"got decay_rate={rate[i]!r}, initial_confidence={c0[i]!r}")
    days = float(days)
    if not days > 0:
        raise InputError(f"days must be positive, got {days!r}")
    d = np.linspace(0.0, days, 400)
    curves = c0[:, None] * np.exp(-rate[:, None] * d[None, :])  # every curve at once
    labels = pd.unique(table["label"].astype(str))
    styles = ["-", (0, (5, 2.5)), (0, (1.5, 1.5)), (0, (6, 2, 1.5, 2))]
    style_of = {lab: styles[i % len(styles)] for i, lab in enumerate(labels)}
    fig, ax = new_axes(ax, (9.5, 4.8))
    colors = kind_colors(table["kind"].to_numpy())
    lab = table["label"].astype(str).to_numpy()
    # identical curves (same rate and c0, e.g. user_preference and derived in the seed) would hide
    # each other: they are drawn in interleaved dashes, so each colour shows, and named in the legend
    key = pd.DataFrame({"r": np.round(rate, 12), "c": np.round(c0, 12)})
    group = key.groupby(["r", "c"], sort=False).ngroup().to_numpy()
    size = np.bincount(group)[group]
    rank = key.groupby(["r", "c"], sort=False).cumcount().to_numpy()
    segs_all = np.stack([np.broadcast_to(d, curves.shape), curves], axis=2)
    for label in labels:  # one collection per parameter set (a line style each)
        sel = (lab == label) & (size == 1)
        ax.add_collection(LineCollection(segs_all[sel], colors=list(colors[sel]), linestyles=style_of[label],
                                         linewidths=2.0))
    dash = 5.0
    for j in np.flatnonzero(size > 1):  # a few coincident curves
        ax.add_collection(LineCollection(list(segs_all[j:j + 1]), colors=[colors[j]], linewidths=2.0,
                                         linestyles=[(rank[j] * dash, (dash, dash * (size[j] - 1)))]))
    multi_label = len(labels) > 1
    same_notes = []
    kinds_col = table["kind"].astype(str).to_numpy()
    for g in pd.unique(group[size > 1]):  # one legend note per set of coincident curves
        members = np.flatnonzero(group == g)
        ks, ls_ = list(pd.unique(kinds_col[members])), list(pd.unique(lab[members]))
        if len(members) == len(ks) * len(ls_):  # every kind × every set: say it compactly
            note = " = ".join(ks) + (f" ({', '.join(ls_)})" if multi_label else "")
        else:
            note = " = ".join(f"{kinds_col[j]}" + (f" ({lab[j]})" if multi_label else "") for j in members)
        same_notes.append(textwrap.fill(note, 38, subsequent_indent="  "))
    with np.errstate(divide="ignore"):
        half = np.where(rate > 0, _LN2 / np.where(rate > 0, rate, 1.0), np.inf)
    shown = half <= days
    ax.scatter(half[shown], c0[shown] / 2.0, s=36, c=list(colors[shown]), edgecolors="black", linewidths=0.7, zorder=5)
    thr = threshold_line(ax, threshold)
    hs, ls = kind_handles(kind_order(table["kind"]))
    if len(labels) > 1 or labels[0] != "parameters":
        hs += [Line2D([], [], color="#333333", lw=2.0, ls=style_of[label]) for label in labels]
        ls += list(labels)
    for note in same_notes:
        hs.append(Line2D([], [], color="#999999", lw=2.0, ls=(0, (2.5, 2.5))))
        ls.append("same curve:\n  " + note)
    hs.append(Line2D([], [], ls="", marker="o", mfc="#dddddd", mec="black"))
    ls.append("half-life (c0 / 2)")
    if thr is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            level = float(threshold)  # type: ignore[arg-type]  # a threshold line exists only for a number
            cross = np.where(c0 > level, np.log(c0 / level) / rate, 0.0)
        ok = np.isfinite(cross) & (cross <= days)
        ax.scatter(cross[ok], np.full(ok.sum(), level), marker="|", s=160, c=list(colors[ok]),
                   linewidths=2.2, zorder=5)
        hs += [thr, Line2D([], [], ls="", marker="|", color="#333333", ms=11, mew=2.2)]
        ls += [thr.get_label(), "falls below threshold (archived)"]
    ax.set_xlim(0, days)
    confidence_axis(ax, top=float(np.nanmax(c0)))
    ax.set_xlabel("days since last reinforcement")
    legend_outside(ax, hs, ls)
    ax.set_title(title if title is not None else "Decay without reinforcement")
    return fig


def lineage(history: pd.DataFrame, *, ax: Axes | None = None, end: Any = None, time: str = "auto",
            title: str | None = None, truth: pd.DataFrame | None = None) -> Figure:
    """Timeline of every version of a (subject, predicate): one bar per fact from ``first_seen`` to
    ``status_changed_at`` (or ``end`` while still active), labelled with its object, filled and
    hatched by status, with an arrow from each superseded version to the version that replaced it.

    ``history``: ``FactStore.history(subject, predicate)`` (or ``lineage(fact_id)``). ``end``: the
    right edge for active facts (Unix seconds or datetime; default: the last time in ``history``
    plus a margin). ``truth`` (columns ``object, valid_from, valid_to``; ``valid_to`` missing = still
    true; ``subject``/``predicate`` columns, when present, are matched to the history's): the
    ground truth overlaid — under each version's bar, a black line for every interval in which its
    object was true (clipped to ``end``; never-true rows, ``valid_to <= valid_from``, are left out).
    """
    require(history, ["id", "object", "kind", "first_seen", "status", "status_changed_at", "supersedes_id"],
            "history (FactStore.history)")
    h = history.sort_values(["first_seen", "id"], kind="mergesort").reset_index(drop=True)
    start = seconds(h["first_seen"], "history column 'first_seen'")
    changed = seconds(h["status_changed_at"], "history column 'status_changed_at'")
    known = np.concatenate([start, changed[np.isfinite(changed)]])
    true_spans = None
    if truth is not None:
        require(truth, ["object", "valid_from", "valid_to"], "truth", allow_empty=True)
        tr = truth
        for col in ("subject", "predicate"):  # keep the truth of the pair(s) drawn
            if col in tr.columns and col in h.columns:
                tr = tr[tr[col].isin(set(h[col]))]
        t_from = seconds(tr["valid_from"], "truth column 'valid_from'")
        t_to = pd.to_numeric(tr["valid_to"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
        ever = ~(np.isfinite(t_to) & (t_to <= t_from))
        true_spans = pd.DataFrame({"object": tr["object"].astype(str).to_numpy()[ever], "from": t_from[ever],
                                   "to": t_to[ever]})
        true_spans = true_spans[true_spans["object"].isin(set(h["object"].astype(str)))]
        known = np.concatenate([known, true_spans["from"].to_numpy(), true_spans["to"].dropna().to_numpy()])
    if end is None:
        lo, hi = float(np.nanmin(known)), float(np.nanmax(known))
        end_s = hi + max(0.12 * (hi - lo), 86400.0)
    else:
        end_s = float(seconds(pd.Series([end]), "end")[0])
    stop = np.where(np.isfinite(changed), changed, end_s)
    taxis = TimeAxis(np.concatenate([known, [end_s]]), time)
    x0, x1 = taxis.x(start), taxis.x(stop)
    n = len(h)
    fig, ax = new_axes(ax, (9.5, max(2.4, 0.55 * n + 1.6)))
    status = h["status"].astype(object).to_numpy()
    face = pd.Series(status).map(STATUS_COLORS).fillna("#dddddd").to_numpy(object)
    hatch = pd.Series(status).map(STATUS_HATCH).fillna("").to_numpy(object)
    rows = np.arange(n)
    width = np.maximum(x1 - x0, 0.0)
    bars = ax.barh(rows, width, left=x0, height=0.56, color=list(face), edgecolor="#444444", linewidth=1.0,
                   zorder=3)
    for b, ht in zip(bars, hatch):  # per-bar hatch: matplotlib takes one hatch per patch
        b.set_hatch(ht)
    # zero-length versions (superseded at once) still get a visible tick
    ax.scatter(x0[width == 0], rows[width == 0], marker="|", s=200, c="black", zorder=4)
    still = ~np.isfinite(changed) & (status == "active")
    ax.scatter(x1[still], rows[still], marker=">", s=40, c=STATUS_COLORS["active"], edgecolors="black", zorder=4)

    # arrows: old version's end → new version's start
    row_of = pd.Series(rows, index=h["id"].to_numpy())
    sup = pd.to_numeric(h["supersedes_id"], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    has = np.isfinite(sup) & pd.Series(sup).isin(row_of.index).to_numpy()
    for new_row, old_id in zip(rows[has], sup[has].astype(np.int64)):  # one arrow per version
        old_row = int(row_of.loc[old_id])
        ax.annotate("", xy=(x0[new_row], new_row - 0.3), xytext=(x1[old_row], old_row + 0.3),
                    arrowprops={"arrowstyle": "-|>", "color": "#333333", "lw": 1.1, "shrinkA": 0, "shrinkB": 0,
                                "connectionstyle": "arc3,rad=0.0"}, zorder=5)

    if true_spans is not None and len(true_spans):
        # every version of an object gets the object's true intervals: a value true twice (it came
        # back) shows two lines, and a version that lived while its object was false shows none
        span_x0 = taxis.x(true_spans["from"].to_numpy())
        span_x1 = taxis.x(np.where(np.isfinite(true_spans["to"].to_numpy()),
                                   np.minimum(true_spans["to"].to_numpy(), end_s), end_s))
        rows_of = pd.Series(rows).groupby(h["object"].astype(str).to_numpy()).apply(list)
        for obj_name, a, b in zip(true_spans["object"], span_x0, span_x1):  # a few intervals per pair
            for r in rows_of.get(obj_name, []):
                ax.plot([a, b], [r + 0.37, r + 0.37], color="#000000", lw=2.4, solid_capstyle="butt", zorder=4)

    kinds = h["kind"].astype(str)
    obj = h["object"].astype(str)
    names = obj + " #" + h["id"].astype(str)
    if kinds.nunique() > 1:
        names = names + " (" + kinds + ")"
    ax.set_yticks(rows, list(names))
    ax.set_ylim(n - 0.4, -0.6)  # oldest at the top, as read
    ax.set_ylabel("version (oldest at top)")
    lo = min(float(np.nanmin(x0)), float(np.nanmin(x1)))
    hi = float(np.nanmax(x1))
    if true_spans is not None and len(true_spans):
        lo, hi = min(lo, float(np.nanmin(span_x0))), max(hi, float(np.nanmax(span_x1)))
    pad = max((hi - lo) * 0.02, 0.05)
    ax.set_xlim(lo - pad, hi + pad)
    taxis.decorate(ax)
    light_grid(ax, "x")
    present = [s for s in ("active", "superseded", "archived") if s in set(status)]
    hs: list[Artist] = [Patch(facecolor=STATUS_COLORS[s], hatch=STATUS_HATCH[s], edgecolor="#555555") for s in present]
    ls = list(present)
    if still.any():
        hs.append(Line2D([], [], ls="", marker=">", mfc=STATUS_COLORS["active"], mec="black", ms=6))
        ls.append("still active at the right edge")
    if has.any():
        hs.append(Line2D([], [], color="#333333", marker="v", lw=1.1, ms=5))
        ls.append("superseded by (arrow)")
    if true_spans is not None:
        hs.append(Line2D([], [], color="#000000", lw=2.4))
        ls.append("object true (ground truth)")
    legend_outside(ax, hs, ls, title="status")
    if title is None:
        one_kind = f" ({kinds.iloc[0]})" if kinds.nunique() == 1 else ""
        if {"subject", "predicate"} <= set(h.columns) and len(h[["subject", "predicate"]].drop_duplicates()) == 1:
            title = f"{h['subject'].iloc[0]} · {h['predicate'].iloc[0]}{one_kind}: versions over time"
        else:
            title = f"Versions over time{one_kind}"
    ax.set_title(title)
    return fig
