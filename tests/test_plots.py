"""factmem.plots: every figure on small hand-built frames and on a real FactStore; contents checked
against the inputs (positions, heights, labels), not only that something was drawn."""

from __future__ import annotations

import ast
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Rectangle

from factmem import plots
from factmem.core.codes import KINDS
from factmem.core.params import MemoryParams
from factmem.store.factstore import FactStore

D = 86400
T0 = 1_709_251_200  # 2024-03-01T00:00:00Z


# -- fixtures ---------------------------------------------------------------------------------------

@pytest.fixture
def mem():
    """ada's preference changes twice (rust → zig → rust, with reinforcements), an episodic visit
    decays and is archived, an explicit fact is reinforced once."""
    s = FactStore()

    def r(pred, obj, kind, day):
        return s.remember("ada", pred, obj, kind=kind, at=T0 + int(day * D))

    r("prefers", "rust", "user_preference", 0)
    r("prefers", "rust", "user_preference", 5)
    r("prefers", "rust", "user_preference", 12)
    r("prefers", "zig", "user_preference", 30)
    r("prefers", "zig", "user_preference", 33)
    r("prefers", "rust", "user_preference", 50)
    r("visited", "paris", "episodic", 2)
    r("works_at", "acme", "explicit", 1)
    r("works_at", "acme", "explicit", 20)
    for day in range(0, 61, 7):
        s.consolidate(at=T0 + day * D)
    yield s
    s.close()


def _labels_ok(fig: Figure) -> None:
    """Every drawn axes has a y label; the bottom axes of each column has an x label."""
    axes = [a for a in fig.axes if a.get_label() != "<colorbar>"]
    assert axes
    for a in axes:
        assert a.get_ylabel().strip(), f"axes {a.get_title()!r} has no y label"
    bottoms = [a for a in axes if a.get_subplotspec() is None or a.get_subplotspec().is_last_row()]
    assert any(a.get_xlabel().strip() for a in bottoms), "no x label on the bottom axes"


def _png(fig: Figure, tmp_path: Path, name: str) -> Path:
    p = plots.save(fig, tmp_path / "figs" / name)
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return p


def _scatter_offsets(ax) -> np.ndarray:
    offs = [c.get_offsets() for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets())]
    return np.concatenate(offs) if offs else np.empty((0, 2))


# -- colours and layering ---------------------------------------------------------------------------

def test_kind_colors_cover_every_kind_and_are_distinct():
    assert tuple(plots.KINDS) == KINDS
    assert set(plots.KIND_COLORS) == set(KINDS)
    assert len(set(plots.KIND_COLORS.values())) == len(KINDS)


def test_plots_import_nothing_else_from_factmem():
    root = Path(plots.__file__).parent
    for path in sorted(root.glob("plots*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                assert (node.module or "").startswith("plots"), f"{path.name} imports .{node.module}"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert not node.module.startswith("factmem"), f"{path.name} imports {node.module}"


# -- trajectories ------------------------------------------------------------------------------------

def test_trajectories_on_a_store(mem, tmp_path):
    facts = mem.facts()
    traj = mem.trajectories(facts["id"].tolist(), T0, T0 + 70 * D, D // 4)
    fig = plots.trajectories(traj, evidence=mem.evidence(), facts=facts, threshold=0.05)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    _labels_ok(fig)
    assert ax.get_xlabel() == "date (UTC)"
    assert ax.get_legend() is not None
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "archive threshold (0.05)" in legend
    assert {"reinforced", "superseded", "archived", "first seen (insert)"} <= set(legend)
    assert any(t.startswith("user_preference (3 facts)") for t in legend)
    # a line label per fact; the two 'rust' facts are told apart by id
    texts = {t.get_text() for t in ax.texts}
    assert {"zig", "paris", "acme"} <= texts and {"rust #1", "rust #3"} <= texts
    # the threshold is a horizontal line at 0.05
    assert any(np.allclose(line.get_ydata(), 0.05) for line in ax.get_lines())
    _png(fig, tmp_path, "trajectories.png")


def test_trajectories_draw_reinforcements_as_vertical_jumps_and_stop_at_supersession(mem):
    facts = mem.facts()
    traj = mem.trajectories([1], T0, T0 + 40 * D, D)  # rust #1: reinforced on days 5 and 12, superseded day 30
    fig = plots.trajectories(traj, evidence=mem.evidence(1), facts=facts, time="days")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "days since 2024-03-01 00:00 UTC"
    solid, dotted = [c for c in ax.collections if isinstance(c, LineCollection)]
    segs = np.array(solid.get_segments())
    ev = mem.evidence(1)
    for _, row in ev[ev["action"] == "reinforce"].iterrows():
        day = (row["observed_at"] - T0) / D
        vertical = segs[(np.isclose(segs[:, 0, 0], day)) & (np.isclose(segs[:, 1, 0], day))]
        assert len(vertical) == 1, f"no vertical jump at day {day}"
        lo, hi = vertical[0, 0, 1], vertical[0, 1, 1]
        assert hi == pytest.approx(row["confidence"])
        assert lo < hi
    # the solid part ends exactly at the supersession (day 30), the dotted part starts there
    assert segs[:, :, 0].max() == pytest.approx(30.0)
    dots = np.array(dotted.get_segments())
    assert dots[:, :, 0].min() == pytest.approx(30.0)
    # the superseded marker sits on the curve at day 30: c(12) decayed 18 days at the stored rate
    f1 = mem.get(1)
    expected = f1.confidence * math.exp(-f1.decay_rate * 18)
    offs = _scatter_offsets(ax)
    hit = offs[np.isclose(offs[:, 0], 30.0)]
    assert len(hit) == 1 and hit[0, 1] == pytest.approx(expected, rel=1e-9)


def test_trajectories_without_evidence_or_facts_and_many_facts():
    rng = np.random.default_rng(0)
    n, steps = 60, 30
    fid = np.repeat(np.arange(n), steps)
    t = np.tile(np.arange(steps) * D, n)
    kinds = np.array(KINDS)[fid % 4]
    y = 0.5 * np.exp(-0.05 * (t / D)) * rng.uniform(0.5, 1.0, n)[fid]
    traj = pd.DataFrame({"fact_id": fid, "t": t, "kind": kinds, "subject": "s", "predicate": "p",
                         "object": fid.astype(str), "effective_confidence": y, "status": "active"})
    fig = plots.trajectories(traj)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "days since t = 0 s"
    assert not ax.texts  # too many facts to label each line
    assert ax.get_legend() is not None
    solid = [c for c in ax.collections if isinstance(c, LineCollection)][0]
    assert len(solid.get_segments()) == n * (steps - 1)


def test_trajectory_labels_never_overlap_or_leave_the_axis():
    ends = [0.99, 0.985, 0.98, 0.97, 0.96, 0.0, 0.001]  # a crowd at the top, two at zero
    n = len(ends)
    traj = pd.DataFrame({"fact_id": np.repeat(np.arange(n), 2), "t": np.tile([0, D], n), "kind": "explicit",
                         "object": np.repeat([f"o{i}" for i in range(n)], 2), "status": "active",
                         "effective_confidence": np.ravel([[0.5, e] for e in ends])})
    ax = plots.trajectories(traj).axes[0]
    ys = np.sort([t.get_position()[1] for t in ax.texts])
    lo, hi = ax.get_ylim()
    assert len(ys) == n and ys.min() > lo and ys.max() < hi
    assert np.diff(ys).min() >= 0.045 * (hi - lo) - 1e-9


def test_kind_trajectories(mem, tmp_path):
    facts = mem.facts()
    traj = mem.trajectories(facts["id"].tolist(), T0, T0 + 60 * D, D)
    fig = plots.kind_trajectories(traj, threshold=0.05)
    ax = fig.axes[0]
    _labels_ok(fig)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "user_preference (3 facts)" in legend and "episodic (1 fact)" in legend
    # the mean line of a kind equals the mean over its existing facts at each time
    line = next(ln for ln in ax.get_lines() if ln.get_label().startswith("user_preference"))
    live = traj[traj["status"].notna() & (traj["kind"] == "user_preference")]
    expect = live.groupby("t")["effective_confidence"].mean().to_numpy()
    np.testing.assert_allclose(line.get_ydata(), expect)
    assert line.get_color().lower() == plots.KIND_COLORS["user_preference"].lower()
    _png(fig, tmp_path, "kind_trajectories.png")


# -- decay curves -----------------------------------------------------------------------------------

def _kind_table(label, params=None):
    p = params or MemoryParams()
    return pd.DataFrame({"label": label, "kind": list(KINDS), "decay_rate": p.decay_rate.as_array(),
                         "initial_confidence": p.initial_confidence.as_array()})


def test_decay_curves(tmp_path):
    tuned = MemoryParams().replace(decay_rate={"episodic": 0.15})
    table = pd.concat([_kind_table("seed defaults"), _kind_table("tuned", tuned)], ignore_index=True)
    fig = plots.decay_curves(table, days=90, threshold=0.05)
    ax = fig.axes[0]
    _labels_ok(fig)
    assert ax.get_xlabel() == "days since last reinforcement"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"seed defaults", "tuned", "half-life (c0 / 2)", "archive threshold (0.05)"} <= set(legend)
    # user_preference and derived share the seed's numbers: the legend says their curves coincide
    assert any(t.startswith("same curve:") and "user_preference = derived" in t for t in legend)
    offs = _scatter_offsets(ax)
    half = offs[~np.isclose(offs[:, 1], 0.05)]  # half-life markers (the others sit on the threshold)
    rate, c0 = table["decay_rate"].to_numpy(), table["initial_confidence"].to_numpy()
    expect = np.column_stack([np.log(2) / rate, c0 / 2])
    np.testing.assert_allclose(np.sort(half, axis=0), np.sort(expect, axis=0))
    cross = offs[np.isclose(offs[:, 1], 0.05)][:, 0]
    days_to = np.log(c0 / 0.05) / rate
    np.testing.assert_allclose(np.sort(cross), np.sort(days_to[days_to <= 90]))
    _png(fig, tmp_path, "decay_curves.png")


def test_decay_curves_accept_kind_table_index_and_reject_bad_rates():
    from factmem.core.decay import kind_table

    fig = plots.decay_curves(kind_table(), days=30)
    assert fig.axes[0].get_legend() is not None
    bad = _kind_table("x").assign(decay_rate=[0.1, -0.2, 0.3, 0.1])
    with pytest.raises(ValueError, match="decay_rate must be ≥ 0"):
        plots.decay_curves(bad)


# -- lineage -----------------------------------------------------------------------------------------

def test_lineage_on_a_store(mem, tmp_path):
    hist = mem.history("ada", "prefers")
    fig = plots.lineage(hist, end=T0 + 60 * D, time="days")
    ax = fig.axes[0]
    _labels_ok(fig)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rust #1", "zig #2", "rust #3"]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() == pytest.approx(0.56)]
    assert len(bars) == 3
    starts = [b.get_x() for b in bars]
    ends = [b.get_x() + b.get_width() for b in bars]
    np.testing.assert_allclose(starts, [0, 30, 50])
    np.testing.assert_allclose(ends, [30, 50, 60])  # the active version runs to `end`
    assert [b.get_hatch() or "" for b in bars] == ["///", "///", ""]
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    assert len(arrows) == 2  # two supersessions
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"active", "superseded"} <= set(legend)
    assert "ada · prefers (user_preference)" in ax.get_title()
    _png(fig, tmp_path, "lineage.png")


def test_lineage_archived_version_and_default_end(mem):
    hist = mem.history("ada", "visited")
    fig = plots.lineage(hist)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "date (UTC)"
    assert "archived" in [t.get_text() for t in ax.get_legend().get_texts()]


# -- checkpoint metrics ------------------------------------------------------------------------------

def _metrics(n=12, start=T0):
    rng = np.random.default_rng(3)
    t = start + np.arange(n) * 7 * D
    return pd.DataFrame({"t": t, "believed": np.cumsum(rng.integers(1, 9, n)), "needed": np.cumsum(rng.integers(1, 7, n)),
                         "precision": rng.uniform(0.6, 0.95, n), "recall": rng.uniform(0.4, 0.8, n),
                         "stale": rng.integers(0, 5, n), "lost": rng.integers(0, 3, n)})


def test_checkpoint_metrics(tmp_path):
    m = _metrics()
    fig = plots.checkpoint_metrics(m)
    assert len(fig.axes) == 3
    _labels_ok(fig)
    a, b, c = fig.axes
    np.testing.assert_array_equal(a.get_lines()[0].get_ydata(), m["believed"])
    assert [ln.get_label() for ln in a.get_lines()] == ["believed", "needed (true and relevant)"]
    assert b.get_ylim() == pytest.approx((0, 1.03))
    assert c.get_ylabel() == "facts (count)"
    for ax in fig.axes:
        assert ax.get_legend() is not None
    _png(fig, tmp_path, "checkpoint_metrics.png")


def test_checkpoint_metrics_into_two_given_axes_and_fractions():
    m = _metrics(start=0).drop(columns="needed").assign(stale=lambda d: d["stale"] / 10, lost=lambda d: d["lost"] / 10)
    fig = Figure(layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    assert plots.checkpoint_metrics(m, axes=axes) is fig
    twin = [a for a in fig.axes if a not in list(axes)]
    assert len(twin) == 1 and twin[0].get_ylabel().startswith("share of believed (0–1)")
    assert axes[1].get_xlabel() == "days since t = 0 s"
    with pytest.raises(ValueError, match="axes must be a sequence of 3 or 2"):
        plots.checkpoint_metrics(m, axes=[axes[0]])


# -- abstraction outcomes ----------------------------------------------------------------------------

def _passes(n=6):
    rng = np.random.default_rng(5)
    p = pd.DataFrame({"at": T0 + np.arange(n) * 7 * D, **{c: rng.integers(0, 5, n) for c in
                      ("created", "reinforced", "unchanged", "empty", "skipped", "failed", "pruned")}})
    p["believed_before"] = 100 + 5 * np.arange(n)
    p["believed_after"] = p["believed_before"] - p["pruned"] + p["created"]
    return p


def test_abstraction_outcomes(tmp_path):
    p = _passes()
    fig = plots.abstraction_outcomes(p)
    assert len(fig.axes) == 3
    _labels_ok(fig)
    top, mid, size = fig.axes
    heights = np.array([r.get_height() for r in top.patches]).reshape(4, len(p))
    np.testing.assert_array_equal(heights, p[["unchanged", "empty", "skipped", "failed"]].to_numpy().T)
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["unchanged", "empty", "skipped", "failed"]
    mid_h = np.array([r.get_height() for r in mid.patches]).reshape(3, len(p))
    np.testing.assert_array_equal(mid_h, p[["created", "reinforced", "pruned"]].to_numpy().T)
    deltas = {t.get_text() for t in size.texts}
    expect = {f"{d:+d}" for d in (p["believed_after"] - p["believed_before"]) if d != 0}
    assert deltas == expect
    assert [t.get_text() for t in size.get_xticklabels()][0] == "2024-03-01"
    _png(fig, tmp_path, "abstraction_outcomes.png")


def test_abstraction_outcomes_without_sizes_with_eligible():
    p = _passes().drop(columns=["believed_before", "believed_after"])
    p["eligible"] = p[["unchanged", "empty", "skipped", "failed"]].sum(axis=1) + 3
    fig = plots.abstraction_outcomes(p)
    assert len(fig.axes) == 2
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0] == "answered with facts"
    first = [r.get_height() for r in fig.axes[0].patches][: len(p)]
    assert first == [3] * len(p)


# -- sweeps ------------------------------------------------------------------------------------------

def _sweep():
    rng = np.random.default_rng(7)
    g = [(a, b, s) for a in (0.1, 0.2, 0.3, 0.4) for b in (0.1, 0.2, 0.3) for s in (0, 1)]
    r = pd.DataFrame(g, columns=["decay_rate.episodic", "reinforce_gain", "seed"])
    r["log_loss"] = (r["decay_rate.episodic"] - 0.2) ** 2 + (r["reinforce_gain"] - 0.3) ** 2 + rng.normal(0, 0.001, len(r))
    r["recall"] = 1 - r["decay_rate.episodic"] + 0.1 * r["reinforce_gain"]
    r["believed"] = 200 - 300 * r["decay_rate.episodic"] + rng.normal(0, 5, len(r))
    return r


def test_sweep_heatmap(tmp_path):
    r = _sweep()
    fig = plots.sweep_heatmap(r, "decay_rate.episodic", "reinforce_gain", "log_loss")
    ax = fig.axes[0]
    _labels_ok(fig)
    img = next(c for c in ax.get_children() if isinstance(c, AxesImage))
    expect = r.groupby(["reinforce_gain", "decay_rate.episodic"])["log_loss"].mean().unstack().to_numpy()
    np.testing.assert_allclose(np.asarray(img.get_array()), expect)
    cbar = fig.axes[1]
    assert "log loss" in cbar.get_ylabel() and "mean of 2 runs/cell" in cbar.get_ylabel()
    assert "lower is better" in cbar.get_ylabel()
    # the best (lowest) cell is outlined: decay 0.2 (column 1), gain 0.3 (row 2)
    row, col = np.unravel_index(np.argmin(expect), expect.shape)
    outlines = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert any(p.get_xy() == pytest.approx((col - 0.5, row - 0.5)) for p in outlines)
    assert (row, col) == (2, 1)
    assert len(ax.texts) == expect.size  # one number per cell
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.2", "0.3", "0.4"]
    _png(fig, tmp_path, "sweep_heatmap.png")


def test_sweep_heatmap_higher_is_better_and_agg():
    r = _sweep()
    fig = plots.sweep_heatmap(r, "decay_rate.episodic", "reinforce_gain", "recall", agg="max", annotate=False)
    ax = fig.axes[0]
    assert not ax.texts
    assert "higher is better" in fig.axes[1].get_ylabel() and "max of 2" in fig.axes[1].get_ylabel()
    star = [ln for ln in ax.get_lines() if ln.get_marker() == "*"][0]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (0, 2)  # decay 0.1, gain 0.3
    fig = plots.sweep_heatmap(r, "decay_rate.episodic", "reinforce_gain", "recall", lower_is_better=True)
    star = [ln for ln in fig.axes[0].get_lines() if ln.get_marker() == "*"][0]
    assert (star.get_xdata()[0], round(star.get_ydata()[0])) == (3, 0)  # the star sits above the number


# -- pareto ------------------------------------------------------------------------------------------

def _brute_front(x, y, minimize_x, maximize_y):
    a = np.where(minimize_x, x, -x)
    b = np.where(maximize_y, -y, y)
    ok = np.isfinite(a) & np.isfinite(b)
    out = np.zeros(len(x), bool)
    for i in range(len(x)):
        if not ok[i]:
            continue
        dominated = ok & (a <= a[i]) & (b <= b[i]) & ((a < a[i]) | (b < b[i]))
        out[i] = not dominated.any()
    return out


@settings(max_examples=150)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=0, max_size=40),
       st.booleans(), st.booleans(), st.lists(st.integers(0, 39), max_size=3))
def test_pareto_front_matches_brute_force(points, minimize_x, maximize_y, nan_rows):
    df = pd.DataFrame(points, columns=["x", "y"], dtype=float)
    for i in nan_rows:
        if i < len(df):
            df.loc[i, "x"] = np.nan
    got = plots.pareto_front(df, "x", "y", minimize_x, maximize_y)
    want = _brute_front(df["x"].to_numpy(), df["y"].to_numpy(), minimize_x, maximize_y)
    np.testing.assert_array_equal(got, want)


def test_pareto_front_random_floats():
    rng = np.random.default_rng(11)
    df = pd.DataFrame({"x": rng.normal(size=500), "y": rng.normal(size=500)})
    np.testing.assert_array_equal(plots.pareto_front(df, "x", "y"), _brute_front(df["x"].to_numpy(), df["y"].to_numpy(), True, True))


def test_pareto(tmp_path):
    r = _sweep()
    r["recommended"] = False
    r.loc[5, "recommended"] = True
    fig = plots.pareto(r, "believed", "recall", highlight={"seed defaults": 3, "recommended": "recommended"})
    ax = fig.axes[0]
    _labels_ok(fig)
    assert ax.get_xlabel() == "believed-set size (facts) — lower is better"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    front = plots.pareto_front(r, "believed", "recall")
    assert f"Pareto front ({front.sum()} of {len(r)})" in legend
    assert {"seed defaults", "recommended", "parameter sets"} <= set(legend)
    step = [ln for ln in ax.get_lines() if ln.get_drawstyle().startswith("steps")][0]
    assert set(step.get_xdata()) == set(r.loc[front, "believed"])
    _png(fig, tmp_path, "pareto.png")
    with pytest.raises(ValueError, match="'nope' is neither a row index"):
        plots.pareto(r, highlight={"x": "nope"})
    with pytest.raises(ValueError, match="must be boolean"):
        plots.pareto(r, highlight={"x": "seed"})


# -- reliability -------------------------------------------------------------------------------------

def _bins():
    pm = np.linspace(0.05, 0.95, 10)
    return pd.concat([pd.DataFrame({"p_mean": pm, "y_mean": np.clip(pm + d, 0, 1), "n": np.arange(10) * 10 + 5, "kind": k})
                      for k, d in (("explicit", 0.05), ("episodic", -0.1))], ignore_index=True)


def test_reliability_by_kind(tmp_path):
    b = _bins()
    fig = plots.reliability(b)
    top, hist = fig.axes
    _labels_ok(fig)
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert legend == ["perfect calibration", "explicit (n=500)", "episodic (n=500)"]
    curves = [ln for ln in top.get_lines() if len(ln.get_xdata()) == 10]
    assert [ln.get_color().lower() for ln in curves] == [plots.KIND_COLORS["explicit"].lower(),
                                                       plots.KIND_COLORS["episodic"].lower()]
    # marker area grows with n
    sizes = [c.get_sizes() for c in top.collections if isinstance(c, PathCollection)][0]
    assert np.all(np.diff(sizes) > 0)
    assert sorted(r.get_height() for r in hist.patches) == sorted(b["n"])
    _png(fig, tmp_path, "reliability.png")


def test_reliability_into_given_axes_and_other_grouping():
    b = _bins().rename(columns={"kind": "fold"})
    fig = Figure(layout="constrained")
    ax = fig.add_subplot()
    assert plots.reliability(b, ax=ax, by="fold") is fig
    assert len(fig.axes) == 2
    assert ax.get_legend().get_title().get_text() == "fold"
    fig1 = plots.reliability(b.drop(columns="fold"))
    assert [t.get_text() for t in fig1.axes[0].get_legend().get_texts()] == ["perfect calibration", "n=1000"]


# -- bad input ---------------------------------------------------------------------------------------

EMPTY_CASES = [
    ("trajectories", lambda: plots.trajectories(pd.DataFrame(columns=["fact_id", "t", "kind", "object",
                                                                      "effective_confidence", "status"])), "traj"),
    ("kind_trajectories", lambda: plots.kind_trajectories(pd.DataFrame(columns=["fact_id", "t", "kind",
                                                                                "effective_confidence", "status"])), "traj"),
    ("decay_curves", lambda: plots.decay_curves(pd.DataFrame(columns=["label", "kind", "decay_rate",
                                                                      "initial_confidence"])), "table"),
    ("lineage", lambda: plots.lineage(FactStore().history("nobody", "knows")), "history"),
    ("checkpoint_metrics", lambda: plots.checkpoint_metrics(_metrics().iloc[:0]), "metrics"),
    ("abstraction_outcomes", lambda: plots.abstraction_outcomes(_passes().iloc[:0]), "passes"),
    ("sweep_heatmap", lambda: plots.sweep_heatmap(_sweep().iloc[:0], "seed", "reinforce_gain", "recall"), "results"),
    ("pareto", lambda: plots.pareto(_sweep().iloc[:0]), "results"),
    ("reliability", lambda: plots.reliability(_bins().iloc[:0]), "bins"),
]


@pytest.mark.parametrize("name,call,what", EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_empty_input_is_a_clear_value_error(name, call, what):
    with pytest.raises(ValueError, match=rf"{what}.* is empty|{what} is empty"):
        call()


MISSING_CASES = [
    ("trajectories", lambda: plots.trajectories(pd.DataFrame({"fact_id": [1], "t": [0], "kind": ["explicit"],
                                                              "object": ["x"], "status": ["active"]})),
     "effective_confidence"),
    ("trajectories-evidence", lambda: plots.trajectories(
        pd.DataFrame({"fact_id": [1], "t": [0], "kind": ["explicit"], "object": ["x"], "status": ["active"],
                      "effective_confidence": [0.4]}), evidence=pd.DataFrame({"fact_id": [1]})), "observed_at"),
    ("decay_curves", lambda: plots.decay_curves(pd.DataFrame({"kind": ["explicit"], "decay_rate": [0.1]})),
     "initial_confidence"),
    ("lineage", lambda: plots.lineage(pd.DataFrame({"id": [1], "object": ["x"]})), "first_seen"),
    ("checkpoint_metrics", lambda: plots.checkpoint_metrics(_metrics().drop(columns="recall")), "recall"),
    ("abstraction_outcomes", lambda: plots.abstraction_outcomes(_passes().drop(columns="pruned")), "pruned"),
    ("sweep_heatmap", lambda: plots.sweep_heatmap(_sweep(), "decay_rate.episodic", "gain", "recall"), "gain"),
    ("pareto", lambda: plots.pareto(_sweep(), "believed", "f1"), "f1"),
    ("reliability", lambda: plots.reliability(_bins().drop(columns="n")), "n"),
    ("reliability-by", lambda: plots.reliability(_bins(), by="fold"), "fold"),
]


@pytest.mark.parametrize("name,call,column", MISSING_CASES, ids=[c[0] for c in MISSING_CASES])
def test_missing_column_is_named(name, call, column):
    with pytest.raises(ValueError, match=rf"missing column.*'{column}'"):
        call()


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="must be a pandas DataFrame, got list"):
        plots.reliability([1, 2])
    with pytest.raises(ValueError, match="time must be 'auto', 'date' or 'days'"):
        plots.checkpoint_metrics(_metrics(), time="hours")
    with pytest.raises(ValueError, match="column 'recall' must be numeric"):
        plots.checkpoint_metrics(_metrics().assign(recall="high"))
    with pytest.raises(ValueError, match="ax must be a matplotlib Axes"):
        plots.pareto(_sweep(), ax="left")
    with pytest.raises(ValueError, match="no point where a fact exists"):
        plots.kind_trajectories(pd.DataFrame({"fact_id": [1], "t": [0], "kind": ["explicit"],
                                              "effective_confidence": [np.nan], "status": [None]}))


# -- save --------------------------------------------------------------------------------------------

def test_save_creates_dirs_and_is_deterministic(tmp_path):
    a = plots.save(plots.decay_curves(_kind_table("seed")), tmp_path / "a" / "b" / "decay")
    b = plots.save(plots.decay_curves(_kind_table("seed")), tmp_path / "c" / "decay.png")
    assert a.suffix == ".png" and a.exists()
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(ValueError, match="fig must be a matplotlib Figure"):
        plots.save("not a figure", tmp_path / "x.png")


def test_figures_render_themselves_for_jupyter():
    png = plots.decay_curves(_kind_table("seed"))._repr_png_()
    assert png[:4] == b"\x89PNG"


def test_functions_draw_into_a_given_axes():
    fig = Figure()
    ax = fig.add_subplot()
    assert plots.decay_curves(_kind_table("seed"), ax=ax) is fig
    fig2 = Figure()
    ax2 = fig2.add_subplot()
    assert plots.sweep_heatmap(_sweep(), "decay_rate.episodic", "reinforce_gain", "recall", ax=ax2) is fig2


def test_roles_have_one_marker_in_every_tuning_figure():
    """The star is the recommendation and the diamond the baseline in slices and Pareto alike, in
    whatever order `highlight` names them (report.md and notebook 04 say so)."""
    from matplotlib.markers import MarkerStyle

    from factmem.plots.common import ROLE_STYLE

    rng = np.random.default_rng(2)
    table = pd.DataFrame({"decay_rate.episodic": rng.uniform(0, 1, 30), "all.utility@20": rng.uniform(0, 1, 30),
                          "charged": rng.uniform(0, 1, 30), "recall": rng.uniform(0, 1, 30)})
    figures = [
        plots.slices(table, ["decay_rate.episodic"], "all.utility@20", highlight={"baseline": 0, "recommended": 7}),
        plots.slices(table, ["decay_rate.episodic"], "all.utility@20", highlight={"recommended": 7, "baseline": 0}),
        plots.pareto(table, "charged", "recall", highlight={"baseline": 0, "recommended": 7}),
        plots.pareto(table, "charged", "recall", highlight={"recommended": 7, "baseline": 0}),
    ]
    for fig in figures:
        ax = fig.axes[0]
        handles, labels = ax.get_legend_handles_labels()
        for role in ("recommended", "baseline"):
            handle = handles[labels.index(role)]
            style = MarkerStyle(ROLE_STYLE[role]["marker"])
            want = style.get_path().transformed(style.get_transform())
            got = handle.get_paths()[0].vertices
            np.testing.assert_allclose(got / np.abs(got).max(), want.vertices / np.abs(want.vertices).max(),
                                       atol=1e-12)  # the same shape (legend markers are scaled)
    # axis labels in words, not column names
    assert "all.utility@20" not in figures[0].axes[0].get_ylabel()
    assert figures[0].axes[0].get_ylabel().startswith("utility, context of 20 facts")


def test_budget_curves_draw_the_interval_band():
    k = np.arange(1, 11)
    curves = pd.concat([pd.DataFrame({"k": k, "value": k / 20, "low": k / 20 - 0.05, "high": k / 20 + 0.05,
                                      "params": role}) for role in ("recommended", "baseline")])
    fig = plots.budget_curves(curves, budgets=[5])
    ax = fig.axes[0]
    bands = [c for c in ax.collections if c.get_label() and not c.get_label().startswith("_")]
    assert [c.get_label() for c in bands] == ["95% interval over people"]
    assert len(ax.collections) == 3  # one band per line, and the legend's entry


def test_figures_saved_aside_are_written_by_children_byte_for_byte_and_complete_on_leaving(tmp_path, monkeypatch):
    from factmem.plots import common

    here = os.getpid()
    real_write = common._write

    def write(fig, p, dpi):  # records which process wrote each file
        (tmp_path / f"writer-{p.stem}").write_text(str(os.getpid()))
        real_write(fig, p, dpi)

    monkeypatch.setattr(common, "_write", write)
    plain = plots.save(plots.decay_curves(_kind_table("seed")), tmp_path / "plain.png")
    with plots.saving_aside():
        aside = plots.save(plots.decay_curves(_kind_table("seed")), tmp_path / "aside.png")
        other = plots.save(plots.decay_curves(_kind_table("other")), tmp_path / "other.png")
    assert aside.read_bytes() == plain.read_bytes() and other.stat().st_size > 0
    assert int((tmp_path / "writer-aside").read_text()) != here  # a child wrote it
    assert int((tmp_path / "writer-plain").read_text()) == here
    assert plots.save(plots.decay_curves(_kind_table("seed")), tmp_path / "after.png").read_bytes() == plain.read_bytes()
    assert int((tmp_path / "writer-after").read_text()) == here  # outside the block: written here again


def test_a_figure_whose_child_failed_is_written_here(tmp_path, monkeypatch):
    from factmem.plots import common

    here = os.getpid()
    real_write = common._write

    def write(fig, p, dpi):
        if os.getpid() != here:
            raise OSError("the child cannot write")
        real_write(fig, p, dpi)

    monkeypatch.setattr(common, "_write", write)
    plain = plots.save(plots.decay_curves(_kind_table("seed")), tmp_path / "plain.png")
    with plots.saving_aside():
        aside = plots.save(plots.decay_curves(_kind_table("seed")), tmp_path / "aside.png")
    assert aside.read_bytes() == plain.read_bytes()
